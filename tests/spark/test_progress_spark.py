"""ProgressListener: each micro-batch's progress, with its observed metrics, read as Spark's JSON of
it in a few JVM round trips (PySpark's own conversion took hundreds per event)."""

import threading
import time

import pytest
from pyspark.sql import functions as F

from panes.spark.progress import ProgressListener

pytestmark = pytest.mark.spark


def test_progress_events_carry_the_observed_metrics_in_few_round_trips(spark, tmp_path):
    import py4j.java_gateway as gateway

    src = tmp_path / "in"
    src.mkdir()
    spark.createDataFrame([(1,), (2,), (None,)], "x long").write.parquet(str(src / "a"))
    events: list = []
    threads: set = set()

    def on_progress(progress):
        events.append(progress)
        threads.add(threading.current_thread().name)

    listener = ProgressListener(on_progress)
    calls: dict[str, int] = {}
    send = gateway.GatewayClient.send_command

    def counted(self, *args, **kwargs):
        name = threading.current_thread().name
        calls[name] = calls.get(name, 0) + 1
        return send(self, *args, **kwargs)

    stream = spark.readStream.schema("x long").parquet(str(src / "a"))
    seen = stream.observe("seen", F.count(F.lit(1)).alias("rows"), F.count_if(F.col("x").isNull()).alias("nulls"))
    spark.streams.addListener(listener)
    try:
        q = seen.writeStream.format("noop").option("checkpointLocation", str(tmp_path / "ck"))
        q = q.trigger(availableNow=True).start()
        gateway.GatewayClient.send_command = counted
        q.awaitTermination()
        deadline = time.time() + 60
        while not events and time.time() < deadline:
            time.sleep(0.1)
    finally:
        gateway.GatewayClient.send_command = send
        spark.streams.removeListener(listener)
    (p,) = [e for e in events if e.numInputRows]
    assert str(p.id) == str(q.id) and p.batchId == 0 and p.numInputRows == 3
    assert p.observedMetrics["seen"].asDict() == {"rows": 3, "nulls": 1}
    assert "triggerExecution" in p.durationMs
    # the listener's thread asks for each event's progress and its JSON
    assert threading.current_thread().name not in threads
    assert sum(calls.get(name, 0) for name in threads) <= 2 * len(events), calls


def test_a_query_s_end_comes_after_its_progress_as_its_id(spark, tmp_path):
    # (the runner waits on these events: the end lets it return without polling the query)
    src = tmp_path / "in"
    spark.createDataFrame([(1,), (2,)], "x long").write.parquet(str(src))
    got: list = []
    ended = threading.Event()

    def on_terminated(query_id):
        got.append(("ended", query_id))
        ended.set()

    listener = ProgressListener(lambda p: got.append(("progress", str(p.id), p.batchId)), on_terminated)
    spark.streams.addListener(listener)
    try:
        stream = spark.readStream.schema("x long").option("maxFilesPerTrigger", 1).parquet(str(src))
        q = stream.writeStream.format("noop").option("checkpointLocation", str(tmp_path / "ck"))
        q = q.trigger(availableNow=True).start()
        q.awaitTermination()
        assert ended.wait(60)
    finally:
        spark.streams.removeListener(listener)
    mine = [g for g in got if str(q.id) in g]
    batches = [g[2] for g in mine if g[0] == "progress"]
    assert mine[-1] == ("ended", str(q.id)) and batches == list(range(len(batches))) and batches
