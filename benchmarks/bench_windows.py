"""Batch path for the window types plain Spark has no one-call form for: panes vs the best plain
PySpark formulation we could write, on bench.py's data, side by side in one run.

    .venv/bin/python benchmarks/bench_windows.py [--quick] [--repeat 3]

  hopping_gaps_batch  hopping 10 s every 30 s (gaps), count + sum per key
                      plain: groupBy(key, window(ts, 30 s)) over rows with ts < start + 10 s
  sessions_batch      sessions, 30 s gap, count + sum per key
                      plain: groupBy(key, session_window(ts, 30 s))
  sliding_batch       KIP-450 sliding windows, time difference 10 s, count + sum per key
                      plain: window functions over partitionBy(key).orderBy(ts): RANGE frames
                      (-D, 0) for left windows, (1, D + 1) for right ones, one row per distinct
                      time, right windows that hold records and are no left window; union

Each side's result is counted and summed (rows, sum of the counts, sum of the sums); the two must
agree. Merges the three names into benchmarks/results/latest.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench import command_line, generate, log, merge_figures, schema, start_spark, wait_idle  # noqa: E402

D_MS = 10_000


def plain_hopping_gaps(df):
    from pyspark.sql import functions as F

    w = F.window("ts", "30 seconds")
    return (df.withColumn("w", w).filter(F.col("ts") < F.col("w.start") + F.expr("INTERVAL 10 SECONDS"))
            .groupBy("key", "w").agg(F.count(F.lit(1)).alias("n"), F.sum("amount").alias("total")))


def plain_sessions(df):
    from pyspark.sql import functions as F

    return df.groupBy("key", F.session_window("ts", "30 seconds")).agg(
        F.count(F.lit(1)).alias("n"), F.sum("amount").alias("total"))


def plain_sliding(df):
    from pyspark.sql import functions as F
    from pyspark.sql.window import Window

    t = F.unix_millis("ts")
    order = Window.partitionBy("key").orderBy("t")
    left, right = order.rangeBetween(-D_MS, 0), order.rangeBetween(1, D_MS + 1)
    framed = df.withColumn("t", t).select(
        "key", "t",
        (F.lag("t").over(order).isNull() | (F.lag("t").over(order) != F.col("t"))).alias("first"),
        F.count(F.lit(1)).over(left).alias("n_l"), F.sum("amount").over(left).alias("s_l"),
        F.count(F.lit(1)).over(right).alias("n_r"), F.sum("amount").over(right).alias("s_r"),
        F.count(F.lit(1)).over(order.rangeBetween(D_MS + 1, D_MS + 1)).alias("at_end"),
    ).filter("first")
    lw = framed.select("key", (F.col("t") - D_MS).alias("start"), F.col("n_l").alias("n"), F.col("s_l").alias("total"))
    rw = framed.filter((F.col("n_r") > 0) & (F.col("at_end") == 0)).select(
        "key", (F.col("t") + 1).alias("start"), F.col("n_r").alias("n"), F.col("s_r").alias("total"))
    return lw.unionByName(rw)


SPEC = {"event_time": "ts", "key": ["key"],
        "aggregates": {"n": {"count": "*"}, "total": {"sum": "amount"}}}
CASES = {
    "hopping_gaps_batch": ({"hopping": {"size": "10 seconds", "hop": "30 seconds"}}, plain_hopping_gaps),
    "sessions_batch": ({"session": {"gap": "30 seconds"}}, plain_sessions),
    "sliding_batch": ({"sliding": {"time_difference": D_MS}}, plain_sliding),
}


def summary(df) -> tuple:
    """Run the query once, into a small aggregate: (rows, sum of n, sum of total)."""
    from pyspark.sql import functions as F

    r = df.agg(F.count(F.lit(1)), F.sum("n"), F.sum("total")).first()
    return (int(r[0]), int(r[1] or 0), int(r[2] or 0))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="200,000 events, 1,000 keys")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--wait-idle", type=float, default=120)
    a = ap.parse_args(argv)
    events, keys = (200_000, 1_000) if a.quick else (2_000_000, 10_000)
    path = generate(events, keys, 10 if a.quick else 20)
    import panes

    spark = start_spark()
    src = spark.read.schema(schema()).parquet(str(path))
    figures, details = {}, {"command": command_line(), "events": events, "keys": keys}
    for name, (window, plain) in CASES.items():
        spec = dict(SPEC, window=window)
        res = panes.window(src, spec)
        runs = {"plain": [], "panes": []}
        checks = {}
        summary(plain(src)), summary(res.panes)  # warm-up
        wait_idle(a.wait_idle)
        for _ in range(a.repeat):
            for side, make in (("plain", lambda: plain(src)), ("panes", lambda: panes.window(src, spec).panes)):
                t0 = time.perf_counter()
                checks[side] = summary(make())
                runs[side].append(time.perf_counter() - t0)
        med = {k: statistics.median(v) for k, v in runs.items()}
        ok = checks["plain"] == checks["panes"]
        log(f"{name}: plain {med['plain']:.2f} s, panes {med['panes']:.2f} s, ratio "
            f"{med['plain'] / med['panes']:.2f}; rows/n/total plain {checks['plain']} panes {checks['panes']} "
            f"{'OK' if ok else 'MISMATCH'}; plan: {res.plan}")
        figures[name] = {"events_per_s": round(events / med["panes"], 1),
                         "baseline_events_per_s": round(events / med["plain"], 1),
                         "ratio": round(med["plain"] / med["panes"], 4)}
        details[name] = {"seconds": runs, "check_plain": checks["plain"], "check_panes": checks["panes"],
                         "same": ok, "plan": res.plan}
    merge_figures(HERE / "results" / "latest.json", figures)
    (HERE / "results" / "windows_details.json").write_text(json.dumps(details, indent=1))
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
