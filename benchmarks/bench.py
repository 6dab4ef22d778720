"""Throughput benchmark: panes vs plain Spark, 1-minute tumbling count + sum per key.

    .venv/bin/python benchmarks/bench.py [--events N] [--keys K] [--files F] [--repeat R] [--quick]

Four measurements on one SparkSession (``panes.spark.session.get_spark()``: local[2], 2 shuffle
partitions), over the same parquet files (N events over one hour of event time, in event-time
order, split into F files whose modification times increase so a file source reads them in order):

  a. plain Spark streaming: readStream parquet -> withWatermark(ts, 0 s) -> groupBy(key,
     window(ts, 1 minute)).agg(count, sum) -> append -> foreachBatch (one action per batch)
  b. panes streaming: the same source -> panes.window(df, spec).write_stream (the plan the planner
     picks: native for this spec) -> one action per micro-batch on the panes and the dead letters
  c. plain Spark batch: read.parquet -> groupBy(key, window(ts, 1 minute)).agg(...) -> noop sink
  d. panes batch: panes.window(batch_df, spec).panes -> noop sink

Both streaming runs use trigger(availableNow=True) and the same maxFilesPerTrigger (about ten
micro-batches). With availableNow no final watermark is emitted at the end of the input, so the
windows of the last minute never close: the streaming figures count the rows each side emitted,
not the full answer. Throughput is always input events / wall-clock seconds of the query.

Writes benchmarks/results/latest.json ({name: {events_per_s, baseline_events_per_s, ratio}},
ratio = panes / plain) and benchmarks/results/latest_details.json (everything measured).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

import numpy as np  # noqa: E402

SEED = 42
# 2024-01-01T00:00:00Z, in microseconds
BASE_US = 1_704_067_200_000_000
HOUR_US = 3_600_000_000
# fixed file mtimes: a file source reads files in modification-time order
MTIME_BASE = 1_600_000_000

SPEC = {
    "event_time": "ts",
    "key": ["key"],
    "window": {"tumbling": {"size": "1 minute"}},
    "aggregates": {"n": {"count": "*"}, "total": {"sum": "amount"}},
}


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def human(n: int) -> str:
    for div, suffix in ((1_000_000, "m"), (1_000, "k")):
        if n >= div and n % div == 0:
            return f"{n // div}{suffix}"
    return str(n)


# -- data ---------------------------------------------------------------------------------------------


def data_dir(events: int, keys: int, files: int) -> Path:
    return HERE / "data" / f"events{events}_keys{keys}_files{files}_seed{SEED}"


def generate(events: int, keys: int, files: int) -> Path:
    """N events over one hour of event time, in increasing event-time order, split into F parquet
    files (key string, ts timestamp, amount long). Written once; reused when present."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = data_dir(events, keys, files)
    meta = out / "_meta.json"
    if meta.exists():
        log(f"data: reusing {out.relative_to(ROOT)}")
    else:
        t0 = time.time()
        rng = np.random.default_rng(SEED)
        ts = BASE_US + np.sort(rng.integers(0, HOUR_US, size=events, dtype=np.int64))
        key_idx = rng.integers(0, keys, size=events, dtype=np.int64)
        amount = rng.integers(1, 1001, size=events, dtype=np.int64)
        width = len(str(keys - 1))
        labels = pa.array([f"k{i:0{width}d}" for i in range(keys)], type=pa.string())
        tmp = out.with_name(out.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        bounds = np.linspace(0, events, files + 1).astype(np.int64)
        for i in range(files):
            lo, hi = int(bounds[i]), int(bounds[i + 1])
            table = pa.table({
                "key": labels.take(pa.array(key_idx[lo:hi])),
                "ts": pa.array(ts[lo:hi], type=pa.timestamp("us", tz="UTC")),
                "amount": pa.array(amount[lo:hi], type=pa.int64()),
            })
            pq.write_table(table, tmp / f"part-{i:05d}.parquet")
        (tmp / "_meta.json").write_text(json.dumps({
            "events": events, "keys": keys, "files": files, "seed": SEED,
            "ts_min_us": int(ts[0]), "ts_max_us": int(ts[-1]),
            "amount_sum": int(amount.sum()),
        }, indent=1))
        shutil.rmtree(out, ignore_errors=True)
        tmp.rename(out)
        log(f"data: wrote {events:,} events in {files} files to {out.relative_to(ROOT)} "
            f"in {time.time() - t0:.1f} s")
    # (re)apply increasing mtimes every run: a copy or checkout would have lost them
    for i, f in enumerate(sorted(out.glob("part-*.parquet"))):
        os.utime(f, (MTIME_BASE + i, MTIME_BASE + i))
    return out


# -- measurements ------------------------------------------------------------------------------------


def schema():
    from pyspark.sql import types as T

    return T.StructType([
        T.StructField("key", T.StringType()),
        T.StructField("ts", T.TimestampType()),
        T.StructField("amount", T.LongType()),
    ])


def plain_agg(df):
    from pyspark.sql import functions as F

    return df.groupBy("key", F.window("ts", "1 minute")).agg(
        F.count(F.lit(1)).alias("n"), F.sum("amount").alias("total"))


def stream_source(spark, path: Path, files_per_trigger: int):
    return (spark.readStream.schema(schema()).option("maxFilesPerTrigger", files_per_trigger)
            .parquet(str(path)))


def run_query(make_writer, timeout: float, events: int) -> dict:
    """Start a streaming query, wait for it, report the time and what its batches reported."""
    ckpt = tempfile.mkdtemp(prefix="panes-bench-ckpt-")
    try:
        t0 = time.perf_counter()
        made = make_writer(ckpt)
        # a DataStreamWriter (plain Spark) or a query panes already started (write_stream)
        q = made if hasattr(made, "awaitTermination") else \
            made.option("checkpointLocation", ckpt).trigger(availableNow=True).start()
        finished = q.awaitTermination(timeout)
        seconds = time.perf_counter() - t0
        if not finished:
            q.stop()
        progress = q.recentProgress
        input_rows = sum(p.get("numInputRows", 0) for p in progress) if progress else 0
        batches = len(progress)
        data_batches = sum(1 for p in progress if p.get("numInputRows", 0) > 0)
        dropped = 0
        for p in progress:
            for op in p.get("stateOperators", []) or []:
                dropped += op.get("numRowsDroppedByWatermark", 0) or 0
        exc = q.exception()
        if exc is not None:
            raise RuntimeError(f"streaming query failed: {exc}")
        return {
            "seconds": seconds, "finished": bool(finished),
            "input_rows": int(input_rows), "micro_batches": batches, "data_batches": data_batches,
            "rows_dropped_by_watermark": int(dropped),
            # a query cut short by the timeout: events it read per second so far
            "events_per_s": (events if finished else input_rows) / seconds,
        }
    finally:
        shutil.rmtree(ckpt, ignore_errors=True)


def measure_plain_stream(spark, path, fpt, timeout, events) -> dict:
    from pyspark.sql import functions as F

    acc = {"rows": 0, "total": 0}

    def each(batch, batch_id):
        r = batch.agg(F.count(F.lit(1)).alias("rows"), F.sum("total").alias("total")).collect()[0]
        acc["rows"] += r["rows"]
        acc["total"] += r["total"] or 0

    def writer(ckpt):
        df = stream_source(spark, path, fpt).withWatermark("ts", "0 seconds")
        return plain_agg(df).writeStream.outputMode("append").foreachBatch(each)

    res = run_query(writer, timeout, events)
    res.update(emitted_rows=acc["rows"], emitted_total=acc["total"])
    return res


def measure_panes_stream(spark, path, fpt, timeout, events) -> dict:
    from pyspark.sql import functions as F

    import panes

    acc = {"panes": 0, "dead_letters": 0, "total": 0, "plan": ""}

    def on_panes(df, batch_id):  # one action per output per micro-batch
        r = df.agg(F.count(F.lit(1)).alias("rows"), F.sum("total").alias("total")).collect()[0]
        acc["panes"] += r["rows"]
        acc["total"] += r["total"] or 0

    def on_dead_letters(df, batch_id):
        acc["dead_letters"] += df.count()

    def writer(ckpt):
        result = panes.window(stream_source(spark, path, fpt), SPEC)
        acc["plan"] = result.plan
        return result.write_stream(on_panes, on_dead_letters, ckpt, availableNow=True)

    res = run_query(writer, timeout, events)
    res.update(emitted_rows=acc["panes"], emitted_total=acc["total"], dead_letters=acc["dead_letters"])
    return res


def measure_plain_batch(spark, path, events) -> dict:
    t0 = time.perf_counter()
    plain_agg(spark.read.schema(schema()).parquet(str(path))).write.format("noop").mode("overwrite").save()
    s = time.perf_counter() - t0
    return {"seconds": s, "events_per_s": events / s, "finished": True}


def measure_panes_batch(spark, path, events) -> dict:
    import panes

    t0 = time.perf_counter()
    result = panes.window(spark.read.schema(schema()).parquet(str(path)), SPEC)
    result.panes.write.format("noop").mode("overwrite").save()
    s = time.perf_counter() - t0
    return {"seconds": s, "events_per_s": events / s, "finished": True, "plan": result.plan}


def verify_batch(spark, path) -> dict:
    """The panes batch answer equals plain Spark's: row count and sum of total (untimed)."""
    from pyspark.sql import functions as F

    import panes

    def summary(df):
        r = df.agg(F.count(F.lit(1)).alias("rows"), F.sum("total").alias("total"),
                   F.sum("n").alias("n")).collect()[0]
        return {"rows": int(r["rows"]), "total": int(r["total"] or 0), "n": int(r["n"] or 0)}

    src = spark.read.schema(schema()).parquet(str(path))
    plain = summary(plain_agg(src))
    pan = summary(panes.window(src, SPEC).panes)
    return {"plain": plain, "panes": pan, "ok": plain == pan}


# -- main ------------------------------------------------------------------------------------------------


def median_run(runs: list[dict]) -> dict:
    """The run with the median time (the slower middle one for an even count), plus all times."""
    ordered = sorted(runs, key=lambda r: r["seconds"])
    mid = dict(ordered[len(ordered) // 2])
    mid["all_seconds"] = [round(r["seconds"], 2) for r in runs]
    return mid


def other_spark_jvms() -> list[int]:
    """Spark JVMs on this machine that are not this process's (other jobs skew the timings)."""
    me, found = os.getpid(), []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if b"org.apache.spark.deploy.SparkSubmit" not in (d / "cmdline").read_bytes():
                continue
            pid, ours = int(d.name), False
            while pid > 1:
                if pid == me:
                    ours = True
                    break
                stat = (Path("/proc") / str(pid) / "stat").read_text()
                pid = int(stat.rsplit(")", 1)[1].split()[1])
            if not ours:
                found.append(int(d.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


def wait_idle(max_wait: float) -> list[int]:
    """Wait (up to max_wait seconds) until no other Spark JVM runs; the ones still running."""
    deadline = time.time() + max_wait
    others = other_spark_jvms()
    if others:
        log(f"  waiting up to {max_wait:.0f} s for other Spark JVMs to end: {others}")
    while others and time.time() < deadline:
        time.sleep(2)
        others = other_spark_jvms()
    if others:
        log(f"  WARNING: other Spark JVMs still running {others}: this measurement shares the CPU")
    return others


def machine() -> dict:
    info = {"nproc": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()}
    try:
        info["free_g"] = subprocess.run(["free", "-g"], capture_output=True, text=True).stdout.strip()
    except OSError:
        pass
    try:
        info["loadavg"] = os.getloadavg()
    except OSError:
        pass
    return info


def start_spark():
    """The benchmarks' SparkSession (panes' defaults: local[2], 2 shuffle partitions), logged."""
    from panes.spark.session import get_spark

    t0 = time.perf_counter()
    spark = get_spark()
    log(f"spark {spark.version} session ready in {time.perf_counter() - t0:.1f} s "
        f"(master {spark.sparkContext.master}, shuffle partitions "
        f"{spark.conf.get('spark.sql.shuffle.partitions')})")
    return spark


def command_line() -> str:
    """This run's command, with the interpreter relative to the repo when it is the venv's."""
    exe = os.path.relpath(sys.executable) if sys.executable.startswith(str(ROOT)) else sys.executable
    return " ".join([exe, *sys.argv])


def merge_figures(path: Path, figures: dict) -> dict:
    """Add / replace ``figures``' keys in the JSON object at ``path`` (other benchmarks' keys stay)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    merged: dict = {}
    if path.exists():
        try:
            merged = json.loads(path.read_text())
        except ValueError:
            merged = {}
        if not isinstance(merged, dict):
            merged = {}
    merged.update(figures)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(merged, indent=2) + "\n")
    tmp.replace(path)
    return merged


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=None, help="events (default 2,000,000; --quick 200,000)")
    ap.add_argument("--keys", type=int, default=None, help="distinct keys (default 10,000; --quick 1,000)")
    ap.add_argument("--files", type=int, default=None, help="parquet files (default 20; --quick 10)")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each measurement; the median is reported")
    ap.add_argument("--quick", action="store_true", help="200,000 events, 1,000 keys, 10 files")
    ap.add_argument("--batches", type=int, default=10,
                    help="target micro-batches per streaming run (maxFilesPerTrigger = ceil(files / this))")
    ap.add_argument("--timeout", type=float, default=900,
                    help="seconds before a streaming query is stopped and reported as incomplete")
    ap.add_argument("--wait-idle", type=float, default=120,
                    help="before each measurement, wait up to this many seconds for other Spark JVMs "
                         "on the machine to end (0: do not wait)")
    ap.add_argument("--no-warmup", action="store_true", help="skip the untimed warm-up (every measured path once on the first file)")
    ap.add_argument("--only", default="abcd", help="subset of measurements to run, e.g. 'ac' (default abcd)")
    ap.add_argument("--out", default=str(HERE / "results" / "latest.json"), help="where to write the figures")
    a = ap.parse_args(argv)
    events = a.events or (200_000 if a.quick else 2_000_000)
    keys = a.keys or (1_000 if a.quick else 10_000)
    files = a.files or (10 if a.quick else 20)
    fpt = max(1, math.ceil(files / a.batches))
    started = dt.datetime.now(dt.timezone.utc)
    log(f"panes benchmark: {events:,} events, {keys:,} keys, {files} files, repeat {a.repeat}, "
        f"maxFilesPerTrigger {fpt} (~{math.ceil(files / fpt)} micro-batches)")

    path = generate(events, keys, files)

    spark = start_spark()

    if not a.no_warmup:
        # untimed: the first query of a session pays JVM warm-up, the first stateful query the
        # state store's, the first panes query the Python workers' start; warm every path once on
        # the first file so the timed runs do not depend on their order
        wait_idle(a.wait_idle)
        t0 = time.perf_counter()
        plain_agg(spark.read.schema(schema()).parquet(str(path))).write.format("noop").mode("overwrite").save()
        # a file source wants a directory: a sibling one holding a copy of the first file
        head = path.with_name(path.name + "_warmup")
        first = sorted(path.glob("part-*.parquet"))[0]
        if not (head / first.name).exists():
            head.mkdir(exist_ok=True)
            shutil.copy2(first, head / first.name)
        if "a" in a.only:
            measure_plain_stream(spark, head, 1, a.timeout, 0)
        if "b" in a.only:
            measure_panes_stream(spark, head, 1, a.timeout, 0)
        if "d" in a.only:
            measure_panes_batch(spark, head, 0)
        log(f"warm-up (untimed; every measured path on {first.name}): {time.perf_counter() - t0:.1f} s")

    names = {"a": "plain_stream", "b": "panes_stream", "c": "plain_batch", "d": "panes_batch"}
    runs: dict[str, list[dict]] = {names[k]: [] for k in a.only}
    errors: dict[str, str] = {}
    for rep in range(a.repeat):
        for k in a.only:
            name = names[k]
            if name in errors:
                continue
            log(f"run {rep + 1}/{a.repeat}: {name} ...")
            others = wait_idle(a.wait_idle)
            load = os.getloadavg()[0]
            try:
                if k == "a":
                    r = measure_plain_stream(spark, path, fpt, a.timeout, events)
                elif k == "b":
                    r = measure_panes_stream(spark, path, fpt, a.timeout, events)
                elif k == "c":
                    r = measure_plain_batch(spark, path, events)
                else:
                    r = measure_panes_batch(spark, path, events)
            except Exception:  # report and go on with the others
                errors[name] = traceback.format_exc()
                log(f"{name} FAILED:\n{errors[name]}")
                continue
            extra = ""
            if "emitted_rows" in r:
                extra = (f", {r['data_batches']} data batches / {r['micro_batches']} batches, "
                         f"emitted {r['emitted_rows']:,} rows")
                if "dead_letters" in r:
                    extra += f", {r['dead_letters']:,} dead letters"
                if not r["finished"]:
                    extra += f" -- STOPPED after {a.timeout:.0f} s with {r['input_rows']:,} events read"
            log(f"  {name}: {r['seconds']:.1f} s, {r['events_per_s']:,.0f} events/s{extra}")
            after = other_spark_jvms()
            if after:
                log(f"  WARNING: other Spark JVMs {after} ran during {name}: its time is skewed")
            # other Spark JVMs seen before or right after the measurement
            r["other_spark_jvms"] = len(set(others) | set(after))
            r["loadavg_1m_before"] = round(load, 2)
            runs[name].append(r)

    res = {n: median_run(rs) for n, rs in runs.items() if rs}

    check = None
    if "c" in a.only or "d" in a.only:
        try:
            check = verify_batch(spark, path)
        except Exception:
            errors["verify_batch"] = traceback.format_exc()
            log(f"verify_batch FAILED:\n{errors['verify_batch']}")

    # -- report -----------------------------------------------------------------------------------------
    label = f"tumbling_{human(keys)}_keys"
    figures = {}
    print()
    print(f"== panes vs plain Spark: 1-minute tumbling count+sum, {events:,} events, {keys:,} keys, "
          f"{files} files (median of {a.repeat}) ==")
    print(f"{'measurement':<16}{'seconds':>10}{'events/s':>14}   notes")
    for name, r in res.items():
        notes = ""
        if "emitted_rows" in r:
            notes = f"{r['data_batches']} data batches, emitted {r['emitted_rows']:,} windows"
            if not r["finished"]:
                notes += f"; INCOMPLETE: stopped at {a.timeout:.0f} s after {r['input_rows']:,} events"
        print(f"{name:<16}{r['seconds']:>10.1f}{r['events_per_s']:>14,.0f}   {notes}")
    for mode in ("stream", "batch"):
        p, b = res.get(f"panes_{mode}"), res.get(f"plain_{mode}")
        if p and b:
            ratio = p["events_per_s"] / b["events_per_s"]
            figures[f"{label}_{mode}"] = {"events_per_s": round(p["events_per_s"], 1),
                                          "baseline_events_per_s": round(b["events_per_s"], 1),
                                          "ratio": round(ratio, 4)}
            print(f"ratio panes/plain ({mode}): {ratio:.3f}"
                  + ("" if p["finished"] else "  (panes run incomplete: throughput of the part it read)"))
    stream_check = None
    if "plain_stream" in res or "panes_stream" in res:
        ps, pp = res.get("plain_stream"), res.get("panes_stream")
        print("note: trigger availableNow emits no final watermark, so the windows of the last minute "
              "never close; streaming runs count the windows they emitted, not the full answer.")
        if ps and pp:
            same = (ps["emitted_rows"], ps["emitted_total"]) == (pp["emitted_rows"], pp["emitted_total"])
            stream_check = {"plain_rows": ps["emitted_rows"], "plain_total": ps["emitted_total"],
                            "panes_rows": pp["emitted_rows"], "panes_total": pp["emitted_total"],
                            "panes_dead_letters": pp.get("dead_letters", 0), "ok": same}
            print(f"streaming emitted windows: plain {ps['emitted_rows']:,} (sum total {ps['emitted_total']:,}), "
                  f"panes {pp['emitted_rows']:,} (sum total {pp['emitted_total']:,}), "
                  f"panes dead letters {pp.get('dead_letters', 0):,} -> "
                  f"{'OK' if same else 'MISMATCH'}"
                  + ("" if ps["finished"] and pp["finished"] else " (a run was stopped early: not comparable)"))
    if check is not None:
        print(f"batch check (rows, sum of total): plain {check['plain']['rows']:,} / {check['plain']['total']:,}, "
              f"panes {check['panes']['rows']:,} / {check['panes']['total']:,} -> "
              f"{'OK' if check['ok'] else 'MISMATCH'}")
    if errors:
        print(f"ERRORS in: {', '.join(errors)} (tracebacks above)")

    out = Path(a.out)
    merge_figures(out, figures)
    details = {
        "command": command_line(),
        "started_utc": started.isoformat(timespec="seconds"),
        "params": {"events": events, "keys": keys, "files": files, "repeat": a.repeat,
                   "max_files_per_trigger": fpt, "data": str(path.relative_to(ROOT))},
        "spark": {"version": spark.version, "master": spark.sparkContext.master,
                  "shuffle_partitions": spark.conf.get("spark.sql.shuffle.partitions")},
        "machine": machine(),
        "results": res, "figures": figures, "batch_check": check, "stream_check": stream_check, "errors": errors,
    }
    details_path = out.with_name(out.stem + "_details.json")
    details_path.write_text(json.dumps(details, indent=2, default=str) + "\n")
    log(f"wrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out} and {details_path.name}")
    spark.stop()
    return 1 if errors or (check is not None and not check["ok"]) else 0


if __name__ == "__main__":
    sys.exit(main())
