#!/usr/bin/env python3
"""The shared Nexmark comparison's four queries (tw_agg, q5a, q7a, q11) through ``panes run``
against plain Spark's streaming query, side by side in one SparkSession, with where a
micro-batch's time goes: Spark jobs and stages per micro-batch and the time outside them.

    .venv/bin/python benchmarks/nexmark_run.py --bids 1000000 [--rounds 3] [--write]
    .venv/bin/python benchmarks/nexmark_run.py --data DIR [--queries q7a] [--plan stateful] [--phases]

The input: ``--bids N``, the suite's Nexmark bids (``common.generate_nexmark``: 10 parquet files),
or ``--data DIR``, a data set of ``/work/shared/bench/nexmark_gen.py`` (``DIR/parquet/bid``); one
file per micro-batch. panes runs each query as the shared benchmark does (``panes_nexmark.py``:
``panes.runner.run_spec`` with noop sinks, ``available_now`` and the end of the input: every
window closed); plain Spark as its ``spark_nexmark.py`` (``withWatermark`` 4 s +
``groupBy(window)``, append mode, noop sink, ``availableNow``: its last windows stay open; Spark's
own state store and checkpoint file manager, not panes' session's). The
sides alternate, their order reversed every other round; the median time of ``--rounds`` gives
events/s and the ratio (panes / plain). panes' account must balance (records in = counted + dead
letters + in no window = the input's bids), else the run says MISMATCH and exits 1.

Per query and side one JSON line: seconds, the streaming queries the run started, the
micro-batches, and per micro-batch (medians over those that read data, and over all) the Spark
jobs and stages, ``triggerExecution`` and ``addBatch`` of Spark's progress, the time inside jobs
(their wall-clock union) and ``outside`` = addBatch less that (the driver's Python, plan building
and JVM round trips), and the jobs run outside any micro-batch (panes' end of input runs its
step in the driver). ``--phases`` names panes' jobs by the phase that ran them and times the
phases. ``--jfr DIR`` records the JVM during each timed run (``jvm_profile``: Java Flight Recorder,
``DIR/<query>_<side>_r<round>.jfr``) and adds where its time went to the JSON line ("jvm"), with a
table per query at the end. Job counts are robust to a loaded machine; times are not: compare the
sides of one run. ``--write`` merges ``nexmark_<query>_run`` into ``results/latest.json``."""

from __future__ import annotations

import argparse
import contextlib
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

from common import RESULTS, generate_nexmark, merge_figures, meta_of, plain_spark_settings  # noqa: E402
from jvm_profile import Recording  # noqa: E402
from panes.runner import run_spec  # noqa: E402
from panes.spark.session import get_spark  # noqa: E402
from panes.spec import parse_run_spec  # noqa: E402
from panes_nexmark import QUERIES  # noqa: E402

#: the shared benchmark's watermark delay (Nexmark's)
DELAY = "4 seconds"


def bid_stream(spark, path: str):
    """The bids in ``path`` (Parquet) as a stream, one micro-batch per file."""
    schema = spark.read.parquet(path).schema
    return spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(path)


def plain_query(spark, q: str, path: str, delay: str):
    """Plain Spark's formulation of ``q`` (the shared benchmark's ``spark_nexmark.py``)."""
    from pyspark.sql import functions as F

    b = bid_stream(spark, path).withWatermark("dateTime", delay)
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
        from panes.spark.progress import ProgressListener

        self.events: list = []
        self.listener = ProgressListener(self.events.append)
        spark.streams.addListener(self.listener)

    def since(self, n: int) -> list:
        return self.events[n:]


class Counted:
    """Driver-side work counted in this process (robust to a loaded machine, unlike its time):
    DataFrames made (each is one analysis of its plan by Spark: ``Dataset.ofRows``) and py4j round
    trips to the JVM."""

    dataframes = 0
    jvm_calls = 0

    @classmethod
    def install(cls) -> None:
        import py4j.java_gateway as gateway
        from pyspark.sql.classic.dataframe import DataFrame

        init, send = DataFrame.__init__, gateway.GatewayClient.send_command

        def counted_init(self, *args, **kwargs):
            cls.dataframes += 1
            init(self, *args, **kwargs)

        def counted_send(self, *args, **kwargs):
            cls.jvm_calls += 1
            return send(self, *args, **kwargs)

        DataFrame.__init__ = counted_init  # type: ignore[method-assign]
        gateway.GatewayClient.send_command = counted_send

    @classmethod
    def now(cls) -> tuple[int, int]:
        return cls.dataframes, cls.jvm_calls


class Phases:
    """Names each Spark job by the phase of panes' micro-batch that ran it (Spark's short call
    site, a local property of the thread: the foreachBatch callback's) and times each phase in
    the driver, per micro-batch: the step (plan, its job, the state's statistics), the commit of
    its meta, the dead letters' and the panes' callbacks; with the DataFrames (analyses) and JVM
    round trips of each (``Counted``)."""

    def __init__(self, spark):
        self.sc = spark.sparkContext
        self.times: dict = {}
        self.counts: dict = {}
        self.batch = None
        Counted.install()

    def wrap(self, owner, name: str, label: str, batch_arg: int | None = None) -> None:
        original = getattr(owner, name)
        phases = self

        def wrapped(*args, **kwargs):
            if batch_arg is not None:
                phases.batch = args[batch_arg]
            before = self.sc.getLocalProperty("callSite.short")
            self.sc.setLocalProperty("callSite.short", label)
            t0, (d0, j0) = time.perf_counter(), Counted.now()
            try:
                return original(*args, **kwargs)
            finally:
                key = (phases.batch, label)
                phases.times[key] = phases.times.get(key, 0.0) + (time.perf_counter() - t0) * 1000
                d1, j1 = Counted.now()
                d, j = phases.counts.get(key, (0, 0))
                phases.counts[key] = (d + d1 - d0, j + j1 - j0)
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
        """Per phase, the medians over the micro-batches of its ms, DataFrames and JVM round
        trips."""
        out: dict = {}
        for key, ms in self.times.items():
            d, j = self.counts.get(key, (0, 0))
            out.setdefault(key[1], []).append((ms, d, j))
        self.times, self.counts = {}, {}
        return {
            k: {
                "ms": round(statistics.median(v[0] for v in vs)),
                "dataframes": statistics.median(v[1] for v in vs),
                "jvm_calls": statistics.median(v[2] for v in vs),
                "calls": len(vs),
                "dataframes_each": [v[1] for v in vs],
            }
            for k, vs in out.items()
        }


def jobs_of(spark, run_ids: set[str], since: float = 0.0) -> list[dict]:
    """The jobs of the queries with ``run_ids`` (Spark's job group of a streaming query is its run
    id), and those of no query submitted after ``since`` (s; the end of the input's step runs in
    the driver, outside any query: its batch is None): id, batch (from the job's description),
    stages, start and end (ms)."""
    sc = spark.sparkContext._jsc.sc()
    conv = spark._jvm.scala.jdk.javaapi.CollectionConverters
    out = []
    for j in conv.asJava(sc.statusStore().jobsList(None)):
        group = j.jobGroup()
        start, end = j.submissionTime(), j.completionTime()
        if group.isEmpty():
            if start.isEmpty() or start.get().getTime() < since * 1000:
                continue
        elif group.get() not in run_ids:
            continue
        described = j.description()
        desc = described.get() if described.isDefined() else ""
        batch = None
        for line in desc.splitlines():
            if line.startswith("batch = "):
                try:
                    batch = int(line.split("=", 1)[1])
                except ValueError:
                    batch = None
        out.append(
            {
                "run": None if group.isEmpty() else group.get(),
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
        "jobs_outside_names": [j["name"].split(" at ")[0] for j in jobs if j["batch"] is None],
        "job_names": [
            [j["name"].split(" at ")[0] for j in jobs if j["run"] == r["run"] and j["batch"] == r["batch"]]
            for r in rows
        ],
    }


PHASES: Phases | None = None


def panes_doc(q: str, data: str, ck: str, delay: str, plan: str, end_input: bool) -> dict:
    """The spec of ``q`` as a user runs it: Parquet bids, one file per micro-batch, noop sinks,
    ``available_now`` (``end_input``: and the end of the input)."""
    return {
        "name": q,
        "mode": "stream",
        "event_time": "dateTime",
        "watermark": {"max_delay": delay},
        "source": {"format": "parquet", "path": data, "max_files_per_trigger": 1},
        "sink": {"format": "noop"},
        "dead_letter": {"format": "noop"},
        "checkpoint": ck,
        "spark": {"available_now": True, "end_input": end_input, "plan": plan},
        **QUERIES[q],
    }


def run_panes(spark, prog: Progress, q: str, data: str, delay: str, plan: str, end_input: bool = True) -> dict:
    """``q`` through ``panes run`` (``end_input``: and the end of the input, every window closed)."""
    ck = tempfile.mkdtemp(prefix="panes-prof-")
    doc = panes_doc(q, data, ck, delay, plan, end_input)
    n = len(prog.events)
    t0 = time.time()
    counts = run_spec(parse_run_spec(doc), spark=spark, progress=False)
    secs = time.time() - t0
    driver = PHASES.take() if PHASES else {}
    time.sleep(1.0)  # (the last progress events)
    events = prog.since(n)
    jobs = jobs_of(spark, {str(p.runId) for p in events}, since=t0)
    shutil.rmtree(ck, ignore_errors=True)
    out = summary(per_batch(events, jobs), jobs, secs)
    out["panes"], out["dead_letters"] = counts["panes"], counts["dead_letters"]
    out["account"] = {k: counts.get(k) for k in ("records_in", "counted", "dead_letters", "in_no_window")}
    out["driver_ms_median_per_call"] = driver
    return out


def run_plain(spark, prog: Progress, q: str, data: str, delay: str) -> dict:
    ck = tempfile.mkdtemp(prefix="plain-prof-")
    n = len(prog.events)
    t0 = time.time()
    with plain_spark_settings(spark, state_store=True):
        df = plain_query(spark, q, data, delay)
        sq = df.writeStream.format("noop").outputMode("append").option("checkpointLocation", ck)
        sq = sq.trigger(availableNow=True).start()
        sq.awaitTermination()
    secs = time.time() - t0
    time.sleep(1.0)
    events = prog.since(n)
    jobs = jobs_of(spark, {str(p.runId) for p in events}, since=t0)
    shutil.rmtree(ck, ignore_errors=True)
    out = summary(per_batch(events, jobs), jobs, secs)
    out["panes"] = sum(max(p.sink.numOutputRows, 0) for p in events)
    return out


def source(a: argparse.Namespace) -> tuple[str, int]:
    """The bids' directory and how many bids it holds."""
    if a.data:
        with open(os.path.join(a.data, "_meta.json")) as f:
            return os.path.join(a.data, "parquet", "bid"), json.load(f)["counts"]["bid"]
    path = generate_nexmark(a.bids)
    return str(path), meta_of(path)["bids"]


def balanced(out: dict, bids: int) -> bool:
    """panes' account of a run: every bid counted, dead-lettered or in no window."""
    c = out["account"]
    return c["records_in"] == bids == c["counted"] + c["dead_letters"] + c["in_no_window"]


def rounds(spark, prog: Progress, a: argparse.Namespace, data: str, bids: int) -> dict:
    """Each query's runs, sides alternating (reversed every other round); prints each run."""
    runs: dict = {}
    for r in range(a.rounds):
        for q in a.queries.split(","):
            sides = a.sides.split(",")
            for side in sides if r % 2 == 0 else sides[::-1]:
                with recorded(spark, a.jfr, f"{q}_{side}_r{r}") as rec:
                    if side == "panes":
                        out = run_panes(spark, prog, q, data, DELAY, a.plan)
                        out["balanced"] = balanced(out, bids)
                    else:
                        out = run_plain(spark, prog, q, data, DELAY)
                if rec is not None:
                    out["jvm"] = rec.profile()
                out.update(query=q, side=side, plan=a.plan if side == "panes" else "-", round=r)
                out["events_per_s"] = round(bids / out["seconds"])
                out["load_1min"] = round(os.getloadavg()[0], 1)
                print(json.dumps(out), flush=True)
                runs.setdefault((q, side), []).append(out)
    return runs


@contextlib.contextmanager
def recorded(spark, directory: str, name: str):
    """A JFR recording (``jvm_profile.Recording``) of the block in ``directory`` (none: "")."""
    if not directory:
        yield None
        return
    with Recording(spark, Path(directory) / f"{name}.jfr") as rec:
        yield rec


def jvm_table(runs: dict, q: str) -> None:
    """Where the JVM's time went in ``q``'s runs (``--jfr``): ms per category, median over rounds."""
    sides = [s for s in ("panes", "plain") if runs.get((q, s)) and "jvm" in runs[(q, s)][0]]
    if not sides:
        return
    names = {k for s in sides for r in runs[(q, s)] for k in r["jvm"]["samples_ms"]}
    med = {
        s: {k: statistics.median(r["jvm"]["samples_ms"].get(k, 0) for r in runs[(q, s)]) for k in names} for s in sides
    }
    jit = {s: statistics.median(r["jvm"]["jit_ms"] for r in runs[(q, s)]) for s in sides}
    print(f"{q}: the JVM's sampled ms by category (median of the rounds): " + "  ".join(sides))
    for k in sorted(names, key=lambda k: -med[sides[0]][k]):
        if any(med[s][k] for s in sides):
            print(f"  {k:32}" + "".join(f"{med[s][k]:>8.0f}" for s in sides))
    print(f"  {'JIT compilations >=100ms':32}" + "".join(f"{jit[s]:>8.0f}" for s in sides), flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bids", type=int, default=1_000_000, help="the suite's Nexmark bids (without --data)")
    ap.add_argument("--data", default="", help="a nexmark_gen.py data set (DIR/parquet/bid) instead")
    ap.add_argument("--warmup-bids", type=int, default=100_000, help="an untimed run of tw_agg and q7a first (0: none)")
    ap.add_argument("--queries", default="tw_agg,q5a,q7a,q11")
    ap.add_argument("--plan", default="auto", choices=["auto", "native", "arrow", "stateful"])
    ap.add_argument("--sides", default="plain,panes")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--phases", action="store_true", help="name panes' jobs and time its phases")
    ap.add_argument("--write", action="store_true", help="merge the figures into results/latest.json")
    ap.add_argument("--jfr", default="", help="record the JVM of each timed run in DIR (jvm_profile)")
    a = ap.parse_args()
    data, bids = source(a)
    spark = get_spark()
    spark.range(1).collect()
    global PHASES
    if a.phases:
        PHASES = Phases(spark)
        PHASES.install()
    prog = Progress(spark)
    if a.warmup_bids:
        warm = str(generate_nexmark(a.warmup_bids))
        for q in ("tw_agg", "q7a"):
            run_panes(spark, prog, q, warm, DELAY, a.plan)
            run_plain(spark, prog, q, warm, DELAY)
    load = os.getloadavg()[0]
    runs = rounds(spark, prog, a, data, bids)
    figures, ok = {}, True
    for q in a.queries.split(","):
        ok &= all(r["balanced"] for r in runs.get((q, "panes"), []))
        if not runs.get((q, "panes")) or not runs.get((q, "plain")):
            continue  # (one side only: no ratio)
        med = {s: statistics.median(r["seconds"] for r in runs[(q, s)]) for s in ("panes", "plain")}
        figures[f"nexmark_{q}_run"] = {
            "events_per_s": round(bids / med["panes"]),
            "baseline_events_per_s": round(bids / med["plain"]),
            "ratio": round(med["plain"] / med["panes"], 3),
        }
        print(
            f"{q:7} panes run {bids / med['panes']:>10,.0f} events/s  plain {bids / med['plain']:>10,.0f}"
            f"  ratio {med['plain'] / med['panes']:.3f}",
            flush=True,
        )
    for q in a.queries.split(","):
        jvm_table(runs, q)
    print(json.dumps({"load_1min_at_start": round(load, 1), "load_1min_at_end": round(os.getloadavg()[0], 1)}))
    if not ok:
        print("MISMATCH: a panes run's account did not balance (see its JSON line)", flush=True)
    if a.write:
        merge_figures(RESULTS / "latest.json", figures)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
