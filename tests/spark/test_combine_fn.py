"""A user CombineFn on Spark, streaming (stateful plan) and batch (the core engine over buckets,
as there is no native form), against the same fn run by the core."""

import json

import pytest

import panes
from panes.scenario import load_scenario, replay_core

pytestmark = pytest.mark.spark

SPEC = {
    "event_time": "t",
    "key": "k",
    "window": {"tumbling": {"size": 10}},
    "aggregates": {"sq": {"combine": {"fn": "combine_fns:SumOfSquares", "column": "v"}}, "n": {"count": "*"}},
}
RECORDS = [
    {"k": "a", "t": 1, "v": 2},
    {"k": "a", "t": 5, "v": 3},
    {"k": "b", "t": 7, "v": 4},
    {"k": "a", "t": 12, "v": 1},
    {"k": "b", "t": 15, "v": None},
]


def test_combine_fn_core_batch_and_stream(spark, tmp_path):
    core = replay_core(load_scenario({"pipeline": SPEC, "timeline": [{"add": RECORDS}, {"end": True}]}))
    want = sorted((p["k"], p["window_start"], p["sq"], p["n"]) for p in core.panes)
    assert sorted((k, sq, n) for k, _, sq, n in want) == [("a", 1, 1), ("a", 13, 2), ("b", 0, 1), ("b", 16, 1)]

    df = spark.createDataFrame(RECORDS, "k STRING, t LONG, v LONG")
    res = panes.window(df, SPEC)
    assert "core engine" in res.plan
    got = sorted((r["k"], r["sq"], r["n"]) for r in res.panes.collect())
    assert got == [("a", 1, 1), ("a", 13, 2), ("b", 0, 1), ("b", 16, 1)]

    src = tmp_path / "in"
    src.mkdir()
    (src / "a.json").write_text("\n".join(json.dumps(r) for r in RECORDS) + "\n")
    stream = spark.readStream.schema("k STRING, t LONG, v LONG").json(str(src))
    seen = []
    q = panes.window(stream, SPEC).write_stream(
        lambda d, i: seen.extend(r.asDict() for r in d.collect()),
        lambda d, i: None,
        checkpoint=str(tmp_path / "ck"),
        availableNow=True,
    )
    q.awaitTermination(120)
    # the watermark (max event time 15) closes [0, 10); [10, 20) stays open
    assert sorted((r["k"], r["sq"], r["n"]) for r in seen) == [("a", 13, 2), ("b", 16, 1)]


def test_a_dead_letter_of_the_batch_engine_keeps_a_column_named_with_a_dot(spark):
    """The batch plan for user combine functions (the core engine over buckets) writes a malformed
    record whole, a column named ``x.y`` (not a field ``y`` of ``x``) included, as the native plan
    does."""
    df = spark.createDataFrame([("a", 1, 2, "p"), (None, 3, 4, "q")], "k STRING, t LONG, v LONG, `x.y` STRING")
    res = panes.window(df, SPEC)
    assert "core engine" in res.plan
    dead = [(r.reason, json.loads(r.record)) for r in res.dead_letters.collect()]
    assert dead == [("missing_key", {"t": 3, "v": 4, "x.y": "q"})]
    assert sorted((r["k"], r["sq"], r["n"]) for r in res.panes.collect()) == [("a", 4, 1)]
