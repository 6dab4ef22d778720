"""The stage's output watermark on Spark: a pane's timing hangs on every key's holds, across the
stateful plan's hash buckets (each bucket reports its holds, the driver decides the panes its
bucket could not: ``stateful.OutputWatermarks``), in the replay and in ``write_stream``."""

import json
import os
import time

import pytest
from pyspark.sql import functions as F

import panes
from panes.core.engine.parts import StageWatermarks
from panes.scenario import load_scenario, replay_core
from panes.spark.replay import replay_spark

pytestmark = pytest.mark.spark

KEYS = [f"k{i}" for i in range(1, 8)]
PIPELINE = {
    "event_time": "t",
    "key": "k",
    "window": {"tumbling": {"size": 10_000}},
    "allowed_lateness": 600_000,
    "trigger": {"after_count": 2},
    "accumulation": "discarding",
    "aggregates": {"s": {"sum": "v"}},
}


def _holders(spark, buckets: int) -> list[str]:
    """The keys whose hash bucket (``planner.prepare``) is not k0's: only another bucket's holds
    can keep k0's window ON_TIME."""
    rows = (
        spark.createDataFrame([(k,) for k in ["k0", *KEYS]], "k STRING")
        .select("k", F.pmod(F.xxhash64("k"), F.lit(buckets)).alias("b"))
        .collect()
    )
    bucket = {r.k: r.b for r in rows}
    holders = [k for k in KEYS if bucket[k] != bucket["k0"]]
    assert holders
    return holders


def _decisions(monkeypatch) -> list:
    """The provisional panes' decisions, recorded."""
    seen: list = []
    decide = StageWatermarks.timing

    def recorded(self, *args):
        seen.append(decide(self, *args))
        return seen[-1]

    monkeypatch.setattr(StageWatermarks, "timing", recorded)
    return seen


def test_other_buckets_holds_keep_a_late_created_window_on_time_in_the_replay(spark, monkeypatch):
    # issue 32, case 1, over keys in 8 buckets: k0's window [10 s, 20 s) comes into being after the
    # watermark passed its end; the unfired records of keys in other buckets hold the output watermark
    late = [{"k": "k0", "v": 2, "t": 12_000}, {"k": "k0", "v": 3, "t": 13_000}]
    scenario = load_scenario(
        {
            "pipeline": {**PIPELINE, "watermark": {"punctuation": True}},
            "timeline": [
                {"add": [{"k": k, "v": 1, "t": 5000} for k in _holders(spark, 8)]},
                {"watermark": 30_000},
                {"add": late},
                {"end": True},
            ],
        }
    )
    decisions = _decisions(monkeypatch)
    core = replay_core(scenario)
    assert core.panes[0]["k"] == "k0" and core.panes[0]["timing"] == "ON_TIME"
    assert replay_spark(scenario, buckets=8, spark=spark, plan="stateful").panes == core.panes
    assert "ON_TIME" in decisions  # k0's bucket alone would have said LATE


def test_write_stream_decides_the_provisional_panes(spark, tmp_path, monkeypatch):
    src = tmp_path / "in"
    src.mkdir()
    holders = _holders(spark, 8)
    batches = [
        [{"k": k, "v": 1, "t": 5000} for k in holders] + [{"k": holders[0], "v": 0, "t": 30_000}],
        [{"k": "k0", "v": 2, "t": 12_000}, {"k": "k0", "v": 3, "t": 13_000}],
    ]
    df = spark.readStream.schema("k STRING, v LONG, t LONG").option("maxFilesPerTrigger", 1).json(str(src))
    result = panes.window(df, PIPELINE, buckets=8, plan="stateful")
    seen: list = []
    decisions = _decisions(monkeypatch)
    q = result.write_stream(
        lambda d, i: seen.extend(r.asDict() for r in d.collect()), lambda d, i: None, checkpoint=str(tmp_path / "ck")
    )
    try:
        base = time.time() - 1000
        for n, rows in enumerate(batches):
            path = src / f"b{n}.json"
            path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
            os.utime(path, (base + n, base + n))
            q.processAllAvailable()
    finally:
        q.stop()
    k0 = [(r["timing"], r["pane_index"], r["s"]) for r in seen if r["k"] == "k0"]
    assert k0 == [("ON_TIME", 0, 5)]
    assert "ON_TIME" in decisions
