"""The engine's whole-state scans against their per-window definitions, on random runs: the earliest
hold (``Holds.earliest_of_state``: one pass over ends and holds, against the least ``earliest`` of
every window) and the wake mark after a watermark move that looked at every window (``advance``
skips the windows with no timer due: the mark must still be the next deadline, exactly)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from panes import pipeline
from panes.core.engine import TS, Engine, EngineState
from panes.core.time import END_OF_INPUT

WINDOWS = [
    {"tumbling": {"size": 5000}},
    {"hopping": {"size": 6000, "hop": 2000}},
    "global",
]
TRIGGERS = [
    None,
    {"after_watermark": {"early": {"count": 2}, "late": {"count": 1}}},
    {"after_watermark": {"early": {"every": 1000}}},
    {"repeatedly": {"after_count": 3}},
    {"repeatedly": {"every": 1500}},
]


def _spec(window, trigger, lateness: int) -> dict:
    spec = {
        "event_time": "t",
        "key": ["k"],
        "window": window,
        "watermark": {"max_delay": 1000},
        "allowed_lateness": lateness,
        "aggregates": {"n": {"count": "*"}},
    }
    if trigger is not None:
        spec["trigger"] = trigger
    return spec


def _scanned_earliest(engine: Engine, state: EngineState) -> int:
    times = [engine.holds.earliest(ws) for wins in state.keys.values() for ws in wins.values()]
    return min(times, default=END_OF_INPUT)


@st.composite
def runs(draw):
    window = draw(st.sampled_from(WINDOWS))
    trigger = draw(st.sampled_from(TRIGGERS))
    lateness = draw(st.sampled_from([0, 2000, 10_000]))
    steps = []
    watermark, clock = 0, 0
    for _ in range(draw(st.integers(1, 8))):
        n = draw(st.integers(0, 6))
        ts = [draw(st.integers(max(0, watermark - 12_000), watermark + 15_000)) for _ in range(n)]
        keys = [draw(st.sampled_from(["a", "b", "c"])) for _ in range(n)]
        watermark += draw(st.integers(0, 9000))
        clock += draw(st.integers(0, 3000))
        steps.append((ts, keys, watermark, clock))
    return _spec(window, trigger, lateness), steps, draw(st.booleans())


@settings(max_examples=150, deadline=None)
@given(runs())
def test_the_scans_match_their_per_window_definitions(run):
    spec, steps, ends = run
    engine = Engine(pipeline(spec))
    state = engine.new_state()
    for ts, keys, watermark, clock in steps:
        if ts:
            batch = pd.DataFrame({TS: np.array(ts, dtype=np.int64), "k": keys, "t": ts})
            engine.ingest(state, batch, processing_time=clock)
        assert engine.earliest_hold(state) == _scanned_earliest(engine, state)
        looks = watermark >= state.wake_event
        engine.advance(state, watermark, clock)
        assert engine.earliest_hold(state) == _scanned_earliest(engine, state)
        deadline = engine.next_event_deadline(state)
        if looks:
            assert state.wake_event == (END_OF_INPUT if deadline is None else deadline)
        elif deadline is not None:
            assert state.wake_event <= deadline
    if ends:
        engine.advance(state, END_OF_INPUT, clock)
        assert engine.earliest_hold(state) == _scanned_earliest(engine, state) == END_OF_INPUT
        assert not state.keys
