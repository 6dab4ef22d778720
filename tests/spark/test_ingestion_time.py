"""Ingestion time: stamps never go back (Spark's micro-batch time does when the system clock is
set back). On the native plan no record is then late, and the stream carries only the columns the
windows read, a malformed record still reaching the dead letters whole; the stateful plan's
processor clamps a bucket's stamps the same way."""

import json

import pytest
from pyspark.sql import functions as F

from panes import pipeline
from panes.spark.columns import CLOCK, PUNCT, TS, WMARK
from panes.spark.native import NativeStream
from panes.spark.planner import window_stream

SCHEMA = "k string, v long, extra string, it long"
SPEC = {"key": ["k"], "aggregates": {"n": {"count": "*"}, "total": {"sum": "v"}}}


def _stepper(spark, tmp_path, spec: dict, batches: list):
    """``run(i)``: the native stream's step over ``batches[i]``, stamped with ingestion time from
    the column ``it`` (Spark's micro-batch time, scripted); its panes (key, window start second,
    n, total) and dead letters (reason, record), sorted."""
    p = pipeline(spec)
    results = [window_stream(spark.createDataFrame(b, SCHEMA), p, ingestion=F.col("it")) for b in batches]
    stream = NativeStream(results[0].step, str(tmp_path))

    def run(i):
        got: list = []
        stream.run(
            results[i].source,
            i,
            lambda df, b: got.extend((r.k, r.window_start.second, r.n, r.total) for r in df.collect()),
            lambda df, b: got.extend(("dead", r.reason, json.loads(r.record)) for r in df.collect()),
        )
        return sorted(got, key=str)

    return results, run


@pytest.mark.parametrize(
    "window, closed",
    [
        ({"tumbling": {"size": "10 seconds"}}, [("a", 10, 2, 3)]),
        ({"hopping": {"size": "10 seconds", "hop": "5 seconds"}}, [("a", 10, 2, 3), ("a", 5, 2, 3)]),
    ],
)
def test_a_stamp_before_the_latest_counts_as_it_and_malformed_records_stay_whole(spark, tmp_path, window, closed):
    batches = [
        [("a", 1, "x", 12_000), (None, 2, "y", 12_500)],
        [("a", 2, "z", 5_000)],  # the clock set back: counts as 12 s (the latest stamp of a
        # record that counts), not late
        [("b", 4, "w", 21_000)],
    ]
    results, run = _stepper(spark, tmp_path, dict(SPEC, window=window), batches)
    # the stream carries the key and the value, not the columns nothing reads
    assert [c for c in results[0].source.columns if not c.startswith("__panes")] == ["k", "v"]
    assert run(0) == [("dead", "missing_key", {"v": 2, "extra": "y", "it": 12_500})]
    assert run(1) == []
    assert run(2) == closed  # the watermark 21 s closes the windows that end by then


def test_an_event_time_stream_keeps_every_column_for_its_late_records(spark, tmp_path):
    spec = dict(SPEC, event_time="it", window={"tumbling": {"size": "10 seconds"}})
    batches = [[("a", 1, "x", 12_000)], [("a", 2, "z", 5_000)]]
    p = pipeline(spec)
    frames = [spark.createDataFrame(b, SCHEMA) for b in batches]
    results = [window_stream(f, p) for f in frames]
    assert [c for c in results[0].source.columns if not c.startswith("__panes")] == ["k", "v", "extra", "it"]
    # ... but not the event time, punctuation, clock and Spark watermark columns: the step reads
    # the row columns made of them
    assert not {TS, PUNCT, CLOCK, WMARK} & set(results[0].source.columns)
    stream = NativeStream(results[0].step, str(tmp_path))
    dead: list = []
    for i, r in enumerate(results):
        stream.run(
            r.source,
            i,
            lambda df, b: None,
            lambda df, b: dead.extend(
                (
                    d.reason,
                    json.loads(d.record),
                    d.watermark.timestamp(),
                    [(w.start.timestamp(), w.end.timestamp()) for w in d.windows],
                )
                for d in df.collect()
            ),
        )
    # late at watermark 12 s for its window [0 s, 10 s)
    assert dead == [("late", {"k": "a", "v": 2, "extra": "z", "it": 5_000}, 12.0, [(0.0, 10.0)])]


class _Store:
    def __init__(self):
        self.value = None

    def exists(self):
        return self.value is not None

    def get(self):
        return self.value

    def update(self, v):
        self.value = v


class _Handle:
    def __init__(self):
        self.timers: list = []

    def getValueState(self, name, schema):
        return _Store()

    def listTimers(self):
        return iter(self.timers)

    def registerTimer(self, t):
        self.timers.append(t)

    def deleteTimer(self, t):
        self.timers.remove(t)


class _Times:
    def __init__(self, wm, now):
        self.wm, self.now = wm, now

    def getCurrentWatermarkInMs(self):
        return self.wm

    def getCurrentProcessingTimeInMs(self):
        return self.now


@pytest.mark.parametrize("event_time", [None, "it"])
def test_the_stateful_processor_counts_a_stamp_before_the_latest_as_it(event_time):
    """The stateful plan's processor (no Spark session: its callbacks called as Spark would):
    an ingestion stamp set back counts in the latest stamp's window; an event time set back is
    late as ever."""
    import pandas as pd

    from panes.spark.columns import DETAIL, INVALID, TS
    from panes.spark.stateful import KIND, ORDER, PHASE, BucketProcessor

    spec = dict(SPEC, window={"tumbling": {"size": "10 seconds"}})
    if event_time:
        spec["event_time"] = event_time
    out_cols = [
        KIND,
        PHASE,
        ORDER,
        "k",
        "window_start",
        "window_end",
        "timing",
        "pane_index",
        "is_last",
        "retraction",
        "n",
        "total",
        "dl_reason",
        "dl_record",
        "dl_watermark",
        "dl_windows",
        "dl_detail",
    ]
    proc = BucketProcessor(pipeline(spec), ["k", "v", "it"], out_cols)
    proc.init(_Handle())

    def rows(k, v, t):
        return iter([pd.DataFrame({TS: [t], INVALID: [None], DETAIL: [None], "k": [k], "v": [v], "it": [t]})])

    got = []
    for batch, (wm, now) in zip(
        [rows("a", 1, 12_000), rows("a", 2, 5_000), rows("b", 4, 21_000)],
        [(0, 12_000), (12_000, 5_000), (12_000, 21_000)],
    ):
        for f in proc.handleInputRows(("0",), batch, _Times(wm, now)):
            got.extend(f.to_dict("records"))
    for f in proc.handleExpiredTimer(("0",), _Times(21_000, 21_000), None):
        got.extend(f.to_dict("records"))
    panes_ = [(r["k"], r["window_start"], r["n"], r["total"]) for r in got if r[KIND] == "P"]
    dead = [(r["dl_reason"], json.loads(r["dl_record"])["v"]) for r in got if r[KIND] == "D"]
    if event_time is None:  # 5 s counts as 12 s: in [10 s, 20 s)
        assert panes_ == [("a", 10_000, 2, 3)] and dead == []
    else:
        assert panes_ == [("a", 10_000, 1, 1)] and dead == [("late", 2)]
