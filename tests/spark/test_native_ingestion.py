"""Ingestion time on the native streaming plan: stamps never go back, so no record is late, and
the stream reads only the columns the windows need; a malformed record still reaches the dead
letters whole."""

import json

import pytest
from pyspark.sql import functions as F

from panes import pipeline
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
    stream = NativeStream(results[0].native, str(tmp_path))

    def run(i):
        got: list = []
        stream.run(results[i].source, i,
                   lambda df, b: got.extend((r.k, r.window_start.second, r.n, r.total) for r in df.collect()),
                   lambda df, b: got.extend(("dead", r.reason, json.loads(r.record)) for r in df.collect()))
        return sorted(got, key=str)
    return results, run


@pytest.mark.parametrize("window, closed", [
    ({"tumbling": {"size": "10 seconds"}}, [("a", 10, 2, 3)]),
    ({"hopping": {"size": "10 seconds", "hop": "5 seconds"}}, [("a", 10, 2, 3), ("a", 5, 2, 3)]),
])
def test_a_stamp_before_the_latest_counts_as_it_and_malformed_records_stay_whole(spark, tmp_path, window, closed):
    batches = [[("a", 1, "x", 12_000), (None, 2, "y", 12_500)],
               [("a", 2, "z", 5_000)],  # the clock set back: counts as 12 s (the latest stamp of a
               # record that counts), not late
               [("b", 4, "w", 21_000)]]
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
    stream = NativeStream(results[0].native, str(tmp_path))
    dead: list = []
    for i, r in enumerate(results):
        stream.run(r.source, i, lambda df, b: None,
                   lambda df, b: dead.extend((d.reason, json.loads(d.record)) for d in df.collect()))
    assert dead == [("late", {"k": "a", "v": 2, "extra": "z", "it": 5_000})]
