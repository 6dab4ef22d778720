#!/usr/bin/env python3
"""Where a micro-batch's time goes: Spark jobs and stages per micro-batch, and the time outside
them, for the Nexmark queries through ``panes run`` and through plain Spark's query, on the same
input in one SparkSession. Counts are robust to a loaded machine; times are not (compare the two
sides of one run).

    .venv/bin/python benchmarks/profile_batches.py --data DIR [--queries tw_agg,q5a,q7a,q11]
                                                   [--plan auto|stateful] [--rounds 1]

``DIR`` is a Nexmark data set of ``/work/shared/bench/nexmark_gen.py`` (``parquet/bid``, 10 files:
one micro-batch each). Each query runs as the shared benchmark runs it (``panes_nexmark.py``:
``panes.runner.run_spec`` with noop sinks, ``available_now`` and the end of the input) and as
plain Spark (``withWatermark`` + ``groupBy(window)``, append mode, noop sink, ``availableNow``).

Per query and side it prints one JSON line: the streaming queries the run started (the end of the
input may start more), the micro-batches, and per micro-batch (medians over the micro-batches that
read data, and over all of them) the Spark jobs and stages, ``triggerExecution`` and ``addBatch``
of Spark's progress, the time inside jobs (their wall-clock union) and ``outside`` = addBatch less
that: the driver's Python, plan building and JVM round trips of the micro-batch."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from panes.runner import run_spec  # noqa: E402
from panes.spark.session import get_spark  # noqa: E402
from panes.spec import parse_run_spec  # noqa: E402
from panes_nexmark import QUERIES  # noqa: E402


def plain_query(spark, q: str, path: str, delay: str):
    """Plain Spark's formulation of ``q`` (the shared benchmark's ``spark_nexmark.py``)."""
    from pyspark.sql import functions as F

    schema = spark.read.parquet(path).schema
    b = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(path)
    b = b.withWatermark("dateTime", delay)
    if q == "tw_agg":
        g = b.groupBy(F.window("dateTime", "10 seconds").alias("w"), "auction")
        return g.agg(F.count(F.lit(1)).alias("num"), F.sum("price").alias("total"))
    if q == "q5a":
        g = b.groupBy(F.window("dateTime", "10 seconds", "2 seconds").alias("w"), "auction")
        return g.agg(F.count(F.lit(1)).alias("num"))
    if q == "q7a":
        return b.groupBy(F.window("dateTime", "10 seconds").alias("w")).agg(F.max("price").alias("maxprice"))
    if q == "q11":
        g = b.groupBy("bidder", F.session_window("dateTime", "10 seconds").alias("s"))
        return g.agg(F.count(F.lit(1)).alias("bid_count"))
    raise ValueError(q)


class Progress:
    """Every query's progress events, by run id."""

    def __init__(self, spark):
        from pyspark.sql.streaming import StreamingQueryListener

        self.events: list = []
        events = self.events

        class Listener(StreamingQueryListener):
            def onQueryStarted(self, event):
                pass

            def onQueryProgress(self, event):
                events.append(event.progress)

            def onQueryIdle(self, event):
                pass

            def onQueryTerminated(self, event):
                pass

        self.listener = Listener()
        spark.streams.addListener(self.listener)

    def since(self, n: int) -> list:
        return self.events[n:]


class Phases:
    """Names each Spark job by the phase of panes' micro-batch that ran it (Spark's short call
    site, a local property of the thread: the foreachBatch callback's) and times each phase in
    the driver, per micro-batch: the step (plan, its job, the state's statistics), the commit of
    its meta, the dead letters' and the panes' callbacks."""

    def __init__(self, spark):
        self.sc = spark.sparkContext
        self.times: dict = {}
        self.batch = None

    def wrap(self, owner, name: str, label: str, batch_arg: int | None = None) -> None:
        original = getattr(owner, name)
        phases = self

        def wrapped(*args, **kwargs):
            if batch_arg is not None:
                phases.batch = args[batch_arg]
            before = self.sc.getLocalProperty("callSite.short")
            self.sc.setLocalProperty("callSite.short", label)
            t0 = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                key = (phases.batch, label)
                phases.times[key] = phases.times.get(key, 0.0) + (time.perf_counter() - t0) * 1000
                self.sc.setLocalProperty("callSite.short", before)

        setattr(owner, name, wrapped)

    def install(self) -> None:
        from panes import runner
        from panes.spark.native import store

        self.wrap(store.NativeStream, "run", "batch", batch_arg=2)
        self.wrap(store.NativeStream, "step_batch", "step")
        self.wrap(store.NativeStream, "commit", "commit")
        self.wrap(store.NativeStream, "clean", "clean")
        self.wrap(runner.StreamRun, "_on_panes", "on_panes")
        self.wrap(runner.StreamRun, "_on_dead_letters", "on_dead_letters")

    def take(self) -> dict:
        out: dict = {}
        for (_, label), ms in self.times.items():
            out.setdefault(label, []).append(ms)
        self.times = {}
        return {k: round(statistics.median(v)) for k, v in out.items()}


def jobs_of(spark, run_ids: set[str]) -> list[dict]:
    """The jobs of the queries with ``run_ids`` (Spark's job group of a streaming query is its run
    id): id, batch (from the job's description), stages, start and end (ms)."""
    sc = spark.sparkContext._jsc.sc()
    conv = spark._jvm.scala.jdk.javaapi.CollectionConverters
    out = []
    for j in conv.asJava(sc.statusStore().jobsList(None)):
        group = j.jobGroup()
        if group.isEmpty() or group.get() not in run_ids:
            continue
        desc = j.description().getOrElse(None) or ""
        batch = None
        for line in desc.splitlines():
            if line.startswith("batch = "):
                try:
                    batch = int(line.split("=", 1)[1])
                except ValueError:
                    batch = None
        start, end = j.submissionTime(), j.completionTime()
        out.append(
            {
                "run": group.get(),
                "job": j.jobId(),
                "batch": batch,
                "stages": len(list(conv.asJava(j.stageIds()))),
                "start": start.get().getTime() if not start.isEmpty() else None,
                "end": end.get().getTime() if not end.isEmpty() else None,
                "name": j.name(),
            }
        )
    return out


def union_ms(intervals: list[tuple[int, int]]) -> int:
    total, last = 0, None
    for s, e in sorted(intervals):
        if last is None or s > last:
            total += e - s
            last = e
        elif e > last:
            total += e - last
            last = e
    return total


def per_batch(progress: list, jobs: list[dict]) -> list[dict]:
    """One row per micro-batch: its jobs and stages, and its times (ms)."""
    rows = []
    for p in progress:
        mine = [j for j in jobs if j["run"] == str(p.runId) and j["batch"] == p.batchId]
        spans = [(j["start"], j["end"]) for j in mine if j["start"] is not None and j["end"] is not None]
        d = p.durationMs or {}
        inside = union_ms(spans)
        rows.append(
            {
                "run": str(p.runId),
                "batch": p.batchId,
                "rows": p.numInputRows,
                "jobs": len(mine),
                "stages": sum(j["stages"] for j in mine),
                "trigger_ms": d.get("triggerExecution", 0),
                "add_batch_ms": d.get("addBatch", 0),
                "in_jobs_ms": inside,
                "outside_ms": max(d.get("addBatch", 0) - inside, 0),
            }
        )
    return rows


def summary(rows: list[dict], jobs: list[dict], secs: float) -> dict:
    data = [r for r in rows if r["rows"]]
    keys = ("jobs", "stages", "trigger_ms", "add_batch_ms", "in_jobs_ms", "outside_ms")

    def med(rs: list[dict]) -> dict:
        return {k: statistics.median(r[k] for r in rs) for k in keys} if rs else {}

    return {
        "seconds": round(secs, 2),
        "queries": len({r["run"] for r in rows}),
        "batches": len(rows),
        "data_batches": len(data),
        "jobs_total": len(jobs),
        "jobs_outside_batches": sum(1 for j in jobs if j["batch"] is None),
        "per_data_batch": med(data),
        "per_batch": med(rows),
        "trigger_ms_total": sum(r["trigger_ms"] for r in rows),
        "jobs_by_batch": [r["jobs"] for r in rows],
        "job_names": [
            [j["name"].split(" at ")[0] for j in jobs if j["run"] == r["run"] and j["batch"] == r["batch"]]
            for r in rows
        ],
    }


PHASES: Phases | None = None


def run_panes(spark, prog: Progress, q: str, data: str, delay: str, plan: str) -> dict:
    ck = tempfile.mkdtemp(prefix="panes-prof-")
    doc = {
        "name": q,
        "mode": "stream",
        "event_time": "dateTime",
        "watermark": {"max_delay": delay},
        "source": {"format": "parquet", "path": os.path.join(data, "parquet", "bid"), "max_files_per_trigger": 1},
        "sink": {"format": "noop"},
        "dead_letter": {"format": "noop"},
        "checkpoint": ck,
        "spark": {"available_now": True, "end_input": True, "plan": plan},
        **QUERIES[q],
    }
    n = len(prog.events)
    t0 = time.time()
    counts = run_spec(parse_run_spec(doc), spark=spark, progress=False)
    secs = time.time() - t0
    driver = PHASES.take() if PHASES else {}
    time.sleep(1.0)  # (the last progress events)
    events = prog.since(n)
    jobs = jobs_of(spark, {str(p.runId) for p in events})
    shutil.rmtree(ck, ignore_errors=True)
    out = summary(per_batch(events, jobs), jobs, secs)
    out["panes"], out["dead_letters"] = counts["panes"], counts["dead_letters"]
    out["driver_ms_median_per_call"] = driver
    return out


def run_plain(spark, prog: Progress, q: str, data: str, delay: str) -> dict:
    ck = tempfile.mkdtemp(prefix="plain-prof-")
    n = len(prog.events)
    t0 = time.time()
    df = plain_query(spark, q, os.path.join(data, "parquet", "bid"), delay)
    sq = df.writeStream.format("noop").outputMode("append").option("checkpointLocation", ck)
    sq = sq.trigger(availableNow=True).start()
    sq.awaitTermination()
    secs = time.time() - t0
    time.sleep(1.0)
    events = prog.since(n)
    jobs = jobs_of(spark, {str(p.runId) for p in events})
    shutil.rmtree(ck, ignore_errors=True)
    out = summary(per_batch(events, jobs), jobs, secs)
    out["panes"] = sum(max(p.sink.numOutputRows, 0) for p in events)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="a nexmark_gen.py data set (parquet/bid)")
    ap.add_argument("--warmup-data", default="", help="a small data set run first, untimed")
    ap.add_argument("--queries", default="tw_agg,q5a,q7a,q11")
    ap.add_argument("--plan", default="auto", choices=["auto", "native", "stateful"])
    ap.add_argument("--sides", default="plain,panes")
    ap.add_argument("--delay", default="4 seconds")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--phases", action="store_true", help="name panes' jobs and time its phases")
    a = ap.parse_args()
    spark = get_spark()
    spark.range(1).collect()
    global PHASES
    if a.phases:
        PHASES = Phases(spark)
        PHASES.install()
    prog = Progress(spark)
    if a.warmup_data:
        for q in ("tw_agg", "q7a"):
            run_panes(spark, prog, q, a.warmup_data, a.delay, a.plan)
            run_plain(spark, prog, q, a.warmup_data, a.delay)
    load = os.getloadavg()[0]
    for r in range(a.rounds):
        for q in a.queries.split(","):
            sides = a.sides.split(",")
            for side in sides if r % 2 == 0 else sides[::-1]:
                t = time.time()
                if side == "panes":
                    out = run_panes(spark, prog, q, a.data, a.delay, a.plan)
                else:
                    out = run_plain(spark, prog, q, a.data, a.delay)
                out.update(query=q, side=side, plan=a.plan if side == "panes" else "-", round=r)
                out["load_1min"] = round(os.getloadavg()[0], 1)
                print(json.dumps(out), flush=True)
                del t
    print(json.dumps({"load_1min_at_start": round(load, 1)}), flush=True)


if __name__ == "__main__":
    main()
