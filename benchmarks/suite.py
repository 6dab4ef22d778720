"""The benchmark suite: panes against plain PySpark doing the same, side by side in one run.

    .venv/bin/python benchmarks/suite.py [--quick] [--repeat 3] [--only NAME_OR_PATTERN ...]
    make bench         # full sizes, median of 3
    make bench-quick   # small sizes, one run each, under 10 minutes

Each benchmark is (name, data set, panes spec, plain-Spark formulation(s), mode stream|batch); the
list is in ``workloads.benchmarks()`` (``--list`` prints it). For each benchmark, after an untimed
warm-up, the plain formulation(s) and panes run alternately, ``--repeat`` times; the median time
gives events/s, and ratio = panes events/s / plain events/s (the order of the sides is reversed
every other run). A batch benchmark with several plain formulations takes the fastest (median) as
its baseline. Benchmarks of one group (early firings and retracting mode next to the default
trigger) share the group's plain runs.

- Batch: ``spark.read.parquet`` -> the query -> ``write.format("noop")``; the time covers building
  the DataFrame (``panes.window``) and the write. A full run executes each batch query k times
  per timed run (k from the group's two warm-up rounds: about ``--batch-seconds`` 5 s; the same
  k for every side) and counts the mean: a query of 0.1-0.5 s timed once moved by 2x between
  runs. The sides' queries are interleaved: a timed run is k rounds, each running every side's
  query once (``Runner.batch_rounds``). Untimed afterwards, both sides are summarised (rows,
  checksum) and must agree.
- Streaming: ``readStream.parquet`` with ``maxFilesPerTrigger``, ``trigger(availableNow=True)``,
  fresh checkpoint; plain: ``withWatermark`` + windowed ``groupBy``, append mode, into
  ``foreachBatch``; panes: ``panes.window(df, spec).write_stream(on_panes, on_dead_letters, ...)``.
  Each micro-batch runs one action per output: a summary of the rows (count, checksum, the first
  aggregate's sum). The input ends with a sentinel record a day after the data (see
  ``common.stream_input``), so every real window closes on both sides; its own windows are
  filtered out. The time runs from building the query to its end.
- Nexmark q12 (processing time) cannot use availableNow + sentinel: see ``run_proc_time``.

The checksum of a result is ``sum(pmod(xxhash64(keys, window_start ms, window_end ms, aggregates
as long), 2^32))`` over its rows, with the row count. Panes' runs with early firings or retractions
compare their final panes (``is_last``, not retractions) with plain Spark's windows. A mismatch is
printed as MISMATCH and makes the exit status 1.

Peak memory: during each timed run a thread samples, every 0.2 s, the resident memory (VmRSS) of
the Spark JVM and its Python workers (all processes this one started); the peak per run, in MB.

Writes benchmarks/results/latest.json ({name: {events_per_s, baseline_events_per_s, ratio}}; a run
with --only merges its names into the file, a full run writes the whole file) and the same to
results/suite-<quick|full>.json (so a quick run does not erase the full figures), everything
measured to results/latest_details.json (and suite-<quick|full>_details.json; merged the same way,
with the command of each run), and the state
series of ``state_bounded*`` to results/state_bounded.json.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import fnmatch
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import (  # noqa: E402
    DAY_MS,
    RESULTS,
    ROOT,
    SENTINEL_FILE,
    RssSampler,
    command_line,
    events_schema,
    generate,
    generate_nexmark,
    log,
    machine,
    merge_details,
    merge_figures,
    meta_of,
    nexmark_schema,
    other_spark_jvms,
    plain_spark_settings,
    sentinel_ms,
    set_mtimes,
    start_spark,
    stream_input,
    wait_idle,
    write_json,
    write_sentinel,
)

SIZES = {
    # events: records of each tumbling data set (1 h of event time); files: its parquet files;
    # bids: Nexmark bids (10 files); state_*: the 30-minute data set of state_bounded
    "quick": {
        "events": 200_000,
        "files": 10,
        "bids": 200_000,
        "batches": 5,
        "state_events": 150_000,
        "state_keys": 2_000,
        "state_files": 15,
        "repeat": 1,
    },
    "full": {
        "events": 2_000_000,
        "files": 20,
        "bids": 5_000_000,
        "batches": 10,
        "state_events": 1_200_000,
        "state_keys": 10_000,
        "state_files": 30,
        "repeat": 3,
    },
}
TARGETS = {  # the bars, by benchmark (ratio panes / plain)
    "early": 0.6,
    "default": 0.9,
    "batch_window": 0.8,
}
HALF_DAY_MS = DAY_MS // 2
#: the fraction of records without event time in the ``events_<keys>_untimed`` data sets
UNTIMED = 0.001


# -- data sets --------------------------------------------------------------------------------------------


@dataclass
class DataSet:
    id: str
    path: Path
    schema: Callable[[], StructType]  # a function giving the Spark schema
    time_column: str
    records: int
    sentinel: dict  # the sentinel record of the streaming input
    key_column: str  # the key column of the sentinel (q12 filters on it)

    @property
    def cutoff_ms(self) -> int:
        """Real windows start before this; the sentinel's windows after it."""
        return self.sentinel[self.time_column] - HALF_DAY_MS


def load_data_set(ds_id: str, size: dict) -> DataSet:
    if ds_id == "nexmark":
        path = generate_nexmark(size["bids"])
        s = sentinel_ms(path)
        return DataSet(
            ds_id,
            path,
            nexmark_schema,
            "dateTime",
            meta_of(path)["bids"],
            {"auction": -1, "bidder": -1, "price": 0, "channel": "sentinel", "dateTime": s},
            "bidder",
        )
    if ds_id == "state":
        path = generate(size["state_events"], size["state_keys"], size["state_files"], minutes=30, late=0.03)
    else:  # events_<keys>[_untimed]
        untimed = UNTIMED if ds_id.endswith("_untimed") else 0.0
        path = generate(size["events"], int(ds_id.split("_")[1]), size["files"], untimed=untimed)
    s = sentinel_ms(path)
    return DataSet(
        ds_id, path, events_schema, "ts", meta_of(path)["events"], {"key": "~sentinel", "ts": s, "amount": 0}, "key"
    )


# -- summaries and checks --------------------------------------------------------------------------------


def checksum_column(bench):
    from pyspark.sql import functions as F

    cols = [F.col(k) for k in bench.out_key] + [F.unix_millis("window_start"), F.unix_millis("window_end")]
    cols += [F.col(n).cast("long") for n in bench.aggs]
    return F.pmod(F.xxhash64(*cols), F.lit(1 << 32))


def summary_columns(bench, final=None):
    """count, checksum and the first aggregate's sum (of the rows where ``final`` holds)."""
    from pyspark.sql import functions as F

    first = F.col(next(iter(bench.aggs))).cast("long")
    if final is None:
        return [F.count(F.lit(1)).alias("rows"), F.sum(checksum_column(bench)).alias("chk"), F.sum(first).alias("agg")]
    return [
        F.count(F.lit(1)).alias("all_rows"),
        F.count(F.when(F.col("retraction"), 1)).alias("retractions"),
        F.count(F.when(F.col("timing") == "EARLY", 1)).alias("early"),
        F.count(F.when(final, 1)).alias("rows"),
        F.sum(F.when(final, checksum_column(bench))).alias("chk"),
        F.sum(F.when(final, first)).alias("agg"),
    ]


def keep_real(bench, ds: DataSet):
    """The filter that drops the sentinel's windows."""
    from pyspark.sql import functions as F

    if bench.time == "processing":
        return F.col(ds.key_column) != F.lit(ds.sentinel[ds.key_column])
    return F.col("window_start") < F.timestamp_millis(F.lit(ds.cutoff_ms))


def add_summary(acc: dict, row) -> None:
    for k, v in row.asDict().items():
        acc[k] = acc.get(k, 0) + int(v or 0)


def batch_summary(df, bench) -> dict:
    r = df.agg(*summary_columns(bench)).collect()[0]
    return {k: int(v or 0) for k, v in r.asDict().items()}


# -- one run ------------------------------------------------------------------------------------------------


def _progress(q) -> list[dict]:
    """Per micro-batch: input rows, duration, watermark, and the state operators' metrics."""
    out = []
    for p in q.recentProgress:
        p = json.loads(p.json)
        r = {
            "batch": p["batchId"],
            "input_rows": p.get("numInputRows", 0),
            "source_offset": _log_offset(p),
            "duration_ms": (p.get("durationMs") or {}).get("triggerExecution"),
            "watermark": (p.get("eventTime") or {}).get("watermark"),
            "timestamp": p.get("timestamp"),
        }
        ops = p.get("stateOperators") or []
        if ops:
            r["state_rows"] = sum(op.get("numRowsTotal", 0) or 0 for op in ops)
            r["state_memory_bytes"] = sum(op.get("memoryUsedBytes", 0) or 0 for op in ops)
            r["rows_dropped_by_watermark"] = sum(op.get("numRowsDroppedByWatermark", 0) or 0 for op in ops)
            for name in ("rocksdbSstFileSize", "rocksdbTotalBytesWritten", "rocksdbBytesCopied"):
                vals = [(op.get("customMetrics") or {}).get(name) for op in ops]
                if any(v is not None for v in vals):
                    r[name] = sum(v or 0 for v in vals)
        out.append(r)
    return out


def _log_offset(p: dict) -> int | None:
    """The file source's end offset after the micro-batch (its log index: one per batch that read
    files). Counts files read, unlike numInputRows, which counts every read of the micro-batch
    (panes' native plan reads each micro-batch more than once)."""
    for src in p.get("sources") or []:
        off = src.get("endOffset")
        if isinstance(off, str):
            try:
                off = json.loads(off)
            except ValueError:
                continue
        if isinstance(off, dict) and "logOffset" in off:
            return int(off["logOffset"])
    return None


def native_state(ckpt: str) -> dict | None:
    """Size of panes' own state under the checkpoint: the tables that hold the open windows after
    the newest version (``panes_native/v<batch>/meta.json`` lists them; a step may keep them in
    several versions' tables): bytes of all their files and rows of their parquet files."""
    root = Path(ckpt) / "panes_native"
    if not root.is_dir():
        return None
    versions = [d for d in root.iterdir() if d.is_dir() and d.name[1:].isdigit() and (d / "meta.json").exists()]
    if not versions:
        return None
    newest = max(versions, key=lambda d: int(d.name[1:]))
    try:
        tables = [root / t["path"] for t in json.loads((newest / "meta.json").read_text()).get("tables", [])]
    except (OSError, ValueError):  # a version being replaced
        return None
    size, rows = 0, 0
    import pyarrow.parquet as pq

    for d in tables:
        for f in d.rglob("*"):
            if f.is_file():
                size += f.stat().st_size
                if f.suffix == ".parquet":
                    with contextlib.suppress(Exception):  # a file being replaced
                        rows += pq.ParquetFile(f).metadata.num_rows
    return {"version": int(newest.name[1:]), "tables": len(tables), "state_dir_bytes": size, "state_dir_rows": rows}


def _finish(q, t0: float, timeout: float, records: int) -> dict:
    finished = q.awaitTermination(timeout)
    seconds = time.perf_counter() - t0
    if not finished:
        q.stop()
    exc = q.exception()
    if exc is not None:
        raise RuntimeError(f"streaming query failed: {exc}")
    prog = _progress(q)
    read = sum(p["input_rows"] or 0 for p in prog)
    return {
        "seconds": seconds,
        "finished": bool(finished),
        "input_rows": int(read),
        "micro_batches": len(prog),
        "data_batches": sum(1 for p in prog if p["input_rows"]),
        "events_per_s": (records if finished else read) / seconds,
        "progress": prog,
    }


#: plain Spark's streaming runs on Spark's own state store (``--plain-state-store spark``), not on
#: panes' session's RocksDB
PLAIN_ON_SPARKS_STATE_STORE = False


def _as_users_run(spark, side: str):
    """The session as ``side``'s users run it: plain Spark with its own checkpoint file manager
    (and with ``--plain-state-store spark`` its own state store)."""
    if side == "panes":
        return contextlib.nullcontext()
    return plain_spark_settings(spark, state_store=PLAIN_ON_SPARKS_STATE_STORE)


def run_stream(spark, bench, ds: DataSet, side: str, src_dir: Path, fpt: int, timeout: float) -> dict:
    """One streaming run (event time, availableNow) of ``side`` ("panes" or a plain formulation)."""
    import panes

    ckpt = tempfile.mkdtemp(prefix=f"bench-{bench.name}-{side}-")
    acc: dict = {}
    dead = {"dead_letters": 0}
    states: list[dict] = []
    keep = keep_real(bench, ds)
    plan = None
    try:
        src = spark.readStream.schema(ds.schema()).option("maxFilesPerTrigger", fpt).parquet(str(src_dir))
        with _as_users_run(spark, side), RssSampler() as rss:
            t0 = time.perf_counter()
            if side == "panes":
                from pyspark.sql import functions as F

                last = F.col("timing") == "ON_TIME" if bench.final_on_time else F.col("is_last")
                final = last & ~F.col("retraction")
                # (a second stage keeps only the window columns: default trigger only)
                cols = summary_columns(bench, None if bench.stage2 is not None else final)

                def on_panes(df, batch_id):
                    df = df.filter(keep)
                    if bench.stage2 is not None:
                        df = bench.stage2(_stage1(df, bench))
                    add_summary(acc, df.agg(*cols).collect()[0])
                    if bench.state_series:
                        st = native_state(ckpt)
                        if st is not None:
                            states.append(dict(st, batch=batch_id))

                def on_dead(df, batch_id):
                    dead["dead_letters"] += df.count()

                res = panes.window(src, bench.spec, plan=bench.plan)
                plan = res.plan
                q = res.write_stream(on_panes, on_dead, ckpt, availableNow=True)
            else:
                cols = summary_columns(bench)

                def each(df, batch_id):
                    df = df.filter(keep)
                    if bench.stage2 is not None:
                        df = bench.stage2(df)
                    add_summary(acc, df.agg(*cols).collect()[0])

                q = (
                    bench.plains[side](src, bench.aggs)
                    .writeStream.outputMode("append")
                    .foreachBatch(each)
                    .option("checkpointLocation", ckpt)
                    .trigger(availableNow=True)
                    .start()
                )
            r = _finish(q, t0, timeout, ds.records)
        r.update(rss.result())
        r["summary"] = acc
        if side == "panes":
            r.update(dead, plan=plan)
            if bench.state_series:
                r["native_state"] = states
        return r
    finally:
        shutil.rmtree(ckpt, ignore_errors=True)


def _epoch(iso: str) -> float:
    return dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def run_proc_time(spark, bench, ds: DataSet, side: str, fpt: int, timeout: float, warmup: bool = False) -> dict:
    """Nexmark q12, processing-time windows. Windows are assigned from the micro-batch's time, so
    availableNow + an event-time sentinel cannot close them. The query runs with the default
    trigger (a micro-batch as soon as the previous one ends) over a fresh copy of the input
    directory. Timed: from building the query to the end of the micro-batch that read the last
    input record (from the query's progress). Then, untimed, once the wall clock has passed the end
    of the 10 s window of that micro-batch, a sentinel record is added to the directory: its
    micro-batch's time is past every window, so both sides close all windows, and the run waits
    until the emitted counts add up to the input (or ``timeout``). ``warmup``: the first file only,
    and no closing."""
    import pyarrow.parquet as pq

    import panes

    ckpt = tempfile.mkdtemp(prefix=f"bench-{bench.name}-{side}-")
    work = Path(tempfile.mkdtemp(prefix="bench-q12-input-"))
    src_dir = work / "in"
    src_dir.mkdir()
    parts = sorted(ds.path.glob("part-*.parquet"))[: 1 if warmup else None]
    for p in parts:
        os.link(p, src_dir / p.name)
    set_mtimes(src_dir)
    records = sum(pq.ParquetFile(p).metadata.num_rows for p in parts)
    acc: dict = {}
    plan = None
    size_s = 10
    try:
        src = spark.readStream.schema(ds.schema()).option("maxFilesPerTrigger", fpt).parquet(str(src_dir))
        keep = keep_real(bench, ds)
        with _as_users_run(spark, side), RssSampler() as rss:
            t_wall = time.time()
            t0 = time.perf_counter()
            if side == "panes":
                cols = summary_columns(bench)

                def on_panes(df, batch_id):
                    add_summary(acc, df.filter(keep).agg(*cols).collect()[0])

                res = panes.window(src, bench.spec)
                plan = res.plan
                q = res.write_stream(on_panes, lambda df, i: df.count(), ckpt)
            else:
                cols = summary_columns(bench)

                def each(df, batch_id):
                    add_summary(acc, df.filter(keep).agg(*cols).collect()[0])

                q = (
                    bench.plains[side](src, bench.aggs)
                    .writeStream.outputMode("append")
                    .foreachBatch(each)
                    .option("checkpointLocation", ckpt)
                    .start()
                )
            # the micro-batch that read the last file: the file source's log offset counts from 0
            last_offset = math.ceil(len(parts) / fpt) - 1
            done_at, last_batch_ts = None, None
            while time.perf_counter() - t0 < timeout:
                if q.exception() is not None:
                    raise RuntimeError(f"streaming query failed: {q.exception()}")
                for progress in q.recentProgress:
                    off = _log_offset(json.loads(progress.json))
                    if off is not None and off >= last_offset:
                        last_batch_ts = _epoch(progress["timestamp"])
                        done_at = last_batch_ts + (progress["durationMs"].get("triggerExecution") or 0) / 1000
                        break
                if done_at is not None:
                    break
                time.sleep(0.1)
            seconds = (done_at - t_wall) if done_at is not None else time.perf_counter() - t0
            r = {
                "seconds": seconds,
                "finished": done_at is not None,
                "events_per_s": records / seconds if done_at is not None else 0.0,
            }
        r.update(rss.result())
        if not warmup and done_at is not None and last_batch_ts is not None:
            # close every window: a sentinel record after the end of the last data window
            window_end = (math.floor(last_batch_ts / size_s) + 1) * size_s
            time.sleep(max(0.0, window_end + 0.3 - time.time()))
            tmp = work / SENTINEL_FILE
            write_sentinel(
                tmp, dict(ds.sentinel, dateTime=int(time.time() * 1000)), sorted(src_dir.glob("part-*.parquet"))[0]
            )
            os.utime(tmp, (2_000_000_000, 2_000_000_000))
            os.rename(tmp, src_dir / SENTINEL_FILE)
            t_close = time.time()
            while time.time() - t_close < 60 and acc.get("agg", 0) < ds.records:
                if q.exception() is not None:
                    raise RuntimeError(f"streaming query failed: {q.exception()}")
                time.sleep(0.2)
            r["closed_all_windows"] = acc.get("agg", 0) >= ds.records
        q.stop()
        prog = _progress(q)
        r.update(
            micro_batches=len(prog),
            data_batches=sum(1 for p in prog if p["input_rows"]),
            input_rows=sum(p["input_rows"] or 0 for p in prog),
            progress=prog,
            summary=acc,
        )
        if side == "panes":
            r["plan"] = plan
        return r
    finally:
        shutil.rmtree(ckpt, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)


def run_batch(spark, bench, ds: DataSet, side: str, loops: int = 1) -> dict:
    """One timed batch run: the query built and executed ``loops`` times in a row; its time is
    the mean of one (a query of 0.1-0.5 s, timed once, moved by 2x between runs)."""
    import panes

    plan = None
    with RssSampler() as rss:
        t0 = time.perf_counter()
        for _ in range(loops):
            src = spark.read.schema(ds.schema()).parquet(str(ds.path))
            if side == "panes":
                res = panes.window(src, bench.spec)
                plan = res.plan
                df = res.panes
            else:
                df = bench.plains[side](src, bench.aggs)
            if bench.stage2 is not None:
                df = bench.stage2(_stage1(df, bench), src)
            df.write.format("noop").mode("overwrite").save()
        s = (time.perf_counter() - t0) / loops
    r: dict[str, float | str] = {"seconds": s, "events_per_s": ds.records / s, "finished": True, "loops": loops}
    r.update(rss.result())
    if plan is not None:
        r["plan"] = plan
    return r


def batch_frame(spark, bench, ds: DataSet, side: str):
    import panes

    src = spark.read.schema(ds.schema()).parquet(str(ds.path))
    df = panes.window(src, bench.spec).panes if side == "panes" else bench.plains[side](src, bench.aggs)
    return df if bench.stage2 is None else bench.stage2(_stage1(df, bench), src)


def _stage1(df, bench):
    """The first stage's columns (panes adds timing, pane_index, ...), for the second stage."""
    return df.select(*bench.key, "window_start", "window_end", *bench.aggs)


# -- a group: shared plain runs, the panes variants -----------------------------------------------------


class Runner:
    def __init__(self, spark, args, size: dict):
        self.spark, self.a, self.size = spark, args, size
        self.data: dict[str, DataSet] = {}
        self.errors: dict[str, str] = {}
        self.warmed: set = set()

    def data_set(self, ds_id: str) -> DataSet:
        if ds_id not in self.data:
            self.data[ds_id] = load_data_set(ds_id, self.size)
        return self.data[ds_id]

    def fpt(self, bench, ds: DataSet) -> int:
        if bench.files_per_trigger:
            return bench.files_per_trigger
        files = len([p for p in ds.path.glob("part-*.parquet")])
        return max(1, math.ceil(files / self.size["batches"]))

    def one(self, bench, ds, side, warmup=False, loops=1) -> dict:
        if bench.mode == "batch":
            return run_batch(self.spark, bench, ds, side, loops)
        fpt = self.fpt(bench, ds)
        if bench.time == "processing":
            return run_proc_time(self.spark, bench, ds, side, fpt, self.a.timeout, warmup=warmup)
        src = stream_input(ds.path, ds.sentinel, warmup=warmup)
        return run_stream(self.spark, bench, ds, side, src, 1 if warmup else fpt, self.a.timeout)

    def run_group(self, benches: list) -> dict:
        first = benches[0]
        ds = self.data_set(first.data)
        plains = list(first.plains)
        group = first.group
        log(
            f"== {group} ({first.mode}; {ds.records:,} records of {ds.path.name}; panes: "
            f"{', '.join(b.name for b in benches)}; plain: {', '.join(plains)})"
        )
        sides = [("plain", p, first) for p in plains] + [("panes", "panes", b) for b in benches]
        warm = self.a.warmup == "each" or (self.a.warmup == "first" and first.mode not in self.warmed)
        # the first group of a mode runs on a JVM still compiling Spark's code: its timed runs got
        # faster run after run (tumbling 1k keys batch at 603e986: panes 0.38, 0.34, 0.27 s, plain
        # start_long 0.38, 0.29, 0.28 s), which favoured the side that ran second in the middle
        # run. One more warm-up round there.
        cold = first.mode not in self.warmed
        self.warmed.add(first.mode)
        loops = 1
        if warm:
            t0 = time.perf_counter()
            wait_idle(self.a.wait_idle)
            batch_loops = first.mode == "batch" and self.a.batch_seconds > 0
            # (batch: a second round, each side its query k times, k from the first round; k for
            # the timed runs from the second, warmer one. Every side runs its query k times.)
            for _ in range((2 if batch_loops else 1) + (1 if cold else 0)):
                warm_s = []
                for _kind, side, b in sides:
                    try:
                        warm_s.append(self.one(b, ds, side, warmup=True, loops=loops)["seconds"])
                    except Exception:
                        log(f"  warm-up of {b.name} / {side} failed (the timed runs will report it)")
                if batch_loops and warm_s:
                    loops = max(1, math.ceil(self.a.batch_seconds / statistics.median(warm_s)))
            log(
                f"  warm-up (untimed, {'full data' if first.mode == 'batch' else 'first file'}): "
                f"{time.perf_counter() - t0:.1f} s"
                + (f"; each timed run executes the query {loops} times" if first.mode == "batch" else "")
            )
        runs: dict[tuple, list] = {}
        failed: set = set()
        interleaved = first.mode == "batch" and loops > 1
        for rep in range(self.a.repeat):
            # plain first in odd runs, panes first in even ones (no side always runs first)
            order = sides if rep % 2 == 0 else sides[::-1]
            if interleaved:
                others = wait_idle(self.a.wait_idle)
                load = os.getloadavg()[0]
                rounds = self.batch_rounds(order, ds, loops, failed)
            for kind, side, b in order:
                key = _key(kind, side, b)
                if key in failed:
                    continue
                if interleaved:
                    r = rounds[key]
                else:
                    others = wait_idle(self.a.wait_idle)
                    load = os.getloadavg()[0]
                    try:
                        r = self.one(b, ds, side, loops=loops)
                    except Exception:
                        self.failed(failed, key, b, side)
                        continue
                after = other_spark_jvms()
                r["other_spark_jvms"] = len(set(others) | set(after))
                r["loadavg_1m_before"] = round(load, 2)
                runs.setdefault(key, []).append(r)
                s = r.get("summary")
                extra = ""
                if s:
                    extra = f", {s.get('rows', 0):,} rows out"
                    if "all_rows" in s:
                        extra += (
                            f" ({s['all_rows']:,} panes incl. {s['early']:,} early, {s['retractions']:,} retractions)"
                        )
                if "dead_letters" in r:
                    extra += f", {r['dead_letters']:,} dead letters"
                if "micro_batches" in r:
                    extra += f", {r['micro_batches']} micro-batches"
                if not r.get("finished", True):
                    extra += " -- INCOMPLETE (timeout)"
                if r["other_spark_jvms"]:
                    extra += " -- shared the CPU with another Spark JVM"
                log(
                    f"  run {rep + 1}/{self.a.repeat} {'plain ' + side if kind == 'plain' else b.name}: "
                    f"{r['seconds']:.2f} s, {r['events_per_s']:,.0f} events/s, "
                    f"peak RSS {r['peak_rss_mb']:,.0f} MB{extra}"
                )
        return {b.name: self.report(b, ds, plains, runs) for b in benches}

    def batch_rounds(self, order: list, ds: DataSet, loops: int, failed: set) -> dict:
        """One timed run of every side of a batch group, interleaved: ``loops`` rounds, each of
        which runs every side's query once (in ``order``, reversed every other round). A slow
        spell of the machine then falls on every side alike (within one minute at 827b704, runs
        of 7 queries in a row of one side took 0.26-0.42 s per query, of every side). A side's
        time is the mean of its rounds; its peak memory the highest."""
        per: dict[tuple, list] = {}
        for i in range(loops):
            for kind, side, b in order if i % 2 == 0 else order[::-1]:
                key = _key(kind, side, b)
                if key in failed:
                    continue
                try:
                    per.setdefault(key, []).append(run_batch(self.spark, b, ds, side))
                except Exception:
                    self.failed(failed, key, b, side)
        out = {}
        for key, rs in per.items():
            if key in failed:
                continue
            secs = statistics.mean(r["seconds"] for r in rs)
            out[key] = {
                **rs[0],
                **{k: max(r[k] for r in rs) for k in rs[0] if k.startswith("peak_")},
                "rss_samples": sum(r.get("rss_samples", 0) for r in rs),
                "seconds": secs,
                "events_per_s": ds.records / secs,
                "loops": len(rs),
                "interleaved": True,
            }
        return out

    def failed(self, failed: set, key: tuple, b, side: str) -> None:
        failed.add(key)
        self.errors[f"{b.name}/{side}"] = traceback.format_exc()
        log(f"  {b.name} / {side} FAILED:\n{self.errors[f'{b.name}/{side}']}")

    def report(self, bench, ds: DataSet, plains: list, runs: dict) -> dict:
        out = {
            "name": bench.name,
            "mode": bench.mode,
            "what": bench.what,
            "data": str(ds.path.relative_to(ROOT)),
            "records": ds.records,
            "spec": bench.spec,
            "group": bench.group,
            "plain": {},
            "ok": False,
        }
        for p in plains:
            rs = runs.get(("plain", p), [])
            if rs:
                out["plain"][p] = _side(rs, ds.records)
        pr = runs.get((bench.name, "panes"), [])
        if pr:
            out["panes"] = _side(pr, ds.records)
            out["plan"] = pr[0].get("plan")
        # checks (batch: untimed, now; streaming: from the timed runs' summaries)
        eligible = list(out["plain"])
        if bench.mode == "batch":
            try:
                sums = {p: batch_summary(batch_frame(self.spark, bench, ds, p), bench) for p in plains}
                ref = sums["panes"] = batch_summary(batch_frame(self.spark, bench, ds, "panes"), bench)
                same = [p for p in plains if sums[p] == ref]
                differ = [p for p in plains if sums[p] != ref]
                ok = bool(same)
                text = (
                    f"{ref['rows']:,} rows, checksum {ref['chk']}, sum {next(iter(bench.aggs))} "
                    f"{ref['agg']:,} from panes and plain {', '.join(same)}"
                    if ok
                    else f"DIFFERENT (rows, checksum, sum): {sums}"
                )
                out["check"] = {"summaries": sums, "ok": ok, "text": text}
                if differ:
                    # a plain formulation that computes something else is no baseline; say so loudly
                    out["check"]["differing_formulations"] = {
                        p: {"summary": sums[p], "diff": self.diff(bench, ds, p)} for p in differ
                    }
                    out["check"]["text"] += (
                        f"; DIFFERS: plain {', '.join(differ)} "
                        f"({'; '.join(f'{p}: {sums[p]}' for p in differ)}), not used as baseline"
                    )
                    eligible = [p for p in eligible if p in same] or eligible
            except Exception:
                self.errors[f"{bench.name}/check"] = traceback.format_exc()
                log(f"  {bench.name} check FAILED:\n{self.errors[f'{bench.name}/check']}")
                out["check"] = {"ok": False, "error": "see errors", "text": "the check failed to run"}
        else:
            out["check"] = stream_check(bench, runs, plains, ds)
        # the baseline: the fastest plain formulation (of those that compute what panes computes)
        best = max(((p, out["plain"][p]) for p in eligible), key=lambda kv: kv[1]["events_per_s"], default=None)
        if best and pr:
            out["baseline"] = best[0]
            out["ratio"] = out["panes"]["events_per_s"] / best[1]["events_per_s"]
            out["target"] = target_of(bench)
        out["ok"] = bool(out.get("check", {}).get("ok")) and "ratio" in out
        c = out["check"]
        if "ratio" not in out:
            log(f"  {bench.name}: FAILED (no ratio: a side failed, see the errors)")
            return out
        log(
            f"  {bench.name}: ratio {out['ratio']:.3f} "
            f"(panes {out.get('panes', {}).get('events_per_s', 0):,.0f} / plain {out.get('baseline')} "
            f"{out['plain'].get(out.get('baseline'), {}).get('events_per_s', 0):,.0f} events/s); "
            f"check {'OK' if c.get('ok') else 'MISMATCH'}: {c.get('text', '')}; panes plan: "
            f"{(out.get('plan') or '?').split(' (')[0]}"
        )
        if bench.state_series and pr:
            out["state_series"] = state_series(runs, plains, bench)
        return out

    def diff(self, bench, ds, plain: str) -> dict:
        """Rows on one side only (a few), to see what differs."""
        a = batch_frame(self.spark, bench, ds, plain)
        b = batch_frame(self.spark, bench, ds, "panes").select(*a.columns)
        return {
            "only_plain": [r.asDict() for r in a.exceptAll(b).limit(5).collect()],
            "only_panes": [r.asDict() for r in b.exceptAll(a).limit(5).collect()],
        }


def _key(kind: str, side: str, b) -> tuple:
    """A side's key in a group's runs: ("plain", formulation) or (panes benchmark, "panes")."""
    return (b.name if kind == "panes" else "plain", side)


def _side(rs: list[dict], records: int) -> dict:
    secs = [r["seconds"] for r in rs]
    med = statistics.median(secs)
    keep = ("summary", "dead_letters", "micro_batches", "data_batches", "finished", "closed_all_windows", "loops")
    return {
        "events_per_s": records / med,
        "median_s": med,
        "seconds": [round(s, 3) for s in secs],
        "peak_rss_mb": max(r["peak_rss_mb"] for r in rs),
        "peak_jvm_rss_mb": max(r["peak_jvm_rss_mb"] for r in rs),
        "peak_python_workers_rss_mb": max(r["peak_python_workers_rss_mb"] for r in rs),
        "other_spark_jvms": max(r.get("other_spark_jvms", 0) for r in rs),
        "runs": [
            {k: r.get(k) for k in keep + ("seconds", "peak_rss_mb", "start_rss_mb", "input_rows") if k in r} for r in rs
        ],
        "progress_last_run": rs[-1].get("progress"),
    }


def target_of(bench) -> float | None:
    if bench.name.startswith(("state_bounded", "top3_")):  # (issue 31 sets the window pipeline no bar)
        return None
    if bench.name.endswith(
        ("_lateness", "_stateful", "_stateful_late")
    ):  # the output watermark's cost: measured, no bar
        return None
    if bench.final_only:
        return TARGETS["early"]
    if bench.mode == "batch" and bench.name in (
        "hopping_gaps_batch",
        "sessions_batch",
        "sliding_batch",
        "global_batch",
    ):
        return TARGETS["batch_window"]
    return TARGETS["default"]


def stream_check(bench, runs: dict, plains: list, ds: DataSet) -> dict:
    """Every run of every side emitted the same final rows (count and checksum)."""
    seen: dict[str, list[tuple[int, int, int]]] = {}
    for (who, side), rs in runs.items():
        if who not in ("plain", bench.name):
            continue
        for r in rs:
            s = r.get("summary", {})
            seen.setdefault(side, []).append((s.get("rows", 0), s.get("chk", 0), s.get("agg", 0)))
    if not seen:
        return {"ok": False, "text": "no runs"}
    if bench.time == "processing":
        # windows depend on when each micro-batch ran: only the totals can agree
        ok = all(agg == ds.records for v in seen.values() for _, _, agg in v) and all(
            r.get("closed_all_windows") for rs in runs.values() for r in rs
        )
        return {
            "ok": ok,
            "runs": seen,
            "text": "sum of bid_count = input bids on every run of both sides (windows differ: processing time)"
            if ok
            else f"sum of bid_count differs from {ds.records:,} input bids: {seen}",
        }
    distinct = {v for vs in seen.values() for v in vs}
    dead = [
        r.get("dead_letters", 0)
        for (who, side), rs in runs.items()
        if side == "panes" and who == bench.name
        for r in rs
    ]
    ok = len(distinct) == 1
    rows, chk, agg = next(iter(distinct))
    text = (
        f"{rows:,} rows, checksum {chk}, sum {next(iter(bench.aggs))} {agg:,} on every run of both sides"
        if ok
        else f"DIFFERENT results (rows, checksum, sum): {seen}"
    )
    if bench.final_only:
        final = "ON_TIME" if bench.final_on_time else "is_last"
        text = f"final panes ({final}, not retractions): " + text
    if dead and any(dead):
        text += f"; panes dead letters {sorted(set(dead))}"
    return {"ok": ok, "runs": seen, "panes_dead_letters": dead, "text": text}


def state_series(runs: dict, plains: list, bench) -> dict:
    """Per micro-batch of the last run of each side: state rows and bytes."""
    out = {}
    for (who, side), rs in runs.items():
        if who not in ("plain", bench.name) or not rs:
            continue
        r = rs[-1]
        rows = []
        native = {s["batch"]: s for s in r.get("native_state", [])}
        for p in r.get("progress") or []:
            row = {
                k: p.get(k)
                for k in (
                    "batch",
                    "input_rows",
                    "source_offset",
                    "watermark",
                    "state_rows",
                    "state_memory_bytes",
                    "rocksdbSstFileSize",
                    "rocksdbTotalBytesWritten",
                    "rows_dropped_by_watermark",
                )
                if p.get(k) is not None
            }
            if p["batch"] in native:
                row.update({k: v for k, v in native[p["batch"]].items() if k != "batch"})
            rows.append(row)
        out[side] = rows
    return out


def flat_verdict(rows: list[dict], metric: str) -> dict | None:
    """State is flat when, after the first third of the micro-batches (the first windows have
    closed by then), the last third's maximum is within 25 % of the middle third's maximum."""
    vals = [r[metric] for r in rows if r.get(metric) is not None and r.get("input_rows")]
    if len(vals) < 6:
        return None
    n = len(vals)
    mid, last = max(vals[n // 3 : 2 * n // 3]), max(vals[2 * n // 3 :])
    return {"metric": metric, "middle_third_max": mid, "last_third_max": last, "flat": last <= 1.25 * max(mid, 1)}


# -- report ---------------------------------------------------------------------------------------------------


def print_state_table(name: str, series: dict) -> None:
    print(f"\n-- {name}: state after each micro-batch (last run of each side) --")
    cols = [
        ("batch", "batch"),
        ("source_offset", "files offset"),
        ("state_rows", "state rows"),
        ("state_memory_bytes", "state mem B"),
        ("rocksdbSstFileSize", "SST B"),
        ("state_dir_rows", "panes_native rows"),
        ("state_dir_bytes", "panes_native B"),
        ("watermark", "watermark"),
    ]
    for side, rows in series.items():
        present = [(k, h) for k, h in cols if any(k in r for r in rows)]
        print(f"{side}:")
        print("  " + " | ".join(h for _, h in present))
        for r in rows:
            print("  " + " | ".join(str(r.get(k, "")) for k, _ in present))


def print_summary(results: dict) -> None:
    print()
    print(
        f"{'benchmark':<42}{'panes ev/s':>13}{'plain ev/s':>13}  {'baseline':<26}{'ratio':>7}{'target':>8}"
        f"{'peak MB panes/plain':>21}  check"
    )
    for name, r in results.items():
        if "ratio" not in r:
            print(f"{name:<42}  (failed: see errors)")
            continue
        base = r["plain"][r["baseline"]]
        t = r.get("target")
        tgt = "" if t is None else (f"{t:.1f} " + ("ok" if r["ratio"] >= t else "NO"))
        mem = f"{r['panes']['peak_rss_mb']:,.0f}/{base['peak_rss_mb']:,.0f}"
        print(
            f"{name:<42}{r['panes']['events_per_s']:>13,.0f}{base['events_per_s']:>13,.0f}  {r['baseline']:<26}"
            f"{r['ratio']:>7.3f}{tgt:>8}{mem:>21}  {'OK' if r['check'].get('ok') else 'MISMATCH'}"
        )


def main(argv=None) -> int:
    import stages
    from workloads import benchmarks

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small data, one run each (make bench-quick)")
    ap.add_argument(
        "--repeat", type=int, default=None, help="timed runs per side; the median counts (default 3; --quick 1)"
    )
    ap.add_argument(
        "--only",
        nargs="+",
        default=None,
        metavar="NAME",
        help="benchmarks to run: names or shell patterns (e.g. 'nexmark_*'); their group's plain runs come along",
    )
    ap.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    ap.add_argument("--events", type=int, help="records of each tumbling data set (default 2,000,000; quick 200,000)")
    ap.add_argument("--bids", type=int, help="Nexmark bids (default 5,000,000; quick 200,000)")
    ap.add_argument("--timeout", type=float, default=900, help="seconds before a streaming run is stopped")
    ap.add_argument(
        "--wait-idle",
        type=float,
        default=None,
        help="before each measurement, wait up to this many seconds for other Spark JVMs on "
        "the machine to end (default 120; --quick 20); a run that shared the CPU is flagged",
    )
    ap.add_argument(
        "--warmup",
        choices=("each", "first", "none"),
        default=None,
        help="untimed warm-up runs: before each benchmark group (default), only before the "
        "first streaming and the first batch group (--quick's default), or none",
    )
    ap.add_argument("--no-warmup", action="store_true", help="the same as --warmup none")
    ap.add_argument(
        "--batch-seconds",
        type=float,
        default=None,
        help="a timed batch run executes each side's query several times, interleaved, as "
        "many as make this many seconds by the group's warm-up, and counts the mean "
        "(default 5; --quick 0: once)",
    )
    ap.add_argument(
        "--plain-state-store",
        choices=("session", "spark"),
        default="session",
        help="plain Spark's streaming state store: panes' session's RocksDB (default, as in "
        "RESULTS.md's figures) or Spark's own, HDFS-backed one (as the shared Nexmark harness runs it)",
    )
    ap.add_argument("--out", default=str(RESULTS / "latest.json"), help="the figures (JSON)")
    a = ap.parse_args(argv)
    global PLAIN_ON_SPARKS_STATE_STORE
    PLAIN_ON_SPARKS_STATE_STORE = a.plain_state_store == "spark"
    size_name = "quick" if a.quick else "full"
    size = dict(SIZES[size_name])
    if a.events:
        size["events"] = a.events
    if a.bids:
        size["bids"] = a.bids
    a.repeat = a.repeat or size["repeat"]
    a.warmup = "none" if a.no_warmup else (a.warmup or ("first" if a.quick else "each"))
    if a.batch_seconds is None:
        a.batch_seconds = 0.0 if a.quick else 5.0
    if a.wait_idle is None:
        a.wait_idle = 20 if a.quick else 120

    all_benches = benchmarks()
    if a.list:
        for b in all_benches:
            print(f"{b.name:<42}{b.mode:<8}{b.what}\n{'':<50}plain: {', '.join(b.plains)}")
        for name, query, mode in stages.benchmarks():
            print(f"{name:<42}{mode:<8}{query} end to end, a multi-stage pipeline (benchmarks/stages.py)")
        return 0
    chosen = all_benches
    # the multi-stage Nexmark queries (benchmarks/stages.py): run after the others
    stage_names = [n for n, _, _ in stages.benchmarks()]
    with_stages = not a.only or any(fnmatch.fnmatchcase(n, pat) for n in stage_names for pat in a.only)
    if a.only:
        chosen = [b for b in all_benches if any(fnmatch.fnmatchcase(b.name, pat) for pat in a.only)]
        if not chosen and not with_stages:
            ap.error(f"--only {a.only}: no benchmark matches (see --list)")
    groups: dict[str, list] = {}
    for b in chosen:
        groups.setdefault(b.group, []).append(b)

    started = dt.datetime.now(dt.UTC)
    t_start = time.perf_counter()
    log(
        f"panes benchmark suite ({size_name}): {len(chosen)} benchmarks in {len(groups)} groups, "
        f"repeat {a.repeat}, warm-up {a.warmup}; sizes {size}"
    )
    spark = start_spark()
    spark.conf.set("spark.sql.streaming.numRecentProgressUpdates", "1000")
    runner = Runner(spark, a, size)
    results: dict = {}
    for g, benches in groups.items():
        try:
            results.update(runner.run_group(benches))
        except Exception:
            runner.errors[g] = traceback.format_exc()
            log(f"group {g} FAILED:\n{runner.errors[g]}")
        # intermediate results, in case the run is cut short
        write_json(Path(a.out).with_name("latest_details.partial.json"), {"results": results, "errors": runner.errors})

    stage_figures: dict = {}
    if with_stages:
        try:
            stage_figures = stages.run(spark, size["bids"], a.repeat, a.only)
        except Exception:
            runner.errors["stages"] = traceback.format_exc()
            log(f"multi-stage benchmarks FAILED:\n{runner.errors['stages']}")
        for name, f in stage_figures.items():
            print(
                f"{name:<42} panes {f['events_per_s']:>12,.0f} ev/s"
                + (
                    f"  plain {f['baseline_events_per_s']:>12,.0f} ev/s  ratio {f['ratio']:.3f}"
                    f"{'' if f['same_result'] else '  MISMATCH'}"
                    if "ratio" in f
                    else "  (no plain streaming form)"
                )
            )
    print_summary(results)
    for name, r in results.items():
        if "state_series" in r:
            print_state_table(name, r["state_series"])
            verdicts = {}
            for side, rows in r["state_series"].items():
                for metric in (
                    "state_rows",
                    "state_memory_bytes",
                    "rocksdbSstFileSize",
                    "state_dir_rows",
                    "state_dir_bytes",
                ):
                    v = flat_verdict(rows, metric)
                    if v:
                        verdicts[f"{side}:{metric}"] = v
                        print(
                            f"{side} {metric}: middle third max {v['middle_third_max']:,}, last third max "
                            f"{v['last_third_max']:,} -> {'FLAT' if v['flat'] else 'GROWING'}"
                        )
            r["state_flat"] = verdicts
            state_file = Path(a.out).with_name("state_bounded.json")
            saved = {}
            if state_file.exists():
                try:
                    saved = json.loads(state_file.read_text()).get("benchmarks", {})
                except ValueError:
                    saved = {}
            saved[name] = {
                "spec": r["spec"],
                "plan": r.get("plan"),
                "data": r["data"],
                "records": r["records"],
                "series": r["state_series"],
                "flat": verdicts,
            }
            write_json(
                state_file,
                {"command": command_line(), "started_utc": started.isoformat(timespec="seconds"), "benchmarks": saved},
            )
    mismatches = [n for n, r in results.items() if not r.get("check", {}).get("ok")]
    mismatches += [n for n, f in stage_figures.items() if not f.get("same_result", True)]
    for n in mismatches:
        print(f"!!! MISMATCH in {n}: {results[n].get('check', {}).get('text', 'no check')}")
    for n, r in results.items():
        for p, d in (r.get("check", {}).get("differing_formulations") or {}).items():
            print(
                f"!!! {n}: plain formulation {p} computes something else than panes (and than the baseline "
                f"{r.get('baseline')}): {d['summary']} vs {r['check']['summaries']['panes']}; rows only in "
                f"{p}: {d['diff']['only_plain'][:2]}, only in panes: {d['diff']['only_panes'][:2]}"
            )
    if runner.errors:
        print(f"ERRORS in: {', '.join(runner.errors)} (tracebacks above and in the details file)")
    elapsed = time.perf_counter() - t_start
    print(f"\nsuite ({size_name}) took {elapsed / 60:.1f} min")

    figures = {
        n: {
            "events_per_s": round(r["panes"]["events_per_s"], 1),
            "baseline_events_per_s": round(r["plain"][r["baseline"]]["events_per_s"], 1),
            "ratio": round(r["ratio"], 4),
        }
        for n, r in results.items()
        if "ratio" in r
    }
    figures.update(stage_figures)
    out = Path(a.out)
    if a.only:
        merge_figures(out, figures)
        merge_figures(out.with_name(f"suite-{size_name}.json"), figures)
    else:
        write_json(out, figures)
        write_json(out.with_name(f"suite-{size_name}.json"), figures)
    details = {
        "command": command_line(),
        "started_utc": started.isoformat(timespec="seconds"),
        "elapsed_s": round(elapsed, 1),
        "size": size_name,
        "params": size,
        "repeat": a.repeat,
        "spark": {
            "version": spark.version,
            "master": spark.sparkContext.master,
            "shuffle_partitions": spark.conf.get("spark.sql.shuffle.partitions"),
        },
        "machine": machine(),
        "figures": figures,
        "results": results,
        "errors": runner.errors,
        "mismatches": mismatches,
    }
    details_path = out.with_name(out.stem + "_details.json")
    for path in (details_path, out.with_name(f"suite-{size_name}_details.json")):
        (merge_details if a.only else write_json)(path, details)
    out.with_name("latest_details.partial.json").unlink(missing_ok=True)
    log(f"wrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out} and {details_path.name}")
    spark.stop()
    return 1 if mismatches or runner.errors else 0


if __name__ == "__main__":
    sys.exit(main())
