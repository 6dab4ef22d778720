#!/usr/bin/env python3
"""What a ``foreachBatch`` plan can reach at best on Nexmark's tw_agg (tumbling 10 s per auction,
count + sum(price)), side by side in one SparkSession, alternating, against plain Spark's streaming
query (``withWatermark`` + ``groupBy(window)``, append mode, noop sink):

- ``floor_raw``: each micro-batch's rows, as the file source reads them, grouped per auction and
  window and written to noop: no open windows kept, no late split, no panes' write;
- ``floor_prepared``: the same over panes' prepared stream (``panes.window(...)``'s rows: the
  columns the native step reads and the observed input counts), as ``foreachBatch`` hands it over;
- ``panes``: ``panes.window(...).write_stream`` with noop callbacks (no end of the input, as plain
  Spark's append mode).

    .venv/bin/python benchmarks/foreach_batch_floor.py --data ~/.cache/panes-bench/data/b1m

``--data``: a ``../shared/bench/nexmark_gen.py`` data set (``make bench-shared`` makes 1M bids in
``~/.cache/panes-bench/data/b1m``), one micro-batch per file. Prints each side's seconds per round
and the medians' ratios to plain Spark (above 1: faster). Both sides run in panes' session (its
checkpoint file manager), so the floors compare with plain Spark on equal terms."""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

sys.path.insert(0, str(Path(__file__).resolve().parent))

import panes  # noqa: E402
from nexmark_run import DELAY, bid_stream, plain_query  # noqa: E402
from panes.spark.native.names import ROW_TIME  # noqa: E402
from panes.spark.results import NativeStreamResult  # noqa: E402
from panes.spark.session import get_spark  # noqa: E402
from panes_nexmark import QUERIES  # noqa: E402

#: tw_agg as panes runs it in the shared comparison
SPEC = {"event_time": "dateTime", "watermark": {"max_delay": DELAY}, **QUERIES["tw_agg"]}
SIDES = ("plain", "floor_raw", "floor_prepared", "panes")


def _timed(start) -> float:
    ck = tempfile.mkdtemp(prefix="panes-floor-")
    t0 = time.time()
    q = start(ck)
    q.awaitTermination()
    secs = time.time() - t0
    shutil.rmtree(ck, ignore_errors=True)
    return secs


def run(spark, side: str, data: str) -> float:
    path = os.path.join(data, "parquet", "bid")
    if side == "plain":
        out = plain_query(spark, "tw_agg", path, DELAY).writeStream.format("noop").outputMode("append")
        return _timed(lambda ck: out.option("checkpointLocation", ck).trigger(availableNow=True).start())
    src = bid_stream(spark, path)
    result = panes.window(src, SPEC)
    assert isinstance(result, NativeStreamResult)  # (the native plan's stream)
    if side == "panes":

        def noop(df, _batch_id):
            df.write.format("noop").mode("overwrite").save()

        return _timed(lambda ck: result.write_stream(noop, noop, ck, availableNow=True))
    prepared = side == "floor_prepared"
    rows, ts = (result.source, F.col(ROW_TIME)) if prepared else (src, F.unix_millis("dateTime"))

    def each(df: DataFrame, _batch_id: int) -> None:
        window = (ts - F.pmod(ts, F.lit(10_000))).alias("window_start")
        df.groupBy(window, "auction").agg(F.count(F.lit(1)), F.sum("price")).write.format("noop").mode(
            "overwrite"
        ).save()

    out = rows.writeStream.foreachBatch(each).trigger(availableNow=True)
    return _timed(lambda ck: out.option("checkpointLocation", ck).start())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=os.path.expanduser("~/.cache/panes-bench/data/b1m"))
    ap.add_argument("--warmup-data", default=os.path.expanduser("~/.cache/panes-bench/data/t100k"))
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    spark = get_spark()
    for side in SIDES:
        run(spark, side, a.warmup_data)
    secs: dict[str, list[float]] = {s: [] for s in SIDES}
    for r in range(a.rounds):
        for side in SIDES[r % len(SIDES) :] + SIDES[: r % len(SIDES)]:
            secs[side].append(run(spark, side, a.data))
            print(f"round {r + 1}: {side} {secs[side][-1]:.2f} s", flush=True)
    plain = statistics.median(secs["plain"])
    for side in SIDES:
        med = statistics.median(secs[side])
        print(f"{side:15s} median {med:6.2f} s  plain Spark / it {plain / med:5.2f}x")


if __name__ == "__main__":
    main()
