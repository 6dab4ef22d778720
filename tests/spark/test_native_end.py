"""The native plan's end of the input in the driver (``NativeStream.end``): the panes of the kept
windows straight from their tables, with no step run over the control row that moves the
watermark to the end of time. Held equal to that step (the runner's ending with ``end`` declined)
on streams with late rows, allowed lateness (the closing panes' holds), the native plan's window
kinds (tumbling, hopping, sessions, global), and windows kept in several tables (their partials
merged at the end)."""

import json
import os

import pytest

from panes.runner import StreamRun, run_spec
from panes.spark.native import NativeStream
from panes.spec import parse_run_spec
from tests.spark.answers import record_answers

pytestmark = pytest.mark.spark

#: (key, event time in s, value) per file, one micro-batch each: the watermark (2 s behind) passes
#: some windows' ends between files; rows late within the allowed lateness and past it
FILES = [
    [("a", 1, 1), ("b", 2, 2), ("a", 4, 3), ("c", 11, 4)],
    [("b", 13, 5), ("a", 3, 6), ("c", 25, 7), ("a", 26, 8)],
    [("b", 9, 9), ("a", 31, 10), ("b", 33, 11), ("c", 12, 12), ("a", 1, 13)],
    [("c", 41, 14), ("a", 44, 15), ("b", 45, 16), ("b", 29, 17), ("a", 2, 18)],
]
WINDOWS = {
    "tumbling": {"tumbling": {"size": "10 seconds"}},
    "tumbling_30": {"tumbling": {"size": "30 seconds"}},
    "hopping": {"hopping": {"size": "10 seconds", "hop": "5 seconds"}},
    "session": {"session": {"gap": "5 seconds"}},
    "global": "global",
}


def _run(spark, tmp_path, name: str, window, lateness: str) -> tuple[list, list, list]:
    src = tmp_path / "data"
    if not src.exists():
        src.mkdir()
        for i, rows in enumerate(FILES):
            lines = [json.dumps({"k": k, "t": t * 1000, "v": v}) for k, t, v in rows]
            (src / f"part-{i}.json").write_text("\n".join(lines) + "\n")
            os.utime(src / f"part-{i}.json", (1_600_000_000 + i, 1_600_000_000 + i))
    out = tmp_path / name
    counts = run_spec(parse_run_spec(run_doc(src, out, name, window, lateness)), spark=spark, progress=False)
    assert counts["records_in"] == sum(map(len, FILES))
    return _rows(out / "panes"), _rows(out / "dead"), [counts["panes"], counts["dead_letters"]]


def run_doc(src, out, name: str, window, lateness: str, plan: str = "native", end: bool = True) -> dict:
    """The spec of a run over ``FILES`` in ``src`` (one micro-batch each), its sinks under ``out``."""
    return {
        "name": name,
        "mode": "stream",
        "event_time": "t",
        "key": "k",
        "watermark": {"max_delay": "2 seconds"},
        "allowed_lateness": lateness,
        "window": window,
        "aggregates": {"n": {"count": "*"}, "s": {"sum": "v"}, "least_v": {"min": "v"}},
        "source": {
            "format": "json",
            "path": str(src),
            "schema": "k STRING, t LONG, v LONG",
            "max_files_per_trigger": 1,
        },
        "sink": {"format": "json", "path": str(out / "panes")},
        "dead_letter": {"format": "json", "path": str(out / "dead")},
        "checkpoint": str(out / "checkpoint"),
        "spark": {"available_now": True, "end_input": end, "plan": plan},
    }


def _rows(sink) -> list[str]:
    """What a JSON sink received, each row with its micro-batch (``batch=<id>/part-*.json``)."""
    return sorted(
        json.dumps({**json.loads(x), "batch": f.parent.name}, sort_keys=True)
        for f in sink.glob("batch=*/part-*.json")
        for x in f.open()
    )


@pytest.mark.parametrize(
    "window, lateness, tables_added",
    [
        ("tumbling", "15 seconds", False),
        ("tumbling_30", "0 seconds", True),
        ("hopping", "0 seconds", False),
        ("session", "5 seconds", False),
        ("global", "0 seconds", True),
    ],
)
def test_the_end_in_the_driver_gives_the_control_rows_step(
    spark, tmp_path, monkeypatch, window, lateness, tables_added
):
    from panes.spark.native import store

    if tables_added:  # (every step adds its rows' table: the end merges the windows' partials across them)
        monkeypatch.setattr(store, "SMALL_STATE_ROWS", 0)
        monkeypatch.setattr(store, "MAX_TABLES", 8)
        monkeypatch.setattr(store, "CLOSING_STEPS", None)
    rewrites = record_answers(monkeypatch, NativeStream, "rewrites")
    ends = record_answers(monkeypatch, NativeStream, "end")
    writes = record_answers(monkeypatch, StreamRun, "_write")
    loads = record_answers(monkeypatch, NativeStream, "load")
    direct = _run(spark, tmp_path, "direct", WINDOWS[window], lateness)
    assert ends == [True]
    end_panes = writes[-1]["n"]  # (the end's write, after the query's)
    assert end_panes > 0 and (False in rewrites) == tables_added
    assert (len(loads[-1].tables) > 1) == tables_added  # (what the end found kept)
    monkeypatch.setattr(NativeStream, "end", lambda self, spark, batch_id, on_panes: False)
    del writes[:]
    stepped = _run(spark, tmp_path, "stepped", WINDOWS[window], lateness)
    assert writes[-1]["n"] == end_panes
    assert direct == stepped
    assert sum('"batch": "batch=4"' in r for r in direct[0]) == end_panes  # (the end's micro-batch)
    assert bool(direct[1]) == (window != "global")  # (late rows went to the dead letters)
