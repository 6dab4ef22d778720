"""A window pipeline that aggregates its window's rows gives the panes of the same aggregates, for
random records, batchings, windows (merging sessions, record-defined sliding windows included),
triggers and accumulation modes: the rows it sees are the window's (so far, or since the last pane),
its retractions restate the previous pane's rows, its dead letters are the aggregates'. The one
difference is by design: a pane over no rows (discarding, nothing new) runs no pipeline and has no
rows, where the aggregates give a pane of count 0."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from panes.scenario import load_scenario, replay_core

pytest.importorskip("duckdb")

TRIGGERS = [
    None,
    {"after_watermark": {"early": {"count": 2}, "late": {"count": 1}}},
    {"repeatedly": {"after_count": 2}},
    {"after_watermark": {"early": {"every": 1000}}},
]
WINDOWS = [
    {"tumbling": {"size": 5000}},
    {"hopping": {"size": 6000, "hop": 2000}},
    {"session": {"gap": 1500}},
    {"sliding": {"time_difference": 2000}},
]


@st.composite
def scenarios(draw):
    n = draw(st.integers(1, 20))
    records = [
        {"k": draw(st.sampled_from(["a", "b"])), "t": draw(st.integers(0, 20_000)), "v": draw(st.integers(-5, 20))}
        for _ in range(n)
    ]
    timeline, clock, i = [], 0, 0
    while i < n:
        size = draw(st.integers(1, 4))
        clock += draw(st.integers(0, 1500))
        timeline.append({"processing_time": clock, "add": records[i : i + size]})
        i += size
    timeline.append({"end": True})
    window = draw(st.sampled_from(WINDOWS))
    trigger = draw(st.sampled_from(TRIGGERS))
    if "session" in window and trigger is not None and "after_watermark" not in trigger:
        trigger = None
    pipeline = {
        "event_time": "t",
        "key": "k",
        "window": window,
        "trigger": trigger,
        "accumulation": draw(st.sampled_from(["accumulating", "discarding", "retracting"])),
        "watermark": {"max_delay": draw(st.sampled_from([0, 2000]))},
        "allowed_lateness": draw(st.sampled_from([0, 3000])),
        "only_updated_panes": draw(st.booleans()),
    }
    # SQL, or the same as a pandas function (only_updated_panes is for functions: the spec refuses it with SQL)
    sql = not pipeline["only_updated_panes"] and draw(st.booleans())
    form = (
        {"sql": "SELECT count(*) AS n, sum(v) AS s, min(v) AS lo FROM rows"}
        if sql
        else {"fn": "window_functions:count_sum_min"}
    )
    return pipeline, form, timeline


@settings(max_examples=40, deadline=None)
@given(scenarios())
def test_a_window_pipeline_that_aggregates_gives_the_aggregates_panes(case):
    pipeline, form, timeline = case
    aggregates = replay_core(
        load_scenario(
            {
                "pipeline": {**pipeline, "aggregates": {"n": {"count": "*"}, "s": {"sum": "v"}, "lo": {"min": "v"}}},
                "timeline": timeline,
            }
        )
    )
    rows = replay_core(load_scenario({"pipeline": {**pipeline, "window_pipeline": form}, "timeline": timeline}))
    assert rows.panes == [p for p in aggregates.panes if p["n"] > 0]
    assert rows.dead_letters == aggregates.dead_letters
