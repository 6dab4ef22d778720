#!/usr/bin/env python3
"""What each micro-batch of the stateful plan costs Spark, counted (not timed): the suite's
``state_bounded_stateful`` run (``suite.run_stream``: ``panes.window(..., plan="stateful")`` and
``write_stream`` with the suite's callbacks), and with ``--plain`` plain Spark's run of the same
data beside it.

    .venv/bin/python benchmarks/stateful_counts.py                  # the quick suite's size
    .venv/bin/python benchmarks/stateful_counts.py --events 30000 --files 5 --plain

Per micro-batch (data and no-data, from the query's progress) it prints: the Spark jobs, each
named by what ran it (``settle``: the driver's read of the operator's output, the job that runs
the operator; ``on_panes``, ``on_dead_letters``: the suite's callbacks), their stages and tasks
(run, not skipped), the executors' CPU time of those stages (Spark's ``executorCpuTime``), the
CPU time of the JVM (the driver's and the executors' threads: ``local[2]``), of the Python
workers (``pyspark.daemon`` and the workers it forks: their utime + stime, children's included)
and of the driver's Python process inside the micro-batch's ``foreachBatch``, the rows sent to
the Python workers (the micro-batch's input rows) and the bytes each way (the SQL metrics of the
Python operator), the rows collected to the driver, the DataFrames made (each one analysis of
its plan) and the JVM round trips of the driver (``nexmark_run.Counted``). Then the medians over
the data micro-batches and over the no-data ones, and the totals. CPU times vary with the load
of the machine far less than wall-clock times; the counts not at all. ``--out`` writes every row
as JSON."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import start_spark, stream_input  # noqa: E402
from nexmark_run import Counted, Progress  # noqa: E402
from suite import SIZES, load_data_set, run_stream  # noqa: E402
from workloads import benchmarks  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
#: the SQL metrics of a Python operator (``PythonSQLMetrics``): bytes to and from its workers
PYTHON_BYTES = {
    "data sent to Python workers": "to_python_bytes",
    "data returned from Python workers": "from_python_bytes",
}


def cpu_s(pid: int) -> float:
    """A process's CPU seconds, with those of its children it waited for."""
    try:
        fields = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return sum(int(f) for f in fields[11:15]) / TICK


def python_workers_cpu(jvm: int) -> float:
    """The CPU seconds of this JVM's Python workers: its ``pyspark.daemon`` (with the workers it
    reaped) and the workers it forked that still run."""
    parent: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if b"pyspark" in (d / "cmdline").read_bytes():
                    parent[int(d.name)] = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    daemons = {pid for pid, pp in parent.items() if pp == jvm}
    return sum(cpu_s(pid) for pid, pp in parent.items() if pid in daemons or pp in daemons)


class Batches:
    """Per micro-batch (by batch id), what this process saw inside ``foreachBatch`` (either side's):
    the JVM's, the Python workers' and the driver's CPU seconds, the rows collected to the driver,
    DataFrames, JVM calls."""

    def __init__(self, jvm: int):
        self.jvm = jvm
        self.rows: dict[int, dict] = {}
        self.collected = 0
        self.spans: list[tuple[float, float, str]] = []  # (start ms, end ms, label)

    def install(self) -> None:
        from pyspark.sql.classic.dataframe import DataFrame

        collect = DataFrame.collect
        batches = self

        def counted_collect(df):
            rows = collect(df)
            batches.collected += len(rows)
            return rows

        DataFrame.collect = counted_collect  # type: ignore[method-assign]
        from pyspark.sql.streaming.readwriter import DataStreamWriter

        for_each = DataStreamWriter.foreachBatch

        def measured_for_each(writer, each):
            def measured(batch, batch_id):
                before = self.now()
                try:
                    return each(batch, batch_id)
                finally:
                    after = self.now()
                    self.rows[batch_id] = {k: after[k] - before[k] for k in after}

            return for_each(writer, measured)

        DataStreamWriter.foreachBatch = measured_for_each  # type: ignore[method-assign]

    def label(self, spark) -> None:
        """Names each job by what ran it: the driver's read of the operator's output (``settle``,
        which runs the operator: the first job of a micro-batch) and the suite's callbacks (the
        job was submitted while it ran: ``spans``)."""
        from panes.spark import results, settling

        spans = self.spans

        def named(f, label):
            def wrapped(*args, **kwargs):
                t0 = time.time() * 1000
                try:
                    return f(*args, **kwargs)
                finally:
                    spans.append((t0, time.time() * 1000, label))

            return wrapped

        settling.Settler.settle = named(settling.Settler.settle, "settle")  # type: ignore[method-assign]
        try:
            from panes.spark.stateful_batch import StatefulBatches

            StatefulBatches.settled = named(StatefulBatches.settled, "settle")  # type: ignore[method-assign]
        except ImportError:  # (a commit before stateful_batch)
            pass
        write_stream = results.StatefulStreamResult.write_stream

        def labelled(self, on_panes, on_dead_letters, *args, **kwargs):
            return write_stream(
                self, named(on_panes, "on_panes"), named(on_dead_letters, "on_dead_letters"), *args, **kwargs
            )

        results.StatefulStreamResult.write_stream = labelled  # type: ignore[method-assign]

    def now(self) -> dict:
        dataframes, jvm_calls = Counted.now()
        return {
            "jvm_cpu_s": cpu_s(self.jvm),
            "python_workers_cpu_s": python_workers_cpu(self.jvm),
            "driver_cpu_s": time.process_time(),
            "collected_rows": self.collected,
            "dataframes": dataframes,
            "jvm_calls": jvm_calls,
        }


def jvm_list(spark, java_list) -> list:
    return list(spark._jvm.scala.jdk.javaapi.CollectionConverters.asJava(java_list))


def jobs_and_stages(spark, run_id: str, spans: list) -> list[dict]:
    """The jobs of the query run ``run_id`` (its job group), each with its micro-batch, name, and
    the stages it ran (not skipped): tasks and executor CPU."""
    store = spark.sparkContext._jsc.sc().statusStore()
    stages: dict[int, dict | None] = {}

    def stage(i: int) -> dict | None:
        if i not in stages:
            try:
                s = store.lastStageAttempt(i)
            except Exception:  # (a stage that never ran)
                s = None
            ran = s is not None and str(s.status()) == "COMPLETE"
            stages[i] = {"tasks": s.numCompleteTasks(), "executor_cpu_s": s.executorCpuTime() / 1e9} if ran else None
        return stages[i]

    out = []
    for j in jvm_list(spark, store.jobsList(None)):
        group = j.jobGroup()
        if group.isEmpty() or group.get() != run_id:
            continue
        desc = j.description().get() if j.description().isDefined() else ""
        batch = next((int(x.split("=", 1)[1]) for x in desc.splitlines() if x.startswith("batch = ")), None)
        ran = [s for s in (stage(i) for i in jvm_list(spark, j.stageIds())) if s is not None]
        submitted = j.submissionTime().get().getTime() if j.submissionTime().isDefined() else 0
        label = next((lb for t0, t1, lb in spans if t0 <= submitted <= t1), None)
        name = j.name().split(" at ")
        where = Path(name[1].split(":")[0]).name + ":" + name[1].split(":")[1] if len(name) > 1 else ""
        out.append(
            {
                "batch": batch,
                "job": j.jobId(),
                "name": label or (f"{name[0]} at {where}" if where else name[0]),
                "stages": len(ran),
                "tasks": sum(s["tasks"] for s in ran),
                "executor_cpu_s": sum(s["executor_cpu_s"] for s in ran),
            }
        )
    return sorted(out, key=lambda j: j["job"])


def python_bytes(spark, run_id: str) -> dict[int, dict]:
    """Per micro-batch, the bytes to and from the Python workers (the SQL metrics of its executions)."""
    sql = spark._jsparkSession.sharedState().statusStore()
    out: dict[int, dict] = {}
    for e in jvm_list(spark, sql.executionsList()):
        desc = str(e.description())
        if f"runId = {run_id}" not in desc:
            continue
        batch = next((int(x.split("=", 1)[1]) for x in desc.splitlines() if x.startswith("batch = ")), None)
        if batch is None:
            continue
        conv = spark._jvm.scala.jdk.javaapi.CollectionConverters
        values = {int(k): str(v) for k, v in conv.asJava(sql.executionMetrics(e.executionId())).items()}
        for m in jvm_list(spark, e.metrics()):
            field = PYTHON_BYTES.get(m.name())
            if field is None or int(m.accumulatorId()) not in values:
                continue
            total = parse_size(values[int(m.accumulatorId())])
            row = out.setdefault(batch, {v: 0 for v in PYTHON_BYTES.values()})
            row[field] += total
    return out


def parse_size(text: str) -> int:
    """A size metric as Spark formats it (``total (min, med, max ...)\\n12.3 KiB (...)``): the total in bytes."""
    units = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[1] in units:
            try:
                return int(float(parts[0].replace(",", "")) * units[parts[1]])
            except ValueError:
                continue
    return 0


def table(progress: list, jobs: list[dict], batches: Batches, pybytes: dict) -> list[dict]:
    rows = []
    for p in progress:
        mine = [j for j in jobs if j["batch"] == p.batchId]
        seen = batches.rows.get(p.batchId, {})
        rows.append(
            {
                "batch": p.batchId,
                "input_rows": p.numInputRows,
                "jobs": len(mine),
                "job_names": [j["name"] for j in mine],
                "stages": sum(j["stages"] for j in mine),
                "tasks": sum(j["tasks"] for j in mine),
                "executor_cpu_s": round(sum(j["executor_cpu_s"] for j in mine), 3),
                **{k: round(v, 3) if isinstance(v, float) else v for k, v in seen.items()},
                **pybytes.get(p.batchId, {}),
            }
        )
    return rows


NUMBERS = (
    "jobs",
    "stages",
    "tasks",
    "executor_cpu_s",
    "jvm_cpu_s",
    "python_workers_cpu_s",
    "driver_cpu_s",
    "collected_rows",
    "dataframes",
    "jvm_calls",
    "to_python_bytes",
    "from_python_bytes",
)


def summary(rows: list[dict]) -> dict:
    data = [r for r in rows if r["input_rows"]]
    empty = [r for r in rows if not r["input_rows"]]

    def med(rs):
        return {k: statistics.median(r.get(k, 0) for r in rs) for k in NUMBERS} if rs else {}

    return {
        "micro_batches": len(rows),
        "data_batches": len(data),
        "no_data_batches": len(empty),
        "median_data_batch": med(data),
        "median_no_data_batch": med(empty),
        "total": {k: round(sum(r.get(k, 0) for r in rows), 3) for k in NUMBERS},
        "jobs_by_name": sorted({n for r in rows for n in r["job_names"]}),
    }


def one_run(spark, bench, ds, side: str, src, fpt: int, prog: Progress, batches: Batches) -> dict:
    n = len(prog.events)
    batches.rows.clear()
    r = run_stream(spark, bench, ds, side, src, fpt, 900)
    time.sleep(1)  # (the last progress event)
    progress = [p for p in prog.since(n)]
    run_id = str(progress[0].runId) if progress else ""
    rows = table(progress, jobs_and_stages(spark, run_id, batches.spans), batches, python_bytes(spark, run_id))
    return {"side": side, "finished": r["finished"], "summary": r.get("summary"), "rows": rows, "counts": summary(rows)}


def main() -> int:
    quick = SIZES["quick"]
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=quick["state_events"])
    ap.add_argument("--keys", type=int, default=quick["state_keys"])
    ap.add_argument("--files", type=int, default=quick["state_files"])
    ap.add_argument("--buckets", type=int, default=None, help="hash buckets (default: panes.window's)")
    ap.add_argument("--plain", action="store_true", help="plain Spark's run of the same data too")
    ap.add_argument("--warmup", action="store_true", help="one untimed run first (the JIT, the workers)")
    ap.add_argument("--out", help="every row as JSON")
    a = ap.parse_args()
    size = dict(quick, state_events=a.events, state_keys=a.keys, state_files=a.files)
    bench = next(b for b in benchmarks() if b.name == "state_bounded_stateful")
    if a.buckets is not None:
        import panes

        window = panes.window

        def with_buckets(df, spec, **kw):
            return window(df, spec, buckets=a.buckets, **kw)

        panes.window = with_buckets
    ds = load_data_set("state", size)
    src = stream_input(ds.path, ds.sentinel)
    spark = start_spark()
    jvm = int(spark._jvm.java.lang.ProcessHandle.current().pid())
    Counted.install()
    batches = Batches(jvm)
    batches.install()
    batches.label(spark)
    prog = Progress(spark)
    fpt = bench.files_per_trigger or 1
    if a.warmup:
        one_run(spark, bench, ds, "panes", stream_input(ds.path, ds.sentinel, warmup=True), 1, prog, batches)
    runs = [one_run(spark, bench, ds, "panes", src, fpt, prog, batches)]
    if a.plain:
        runs.append(one_run(spark, bench, ds, next(iter(bench.plains)), src, fpt, prog, batches))
    for run in runs:
        print(f"== {run['side']}: finished {run['finished']}")
        for row in run["rows"]:
            print(json.dumps(row))
        print(json.dumps(run["counts"], indent=1))
    if a.out:
        Path(a.out).write_text(json.dumps({"args": vars(a), "runs": runs}, indent=1, default=str))
    shutil.rmtree(Path(src).parent / "unused", ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
