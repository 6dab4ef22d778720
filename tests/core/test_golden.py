"""The replay contract, byte for byte: every scenario in ``tests/scenarios`` prints exactly the
panes and dead letters recorded in ``tests/golden`` (``tests/golden/record.py`` writes them)."""

from pathlib import Path

import pytest
from click.testing import CliRunner

from panes.cli import main

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml"))


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_replay_prints_the_golden_panes_and_dead_letters(path, tmp_path):
    dead = tmp_path / "dead.jsonl"
    result = CliRunner().invoke(main, ["replay", str(path), "--dead-letter", str(dead)])
    assert result.exit_code == 0, result.output
    assert result.stdout == (ROOT / "golden" / f"{path.stem}.panes.jsonl").read_text()
    assert dead.read_text() == (ROOT / "golden" / f"{path.stem}.dead.jsonl").read_text()
    # stderr: the counts, every record accounted for
    summary = result.stderr.splitlines()[-1]
    assert summary.startswith(
        f"done: {len(result.stdout.splitlines())} panes, "
        f"{len(dead.read_text().splitlines())} dead letters (in {dead}); records in "
    )
    assert "does not add up" not in summary
