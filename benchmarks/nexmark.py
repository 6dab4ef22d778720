"""Nexmark benchmark (bid stream only): panes vs plain PySpark, side by side in one run.

    .venv/bin/python benchmarks/nexmark.py [--bids N] [--quick] [--repeat R]

Data: our own numpy generator of the Nexmark *bid* stream (auction, bidder, price, channel,
dateTime) following /work/shared/nexmark/NEXMARK.md's generator rules: events numbered 0, 1, ...,
kind by id mod 50 (4-49 are bids; persons and auctions are not written, only counted for the ids),
event time base + i * 100 µs truncated to ms (10,000 events/s), hot auction with probability 1/2
(first auction of the current block of 100), hot bidder with probability 3/4 (second person of the
current block of 100), else a random active id (last 100 auctions / last 1,000 persons, plus 10
from the future), prices round(10^(6u) * 100), half the bids on four hot channels, the rest on
channel-k (k < 10,000). Written as 10 parquet part files contiguous in event time
(timestamp[ms, UTC]) under benchmarks/data/nexmark-<N>/ and reused when present.
Default 1,000,000 bids (1,086,957 events, 108.7 s of event time), --quick 200,000.

Measured (throughput = bids / wall-clock seconds of the query):
  batch  (spark.read.parquet -> ... -> write.format("noop")):
    q11        session 10 s per bidder, count            vs groupBy(bidder, session_window).count()
    q7 stage 1 tumbling 10 s, max(price)                  vs groupBy(window(10 s)).agg(max(price))
    q5 stage 1 hopping 10 s / 2 s per auction, count      vs groupBy(auction, window(10 s, 2 s)).count()
  stream (readStream parquet, maxFilesPerTrigger -> ~5 micro-batches, trigger availableNow):
    q7 stage 1 panes (watermark max_delay 4 s) vs plain withWatermark('dateTime', '4 seconds')
    append; both count emitted rows. availableNow emits no final watermark: the last windows stay
    open on both sides.
Not measured: q5's and q7's second stages (max per window joined back), q8, q12.

Merges nexmark_q11_batch, nexmark_q7_batch, nexmark_q5_batch, nexmark_q7_stream into
benchmarks/results/latest.json (bench.merge_figures); details in results/nexmark_details.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

import numpy as np  # noqa: E402

from bench import command_line, start_spark, log, merge_figures, other_spark_jvms, wait_idle, machine  # noqa: E402

SEED = 42
PARTS = 10
RATE = 10_000                       # events per second of event time
BASE_MS = 1_704_067_200_000         # 2024-01-01T00:00:00Z (aligned to 10 s)
FIRST_PERSON_ID = 1000
FIRST_AUCTION_ID = 1000
HOT_CHANNELS = ["Google", "Facebook", "Baidu", "Apple"]
MTIME_BASE = 1_600_000_000


# -- generator -----------------------------------------------------------------------------------------


def data_dir(bids: int) -> Path:
    return HERE / "data" / f"nexmark-{bids}"


def gen_part(lo: int, hi: int, part: int) -> dict:
    """Bids among events [lo, hi), vectorised over event numbers."""
    rng = np.random.Generator(np.random.PCG64([SEED, part]))
    ev = np.arange(lo, hi, dtype=np.int64)
    ev = ev[(ev % 50) >= 4]
    n = len(ev)
    epoch, off = ev // 50, ev % 50
    # last 0-based person / auction id created at or before this event (off >= 4: all of the
    # epoch's person (residue 0) and auctions (1-3) exist)
    last_person = epoch                       # persons 0..epoch exist
    last_auction = epoch * 3 + np.minimum(off, 3) - 1
    # auction: hot (first of current block of 100) with p 1/2, else random among last 100 (+10)
    hot_a = rng.random(n) < 0.5
    a_lo = np.maximum(0, last_auction - 100 + 1)
    rand_a = a_lo + (rng.random(n) * (last_auction + 10 - a_lo + 1)).astype(np.int64)
    auction = np.where(hot_a, (last_auction // 100) * 100, rand_a) + FIRST_AUCTION_ID
    # bidder: hot (second person of current block of 100) with p 3/4, else among last 1000 (+10)
    hot_b = rng.random(n) < 0.75
    p_lo = np.maximum(0, last_person - 1000 + 1)
    rand_p = p_lo + (rng.random(n) * (last_person + 10 - p_lo + 1)).astype(np.int64)
    bidder = np.where(hot_b, (last_person // 100) * 100 + 1, rand_p) + FIRST_PERSON_ID
    price = np.rint(10.0 ** (6.0 * rng.random(n)) * 100.0).astype(np.int64)
    hot_c = rng.random(n) < 0.5
    chan = np.where(hot_c, rng.integers(0, 4, n), 4 + rng.integers(0, 10_000, n))
    # event time: base + i * (1e6 / rate) µs, truncated to ms
    ts_ms = BASE_MS + (ev * 1_000_000 // RATE) // 1000
    return {"auction": auction, "bidder": bidder, "price": price, "chan": chan, "ts_ms": ts_ms}


def generate(bids: int) -> tuple[Path, dict]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = data_dir(bids)
    meta_f = out / "_meta.json"
    if meta_f.exists():
        log(f"data: reusing {out.relative_to(ROOT)}")
    else:
        t0 = time.time()
        events = -(-bids * 50 // 46)  # ceil: the events holding ~N bids (NEXMARK.md's sizes)
        labels = pa.array(HOT_CHANNELS + [f"channel-{k}" for k in range(10_000)], type=pa.string())
        tmp = out.with_name(out.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        bounds = np.linspace(0, events, PARTS + 1).astype(np.int64)
        total, price_sum, tmin, tmax = 0, 0, None, None
        for i in range(PARTS):
            g = gen_part(int(bounds[i]), int(bounds[i + 1]), i)
            table = pa.table({
                "auction": pa.array(g["auction"], type=pa.int64()),
                "bidder": pa.array(g["bidder"], type=pa.int64()),
                "price": pa.array(g["price"], type=pa.int64()),
                "channel": labels.take(pa.array(g["chan"])),
                "dateTime": pa.array(g["ts_ms"], type=pa.timestamp("ms", tz="UTC")),
            })
            pq.write_table(table, tmp / f"part-{i:05d}.parquet")
            total += len(g["price"])
            price_sum += int(g["price"].sum())
            tmin = int(g["ts_ms"][0]) if tmin is None else tmin
            tmax = int(g["ts_ms"][-1])
        (tmp / "_meta.json").write_text(json.dumps({
            "requested_bids": bids, "events": int(events), "bids": total, "parts": PARTS,
            "seed": SEED, "rate": RATE, "ts_min_ms": tmin, "ts_max_ms": tmax,
            "event_time_s": (tmax - tmin) / 1000, "price_sum": price_sum,
        }, indent=1))
        shutil.rmtree(out, ignore_errors=True)
        tmp.rename(out)
        log(f"data: wrote {total:,} bids ({events:,} events) in {PARTS} files to "
            f"{out.relative_to(ROOT)} in {time.time() - t0:.1f} s")
    for i, f in enumerate(sorted(out.glob("part-*.parquet"))):
        os.utime(f, (MTIME_BASE + i, MTIME_BASE + i))
    return out, json.loads(meta_f.read_text())


# -- queries ---------------------------------------------------------------------------------------------

Q11 = {"event_time": "dateTime", "key": "bidder", "window": {"session": {"gap": "10 seconds"}},
       "aggregates": {"bid_count": {"count": "*"}}}
Q7 = {"event_time": "dateTime", "window": {"tumbling": {"size": "10 seconds"}},
      "aggregates": {"maxprice": {"max": "price"}}}
Q5 = {"event_time": "dateTime", "key": "auction",
      "window": {"hopping": {"size": "10 seconds", "hop": "2 seconds"}},
      "aggregates": {"num": {"count": "*"}}}
Q7_STREAM = dict(Q7, watermark={"max_delay": "4 seconds"})


def schema():
    from pyspark.sql import types as T

    return T.StructType([
        T.StructField("auction", T.LongType()), T.StructField("bidder", T.LongType()),
        T.StructField("price", T.LongType()), T.StructField("channel", T.StringType()),
        T.StructField("dateTime", T.TimestampType()),
    ])


def plain_q11(df):
    from pyspark.sql import functions as F
    w = F.session_window("dateTime", "10 seconds")
    return (df.groupBy("bidder", w.alias("w")).agg(F.count(F.lit(1)).alias("bid_count"))
            .select("bidder", F.col("w.start").alias("window_start"), F.col("w.end").alias("window_end"),
                    "bid_count"))


def plain_q7(df):
    from pyspark.sql import functions as F
    return (df.groupBy(F.window("dateTime", "10 seconds").alias("w")).agg(F.max("price").alias("maxprice"))
            .select(F.col("w.start").alias("window_start"), F.col("w.end").alias("window_end"), "maxprice"))


def plain_q5(df):
    from pyspark.sql import functions as F
    return (df.groupBy("auction", F.window("dateTime", "10 seconds", "2 seconds").alias("w"))
            .agg(F.count(F.lit(1)).alias("num"))
            .select("auction", F.col("w.start").alias("window_start"), F.col("w.end").alias("window_end"),
                    "num"))


QUERIES = {  # name: (panes spec, plain builder, compared columns, count column)
    "q11": (Q11, plain_q11, ["bidder", "window_start", "window_end", "bid_count"], "bid_count"),
    "q7": (Q7, plain_q7, ["window_start", "window_end", "maxprice"], "maxprice"),
    "q5": (Q5, plain_q5, ["auction", "window_start", "window_end", "num"], "num"),
}


def timed_noop(df_fn) -> float:
    t0 = time.perf_counter()
    df_fn().write.format("noop").mode("overwrite").save()
    return time.perf_counter() - t0


def compare(spark, path, name) -> dict:
    """Untimed: rows and column total on both sides, and rows present on one side only."""
    from pyspark.sql import functions as F

    import panes

    spec, plain_fn, cols, total_col = QUERIES[name]
    src = spark.read.schema(schema()).parquet(str(path))
    a = plain_fn(src).select(*cols).cache()
    b = panes.window(src, spec).panes.select(*cols).cache()
    try:
        def summ(df):
            r = df.agg(F.count(F.lit(1)).alias("rows"), F.sum(total_col).alias("total")).collect()[0]
            return {"rows": int(r["rows"]), "total": int(r["total"] or 0)}
        res = {"plain": summ(a), "panes": summ(b),
               "only_plain": a.exceptAll(b).count(), "only_panes": b.exceptAll(a).count()}
        res["ok"] = res["only_plain"] == 0 and res["only_panes"] == 0 and res["plain"] == res["panes"]
        if not res["ok"]:
            res["examples_only_plain"] = [r.asDict() for r in a.exceptAll(b).orderBy(*cols).limit(5).collect()]
            res["examples_only_panes"] = [r.asDict() for r in b.exceptAll(a).orderBy(*cols).limit(5).collect()]
            if name == "q11":
                # sessions touching exactly at the gap: next bid of the bidder exactly 10 s later
                from pyspark.sql import Window
                w = Window.partitionBy("bidder").orderBy("dateTime")
                gaps = src.select("bidder", "dateTime").withColumn(
                    "d", F.unix_millis("dateTime") - F.unix_millis(F.lag("dateTime").over(w)))
                res["bid_gaps_exactly_10s"] = gaps.filter(F.col("d") == 10_000).count()
                res["bid_gaps_over_10s"] = gaps.filter(F.col("d") > 10_000).count()
        return res
    finally:
        a.unpersist()
        b.unpersist()


def run_stream(make_query, bids) -> dict:
    t0 = time.perf_counter()
    q = make_query()
    q.awaitTermination()
    s = time.perf_counter() - t0
    prog = q.recentProgress
    exc = q.exception()
    if exc is not None:
        raise RuntimeError(f"streaming query failed: {exc}")
    return {"seconds": s, "events_per_s": bids / s, "micro_batches": len(prog),
            "data_batches": sum(1 for p in prog if p.get("numInputRows", 0) > 0),
            "input_rows": int(sum(p.get("numInputRows", 0) for p in prog))}


def stream_plain_q7(spark, path, fpt, bids) -> dict:
    from pyspark.sql import functions as F

    acc = {"rows": 0, "maxsum": 0}
    ckpt = tempfile.mkdtemp(prefix="nexmark-ckpt-")

    def each(batch, _):
        r = batch.agg(F.count(F.lit(1)).alias("n"), F.sum("maxprice").alias("s")).collect()[0]
        acc["rows"] += r["n"]
        acc["maxsum"] += int(r["s"] or 0)

    def start():
        df = (spark.readStream.schema(schema()).option("maxFilesPerTrigger", fpt).parquet(str(path))
              .withWatermark("dateTime", "4 seconds"))
        return (plain_q7(df).writeStream.outputMode("append").foreachBatch(each)
                .option("checkpointLocation", ckpt).trigger(availableNow=True).start())
    try:
        r = run_stream(start, bids)
    finally:
        shutil.rmtree(ckpt, ignore_errors=True)
    r.update(emitted_rows=acc["rows"], emitted_maxprice_sum=acc["maxsum"])
    return r


def stream_panes_q7(spark, path, fpt, bids) -> dict:
    from pyspark.sql import functions as F

    import panes

    acc = {"rows": 0, "maxsum": 0, "dead": 0}
    ckpt = tempfile.mkdtemp(prefix="nexmark-ckpt-")

    def on_panes(df, _):
        r = df.agg(F.count(F.lit(1)).alias("n"), F.sum("maxprice").alias("s")).collect()[0]
        acc["rows"] += r["n"]
        acc["maxsum"] += int(r["s"] or 0)

    def on_dead(df, _):
        acc["dead"] += df.count()

    def start():
        src = spark.readStream.schema(schema()).option("maxFilesPerTrigger", fpt).parquet(str(path))
        return panes.window(src, Q7_STREAM).write_stream(on_panes, on_dead, ckpt, availableNow=True)
    try:
        r = run_stream(start, bids)
    finally:
        shutil.rmtree(ckpt, ignore_errors=True)
    r.update(emitted_rows=acc["rows"], emitted_maxprice_sum=acc["maxsum"], dead_letters=acc["dead"])
    return r


# -- main --------------------------------------------------------------------------------------------------


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bids", type=int, default=None, help="bids (default 1,000,000; --quick 200,000)")
    ap.add_argument("--quick", action="store_true", help="200,000 bids")
    ap.add_argument("--batches", type=int, default=5, help="target micro-batches of the streaming runs")
    ap.add_argument("--wait-idle", type=float, default=120, help="wait up to this long for other Spark JVMs")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each timed measurement; the median is reported")
    ap.add_argument("--out", default=str(HERE / "results" / "latest.json"))
    a = ap.parse_args(argv)
    bids = a.bids or (200_000 if a.quick else 1_000_000)
    fpt = max(1, -(-PARTS // a.batches))
    started = dt.datetime.now(dt.timezone.utc)
    path, meta = generate(bids)
    n = meta["bids"]
    log(f"nexmark: {n:,} bids ({meta['events']:,} events, {meta['event_time_s']:.1f} s of event time), "
        f"{PARTS} files, maxFilesPerTrigger {fpt}")

    import panes

    spark = start_spark()

    def src():
        return spark.read.schema(schema()).parquet(str(path))

    # untimed warm-up: JVM, parquet reader, and the Python workers of the panes session path
    wait_idle(a.wait_idle)
    t0 = time.perf_counter()
    first = str(sorted(path.glob("part-*.parquet"))[0])
    one = spark.read.schema(schema()).parquet(first)
    for name, (spec, plain_fn, _, _) in QUERIES.items():
        plain_fn(one).write.format("noop").mode("overwrite").save()
        panes.window(one, spec).panes.write.format("noop").mode("overwrite").save()
    log(f"warm-up (untimed, every batch query on {Path(first).name}): {time.perf_counter() - t0:.1f} s")

    res: dict = {}
    errors: dict = {}
    checks: dict = {}
    for name, (spec, plain_fn, _, _) in QUERIES.items():
        for side in ("plain", "panes"):
            key = f"{name}_batch_{side}"
            try:
                times, others = [], set()
                for _ in range(a.repeat):
                    others |= set(wait_idle(a.wait_idle))
                    if side == "plain":
                        times.append(timed_noop(lambda: plain_fn(src())))
                    else:
                        times.append(timed_noop(lambda: panes.window(src(), spec).panes))
                s = sorted(times)[len(times) // 2]
                res[key] = {"seconds": s, "events_per_s": n / s, "other_spark_jvms": len(others),
                            "all_seconds": [round(t, 3) for t in times]}
                log(f"  {key}: {s:.2f} s (median of {[round(t, 2) for t in times]}), {n / s:,.0f} bids/s")
            except Exception:
                errors[key] = traceback.format_exc()
                log(f"{key} FAILED:\n{errors[key]}")
        try:
            checks[name] = compare(spark, path, name)
            c = checks[name]
            log(f"  {name} check: plain {c['plain']}, panes {c['panes']}, only-plain rows {c['only_plain']}, "
                f"only-panes rows {c['only_panes']} -> {'OK' if c['ok'] else 'MISMATCH'}")
        except Exception:
            errors[f"{name}_check"] = traceback.format_exc()
            log(f"{name} check FAILED:\n{errors[name + '_check']}")

    for side, fn in (("plain", stream_plain_q7), ("panes", stream_panes_q7)):
        key = f"q7_stream_{side}"
        try:
            runs, others = [], set()
            for _ in range(a.repeat):
                others |= set(wait_idle(a.wait_idle))
                runs.append(fn(spark, path, fpt, n))
            r = dict(sorted(runs, key=lambda x: x["seconds"])[len(runs) // 2])
            r["all_seconds"] = [round(x["seconds"], 2) for x in runs]
            r["other_spark_jvms"] = len(others)
            res[key] = r
            log(f"  {key}: {r['seconds']:.2f} s, {r['events_per_s']:,.0f} bids/s, {r['data_batches']} data "
                f"batches / {r['micro_batches']}, emitted {r['emitted_rows']} windows"
                + (f", {r['dead_letters']} dead letters" if "dead_letters" in r else ""))
        except Exception:
            errors[key] = traceback.format_exc()
            log(f"{key} FAILED:\n{errors[key]}")
    after = other_spark_jvms()
    if after:
        log(f"WARNING: other Spark JVMs running at the end: {after}")

    # -- report ---------------------------------------------------------------------------------------
    figures = {}
    print()
    print(f"== Nexmark (bids only), {n:,} bids, {meta['event_time_s']:.1f} s event time, {PARTS} files, "
          f"median of {a.repeat} ==")
    print(f"{'query':<14}{'plain s':>9}{'panes s':>9}{'plain bids/s':>14}{'panes bids/s':>14}{'ratio':>8}  check")
    for q in ("q11_batch", "q7_batch", "q5_batch", "q7_stream"):
        p, b = res.get(f"{q.split('_')[0]}_{q.split('_')[1]}_panes"), res.get(f"{q.split('_')[0]}_{q.split('_')[1]}_plain")
        if not (p and b):
            print(f"{q:<14} (missing: see errors)")
            continue
        ratio = p["events_per_s"] / b["events_per_s"]
        figures[f"nexmark_{q}"] = {"events_per_s": round(p["events_per_s"], 1),
                                   "baseline_events_per_s": round(b["events_per_s"], 1), "ratio": round(ratio, 4)}
        if q.endswith("batch"):
            c = checks.get(q.split("_")[0])
            note = "n/a" if c is None else ("OK" if c["ok"] else
                                            f"MISMATCH rows {c['plain']['rows']}/{c['panes']['rows']} "
                                            f"total {c['plain']['total']}/{c['panes']['total']}")
        else:
            same = (p["emitted_rows"], p["emitted_maxprice_sum"]) == (b["emitted_rows"], b["emitted_maxprice_sum"])
            note = (f"emitted {b['emitted_rows']}/{p['emitted_rows']} windows "
                    f"({'same' if same else 'DIFFERENT'}), {p['data_batches']} batches")
        print(f"{q:<14}{b['seconds']:>9.2f}{p['seconds']:>9.2f}{b['events_per_s']:>14,.0f}"
              f"{p['events_per_s']:>14,.0f}{ratio:>8.3f}  {note}")
    for q, c in checks.items():
        if not c["ok"]:
            print(f"{q} mismatch detail: {json.dumps(c, default=str)}")
    print("not measured: q5 and q7 second stages (max per window joined back), q8, q12")
    if errors:
        print(f"ERRORS in: {', '.join(errors)} (tracebacks above)")

    out = Path(a.out)
    merge_figures(out, figures)
    details = {
        "command": command_line(), "started_utc": started.isoformat(timespec="seconds"),
        "data": meta, "path": str(path.relative_to(ROOT)), "max_files_per_trigger": fpt,
        "spark": {"version": spark.version, "master": spark.sparkContext.master}, "machine": machine(),
        "results": res, "checks": checks, "figures": figures, "errors": errors,
    }
    (out.parent / f"nexmark_details_{n}.json").write_text(json.dumps(details, indent=2, default=str) + "\n")
    log(f"merged {list(figures)} into {out}")
    spark.stop()
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
