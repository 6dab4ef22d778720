#!/usr/bin/env python3
"""What it costs a task of the sink plan (``spark.plan: arrow``) to receive its rows as Arrow, per
projection of the stream, on tw_agg's spec: each side's stream goes into a data source whose
writer only drains its rows (timed inside the task, from the first batch asked for to the last
received), so the time is Spark's: the scan, the projection, the input counts it observes, the
rows written as Arrow and read by the Python worker.

Sides (``--sides``): ``raw``, the bids' key, price and event time (plain Spark's own columns);
``raw_refs``, with each row's file and index in it (``_metadata``); ``raw_file_key``, with the
file's size in place of its path (a long, the same for every row of a file); ``arrow``, the sink plan's
stream as it is (``ArrowStream.source``); ``arrow_no_strings``, without its reason and detail
strings; ``arrow_no_refs``, without the references; ``packed``, the same information in fewer
columns: one long per row's reference (the file's hash, shifted, or the row's index), one
byte for what the row is (counts, malformed, neither) and the event time or watermark value in
one long, as a stream for the sink could carry it.

    .venv/bin/python benchmarks/sink_receive.py --data ~/.cache/panes-bench/data/b1m [--rounds 3]

Prints per round and side the query's seconds and the median time a task with rows spent
receiving them."""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.datasource import DataSource, DataSourceStreamArrowWriter, WriterCommitMessage

sys.path.insert(0, str(Path(__file__).resolve().parent))

from panes.io import with_record_references  # noqa: E402
from panes.runner import read_stream  # noqa: E402
from panes.spark.native.arrow_stream import ArrowStream  # noqa: E402
from panes.spark.native.names import ROW_COUNTS, ROW_MALFORMED, ROW_TIME, ROW_WATERMARK  # noqa: E402
from panes.spark.planner import window_stream  # noqa: E402
from panes.spark.record_files import REF_FILE, REF_ROW  # noqa: E402
from panes.spark.session import get_spark  # noqa: E402
from panes.spec import parse_run_spec  # noqa: E402
from panes_nexmark import QUERIES  # noqa: E402

SIDES = ("raw", "raw_refs", "raw_file_key", "arrow", "arrow_no_strings", "arrow_no_refs", "packed")


class Drained(WriterCommitMessage):
    pass


class DrainWriter(DataSourceStreamArrowWriter):
    def __init__(self, log: str):
        self.log = log

    def write(self, iterator: Any) -> Drained:
        t0 = time.perf_counter()
        rows = sum(b.num_rows for b in iterator)
        if rows:
            with open(self.log, "a") as f:
                f.write(f"{time.perf_counter() - t0:.4f}\n")
        return Drained()

    def commit(self, messages: list, batchId: int) -> None:
        pass


class DrainSink(DataSource):
    @classmethod
    def name(cls) -> str:
        return "panes_drain"

    def streamWriter(self, schema: Any, overwrite: bool) -> DrainWriter:
        return DrainWriter(self.options["log"])


def stream(spark, side: str, data: str, checkpoint: str) -> DataFrame:
    path = os.path.join(data, "parquet", "bid")
    doc = {
        "event_time": "dateTime",
        "watermark": {"max_delay": "4 seconds"},
        "source": {"format": "parquet", "path": path, "max_files_per_trigger": 1},
        "sink": {"format": "noop"},
        **QUERIES["tw_agg"],
    }
    spec = parse_run_spec(doc)
    df = read_stream(spark, spec.source)
    if side.startswith("raw"):
        refs = {
            "raw": [],
            "raw_refs": [F.col("_metadata.file_path"), F.col("_metadata.row_index")],
            "raw_file_key": [F.col("_metadata.file_size"), F.col("_metadata.row_index")],
        }[side]
        return df.select("auction", "price", F.unix_millis("dateTime").alias("ts"), *refs)
    df, records = with_record_references(df, spec.source)
    result = window_stream(df, spec.to_pipeline(), plan="arrow", records=records)
    source = ArrowStream(result.step, result.source, checkpoint).source  # type: ignore[attr-defined]
    if side == "arrow":
        return source
    if side == "arrow_no_strings":
        return source.drop("__panes_invalid", "__panes_detail")
    if side == "arrow_no_refs":
        return source.drop(REF_FILE, REF_ROW)
    counts = F.col(ROW_COUNTS)
    return source.select(
        "auction",
        "price",
        F.when(counts, F.col(ROW_TIME)).otherwise(F.col(ROW_WATERMARK)).alias("time_or_mark"),
        F.shiftleft(F.xxhash64(REF_FILE), 32).bitwiseOR(F.col(REF_ROW)).alias("reference"),
        F.when(counts, 0).when(F.col(ROW_MALFORMED), 1).otherwise(2).cast("byte").alias("status"),
        "__panes_detail",
    )


def run(spark, side: str, data: str) -> tuple[float, float]:
    """The query's seconds, and the median seconds a task with rows spent receiving them."""
    work = tempfile.mkdtemp(prefix="panes-sink-receive-")
    log = os.path.join(work, "received")
    try:
        t0 = time.time()
        w = stream(spark, side, data, os.path.join(work, "state")).writeStream.format(DrainSink.name())
        q = w.option("log", log).option("checkpointLocation", os.path.join(work, "checkpoint"))
        q.trigger(availableNow=True).start().awaitTermination()
        secs = time.time() - t0
        with open(log) as f:
            return secs, statistics.median(float(x) for x in f)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=os.path.expanduser("~/.cache/panes-bench/data/b1m"))
    ap.add_argument("--sides", default=",".join(SIDES))
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    spark = get_spark()
    spark.dataSource.register(DrainSink)
    sides = a.sides.split(",")
    received: dict[str, list[float]] = {s: [] for s in sides}
    for r in range(a.rounds + 1):  # (round 0 warms the session up: not counted)
        for side in sides if r % 2 == 0 else sides[::-1]:
            secs, task = run(spark, side, a.data)
            print(f"round {r} {side}: {secs:.2f} s, a task received its rows in {task * 1000:.0f} ms", flush=True)
            if r:
                received[side].append(task)
    for side, xs in received.items():
        print(f"{side}: median {statistics.median(xs) * 1000:.0f} ms per task", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
