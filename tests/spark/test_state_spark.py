"""``panes state`` / ``panes.state(spec)`` on both streaming plans, asked while the query runs (the
same windows, aggregates, panes and pending records on each, as the core holds them), and the
``--report`` page of that run."""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

import panes
from panes import cli
from panes.core.time import format_instant, parse_instant
from panes.runner import run_spec
from panes.spec import SpecError, load_run_spec

pytestmark = pytest.mark.spark
WAIT = 300  # s: the machine is shared; a micro-batch can take long


def _ms(text: str) -> int:
    return parse_instant(f"2021-08-07T{text}Z")


def _file(directory: Path, n: int, records: list[tuple]) -> None:
    path = directory / f"part-{n}.json"
    tmp = directory / f".part-{n}.tmp"  # (hidden: the file source skips it until it is renamed)
    tmp.write_text("".join(json.dumps({"k": k, "t": _ms(t), "v": v}) + "\n" for k, t, v in records))
    tmp.rename(path)


def _spec(tmp_path: Path, plan: str) -> Path:
    doc = {
        "name": f"state_{plan}",
        "source": {"format": "json", "path": str(tmp_path / "in"), "max_files_per_trigger": 1,
                   "schema": "k STRING, t LONG, v LONG"},
        "event_time": "t",
        "key": "k",
        "window": {"tumbling": {"size": "1 minute"}},
        "trigger": {"after_watermark": {"early": {"count": 2}, "late": {"count": 1}}},
        "allowed_lateness": "1 minute",
        "aggregates": {"n": {"count": "*"}, "total": {"sum": "v"}},
        "sink": {"format": "json", "path": str(tmp_path / "panes")},
        "dead_letter": {"format": "json", "path": str(tmp_path / "dead")},
        "checkpoint": str(tmp_path / "checkpoint"),
        "spark": {"plan": plan, "trigger_interval": "500ms"},
    }  # fmt: skip
    (tmp_path / "in").mkdir()
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _windows(df) -> list[tuple]:
    """The rows with their instants as ISO-8601 text (no local time zone on the way)."""
    rows = df.select(*cli.state_columns(df)).collect()
    return [tuple(cli.state_record(r.asDict(), df).values()) for r in rows]


def _until(spec: Path, spark, run: threading.Thread, expected: list[tuple]) -> list[tuple]:
    """Asks until the state is ``expected`` (the query is running: its micro-batches come when
    they come) or the run ended; the last answer."""
    deadline = time.time() + WAIT
    got: list[tuple] = []
    while time.time() < deadline and run.is_alive():
        try:
            got = _windows(panes.state(spec, spark=spark))
        except SpecError as e:  # (no committed micro-batch yet)
            assert "holds no committed micro-batch yet" in str(e) or "holds no stream's state" in str(e)
        if got == expected:
            return got
        time.sleep(2)
    return got


def _at(t: str) -> str:
    return format_instant(_ms(t))


# each window: k, start, end, n, total, panes emitted, pending records, closes at, watermark
FIRST = [
    # a's 3 records gave an EARLY pane, then the watermark (09:01:05) its ON_TIME one
    ("a", _at("09:00:00"), _at("09:01:00"), 3, 6, 2, 0, _at("09:02:00"), _at("09:01:05")),
    ("b", _at("09:01:00"), _at("09:02:00"), 1, 4, 0, 1, _at("09:03:00"), _at("09:01:05")),
]
SECOND = [
    # a late record (09:00:40, within the allowed lateness) gave a LATE pane; b's second an EARLY one
    ("a", _at("09:00:00"), _at("09:01:00"), 4, 12, 3, 0, _at("09:02:00"), _at("09:01:50")),
    ("b", _at("09:01:00"), _at("09:02:00"), 2, 9, 1, 0, _at("09:03:00"), _at("09:01:50")),
    ("c", _at("09:01:00"), _at("09:02:00"), 1, 7, 0, 1, _at("09:03:00"), _at("09:01:50")),
]


@pytest.mark.parametrize("plan", ["native", "stateful"])
def test_state_answers_from_a_running_querys_checkpoint(spark, tmp_path, plan):
    spec = _spec(tmp_path, plan)
    _file(tmp_path / "in", 0, [("a", "09:00:10", 1), ("a", "09:00:20", 2), ("a", "09:00:30", 3), ("b", "09:01:05", 4)])
    counts: dict = {}

    def running() -> None:
        try:
            counts.update(
                run_spec(load_run_spec(spec), spark=spark, progress=False, report_path=str(tmp_path / "run.html"))
            )
        except Exception as e:  # (said by the test: the run ended before the state was right)
            counts["error"] = e

    run = threading.Thread(target=running)
    run.start()
    try:
        assert _until(spec, spark, run, FIRST) == FIRST, counts.get("error")
        _file(tmp_path / "in", 1, [("b", "09:01:30", 5), ("a", "09:00:40", 6), ("c", "09:01:50", 7)])
        assert _until(spec, spark, run, SECOND) == SECOND, counts.get("error")
        # fetch(key, from, to): one key, window starts in [from, to] (both inclusive)
        assert _windows(panes.state(spec, key="a", spark=spark)) == SECOND[:1]
        assert _windows(panes.state(spec, time_from=_at("09:01:00"), spark=spark)) == SECOND[1:]
        assert _windows(panes.state(spec, key="c", time_to=_at("09:00:59.999"), spark=spark)) == []
    finally:
        for q in spark.streams.active:
            q.stop()
        run.join(WAIT)
    assert not run.is_alive()
    assert counts["records_in"] == 7 and counts["counted"] == 7
    _the_runs_page(tmp_path / "run.html", counts)
    # the command line: the same rows as JSON lines, after the query stopped; the checkpoint unchanged
    before = _files(tmp_path / "checkpoint")
    result = CliRunner().invoke(cli.main, ["state", str(spec), "--key", "b"])
    assert result.exit_code == 0, result.output
    assert _files(tmp_path / "checkpoint") == before
    fields = ["k", "window_start", "window_end", "n", "total", "panes_emitted", "pending_records", "closes_at",
              "watermark"]  # fmt: skip
    assert [json.loads(line) for line in result.stdout.splitlines()] == [dict(zip(fields, SECOND[1]))]
    assert result.stderr.splitlines()[-1] == "done: 1 open windows"


def _files(root: Path) -> dict:
    """Every file under ``root`` with its size and modification time."""
    return {str(f): (f.stat().st_size, f.stat().st_mtime_ns) for f in root.rglob("*") if f.is_file()}


def _the_runs_page(path: Path, counts: dict) -> None:
    page = path.read_text()
    assert f"{counts['batches']} micro-batches, {counts['panes']} panes, 0 dead letters" in page
    assert "records in 7 = 7 counted + 0 dead letters + 0 in no window" in page
    table = re.findall(r"<tr><td>(\d+|run)</td><td>[^<]*</td><td>(\d+)</td>", page)
    assert [n for b, n in table if b != "run"] and sum(int(n) for b, n in table if b != "run") == 7
    assert table[-1] == ("run", "7")
    assert page.count("<svg") == 4


def test_state_of_a_spec_without_a_stream_checkpoint_is_one_line(tmp_path):
    spec = _spec(tmp_path, "native")
    result = CliRunner().invoke(cli.main, ["state", str(spec)])
    assert result.exit_code == 2
    assert (
        result.stderr
        == f"error: checkpoint: {tmp_path / 'checkpoint'} holds no stream's state (no "
        + str(tmp_path / "checkpoint" / "panes" / "state.json")
        + ")\n"
    )
