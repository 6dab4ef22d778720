"""Cost of early firings and of retracting mode on Spark streaming, against the default trigger.

    .venv/bin/python benchmarks/bench_triggers.py [--events N] [--keys K] [--files F] [--quick]

The data, the source and the plain-Spark baseline are bench.py's (imported from it): N events over
one hour of event time (default 2,000,000, 10,000 keys, 20 parquet files; --quick 200,000 / 1,000 /
10), read by a file source with maxFilesPerTrigger = ceil(F / 10), trigger availableNow, 1-minute
tumbling windows per key, count(*) and sum(amount). In one SparkSession, one after the other:

  a. plain Spark: groupBy(key, window(ts, '1 minute')).agg(count, sum), append mode (the baseline;
     run first and again last, the faster of the two is the baseline: see --baseline-runs)
  b. panes, default trigger (one ON_TIME pane per window)                     (bench.py's "b")
  c. panes, trigger {after_watermark: {early: {count: 100}, late: {count: 1}}}, accumulating
  d. the same trigger, accumulation: retracting
  e. panes, {after_watermark: {early: {count: 1}, late: {count: 1}}}, accumulating
  f. the same as e, retracting

Count-based early triggers need no processing time, so panes adds no heartbeat source and the query
runs with availableNow. With this data a 1-minute window of a key gets about N / (60 K) events
(3.3 by default), so {count: 100} (c, d) never fires early: they measure what the trigger machinery
and the retracting bookkeeping cost when nothing fires early. {count: 1} (e, f) fires an EARLY pane
in every micro-batch in which a window gets data (triggers are evaluated once per micro-batch, after
it), then the ON_TIME pane: about two panes per window, and in retracting mode a retraction row in
between.

Every panes micro-batch runs one action (rows grouped by kind, timing and retraction). Reported per
measurement: seconds, events/s, ratio to the plain baseline and to panes default, emitted rows (panes
including retraction rows) by timing. Checks: each panes run's ON_TIME panes are the windows plain
Spark emitted, with the same sum of `total`; no dead letters.

Merges into benchmarks/results/latest.json (other keys are kept): tumbling_<K>_keys_stream (b vs a,
as bench.py), tumbling_<K>_keys_stream_early_firings (c vs a), tumbling_<K>_keys_stream_retracting
(d vs a), and the ..._early_firings_count1 / ..._retracting_count1 variants (e, f vs a). Everything
measured goes to benchmarks/results/triggers_details.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import shutil
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

from bench import (SPEC, command_line, start_spark, generate, human, log, machine, measure_plain_stream, merge_figures,  # noqa: E402
                   other_spark_jvms, run_query, stream_source, wait_idle)


def trigger_spec(early_count: int | None, accumulation: str = "accumulating") -> dict:
    spec = dict(SPEC)
    if early_count is not None:
        spec["trigger"] = {"after_watermark": {"early": {"count": early_count}, "late": {"count": 1}}}
        spec["accumulation"] = accumulation
    return spec


def measure_panes(spark, path, fpt, timeout, events, spec) -> dict:
    """bench.py's panes streaming run with a given spec; the foreachBatch action also splits the
    emitted rows by timing and retraction."""
    from pyspark.sql import functions as F

    import panes

    acc = {"panes": 0, "retractions": 0, "dead_letters": 0, "by_timing": {},
           "on_time_rows": 0, "on_time_total": 0, "net_total": 0}

    def on_dead_letters(batch, batch_id):
        acc["dead_letters"] += batch.count()

    def on_panes(batch, batch_id):
        rows = (batch.groupBy("timing", "retraction")
                .agg(F.count(F.lit(1)).alias("rows"), F.sum("total").alias("total")).collect())
        for r in rows:
            total = r["total"] or 0
            if r["retraction"]:
                acc["retractions"] += r["rows"]
                acc["net_total"] -= total
                name = f"{r['timing']} retraction"
            else:
                acc["panes"] += r["rows"]
                acc["net_total"] += total
                name = r["timing"]
                if r["timing"] == "ON_TIME":
                    acc["on_time_rows"] += r["rows"]
                    acc["on_time_total"] += total
            acc["by_timing"][name] = acc["by_timing"].get(name, 0) + r["rows"]

    def writer(ckpt):
        result = panes.window(stream_source(spark, path, fpt), spec)
        acc["plan"] = result.plan
        return result.write_stream(on_panes, on_dead_letters, ckpt, availableNow=True)

    res = run_query(writer, timeout, events)
    res.update(acc)
    res["emitted_rows"] = acc["panes"] + acc["retractions"]
    return res


VARIANTS = {
    # letter: (name, description, early count, accumulation)
    "b": ("panes_default", "panes, default trigger", None, "accumulating"),
    "c": ("panes_early", "panes, early count 100 + late count 1, accumulating", 100, "accumulating"),
    "d": ("panes_retracting", "panes, early count 100 + late count 1, retracting", 100, "retracting"),
    "e": ("panes_early_count1", "panes, early count 1 + late count 1, accumulating", 1, "accumulating"),
    "f": ("panes_retracting_count1", "panes, early count 1 + late count 1, retracting", 1, "retracting"),
}
FIGURE_SUFFIX = {"b": "", "c": "_early_firings", "d": "_retracting",
                 "e": "_early_firings_count1", "f": "_retracting_count1"}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=None, help="events (default 2,000,000; --quick 200,000)")
    ap.add_argument("--keys", type=int, default=None, help="distinct keys (default 10,000; --quick 1,000)")
    ap.add_argument("--files", type=int, default=None, help="parquet files (default 20; --quick 10)")
    ap.add_argument("--quick", action="store_true", help="200,000 events, 1,000 keys, 10 files")
    ap.add_argument("--batches", type=int, default=10,
                    help="target micro-batches (maxFilesPerTrigger = ceil(files / this)), as bench.py")
    ap.add_argument("--early-count", type=int, default=100, help="early count of c and d (default 100)")
    ap.add_argument("--only", default="abcdef", help="measurements to run (default abcdef; a is the baseline)")
    ap.add_argument("--baseline-runs", type=int, default=2,
                    help="plain Spark runs: 1 = before the panes runs, 2 = also after them (default); "
                         "the fastest is the baseline")
    ap.add_argument("--timeout", type=float, default=900, help="seconds before a query is stopped (incomplete)")
    ap.add_argument("--wait-idle", type=float, default=120,
                    help="before each measurement, wait up to this many seconds for other Spark JVMs to end")
    ap.add_argument("--no-warmup", action="store_true", help="skip the untimed warm-up on the first file")
    ap.add_argument("--out", default=str(HERE / "results" / "latest.json"),
                    help="JSON file the figures are merged into (default benchmarks/results/latest.json)")
    ap.add_argument("--details", default=None,
                    help="where everything measured goes (default: triggers_details.json next to --out)")
    a = ap.parse_args(argv)
    events = a.events or (200_000 if a.quick else 2_000_000)
    keys = a.keys or (1_000 if a.quick else 10_000)
    files = a.files or (10 if a.quick else 20)
    fpt = max(1, math.ceil(files / a.batches))
    variants = dict(VARIANTS)
    for k in ("c", "d"):
        name, desc, _, accu = variants[k]
        variants[k] = (name, desc.replace("count 100", f"count {a.early_count}"), a.early_count, accu)
    letters = [k for k in "bcdef" if k in a.only]
    started = dt.datetime.now(dt.timezone.utc)
    log(f"trigger benchmark: {events:,} events, {keys:,} keys, {files} files, maxFilesPerTrigger {fpt} "
        f"(~{math.ceil(files / fpt)} micro-batches), measurements {'a' if 'a' in a.only else ''}{''.join(letters)}")

    path = generate(events, keys, files)

    spark = start_spark()

    if not a.no_warmup:
        # untimed, as bench.py: plain streaming and one panes streaming run (with a trigger and
        # retractions: the code every variant uses) on a copy of the first file
        wait_idle(a.wait_idle)
        t0 = time.perf_counter()
        head = path.with_name(path.name + "_warmup")
        first = sorted(path.glob("part-*.parquet"))[0]
        if not (head / first.name).exists():
            head.mkdir(exist_ok=True)
            shutil.copy2(first, head / first.name)
        if "a" in a.only:
            measure_plain_stream(spark, head, 1, a.timeout, 0)
        if letters:
            measure_panes(spark, head, 1, a.timeout, 0, trigger_spec(1, "retracting"))
        log(f"warm-up (untimed, on {first.name}): {time.perf_counter() - t0:.1f} s")

    order: list[tuple[str, str]] = []  # (run label, letter)
    if "a" in a.only:
        order.append(("plain_stream_1", "a"))
    order += [(variants[k][0], k) for k in letters]
    if "a" in a.only and a.baseline_runs >= 2:
        order.append(("plain_stream_2", "a"))

    res: dict[str, dict] = {}
    errors: dict[str, str] = {}
    for label, k in order:
        log(f"{label} ...")
        others = wait_idle(a.wait_idle)
        load = os.getloadavg()[0]
        try:
            if k == "a":
                r = measure_plain_stream(spark, path, fpt, a.timeout, events)
            else:
                r = measure_panes(spark, path, fpt, a.timeout, events, trigger_spec(variants[k][2], variants[k][3]))
        except Exception:
            errors[label] = traceback.format_exc()
            log(f"{label} FAILED:\n{errors[label]}")
            continue
        after = other_spark_jvms()
        if after:
            log(f"  WARNING: other Spark JVMs {after} ran during {label}: its time is skewed")
        r["other_spark_jvms"] = len(set(others) | set(after))
        r["loadavg_1m_before"] = round(load, 2)
        res[label] = r
        extra = f", {r['data_batches']} data batches / {r['micro_batches']} batches, emitted {r['emitted_rows']:,} rows"
        if k != "a":
            extra += f" ({', '.join(f'{n} {c:,}' for n, c in sorted(r['by_timing'].items()))}), {r['dead_letters']:,} dead letters"
        if not r["finished"]:
            extra += f" -- STOPPED after {a.timeout:.0f} s with {r['input_rows']:,} events read"
        log(f"  {label}: {r['seconds']:.1f} s, {r['events_per_s']:,.0f} events/s{extra}")

    # -- report -----------------------------------------------------------------------------------------
    plain_runs = [res[n] for n in ("plain_stream_1", "plain_stream_2") if n in res]
    base = max(plain_runs, key=lambda r: r["events_per_s"]) if plain_runs else None
    default = res.get(variants["b"][0])
    label = f"tumbling_{human(keys)}_keys_stream"
    figures = {}
    checks = {}
    print()
    print(f"== panes triggers and accumulation vs plain Spark, streaming: 1-minute tumbling count+sum, "
          f"{events:,} events, {keys:,} keys, {files} files, maxFilesPerTrigger {fpt} ==")
    print(f"{'measurement':<54}{'seconds':>9}{'events/s':>11}{'vs plain':>10}{'vs default':>11}{'rows out':>11}   rows by timing")
    for name, r in res.items():
        desc = {"plain_stream_1": "a. plain Spark, append (run 1)", "plain_stream_2": "a. plain Spark, append (run 2)"}.get(name)
        letter = next((k for k, v in variants.items() if v[0] == name), None)
        if letter:
            desc = f"{letter}. {variants[letter][1]}"
        vs_plain = f"{r['events_per_s'] / base['events_per_s']:.3f}" if base else "-"
        vs_def = f"{r['events_per_s'] / default['events_per_s']:.3f}" if default and letter else "-"
        timing = ", ".join(f"{n} {c:,}" for n, c in sorted(r.get("by_timing", {}).items())) if letter else ""
        if not r["finished"]:
            timing += " INCOMPLETE"
        print(f"{desc:<54}{r['seconds']:>9.1f}{r['events_per_s']:>11,.0f}{vs_plain:>10}{vs_def:>11}"
              f"{r['emitted_rows']:>11,}   {timing}")
    if base is not None:
        print(f"baseline: plain Spark run {'1' if base is plain_runs[0] else '2'} (the faster of "
              f"{len(plain_runs)}: " + ", ".join(f"{r['seconds']:.1f} s" for r in plain_runs) + ")")
    for k in letters:
        r = res.get(variants[k][0])
        if not r:
            continue
        if base is not None:
            figures[label + FIGURE_SUFFIX[k]] = {"events_per_s": round(r["events_per_s"], 1),
                                                 "baseline_events_per_s": round(base["events_per_s"], 1),
                                                 "ratio": round(r["events_per_s"] / base["events_per_s"], 4)}
            ok = (r["on_time_rows"], r["on_time_total"]) == (base["emitted_rows"], base["emitted_total"]) \
                and r["dead_letters"] == 0
            checks[variants[k][0]] = {"on_time_rows": r["on_time_rows"], "on_time_total": r["on_time_total"],
                                      "plain_rows": base["emitted_rows"], "plain_total": base["emitted_total"],
                                      "dead_letters": r["dead_letters"], "ok": ok}
            print(f"check {k}: ON_TIME panes {r['on_time_rows']:,} (sum total {r['on_time_total']:,}) vs plain windows "
                  f"{base['emitted_rows']:,} ({base['emitted_total']:,}), dead letters {r['dead_letters']} -> "
                  f"{'OK' if ok else 'MISMATCH'}")
    print("note: availableNow emits no final watermark, so the windows of the last minute never close on either "
          "side (no ON_TIME pane); early panes of those windows are emitted and counted.")
    if errors:
        print(f"ERRORS in: {', '.join(errors)} (tracebacks above)")

    out = Path(a.out)
    if figures:
        merge_figures(out, figures)
    details_path = Path(a.details) if a.details else out.with_name("triggers_details.json")
    details = {
        "command": command_line(),
        "started_utc": started.isoformat(timespec="seconds"),
        "params": {"events": events, "keys": keys, "files": files, "max_files_per_trigger": fpt,
                   "early_count": a.early_count, "data": str(path.relative_to(ROOT)),
                   "specs": {variants[k][0]: trigger_spec(variants[k][2], variants[k][3]) for k in letters}},
        "spark": {"version": spark.version, "master": spark.sparkContext.master,
                  "shuffle_partitions": spark.conf.get("spark.sql.shuffle.partitions")},
        "machine": machine(), "results": res, "figures": figures, "checks": checks, "errors": errors,
    }
    details_path.parent.mkdir(parents=True, exist_ok=True)
    details_path.write_text(json.dumps(details, indent=2, default=str) + "\n")
    log(f"merged {len(figures)} figures into {out} and wrote {details_path.name}")
    spark.stop()
    return 1 if errors or any(not c["ok"] for c in checks.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
