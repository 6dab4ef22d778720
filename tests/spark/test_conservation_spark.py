"""The conservation law on Spark, on fuzzed input: 10,000 fuzzed lines (tests/fuzz/records.py: random
JSON types, lines that are not JSON, huge, negative and NaN numbers, unicode and empty keys, nulls,
duplicate fields) read by ``panes run``'s JSON source, one file per micro-batch, on the native and the
stateful plan: every record is counted in windows, a dead letter, in no window or a watermark record,
exactly, as the plans' observed metrics and the sinks say; the final panes' counts add up to the
records counted; the dead letters in the sink are those counted. The engine's reasons occur on the
stateful plan: ``window_closed`` (a once-trigger that finished) and ``window_pipeline_failed``
(counted records of a window whose pipeline failed, reported beside the sum)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from panes.runner import run_spec
from panes.spec import parse_run_spec
from tests.fuzz.records import lines

pytestmark = pytest.mark.spark
N = 10_000
FILES = 3  # (few micro-batches: their fixed cost, not the records, is the test's time)

CASES = {
    "tumbling-native": (
        {"window": {"tumbling": {"size": "10 minutes"}}, "watermark": {"max_delay": "20 minutes"}},
        "native",
    ),
    "hopping_gaps-stateful": ({"window": {"hopping": {"size": "4 minutes", "hop": "10 minutes"}}}, "stateful"),
    "punctuation-native": (
        {
            "window": {"tumbling": {"size": "10 minutes"}},
            "watermark": {"punctuation": True, "punctuation_column": "wm"},
        },
        "native",
    ),
    # a once-trigger: a window's trigger finishes at its 20th record, later ones are window_closed
    "finished_trigger-stateful": (
        {
            "trigger": {"after_count": 20},
            "window": {"tumbling": {"size": "10 minutes"}},
            "watermark": {"max_delay": "20 minutes"},
        },
        "stateful",
    ),
    # a window pipeline that fails on some windows: their counted records are window_pipeline_failed
    "failing_window_pipeline-stateful": (
        {
            "window": {"tumbling": {"size": "10 minutes"}},
            "watermark": {"max_delay": "20 minutes"},
            "window_pipeline": {"fn": "window_functions:rows_unless_odd", "schema": "n LONG"},
        },
        "stateful",
    ),
}
#: the reasons the engine gives besides the records' own checks, where the case makes them
ENGINE_REASONS = {"finished_trigger": "window_closed", "failing_window_pipeline": "window_pipeline_failed"}


def _input(directory: Path, seed: int) -> None:
    directory.mkdir()
    text = lines(N, seed)
    for f in range(FILES):
        path = directory / f"part-{f}.json"
        path.write_text("\n".join(text[f * N // FILES : (f + 1) * N // FILES]) + "\n")
        os.utime(path, (1_600_000_000 + f, 1_600_000_000 + f))


def _rows(directory: Path) -> list[dict]:
    return [
        json.loads(line)
        for part in sorted(directory.glob("batch=*/part-*"))
        for line in part.read_text().splitlines()
        if line.strip()
    ]


def _spec(tmp_path: Path, out: Path, pipeline: dict, plan: str):
    """A run of ``pipeline`` on ``plan`` over the input ``_input`` wrote, its outputs under ``out``."""
    return parse_run_spec(
        {
            "source": {
                "format": "json",
                "path": str(tmp_path / "input"),
                "max_files_per_trigger": 1,
                "schema": "k STRING, t STRING, v DOUBLE, wm STRING",
            },
            "event_time": "t",
            "key": "k",
            **({} if "window_pipeline" in pipeline else {"aggregates": {"n": {"count": "*"}, "total": {"sum": "v"}}}),
            "sink": {"format": "json", "path": str(out / "panes")},
            "dead_letter": {"format": "json", "path": str(out / "dead")},
            "checkpoint": str(out / "checkpoint"),
            "spark": {"available_now": True, "plan": plan},
            **pipeline,
        }
    )


@pytest.mark.parametrize("case", list(CASES))
def test_every_fuzzed_record_is_accounted_for_on_spark(spark, tmp_path, case):
    pipeline, plan = CASES[case]
    _input(tmp_path / "input", seed=list(CASES).index(case))
    counts = run_spec(_spec(tmp_path, tmp_path, pipeline, plan), spark=spark, progress=False, end_input=True)
    assert counts["records_in"] == N
    assert counts["records_in"] == (
        counts["counted"] + counts["dead_letters"] + counts["in_no_window"] + counts["watermark_records"]
    )
    dead = _rows(tmp_path / "dead")
    # (a record counted in a window whose pipeline failed later is a dead letter beside the sum)
    failed_later = counts["reasons"].get("window_pipeline_failed", 0)
    assert len(dead) == counts["dead_letters"] + failed_later
    assert {r: sum(d["reason"] == r for d in dead) for r in counts["reasons"]} == counts["reasons"]
    assert {"malformed", "missing_event_time", "invalid_event_time", "missing_key", "invalid_value", "late"} <= set(
        counts["reasons"]
    )
    panes = _rows(tmp_path / "panes")
    assert sum(p["n"] for p in panes if p["is_last"]) == counts["counted"] - failed_later
    for kind, reason in ENGINE_REASONS.items():
        assert (counts["reasons"].get(reason, 0) > 0) == case.startswith(kind)
    assert counts["counted"] > N // 8
    assert (counts["in_no_window"] > 0) == case.startswith("hopping_gaps")
    assert (counts["watermark_records"] > 0) == case.startswith("punctuation")
    # a malformed line's record is the line as read
    assert "not json {" in {d["record"] for d in dead if d["reason"] == "malformed"}


def test_both_plans_count_the_same_records_punctuation_included(spark, tmp_path):
    """The native plan counts with Spark observed metrics, the stateful plan in its processor
    (``panes.spark.stateful_counts``): one account of the same input, punctuation records, dead
    letters and the control row that ends the input included."""
    pipeline = {
        "window": {"tumbling": {"size": "10 minutes"}},
        "watermark": {"punctuation": True, "punctuation_column": "wm"},
    }
    _input(tmp_path / "input", seed=7)
    accounts = {}
    for plan in ("native", "stateful"):
        spec = _spec(tmp_path, tmp_path / plan, pipeline, plan)
        counts = run_spec(spec, spark=spark, progress=False, end_input=True)
        accounts[plan] = {k: counts[k] for k in ("records_in", "counted", "watermark_records", "reasons")}
    assert accounts["native"]["records_in"] == N and accounts["native"]["watermark_records"] > 0
    assert accounts["stateful"] == accounts["native"]
