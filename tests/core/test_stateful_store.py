"""A hash bucket's state and timer in the stateful plan (``panes.spark.stateful_store``), without
Spark: the timer it keeps at the engine's next deadline, known from the stored state (Spark is asked
for its timers only for a state stored without them, once)."""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import pandas as pd

from panes import pipeline
from panes.core.engine import TS, Engine, columnar
from panes.spark.stateful_store import BucketState

SPEC = {
    "event_time": "t",
    "key": ["k"],
    "window": {"tumbling": {"size": 5000}},
    "watermark": {"max_delay": 0},
    "allowed_lateness": 2000,
    "trigger": {"after_watermark": {}},
    "aggregates": {"n": {"count": "*"}},
}


class Value:
    def __init__(self):
        self.stored = None

    def get(self):
        return self.stored

    def update(self, v):
        self.stored = tuple(v)


class Handle:
    """Spark's timers of one bucket, and how often it was asked for them."""

    def __init__(self):
        self.timers: set[int] = set()
        self.listed = 0

    def listTimers(self):
        self.listed += 1
        return iter(sorted(self.timers))

    def registerTimer(self, t):
        assert t not in self.timers
        self.timers.add(t)

    def deleteTimer(self, t):
        assert t in self.timers
        self.timers.remove(t)


def _batch(*ts: int) -> pd.DataFrame:
    return pd.DataFrame({TS: np.array(ts, dtype=np.int64), "k": ["a"] * len(ts), "t": list(ts)})


def test_the_bucket_keeps_one_timer_at_the_next_deadline_without_asking_spark():
    engine = Engine(pipeline(SPEC), partial=True)
    handle, value = Handle(), Value()
    bucket = BucketState(cast(Any, handle), engine, value)
    st = bucket.load()
    engine.ingest(st, _batch(1000, 6000))
    bucket.save(st)
    assert handle.timers == {5000}  # (the first window's end: its end-of-window timer fires there)
    st = bucket.load()
    engine.advance(st, 5000)
    bucket.save(st)
    assert handle.timers == {7000}  # (it fired: now its expiry, end + allowed lateness)
    st = bucket.load()
    engine.advance(st, 7000)
    bucket.save(st)
    assert handle.timers == {10000}  # (it expired: the second window's end)
    assert handle.listed == 0
    st = bucket.load()
    engine.advance(st, 20_000)
    bucket.save(st)
    assert handle.timers == set() and not st.keys


def test_a_state_stored_without_its_timers_asks_spark_once():
    engine = Engine(pipeline(SPEC), partial=True)
    handle, value = Handle(), Value()
    bucket = BucketState(cast(Any, handle), engine, value)
    st = bucket.load()
    engine.ingest(st, _batch(1000))
    bucket.save(st)
    # as an older panes stored it: the state without the timers it set
    older = columnar.decode(value.stored[0])
    older.host_timers = None
    value.stored = (columnar.encode(older),)
    for watermark in (5000, 7000):
        st = bucket.load()
        engine.ingest(st, _batch(watermark + 1))
        engine.advance(st, watermark)
        bucket.save(st)
    assert handle.listed == 1
    assert handle.timers == {10000}
