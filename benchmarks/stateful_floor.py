#!/usr/bin/env python3
"""What a plan on ``transformWithStateInPandas`` can reach at best on the suite's
``state_bounded_stateful`` (tumbling 1 min, count + sum per key, watermark delay 2 min 5 s, one
file per micro-batch), side by side in one SparkSession, alternating, against plain Spark's
windowed aggregation (the suite's ``window`` formulation) and panes' stateful plan:

- ``tws_noop``: the rows grouped by hash buckets of the key as panes groups them (by default one per
  shuffle partition, labelled by ``panes.spark.bucket_layout``) into
  ``transformWithStateInPandas`` with event-time timers, a processor that reads every row, keeps
  no state and gives one row per bucket; ``foreachBatch`` aggregates its output and collects it;
- ``tws_state``: the same, and each bucket reads and writes its share of 224 KB (8 buckets' state
  at this size is 27-31 KB each) and keeps one timer, as panes' processor does, with no engine;
- ``tws_two_jobs``: ``tws_state`` with the output held as panes holds it (``stateful_batch.held``)
  and read by two jobs (a collect of the bucket rows, then the aggregation): the shape of panes'
  micro-batch (its decisions, then the callbacks);
- ``panes_null``: panes' stateful plan whole (its prepared input, its operator, its driver's
  micro-batch, the suite's callbacks) with ``StateProcessor``'s work in place of its processor's
  (``panes.spark.planner.DeferredProcessor`` replaced for the run): one count row per bucket, no
  engine, no panes;
- ``panes``: ``panes.window(..., plan="stateful").write_stream`` as the suite runs it;
- ``panes_zipped``: ``panes`` with Spark's Python workers on this Python, which imports PySpark from
  the zip Spark puts first on their path, in place of the session's ``panes-spark-python``
  (``panes_spark_python``): what each query start costs without it (Spark's driver-side worker).

    .venv/bin/python benchmarks/stateful_floor.py [--size quick|full] [--rounds 4]

Prints each side's seconds per round and, over the rounds after the first (the JIT's warm-up),
the medians and their ratio to plain Spark (above 1: faster). The floors run in panes' session
settings (its checkpoint file manager) and plain Spark with its own, as the suite runs them."""

from __future__ import annotations

import argparse
import contextlib
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
from pyspark.sql import functions as F
from pyspark.sql.streaming.stateful_processor import StatefulProcessor

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import start_spark, stream_input  # noqa: E402
from panes.spark.bucket_layout import bucket_column, default_buckets  # noqa: E402
from panes.spark.stateful_batch import held  # noqa: E402
from suite import SIZES, load_data_set, run_stream  # noqa: E402
from workloads import benchmarks  # noqa: E402

#: the whole state at the quick size (8 buckets of 27-31 KB), split over the buckets
STATE_BYTES = 224_000
FLOORS = ("tws_noop", "tws_state", "tws_two_jobs")
SIDES = ("window", "panes", "panes_zipped", *FLOORS, "panes_null")


class NoopProcessor(StatefulProcessor):
    """Reads every row, keeps nothing: one row per bucket (its rows)."""

    def init(self, handle) -> None:
        self.handle = handle

    def handleInputRows(self, key, rows, timerValues) -> Iterator[pd.DataFrame]:
        yield pd.DataFrame({"bucket": [int(key[0])], "rows": [sum(len(r) for r in rows)]})

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo) -> Iterator[pd.DataFrame]:
        yield pd.DataFrame({"bucket": [int(key[0])], "rows": [0]})

    def close(self) -> None:
        pass


class StateProcessor(NoopProcessor):
    """``NoopProcessor`` with a bucket's state traffic: a value read and written (its share of
    ``STATE_BYTES``), one timer kept."""

    def __init__(self, buckets: int) -> None:
        self.state_bytes = STATE_BYTES // buckets

    def init(self, handle) -> None:
        self.handle = handle
        self.value = handle.getValueState("blob", "blob binary")

    def handleInputRows(self, key, rows, timerValues) -> Iterator[pd.DataFrame]:
        stored = self.value.get()
        n = sum(len(r) for r in rows)
        blob = bytes(self.state_bytes) if stored is None else stored[0]
        # the timer set is kept in the state (its first 8 bytes; 0: none), as panes keeps its own
        had = int.from_bytes(blob[:8], "little", signed=True)
        want = max(timerValues.getCurrentWatermarkInMs() + 60_000, 1)
        self.value.update((want.to_bytes(8, "little", signed=True) + blob[8:],))
        if had != want:
            if had:
                self.handle.deleteTimer(had)
            self.handle.registerTimer(want)
        yield pd.DataFrame({"bucket": [int(key[0])], "rows": [n]})


class NullPanesProcessor(StateProcessor):
    """``StateProcessor`` in panes' plan: its state declared as panes' is, one count row per call
    in panes' output columns (what the driver's micro-batch reads), no engine."""

    def __init__(self, processor, buckets: int) -> None:
        super().__init__(buckets)
        self.columns = list(processor.output_columns)

    def init(self, handle) -> None:
        from panes.spark.deferred_processor import engine_state

        self.handle, self.value = handle, engine_state(handle)

    def _count_row(self, rows: int) -> pd.DataFrame:
        from panes.core.engine.parts import PHASES
        from panes.spark.stateful import KIND, ORDER, PHASE
        from panes.spark.stateful_counts import COUNTS, as_json

        # (as ``BucketProcessor._summary`` writes it: after the last phase)
        row: dict = {c: [None] for c in self.columns}
        row.update({KIND: ["C"], PHASE: [PHASES], ORDER: [1], COUNTS: [as_json({"records_in": rows, "counted": rows})]})
        return pd.DataFrame(row)

    def handleInputRows(self, key, rows, timerValues) -> Iterator[pd.DataFrame]:
        for out in super().handleInputRows(key, rows, timerValues):
            yield self._count_row(int(out["rows"].iloc[0]))

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo) -> Iterator[pd.DataFrame]:
        yield self._count_row(0)


def floor_run(spark, side: str, src_dir: Path, schema, timeout: float) -> float:
    """One run of a floor (its seconds, from building the query to its end)."""
    ck = tempfile.mkdtemp(prefix=f"panes-floor-{side}-")
    try:
        t0 = time.perf_counter()
        src = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(src_dir))
        buckets = default_buckets(spark)
        rows = src.withColumn("bucket", bucket_column([F.col("key")], buckets)).withWatermark("ts", "125 seconds")
        processor = NoopProcessor() if side == "tws_noop" else StateProcessor(buckets)
        out = rows.groupBy("bucket").transformWithStateInPandas(
            statefulProcessor=processor,
            outputStructType="bucket long, rows long",
            outputMode="Append",
            timeMode="EventTime",
        )
        got = {"rows": 0}

        def each(df, batch_id):
            release = None
            if side == "tws_two_jobs":
                df, release = held(df)
                df.filter(F.col("rows") > 0).collect()
            got["rows"] += df.agg(F.sum("rows")).collect()[0][0] or 0
            if release is not None:
                release()

        q = out.writeStream.foreachBatch(each).option("checkpointLocation", ck).trigger(availableNow=True).start()
        if not q.awaitTermination(timeout):
            q.stop()
            raise RuntimeError(f"{side}: not finished in {timeout} s")
        seconds = time.perf_counter() - t0
        if q.exception() is not None:
            raise RuntimeError(f"{side}: {q.exception()}")
        return seconds
    finally:
        shutil.rmtree(ck, ignore_errors=True)


@contextlib.contextmanager
def null_processor(on: bool, buckets: int) -> Iterator[None]:
    """panes' stateful plan with ``NullPanesProcessor`` in place of its processor (``on``)."""
    if not on:
        yield
        return
    import panes.spark.planner as planner

    deferred = planner.DeferredProcessor
    planner.DeferredProcessor = lambda processor: NullPanesProcessor(processor, buckets)  # type: ignore
    try:
        yield
    finally:
        planner.DeferredProcessor = deferred  # type: ignore[misc]


@contextlib.contextmanager
def workers_python(spark, python: str | None) -> Iterator[None]:
    """Spark's Python workers run ``python`` for the queries planned in the block (None: the
    session's): a query's Python functions take it from the SparkContext as they are planned."""
    sc = spark.sparkContext
    before = sc.pythonExec
    if python is not None:
        sc.pythonExec = python
    try:
        yield
    finally:
        sc.pythonExec = before


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", choices=sorted(SIZES), default="quick")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--timeout", type=float, default=900)
    a = ap.parse_args()
    bench = next(b for b in benchmarks() if b.name == "state_bounded_stateful")
    ds = load_data_set("state", SIZES[a.size])
    src = stream_input(ds.path, ds.sentinel)
    spark = start_spark()
    secs: dict[str, list[float]] = {s: [] for s in SIDES}
    for rnd in range(a.rounds):
        for side in SIDES:
            if side in FLOORS:
                secs[side].append(floor_run(spark, side, src, ds.schema(), a.timeout))
            else:
                with (
                    null_processor(side == "panes_null", default_buckets(spark)),
                    workers_python(spark, sys.executable if side == "panes_zipped" else None),
                ):
                    r = run_stream(spark, bench, ds, "window" if side == "window" else "panes", src, 1, a.timeout)
                if not r["finished"]:
                    raise RuntimeError(f"{side}: not finished")
                secs[side].append(r["seconds"])
            print(f"round {rnd} {side}: {secs[side][-1]:.2f} s", flush=True)
    plain = statistics.median(secs["window"][1:])
    print(f"\nmedians of rounds 1-{a.rounds - 1} ({ds.records:,} records, {a.size}):")
    for side in SIDES:
        med = statistics.median(secs[side][1:])
        print(f"  {side:14s} {med:6.2f} s  {ds.records / med:9,.0f} events/s  {plain / med:5.3f} x plain Spark")


if __name__ == "__main__":
    main()
