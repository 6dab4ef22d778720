#!/usr/bin/env python3
"""The fixed cost of a micro-batch: many tiny micro-batches (a few hundred Nexmark bids each, one
file per micro-batch) through plain Spark's streaming query and through ``panes run``, side by
side in one SparkSession, on the shapes of tw_agg (tumbling 10 s per auction, count + sum) and q7a
(tumbling 10 s unkeyed, max). With so few rows per micro-batch, what a micro-batch costs is what
each side does per micro-batch whatever its rows: jobs, stages, tasks, plan building, state.

    .venv/bin/python benchmarks/fixed_cost.py [--files 20] [--bids 6000] [--rounds 3]
    .venv/bin/python benchmarks/fixed_cost.py --data DIR     # a nexmark_gen.py data set instead

Both sides run the same micro-batches: ``availableNow`` over the files, no end of the input (panes
keeps its last windows open, as plain Spark's append mode does); plain Spark with its own state
store and checkpoint file manager, as the shared Nexmark harness runs it. The data: ``--bids`` bids at
``--rate`` events per second of event time (33: each file of about 300 bids spans about 10 s, so
about one window closes per micro-batch, as at 1M bids in 10 files at Nexmark's 10,000 per s).

Per query and side, medians over the rounds of (per micro-batch that read data):
- ``trigger_ms``: Spark's ``triggerExecution`` (median over the micro-batches); ``wall_ms``: the
  run's seconds over its micro-batches (with the query's start and stop);
- ``python_cpu_ms``: this process's CPU (every thread: the foreachBatch callback, py4j),
  ``jvm_cpu_ms``: the JVM's process CPU (``/proc``), ``executor_cpu_ms``: Spark's
  ``executorCpuTime`` of the run's stages (tasks), ``jvm_driver_cpu_ms``: the JVM's less the
  tasks' (planning, scheduling, commits, JIT, GC); each the run's total over its data micro-batches;
- ``jobs``, ``stages``, ``tasks``: the run's, over its data micro-batches; ``codegen_compiles``:
  the classes the JVM compiled from generated code (Spark's code cache missed), ``gc_ms``: the
  JVM's garbage collection; ``dataframes`` (each one analysis by Spark) and ``jvm_calls`` (py4j
  round trips) made in this process.

The summary line per query: panes' ``trigger_ms`` and plain Spark's, and the difference, the fixed
cost of panes' micro-batch over plain Spark's (the issue's bar: at most 100 ms). Counts are robust
to a loaded machine, times are not: compare the sides of one run. Writes
``results/fixed_cost.json`` (``--write``: and ``nexmark_<q>_fixed_cost`` into ``results/latest.json``,
events/s being a micro-batch's rows over its ``trigger_ms``)."""

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

from common import RESULTS, generate_nexmark, merge_figures, meta_of, plain_spark_settings  # noqa: E402
from nexmark_run import DELAY, Counted, Progress, panes_doc, plain_query  # noqa: E402
from panes.runner import run_spec  # noqa: E402
from panes.spark.session import get_spark  # noqa: E402
from panes.spec import parse_run_spec  # noqa: E402


class JvmCpu:
    """The CPU time (ms) of the driver's JVM (local mode: its tasks too), read from ``/proc``."""

    def __init__(self, spark):
        self.pid = None
        proc = getattr(spark.sparkContext._gateway, "proc", None)
        pids = [proc.pid] if proc is not None else []
        for pid in pids + self._children(os.getpid()):
            if self._comm(pid) == "java":
                self.pid = pid
                break

    @staticmethod
    def _comm(pid: int) -> str:
        try:
            return Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            return ""

    @staticmethod
    def _children(pid: int) -> list[int]:
        out = []
        for d in Path("/proc").iterdir():
            if d.name.isdigit():
                try:
                    stat = (d / "stat").read_text()
                except OSError:
                    continue
                if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(d.name))
        return out

    def ms(self) -> float | None:
        if self.pid is None:
            return None
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = int(fields[11]) + int(fields[12])  # utime + stime
        return ticks * 1000 / os.sysconf("SC_CLK_TCK")


class JvmCounts:
    """What the JVM counts itself: its classes compiled from generated code (Janino; a plan whose
    code Spark's cache does not hold compiles anew) and its garbage collectors' time (ms)."""

    def __init__(self, spark):
        self.jvm = spark._jvm

    def now(self) -> tuple[int, int]:
        compiles = self.jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME().getCount()
        gcs = self.jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
        return int(compiles), sum(int(g.getCollectionTime()) for g in gcs)


def jobs_and_stages(spark, run_ids: set[str]) -> tuple[list[dict], dict]:
    """The jobs of the queries ``run_ids`` (their job group), and per stage of them its tasks and
    the tasks' CPU (ms) from Spark's status store."""
    sc = spark.sparkContext._jsc.sc()
    conv = spark._jvm.scala.jdk.javaapi.CollectionConverters
    store = sc.statusStore()
    jobs, stage_ids = [], set()
    for j in conv.asJava(store.jobsList(None)):
        group = j.jobGroup()
        if group.isEmpty() or group.get() not in run_ids:
            continue
        described = j.description()
        desc = described.get() if described.isDefined() else ""
        batch = next((int(x.split("=")[1]) for x in desc.splitlines() if x.startswith("batch = ")), None)
        ids = [int(s) for s in conv.asJava(j.stageIds())]
        jobs.append({"run": group.get(), "batch": batch, "stages": ids})
        stage_ids.update(ids)
    stages: dict[int, dict] = {}
    for sid in stage_ids:
        try:
            st = store.lastStageAttempt(sid)
        except Exception:  # (a stage skipped: its shuffle output reused)
            continue
        stages[sid] = {"tasks": st.numCompleteTasks(), "cpu_ms": st.executorCpuTime() / 1e6}
    return jobs, stages


def run_side(spark, prog: Progress, jvm: JvmCpu, side: str, q: str, data: str) -> dict:
    counts = JvmCounts(spark)
    """One run of ``q`` on ``side``, measured (see the module)."""
    ck = tempfile.mkdtemp(prefix=f"fixed-{side}-")
    n = len(prog.events)
    if side == "panes":
        spec = parse_run_spec(panes_doc(q, data, ck, DELAY, "native", end_input=False))
    else:
        df = plain_query(spark, q, data, DELAY)
    (c0, g0), (d0, j0) = counts.now(), Counted.now()
    cpu0, jvm0, t0 = time.process_time(), jvm.ms(), time.perf_counter()
    last = None
    if side == "panes":
        run_spec(spec, spark=spark, progress=False)  # (it waits for its last progress event)
    else:
        with plain_spark_settings(spark, state_store=True):
            w = df.writeStream.format("noop").outputMode("append").option("checkpointLocation", ck)
            sq = w.trigger(availableNow=True).start()
            sq.awaitTermination()
        last = (sq.lastProgress or {}).get("batchId")
    secs = time.perf_counter() - t0
    cpu, jvm1, (d1, j1) = time.process_time() - cpu0, jvm.ms(), Counted.now()
    c1, g1 = counts.now()
    deadline = time.time() + 30
    while last is not None and time.time() < deadline and all(p.batchId < last for p in prog.since(n)):
        time.sleep(0.1)  # (the listener's last progress event)
    events = prog.since(n)
    jobs, stages = jobs_and_stages(spark, {str(p.runId) for p in events})
    shutil.rmtree(ck, ignore_errors=True)
    data_batches = [p for p in events if p.numInputRows]
    k = max(len(data_batches), 1)
    task_cpu = sum(s["cpu_ms"] for s in stages.values())
    jvm_ms = None if jvm0 is None or jvm1 is None else jvm1 - jvm0
    return {
        "query": q,
        "side": side,
        "seconds": round(secs, 3),
        "batches": len(events),
        "data_batches": len(data_batches),
        "rows": sum(p.numInputRows for p in events),
        "trigger_ms": statistics.median((p.durationMs or {}).get("triggerExecution", 0) for p in data_batches),
        "wall_ms": round(secs * 1000 / k, 1),
        "python_cpu_ms": round(cpu * 1000 / k, 1),
        "jvm_cpu_ms": None if jvm_ms is None else round(jvm_ms / k, 1),
        "executor_cpu_ms": round(task_cpu / k, 1),
        "jvm_driver_cpu_ms": None if jvm_ms is None else round((jvm_ms - task_cpu) / k, 1),
        "jobs": round(len(jobs) / k, 2),
        "stages": round(sum(len(j["stages"]) for j in jobs) / k, 2),
        "tasks": round(sum(s["tasks"] for s in stages.values()) / k, 2),
        "codegen_compiles": round((c1 - c0) / k, 2),
        "gc_ms": round((g1 - g0) / k, 1),
        "dataframes": round((d1 - d0) / k, 1),
        "jvm_calls": round((j1 - j0) / k, 1),
    }


MEASURES = (
    "data_batches",
    "trigger_ms",
    "wall_ms",
    "python_cpu_ms",
    "jvm_cpu_ms",
    "executor_cpu_ms",
    "jvm_driver_cpu_ms",
    "jobs",
    "stages",
    "tasks",
    "codegen_compiles",
    "gc_ms",
    "dataframes",
    "jvm_calls",
)


def medians(runs: list[dict]) -> dict:
    return {m: statistics.median(r[m] for r in runs) for m in MEASURES if all(r[m] is not None for r in runs)}


def figures(summary: dict, bids: int) -> dict:
    """``nexmark_<q>_fixed_cost`` for ``latest.json``: events/s of a micro-batch (its rows over its
    ``trigger_ms``), each side's ms per micro-batch and panes' extra ms."""
    out = {}
    for q, s in summary.items():
        if "extra_ms_per_batch" not in s:
            continue
        pn, pl = s["panes"]["trigger_ms"], s["plain"]["trigger_ms"]
        rows = bids / max(s["panes"].get("data_batches", 1), 1)
        out[f"nexmark_{q}_fixed_cost"] = {
            "events_per_s": round(rows * 1000 / pn, 1),
            "baseline_events_per_s": round(rows * 1000 / pl, 1),
            "ratio": round(pl / pn, 3),
            "ms_per_batch": pn,
            "baseline_ms_per_batch": pl,
            "extra_ms_per_batch": s["extra_ms_per_batch"],
        }
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bids", type=int, default=6000)
    ap.add_argument("--files", type=int, default=20, help="micro-batches (one file each)")
    ap.add_argument("--rate", type=int, default=33, help="events per second of event time")
    ap.add_argument("--data", default="", help="a nexmark_gen.py data set (DIR/parquet/bid) instead")
    ap.add_argument("--queries", default="tw_agg,q7a")
    ap.add_argument("--sides", default="plain,panes")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-warmup", action="store_true")
    ap.add_argument("--out", default=str(RESULTS / "fixed_cost.json"))
    ap.add_argument("--write", action="store_true", help="merge the figures into results/latest.json")
    a = ap.parse_args()
    if a.data:
        data, bids = os.path.join(a.data, "parquet", "bid"), json.loads(Path(a.data, "_meta.json").read_text())
        bids = bids["counts"]["bid"]
    else:
        path = generate_nexmark(a.bids, a.files, a.rate)
        data, bids = str(path), meta_of(path)["bids"]
    spark = get_spark()
    spark.range(1).collect()
    Counted.install()
    prog, jvm = Progress(spark), JvmCpu(spark)
    queries, sides = a.queries.split(","), a.sides.split(",")
    if not a.no_warmup:
        for q in queries:
            for side in sides:
                run_side(spark, prog, jvm, side, q, data)
    runs: dict = {}
    for r in range(a.rounds):
        for q in queries:
            for side in sides if r % 2 == 0 else sides[::-1]:
                out = run_side(spark, prog, jvm, side, q, data)
                out.update(round=r, load_1min=round(os.getloadavg()[0], 1))
                print(json.dumps(out), flush=True)
                runs.setdefault(q, {}).setdefault(side, []).append(out)
    summary = {}
    for q, by_side in runs.items():
        summary[q] = {side: medians(rs) for side, rs in by_side.items()}
        if "panes" in by_side and "plain" in by_side:
            extra = summary[q]["panes"]["trigger_ms"] - summary[q]["plain"]["trigger_ms"]
            summary[q]["extra_ms_per_batch"] = extra
            print(
                f"{q:7} ms per micro-batch (triggerExecution, median): panes {summary[q]['panes']['trigger_ms']:.0f}"
                f"  plain {summary[q]['plain']['trigger_ms']:.0f}  fixed cost over plain Spark {extra:+.0f} ms",
                flush=True,
            )
    if a.write:
        merge_figures(RESULTS / "latest.json", figures(summary, bids))
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps({"bids": bids, "data": data, "summary": summary, "runs": runs}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
