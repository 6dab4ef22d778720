"""``panes.core.open_windows``: an engine state's open windows as rows (``panes state``), exact, and
the window query (``fetch(key, from, to)``). The Spark plans' readers: tests/spark/test_state_spark.py."""

from __future__ import annotations

import copy
import pickle

import pytest

from panes.core.engine import Engine, columnar
from panes.core.open_windows import WindowQuery, columns, open_windows
from panes.core.records import parse_records
from panes.core.time import MIN_TIME
from panes.spec import SpecError, parse_pipeline_spec
from panes.window_state import query_of

SPEC = {
    "event_time": "t",
    "key": "k",
    "window": {"tumbling": {"size": "10 seconds"}},
    "allowed_lateness": "5 seconds",
    "trigger": {"after_watermark": {"early": {"count": 2}, "late": {"count": 1}}},
    "aggregates": {"n": {"count": "*"}, "total": {"sum": "v"}},
}
RECORDS = [
    {"k": "a", "v": 1, "t": 1000},
    {"k": "a", "v": 2, "t": 2000},
    {"k": "a", "v": 3, "t": 3000},
    {"k": "b", "v": 4, "t": 12000},
    {"k": "a", "v": 5, "t": 13000},
]


def _stepped(spec: dict, *batches: list[dict]):
    p = parse_pipeline_spec(spec).to_pipeline()
    engine = Engine(p)
    state = engine.new_state()
    for records in batches:
        parsed = parse_records(p, records, ingestion_time=0)
        engine.step(state, parsed.frame, record_of=parsed.records.__getitem__)
    return p, state


def test_the_open_windows_hold_the_next_panes_values_and_what_no_pane_showed():
    p, state = _stepped(SPEC, RECORDS[:3], RECORDS[3:])
    assert columns(p) == [
        "k",
        "window_start",
        "window_end",
        "n",
        "total",
        "panes_emitted",
        "pending_records",
        "closes_at",
        "watermark",
    ]
    # the watermark is 13 s: a's first window gave an EARLY pane (its first batch's 3 records,
    # the count of 2 reached), then an ON_TIME one at 10 s; it stays open until 15 s (5 s allowed
    # lateness) for late records
    assert open_windows(p, [state], state.watermark) == [
        {"k": "a", "window_start": 0, "window_end": 10_000, "n": 3, "total": 6, "panes_emitted": 2,
         "pending_records": 0, "closes_at": 15_000, "watermark": 13_000},
        {"k": "a", "window_start": 10_000, "window_end": 20_000, "n": 1, "total": 5, "panes_emitted": 0,
         "pending_records": 1, "closes_at": 25_000, "watermark": 13_000},
        {"k": "b", "window_start": 10_000, "window_end": 20_000, "n": 1, "total": 4, "panes_emitted": 0,
         "pending_records": 1, "closes_at": 25_000, "watermark": 13_000},
    ]  # fmt: skip


def test_reading_changes_nothing_and_a_pickled_state_reads_the_same():
    p, state = _stepped(SPEC, RECORDS)
    before = pickle.dumps(state)
    rows = open_windows(p, [state], state.watermark)
    assert pickle.dumps(state) == before
    # the stateful plan keeps one pickled state per bucket: two halves give the rows of the whole
    a, b = copy.deepcopy(state), copy.deepcopy(state)
    a.keys = {k: v for k, v in a.keys.items() if k == ("a",)}
    b.keys = {k: v for k, v in b.keys.items() if k != ("a",)}
    assert open_windows(p, [pickle.loads(pickle.dumps(b)), a], state.watermark) == rows
    # ... as its columns (``core.engine.columnar``, what the stateful plan stores)
    assert open_windows(p, [columnar.decode(columnar.encode(b)), a], state.watermark) == rows


def test_discarding_windows_hold_what_came_since_their_last_pane():
    # an EARLY pane of the first 2 records, then a third record
    p, state = _stepped({**SPEC, "accumulation": "discarding"}, RECORDS[:2], RECORDS[2:3])
    assert [(r["n"], r["total"], r["panes_emitted"], r["pending_records"]) for r in open_windows(p, [state], 0)] == [
        (1, 3, 1, 1)
    ]


def test_the_query_picks_a_key_and_window_starts_as_fetch_key_from_to():
    p, state = _stepped(SPEC, RECORDS)
    wm = state.watermark

    def fetch(**q) -> list:
        return [(r["k"], r["window_start"]) for r in open_windows(p, [state], wm, query_of(**q))]

    assert fetch() == [("a", 0), ("a", 10_000), ("b", 10_000)]
    assert fetch(key="a") == [("a", 0), ("a", 10_000)]
    assert fetch(time_from=10_000) == [("a", 10_000), ("b", 10_000)]
    assert fetch(time_to="1970-01-01T00:00:09.999Z") == [("a", 0)]
    assert fetch(key="b", time_from=0, time_to=10_000) == [("b", 10_000)]  # (both ends inclusive)
    assert fetch(key="c") == []


def test_a_query_that_does_not_fit_says_why():
    p = parse_pipeline_spec(SPEC).to_pipeline()
    assert WindowQuery(("a", "b")).check(p) == "the key has 1 column(s) (k); 2 value(s) given"
    assert WindowQuery(None, 5, 4).check(p) == "--from is after --to"
    unkeyed = parse_pipeline_spec({**SPEC, "key": None}).to_pipeline()
    assert WindowQuery(("a",)).check(unkeyed) == "the pipeline has no key"
    with pytest.raises(SpecError, match="--from"):
        query_of(time_from="yesterday")


def test_a_key_is_compared_as_the_command_line_gives_it():
    p, state = _stepped({**SPEC, "key": ["k", "flag"]}, [{"k": 7, "flag": True, "v": 1, "t": 1000}])
    rows = open_windows(p, [state], MIN_TIME, query_of(key=["7", "true"]))
    assert [(r["k"], r["flag"], r["n"]) for r in rows] == [(7, True, 1)]
    assert open_windows(p, [state], MIN_TIME, query_of(key=["7", "false"])) == []
