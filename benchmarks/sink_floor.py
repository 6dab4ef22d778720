#!/usr/bin/env python3
"""What a plan without ``foreachBatch`` can reach at best on the shared Nexmark queries (tw_agg,
q5a, q7a, q11), side by side in one SparkSession, alternating, against plain Spark's streaming
query and panes' native plan.

``sink``: the stream's rows go straight into a streaming Python data source's Arrow writer
(``DataSourceStreamArrowWriter``): Spark analyses the query once, and each micro-batch is one job
of one stage (no shuffle, no state store, no plan built per micro-batch). Each task splits its
rows against the watermark the last commit left (rows whose windows have all expired are counted,
not kept), aggregates the others per key and window with pyarrow (partial aggregates), and sends
them with its greatest event time; the commit (a Python worker on the driver) merges them into the
open windows kept from the micro-batch before (an Arrow file), moves the watermark, counts the
windows that close and keeps the others. What panes' plan does besides is left out: the dead
letters' records, the input counts, the panes handed to a sink, the end of the input, state kept
per micro-batch for a restart. So this is a floor, not a plan.

``plain``: plain Spark's streaming query (``withWatermark`` + ``groupBy(window)``, append mode,
noop sink) on Spark's own state store and checkpoint file manager, as the shared harness runs it.
``panes``: ``panes.window(...).write_stream`` with noop callbacks (no end of the input, as plain
Spark's append mode). The sink runs in panes' session (its checkpoint file manager).
``sink_refs`` and ``sink_hashed_refs`` (``--sides``): the sink with what a plan's dead letters
need to read their records back, each row's file and its index in it (``SINKS``);
``sink_delivered``: ``sink_refs`` whose closed windows the driver hands on (read by Spark, written
to noop), micro-batch by micro-batch while the query goes on (``Delivery``).

    .venv/bin/python benchmarks/sink_floor.py --data ~/.cache/panes-bench/data/b1m

``--data``: a ``../shared/bench/nexmark_gen.py`` data set (``make bench-shared`` makes 1M bids in
``~/.cache/panes-bench/data/b1m``), one micro-batch per file. Prints each side's seconds and
windows out per round, and the medians' ratios to plain Spark (above 1: faster). Exit status 1
when a sink side's windows out differ from plain Spark's."""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import functions as F
from pyspark.sql.datasource import DataSource, DataSourceStreamArrowWriter, WriterCommitMessage

sys.path.insert(0, str(Path(__file__).resolve().parent))

import panes  # noqa: E402
from common import plain_spark_settings  # noqa: E402
from nexmark_run import DELAY, bid_stream, plain_query  # noqa: E402
from panes.spark.native.arrow_sink import from_ipc, to_ipc  # noqa: E402
from panes.spark.session import get_spark  # noqa: E402
from panes_nexmark import QUERIES  # noqa: E402

DELAY_MS = 4_000
#: the partial aggregate of each operation, and how partials merge
MERGE = {"count": "sum", "sum": "sum", "max": "max"}
#: before the first commit
NO_WATERMARK = -(2**62)


@dataclass(frozen=True)
class Query:
    """A query's windows (``size`` and ``hop`` ms, or a session ``gap``) and aggregates
    (``(column, operation)``; ``count`` counts rows)."""

    keys: tuple[str, ...]
    aggregates: tuple[tuple[str, str], ...]
    size: int = 0
    hop: int = 0
    gap: int = 0

    @property
    def columns(self) -> list[str]:
        return [f"{c}_{op}" for c, op in self.aggregates]


FLOOR = {
    "tw_agg": Query(("auction",), (("price", "count"), ("price", "sum")), size=10_000, hop=10_000),
    "q5a": Query(("auction",), (("price", "count"),), size=10_000, hop=2_000),
    "q7a": Query((), (("price", "max"),), size=10_000, hop=10_000),
    "q11": Query(("bidder",), (("price", "count"),), gap=10_000),
}


class Partials(WriterCommitMessage):
    """A task's partial aggregates (Arrow IPC), its greatest event time and rows."""

    def __init__(self, table: bytes | None, max_time: int | None, rows: int, late: int):
        self.table, self.max_time, self.rows, self.late = table, max_time, rows, late


def sessions(t: Any, q: Query) -> Any:
    """Sessions (keys, start, end, aggregates) of proto-sessions, merged where they overlap
    (sessions that only touch stay apart, as in panes and Beam): sorted by key and start, a new
    session where the key changes or the start is at or past every end before it in the key."""
    t = t.sort_by([*((k, "ascending") for k in q.keys), ("start", "ascending")])
    s, e = t["start"].to_numpy(), t["end"].to_numpy()
    new = np.zeros(len(s), bool)
    new[:1] = True
    for k in q.keys:
        v = t[k].to_numpy()
        new[1:] |= v[1:] != v[:-1]
    # the running greatest end within each key: each key's ends lifted above the keys' before
    key_number = np.cumsum(new)
    span = int(e.max() - e.min()) + 1 if len(e) else 1
    lifted = e - (e.min() if len(e) else 0) + key_number * span
    run = np.maximum.accumulate(lifted) - key_number * span + (e.min() if len(e) else 0)
    new[1:] |= s[1:] >= run[:-1]
    g = t.append_column("session", pa.array(np.cumsum(new)))
    merge = [("start", "min"), ("end", "max"), *((c, MERGE[op]) for c, (_, op) in zip(q.columns, q.aggregates))]
    a = g.group_by([*q.keys, "session"]).aggregate(merge)
    return a.select([*q.keys, *(f"{c}_{op}" for c, op in merge)]).rename_columns([*q.keys, "start", "end", *q.columns])


class FloorWriter(DataSourceStreamArrowWriter):
    def __init__(self, directory: str, q: Query, deliver: bool = False):
        self.directory, self.q, self.deliver = directory, q, deliver

    def _path(self, name: str) -> str:
        return os.path.join(self.directory, name)

    def _watermark(self) -> int:
        try:
            with open(self._path("watermark")) as f:
                return int(f.read())
        except FileNotFoundError:
            return NO_WATERMARK

    def _windows(self, t: Any, wm: int) -> tuple[Any, Any]:
        """Each row's windows that have not expired (start, end), and which rows have one."""
        q, ts = self.q, t["ts"]
        base = t.select([*q.keys, *dict.fromkeys(c for c, _ in q.aggregates)])
        if q.gap:
            ok = pc.greater(pc.add(ts, q.gap), wm)
            return base.append_column("start", ts).append_column("end", pc.add(ts, q.gap)).filter(ok), ok
        last = pc.multiply(pc.divide(ts, q.hop), q.hop)  # (the latest window's start: event times >= 0)
        wins, any_ok = [], None
        for i in range(q.size // q.hop):
            start = pc.subtract(last, i * q.hop)
            ok = pc.greater(pc.add(start, q.size), wm)
            any_ok = ok if any_ok is None else pc.or_(any_ok, ok)
            wins.append(base.append_column("start", start).filter(ok))
        return pa.concat_tables(wins), any_ok

    def write(self, iterator: Any) -> Partials:
        q, wm = self.q, self._watermark()
        batches = [b for b in iterator if b.num_rows]
        if not batches:
            return Partials(None, None, 0, 0)
        t = pa.Table.from_batches(batches)
        rows, ok = self._windows(t, wm)
        late = t.num_rows - pc.sum(ok).as_py()
        if q.gap:
            rows = rows.append_column("price_count", pa.array(np.ones(rows.num_rows, np.int64)))
            part = sessions(rows, q)
        else:
            a = rows.group_by([*q.keys, "start"]).aggregate(list(q.aggregates))
            part = a.select([*q.keys, "start", *q.columns])
        return Partials(to_ipc(part), pc.max(t["ts"]).as_py(), t.num_rows, late)

    def commit(self, messages: list, batchId: int) -> None:
        q, wm = self.q, self._watermark()
        tables = []
        if os.path.exists(self._path("open")):
            with open(self._path("open"), "rb") as f:
                tables.append(from_ipc(f.read()))
        times = [m.max_time for m in messages if m is not None and m.max_time is not None]
        tables += [from_ipc(m.table) for m in messages if m is not None and m.table is not None]
        new_wm = max(wm, max(times) - DELAY_MS) if times else wm
        closed = 0
        if tables:
            all_rows = pa.concat_tables(tables)
            if q.gap:
                windows = sessions(all_rows, q)
            else:
                merge = [(c, MERGE[op]) for c, (_, op) in zip(q.columns, q.aggregates)]
                a = all_rows.group_by([*q.keys, "start"]).aggregate(merge)
                windows = a.select([*q.keys, "start", *(f"{c}_{op}" for c, op in merge)])
                windows = windows.rename_columns([*q.keys, "start", *q.columns])
            end = windows["end"] if q.gap else pc.add(windows["start"], q.size)
            closes = pc.less_equal(end, new_wm)
            closed = pc.sum(closes).as_py() or 0
            if self.deliver and closed:  # (for the driver to hand to a sink: ``Delivery``)
                import pyarrow.parquet as pq

                os.makedirs(self._path("panes"), exist_ok=True)
                pq.write_table(windows.filter(closes), self._path(f"panes/{batchId}.tmp"))
                os.replace(self._path(f"panes/{batchId}.tmp"), self._path(f"panes/{batchId}.parquet"))
            with open(self._path("open.tmp"), "wb") as f:
                f.write(to_ipc(windows.filter(pc.invert(closes))))
            os.replace(self._path("open.tmp"), self._path("open"))
        with open(self._path("watermark.tmp"), "w") as f:
            f.write(str(new_wm))
        os.replace(self._path("watermark.tmp"), self._path("watermark"))
        with open(self._path("closed"), "a") as f:
            f.write(f"{batchId} {closed}\n")


class FloorSink(DataSource):
    @classmethod
    def name(cls) -> str:
        return "panes_sink_floor"

    def streamWriter(self, schema: Any, overwrite: bool) -> FloorWriter:
        o = self.options
        return FloorWriter(o["directory"], FLOOR[o["query"]], o.get("deliver", "") == "true")


#: the sink's sides: the columns each row carries besides those the windows read. A plan's dead
#: letters need their records: ``sink_refs`` carries each row's file and index in it (as panes'
#: native stream does, ``record_files``), ``sink_hashed_refs`` the file's path as a hash
SINKS = {
    "sink": lambda: [],
    "sink_refs": lambda: [F.col("_metadata.file_path").alias("file"), F.col("_metadata.row_index").alias("row")],
    "sink_hashed_refs": lambda: [
        F.xxhash64("_metadata.file_path").alias("file"),
        F.col("_metadata.row_index").alias("row"),
    ],
    "sink_delivered": lambda: [F.col("_metadata.file_path").alias("file"), F.col("_metadata.row_index").alias("row")],
}


class Delivery(threading.Thread):
    """``sink_delivered``'s driver side: each micro-batch's closed windows, as the commit wrote
    them, read by Spark and written to noop, in the order of the micro-batches, while the query
    goes on (as a plan would hand its panes to the user's sink); ``finish`` delivers the rest."""

    def __init__(self, spark, directory: str):
        super().__init__(daemon=True)
        self.spark, self.panes = spark, os.path.join(directory, "panes")
        self.done: set[int] = set()
        self.stop = threading.Event()

    def _deliver(self) -> None:
        ready = sorted(
            (int(f.split(".")[0]) for f in os.listdir(self.panes) if f.endswith(".parquet"))
            if os.path.isdir(self.panes)
            else []
        )
        for batch in (b for b in ready if b not in self.done):
            self.spark.read.parquet(os.path.join(self.panes, f"{batch}.parquet")).write.format("noop").mode(
                "overwrite"
            ).save()
            self.done.add(batch)

    def run(self) -> None:
        while not self.stop.wait(0.02):
            self._deliver()

    def finish(self) -> None:
        self.stop.set()
        self.join()
        self._deliver()


def run(spark, side: str, q: str, data: str) -> tuple[float, int]:
    """Seconds from building the query to its end, and the windows it closed."""
    path = os.path.join(data, "parquet", "bid")
    ck = tempfile.mkdtemp(prefix="panes-sink-floor-")
    t0 = time.time()
    if side == "plain":
        with plain_spark_settings(spark, state_store=True):
            out = plain_query(spark, q, path, DELAY).writeStream.format("noop").outputMode("append")
            sq = out.option("checkpointLocation", ck).trigger(availableNow=True).start()
            sq.awaitTermination()
    elif side in SINKS:
        refs = SINKS[side]()
        rows = bid_stream(spark, path).select(*FLOOR[q].keys, "price", F.unix_millis("dateTime").alias("ts"), *refs)
        deliver = side == "sink_delivered"
        w = rows.writeStream.format(FloorSink.name()).options(directory=ck, query=q, deliver=str(deliver).lower())
        sq = w.option("checkpointLocation", os.path.join(ck, "checkpoint")).trigger(availableNow=True).start()
        delivery = Delivery(spark, ck) if deliver else None
        if delivery is not None:
            delivery.start()
        sq.awaitTermination()
        if delivery is not None:
            delivery.finish()
    else:
        spec = {"event_time": "dateTime", "watermark": {"max_delay": DELAY}, **QUERIES[q]}
        result = panes.window(bid_stream(spark, path), spec)

        def noop(df, _batch_id):
            df.write.format("noop").mode("overwrite").save()

        sq = result.write_stream(noop, noop, ck, availableNow=True)
        sq.awaitTermination()
    secs = time.time() - t0
    if side in SINKS:
        with open(os.path.join(ck, "closed")) as f:
            out_rows = sum(int(line.split()[1]) for line in f)
    else:
        out_rows = -1 if side == "panes" else sum(max(p["sink"].get("numOutputRows", 0), 0) for p in sq.recentProgress)
    shutil.rmtree(ck, ignore_errors=True)
    return secs, out_rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=os.path.expanduser("~/.cache/panes-bench/data/b1m"))
    ap.add_argument("--warmup-data", default=os.path.expanduser("~/.cache/panes-bench/data/t100k"))
    ap.add_argument("--queries", default="tw_agg,q5a,q7a,q11")
    ap.add_argument("--sides", default="plain,sink,panes")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    spark = get_spark()
    spark.dataSource.register(FloorSink)
    sides = a.sides.split(",")
    for side in sides:
        run(spark, side, "tw_agg", a.warmup_data)
    ok = True
    for q in a.queries.split(","):
        secs: dict[str, list[float]] = {s: [] for s in sides}
        out: dict[str, set[int]] = {s: set() for s in sides}
        for r in range(a.rounds):
            for side in sides if r % 2 == 0 else sides[::-1]:
                s, rows = run(spark, side, q, a.data)
                secs[side].append(s)
                out[side].add(rows)
                print(f"{q} round {r} {side}: {s:.3f} s, {rows if rows >= 0 else '-'} windows out", flush=True)
        for side in (x for x in sides if x in SINKS and "plain" in sides):
            if out[side] != out["plain"]:
                print(f"{q}: MISMATCH: {side} closed {sorted(out[side])} windows, plain Spark {sorted(out['plain'])}")
                ok = False
        med = {s: statistics.median(v) for s, v in secs.items()}
        line = ", ".join(f"{s} {m:.3f} s" for s, m in med.items())
        if "plain" in med:
            line += "; plain Spark's time over each: " + ", ".join(
                f"{s} {med['plain'] / m:.3f}x" for s, m in med.items()
            )
        print(f"{q}: medians {line}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
