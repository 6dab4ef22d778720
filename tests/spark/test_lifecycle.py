"""A stream's life on one checkpoint (issue 26's first done-when): a run on a checkpoint, files added,
the same run again, five times over, then the input ended: the panes and dead letters equal those of
one run over all the files (on the stateful plan ``make test`` runs three files, ``make test-long``
six); a changed spec on that checkpoint is refused naming the field and the
checkpoint; once the input ended, new files are refused and a run with nothing new has nothing to
do. On the native and the stateful plan. And (long) a stateful checkpoint whose stores an earlier panes
wrote as snapshots only goes on with changelog checkpoints."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from panes import cli
from panes.runner import run_spec
from panes.spark.session import CHANGELOG_CHECKPOINTS
from panes.spec import load_run_spec
from tests.chaos import outputs, spec, write_input
from tests.spark.session_conf import session_conf

pytestmark = pytest.mark.spark


def _run(spec_path: Path, spark, end_input: bool = False) -> dict:
    return run_spec(load_run_spec(spec_path), spark=spark, progress=False, end_input=end_input)


@pytest.mark.parametrize(
    "plan, files", [("native", 6), ("stateful", 3), pytest.param("stateful", 6, marks=pytest.mark.long)]
)
def test_runs_repeated_as_files_arrive_give_the_panes_of_one_run(spark, tmp_path, plan, files):
    write_input(tmp_path / "all", files=files)
    # one run over all the files, the input ended
    whole = spec(tmp_path / "whole", plan)
    _point_at(whole, tmp_path / "all")
    _run(whole, spark, end_input=True)
    expected = outputs(tmp_path / "whole")
    assert sum(expected[0].values()) > 0 and sum(expected[1].values()) > 0

    # the same files arriving one by one, a run after each (available_now: open windows stay)
    arriving = tmp_path / "arriving"
    arriving.mkdir()
    path = spec(tmp_path / "repeated", plan)
    _point_at(path, arriving)
    for f in range(files):
        shutil.copy2(tmp_path / "all" / f"part-{f}.json", arriving / f"part-{f}.json")
        counts = _run(path, spark)
        assert counts["records_in"] == 300, counts
    assert not (tmp_path / "repeated" / "checkpoint" / "panes" / "ended.json").exists()

    # a changed spec is refused before Spark runs, naming the fields and the checkpoint
    changed = yaml.safe_load(path.read_text())
    changed["window"] = {"tumbling": {"size": "30 seconds"}}
    changed["aggregates"]["top"] = {"max": "v"}
    changed_path = tmp_path / "changed.yaml"
    changed_path.write_text(yaml.safe_dump(changed))
    result = CliRunner().invoke(cli.main, ["run", str(changed_path)])
    assert result.exit_code == 2
    checkpoint = tmp_path / "repeated" / "checkpoint"
    lines = result.stderr.splitlines()
    assert [ln.split(":")[1].strip() for ln in lines] == ["window", "aggregates"]
    assert all(f"changed since checkpoint {checkpoint} was started" in ln for ln in lines)

    # the input ended: the panes and dead letters of the one run
    _run(path, spark, end_input=True)
    assert outputs(tmp_path / "repeated") == expected

    # a run with nothing new has nothing to do; a new file is refused
    assert _run(path, spark)["batches"] == 0
    (arriving / "part-9.json").write_text('{"k": "key0", "t": 1628326800000, "v": 1}\n')
    result = CliRunner().invoke(cli.main, ["run", str(path)])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: checkpoint: the input of {checkpoint} ended at ")


def _point_at(spec_path: Path, data: Path) -> None:
    doc = yaml.safe_load(spec_path.read_text())
    doc["source"]["path"] = str(data)
    spec_path.write_text(yaml.safe_dump(doc))


@pytest.mark.long
def test_a_stateful_checkpoint_written_with_snapshots_goes_on_with_changelog_checkpoints(spark, tmp_path):
    # a checkpoint of a panes before changelog checkpoints (its stores' snapshots only), run on by
    # this one: the panes and dead letters of one run
    write_input(tmp_path / "all", files=2)
    whole = spec(tmp_path / "whole", "stateful")
    _point_at(whole, tmp_path / "all")
    _run(whole, spark, end_input=True)
    arriving = tmp_path / "arriving"
    arriving.mkdir()
    path = spec(tmp_path / "repeated", "stateful")
    _point_at(path, arriving)
    stores = tmp_path / "repeated" / "checkpoint"
    shutil.copy2(tmp_path / "all" / "part-0.json", arriving / "part-0.json")
    with session_conf(spark, CHANGELOG_CHECKPOINTS, "false"):
        _run(path, spark)
    assert list(stores.rglob("*.zip")) and not list(stores.rglob("*.changelog"))
    shutil.copy2(tmp_path / "all" / "part-1.json", arriving / "part-1.json")
    _run(path, spark, end_input=True)
    assert list(stores.rglob("*.changelog"))
    assert outputs(tmp_path / "repeated") == outputs(tmp_path / "whole")
