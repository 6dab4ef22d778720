"""State stays bounded: 30 minutes of event time through a streaming run with allowed lateness,
one micro-batch per minute of data, and the size of the state after every micro-batch.

    .venv/bin/python benchmarks/bench_state.py [--events-per-minute N]

Data: 30 parquet files, one per minute of event time, N events each over
2,000 keys; 3 % of the events come 1-4 minutes late (some within the 2-minute allowed lateness,
some beyond it: dead letters). Pipeline: tumbling 1 minute, count + sum per key, max_delay 5 s,
allowed_lateness 2 minutes.

Measured per micro-batch:
  - panes, native plan: rows and bytes of the newest open-window table under
    <checkpoint>/panes_native/v<batch> (what the next micro-batch reads);
  - panes, stateful plan: the state operator's numRowsTotal (one row per key bucket) and
    memoryUsedBytes / rocksdb SST bytes from lastProgress;
  - plain Spark (withWatermark + groupBy(window) append): numRowsTotal.
Written to benchmarks/results/state_bounded.json and printed as a table.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import numpy as np  # noqa: E402

from bench import command_line, log, start_spark  # noqa: E402

MINUTES = 30
KEYS = 2_000
BASE_MS = 1_704_067_200_000
SPEC = {"event_time": "ts", "key": ["key"], "window": {"tumbling": {"size": "1 minute"}},
        "watermark": {"max_delay": "5 seconds"}, "allowed_lateness": "2 minutes",
        "aggregates": {"n": {"count": "*"}, "total": {"sum": "amount"}}}


def generate(per_minute: int) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = HERE / "data" / f"state-{per_minute}"
    if (out / "_done").exists():
        return out
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    rng = np.random.default_rng(7)
    for m in range(MINUTES):
        ts = BASE_MS + m * 60_000 + np.sort(rng.integers(0, 60_000, per_minute))
        late = rng.random(per_minute) < 0.03
        ts = np.where(late, ts - rng.integers(60_000, 240_000, per_minute), ts)
        table = pa.table({"key": pa.array([f"k{k:04d}" for k in rng.integers(0, KEYS, per_minute)]),
                          "ts": pa.array(ts, type=pa.timestamp("ms", tz="UTC")),
                          "amount": pa.array(rng.integers(1, 100, per_minute), type=pa.int64())})
        f = out / f"part-{m:03d}.parquet"
        pq.write_table(table, f)
        os.utime(f, (1_600_000_000 + m, 1_600_000_000 + m))
    (out / "_done").write_text("")
    return out


def dir_bytes(p: Path) -> int:
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def run(spark, path: Path, kind: str) -> list[dict]:
    from pyspark.sql import functions as F

    import panes

    src = spark.readStream.schema("key STRING, ts TIMESTAMP, amount LONG").option("maxFilesPerTrigger", 1) \
        .parquet(str(path))
    ckpt = tempfile.mkdtemp(prefix=f"state-{kind}-")
    series: list[dict] = []
    counts = {"panes": 0, "dead_letters": 0}

    def after(batch_id):
        row = {"batch": batch_id, "panes_so_far": counts["panes"], "dead_letters_so_far": counts["dead_letters"]}
        if kind == "native":
            versions = sorted(Path(ckpt, "panes_native").glob("v*"), key=lambda d: int(d.name[1:]))
            if versions:
                newest = versions[-1] / "windows"
                row["state_bytes"] = dir_bytes(newest)
                row["state_rows"] = spark.read.parquet(str(newest)).count()
        series.append(row)

    if kind == "plain":
        def each(df, batch_id):
            counts["panes"] += df.count()
            series.append({"batch": batch_id, "panes_so_far": counts["panes"]})
        q = (src.withWatermark("ts", "5 seconds").groupBy("key", F.window("ts", "1 minute"))
             .agg(F.count(F.lit(1)).alias("n")).writeStream.outputMode("append").foreachBatch(each)
             .option("checkpointLocation", ckpt).trigger(availableNow=True).start())
    else:
        res = panes.window(src, SPEC, plan=kind)

        def on_panes(df, batch_id):
            counts["panes"] += df.count()
            after(batch_id)

        def on_dead(df, batch_id):
            counts["dead_letters"] += df.count()

        q = res.write_stream(on_panes, on_dead, ckpt, availableNow=True)
    q.awaitTermination()
    by_batch = {r["batch"]: r for r in series}
    for p in q.recentProgress:
        ops = p.get("stateOperators") or []
        if ops and p["batchId"] in by_batch:
            op = ops[0]
            cm = op.get("customMetrics") or {}
            by_batch[p["batchId"]].update(state_rows=op.get("numRowsTotal"), memory_bytes=op.get("memoryUsedBytes"),
                                          sst_bytes=cm.get("rocksdbSstFileSize"))
    shutil.rmtree(ckpt, ignore_errors=True)
    return series


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events-per-minute", type=int, default=20_000)
    a = ap.parse_args(argv)
    path = generate(a.events_per_minute)
    spark = start_spark()
    out = {"command": command_line(), "events": a.events_per_minute * MINUTES, "spec": SPEC}
    for kind in ("native", "stateful", "plain"):
        log(f"{kind}: running")
        out[kind] = run(spark, path, kind)
        for r in out[kind]:
            log(f"  {kind} batch {r['batch']:>2}: " + ", ".join(f"{k} {v}" for k, v in r.items() if k != "batch"))
    (HERE / "results" / "state_bounded.json").write_text(json.dumps(out, indent=1))
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
