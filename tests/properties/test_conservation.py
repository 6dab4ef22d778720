"""The conservation law on fuzzed input, in the core: every record of 10,000 fuzzed lines (random
JSON types, lines that are not JSON, huge, negative and NaN numbers, unicode and empty keys,
nulls, duplicate fields) is counted in windows, a dead letter, in no window or a watermark record,
exactly; the final panes' counts add up to the records counted (windows that hold each record
once); the run never fails. Every dead-letter reason occurs: the records' own checks', ``late``,
``window_closed`` (a once-trigger that finished) and ``window_pipeline_failed`` (counted records of
a window whose pipeline failed, reported beside the sum). (The same on Spark:
tests/spark/test_conservation_spark.py.)"""

from __future__ import annotations

import math

import pytest

from panes.core.records import read_json_lines
from panes.replay import replay
from tests.fuzz.records import lines

N = 10_000
STEPS = 8

PIPELINES = {
    "tumbling": {"window": {"tumbling": {"size": "10 minutes"}}, "watermark": {"max_delay": "20 minutes"}},
    "hopping_gaps": {"window": {"hopping": {"size": "4 minutes", "hop": "10 minutes"}}},
    "hopping_overlap": {
        "window": {"hopping": {"size": "30 minutes", "hop": "10 minutes"}},
        "watermark": {"max_delay": "5 minutes"},
    },
    "sessions": {"window": {"session": {"gap": "3 minutes"}}, "watermark": {"max_delay": "10 minutes"}},
    "sliding": {"window": {"sliding": {"time_difference": "5 minutes"}}, "watermark": {"max_delay": "10 minutes"}},
    "punctuation": {
        "window": {"tumbling": {"size": "10 minutes"}},
        "watermark": {"punctuation": True, "punctuation_column": "wm"},
    },
    "early_firings": {
        "window": {"tumbling": {"size": "1 hour"}},
        "accumulation": "discarding",
        "trigger": {"after_watermark": {"early": {"count": 50}, "late": {"count": 1}}},
        "allowed_lateness": "30 minutes",
    },
    # a once-trigger: a window's trigger finishes at its 20th record, later ones are window_closed
    "finished_trigger": {
        "window": {"tumbling": {"size": "10 minutes"}},
        "trigger": {"after_count": 20},
        "watermark": {"max_delay": "20 minutes"},
    },
    # a window pipeline that fails on some windows: their counted records are window_pipeline_failed
    "failing_window_pipeline": {
        "window": {"tumbling": {"size": "10 minutes"}},
        "window_pipeline": {"fn": "window_functions:rows_unless_odd", "schema": "n LONG"},
        "watermark": {"max_delay": "20 minutes"},
    },
}
#: windows that hold each record once: the final panes' counts add up to the records counted (less
#: those whose window's pipeline failed)
ONE_WINDOW_PER_RECORD = {
    "tumbling",
    "hopping_gaps",
    "sessions",
    "punctuation",
    "finished_trigger",
    "failing_window_pipeline",
}
#: the reasons a run's engine gives besides the records' own checks, where the kind makes them
ENGINE_REASONS = {"finished_trigger": "window_closed", "failing_window_pipeline": "window_pipeline_failed"}


def _scenario(kind: str, seed: int) -> tuple[dict, int]:
    records = read_json_lines(lines(N, seed))
    pipeline = {"event_time": "t", "key": "k", **PIPELINES[kind]}
    if "window_pipeline" not in pipeline:
        pipeline["aggregates"] = {"n": {"count": "*"}, "total": {"sum": "v"}}
    size = math.ceil(len(records) / STEPS)
    timeline = [{"add": records[i : i + size]} for i in range(0, len(records), size)] + [{"end": True}]
    return {"pipeline": pipeline, "timeline": timeline}, len(records)


@pytest.mark.parametrize("kind", list(PIPELINES))
def test_every_fuzzed_record_is_accounted_for(kind):
    doc, n = _scenario(kind, seed=sorted(PIPELINES).index(kind))
    result = replay(doc)
    counts = result.accounting
    assert n == N
    assert counts.records_in == N
    assert counts.records_in == counts.counted + counts.dead_letters + counts.in_no_window + counts.watermark_records
    # (a record counted in a window whose pipeline failed later is a dead letter beside the sum)
    assert counts.dead_letters + counts.failed_later == len(result.dead_letters)
    assert counts.failed_later == sum(d["reason"] == "window_pipeline_failed" for d in result.dead_letters)
    # every kind of bad input occurred
    assert {"malformed", "missing_event_time", "invalid_event_time", "missing_key", "invalid_value"} <= set(
        counts.reasons
    )
    assert counts.counted > N // 6
    assert (counts.watermark_records > 0) == (kind == "punctuation")
    if kind == "punctuation":
        assert counts.reasons["invalid_watermark"] > 0
    if kind == "hopping_gaps":
        assert counts.in_no_window > N // 4
    else:
        assert counts.in_no_window == 0
    for engine_kind, reason in ENGINE_REASONS.items():
        assert (counts.reasons[reason] > 0) == (kind == engine_kind)
    if kind in ONE_WINDOW_PER_RECORD:
        finals = [p for p in result.panes if p["is_last"]]
        assert sum(p["n"] for p in finals) == counts.counted - counts.failed_later
