"""KIP-450 sliding windows vs hopping windows with a 1 ms hop, in the pure core engine (no Spark).

    .venv/bin/python benchmarks/bench_sliding.py [--events N] [--quick] [--diffs 100,1000,10000]

Before KIP-450, a Kafka Streams user who wanted "the aggregate of the records within D of each
other" used hopping windows of size D + 1 ms advancing by 1 ms: they cover the same inclusive spans
[t - D, t] (a record is in D + 1 of them). Record-defined sliding windows (``{sliding:
{time_difference: D}}``) create only the windows whose record set is distinct: at most two per
record, whatever D.

For each D in --diffs: N events (default 20,000; --quick 5,000) over 100 keys with uniformly random
event times over N * 10 ms (seed 42), sorted by event time, cut into 20 consecutive batches, each
batch shuffled; each batch goes through ``Engine.step`` (watermark max_delay = one batch's event-time
span, so nothing is late: checked), then ``step(end=True)`` closes every window. The same batches
go to the sliding pipeline and to the hopping one; the time of each run is the wall clock of all
its steps (including the final one that emits the still-open windows); emitted windows are the
panes (default trigger: one per window).

A hopping run that would take longer than --limit seconds (120) is capped. Its time is predicted
from the exact number of hopping windows the input gives (by formula: per key, the integer points of
the union of the intervals [t - D, t]) times the seconds per window of the previous hopping run (of
an untimed pilot on 2 % of the keys for the first D), times a safety factor 1.5. When that exceeds
the limit, the hopping run gets only the events of the first k keys (k sized for half the limit):
the same per-key event density and the same 20 batches, so its per-record time is comparable. As a
last resort a run stops taking batches (then ends) when the rest would not fit in the limit. A capped
hopping figure is per record (records fed / seconds), and the sliding pipeline also runs on the same
capped input to compare the emitted windows there; the windows ratio on the full input uses the
formula (checked against every hopping run's emitted windows).

A correctness check (before the timings, small input with ties and random arrival order): every
sliding pane's count and sum equal the brute-force count and sum of the key's records within its
inclusive bounds, no window is emitted twice, and the windows are exactly KIP-450's (the left window
of every record and every non-empty right window).

Writes sliding_vs_hopping_<D> entries into benchmarks/results/latest.json (events_per_s = sliding,
baseline_events_per_s = hopping, ratio = sliding / hopping: above 1, sliding is faster; other keys of
the file are kept) and everything measured into benchmarks/results/sliding_details.json.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import gc
import json
import os
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

import panes  # noqa: E402
from common import command_line, log, machine, merge_figures, other_spark_jvms, wait_idle  # noqa: E402
from panes.core.engine import TS, Engine  # noqa: E402

SEED = 42
BASE_MS = 1_704_067_200_000  # 2024-01-01T00:00:00Z
AGGS = {"n": {"count": "*"}, "total": {"sum": "amount"}}


def dur_label(ms: int) -> str:
    if ms % 1000 == 0:
        return f"{ms // 1000}s"
    return f"{ms}ms"


# -- data ---------------------------------------------------------------------------------------------


def make_events(n: int, keys: int, seed: int = SEED, span_ms: int | None = None):
    """n events over ``keys`` keys with uniformly random event times over n * 10 ms (or span_ms),
    sorted by event time: (ts int64 ms, key index, amount)."""
    rng = np.random.default_rng(seed)
    span = span_ms if span_ms is not None else n * 10
    ts = BASE_MS + rng.integers(0, span, size=n, dtype=np.int64)
    key = rng.integers(0, keys, size=n, dtype=np.int64)
    amount = rng.integers(1, 1001, size=n, dtype=np.int64)
    order = np.argsort(ts, kind="stable")
    return ts[order], key[order], amount[order], rng


def key_labels(keys: int) -> np.ndarray:
    width = len(str(keys - 1))
    return np.array([f"k{i:0{width}d}" for i in range(keys)], dtype=object)


def key_subset(batches: list[pd.DataFrame], labels: np.ndarray, k: int) -> list[pd.DataFrame]:
    """The same batches restricted to the events of the first k keys."""
    keep = set(labels[:k].tolist())
    return [b[b["key"].isin(keep)].reset_index(drop=True) for b in batches]


def make_batches(ts, key, amount, keys: int, batches: int, rng) -> list[pd.DataFrame]:
    """Consecutive event-time slices, each shuffled (disorder within a batch, none across)."""
    labels = key_labels(keys)
    out = []
    for idx in np.array_split(np.arange(len(ts)), batches):
        idx = rng.permutation(idx)
        out.append(pd.DataFrame({TS: ts[idx], "key": labels[key[idx]], "amount": amount[idx]}))
    return out


def spec(window: dict, max_delay: int) -> dict:
    return {
        "event_time": "ts",
        "key": ["key"],
        "window": window,
        "watermark": {"max_delay": max_delay},
        "aggregates": AGGS,
    }


def sliding_spec(D: int, max_delay: int) -> dict:
    return spec({"sliding": {"time_difference": D}}, max_delay)


def hopping_spec(D: int, max_delay: int) -> dict:
    # windows [s, s + D + 1) every 1 ms: t is in those with t - D <= s <= t, the inclusive span [t - D, t]
    return spec({"hopping": {"size": D + 1, "hop": 1}}, max_delay)


def hopping_window_count(ts: np.ndarray, key: np.ndarray, D: int) -> int:
    """Distinct (key, start) of hopping windows (size D + 1, hop 1) holding a record: per key, the
    integer points of the union of the intervals [t - D, t]."""
    total = 0
    order = np.lexsort((ts, key))
    ks, tt = key[order], ts[order]
    for grp in np.split(np.arange(len(tt)), np.flatnonzero(np.diff(ks)) + 1):
        t = np.unique(tt[grp])
        # each point covers D + 1 starts; consecutive points share max(0, D + 1 - gap) of them
        gaps = np.diff(t)
        total += int(len(t) * (D + 1) - np.maximum(0, D + 1 - gaps).sum())
    return total


# -- runs -----------------------------------------------------------------------------------------------


def peak_rss_reset() -> None:
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM (Linux)


def peak_rss_mb() -> float | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def run(spec_: dict, batches: list[pd.DataFrame], limit: float | None = None) -> dict:
    """Feed the batches through Engine.step, then end. With ``limit``: when the whole run is
    projected to take longer than ``limit`` seconds, stop feeding batches once about 3/4 of it is
    used (then end) and report the run as capped."""
    eng = Engine(panes.pipeline(spec_))
    state = eng.new_state()
    n_panes = n_dead = 0
    n_sum = 0
    fed = records = 0
    capped = False
    batch_seconds = []
    gc.collect()
    peak_rss_reset()
    t0 = time.perf_counter()
    for b in batches:
        tb = time.perf_counter()
        res = eng.step(state, b)
        batch_seconds.append(time.perf_counter() - tb)
        n_panes += len(res.panes)
        n_sum += sum(p.values[0] for p in res.panes)
        n_dead += len(res.dead_letters)
        fed += 1
        records += len(b)
        if limit is not None and fed < len(batches):
            elapsed = time.perf_counter() - t0
            last = batch_seconds[-1]
            projected = elapsed + last * (len(batches) - fed) * 1.1 + last
            if projected > limit and elapsed + 2 * last > 0.75 * limit:
                capped = True
                break
    tb = time.perf_counter()
    res = eng.step(state, None, end=True)
    end_seconds = time.perf_counter() - tb
    n_panes += len(res.panes)
    n_sum += sum(p.values[0] for p in res.panes)
    n_dead += len(res.dead_letters)
    seconds = time.perf_counter() - t0
    out = {
        "seconds": seconds,
        "records": records,
        "batches_fed": fed,
        "batches": len(batches),
        "capped": capped,
        "windows": n_panes,
        "sum_of_counts": int(n_sum),
        "dead_letters": n_dead,
        "us_per_record": seconds / records * 1e6,
        "events_per_s": records / seconds,
        "end_step_seconds": end_seconds,
        "batch_seconds": [round(s, 3) for s in batch_seconds],
        "peak_rss_mb": peak_rss_mb(),
        "metrics": dict(state.metrics),
    }
    del state, eng, res
    gc.collect()
    return out


def report_run(kind: str, r: dict) -> None:
    cap = ""
    if r["capped"]:
        cap = f", CAPPED: {r.get('keys_fed', '?')} keys, {r['batches_fed']}/{r['batches']} batches"
    log(
        f"  {kind}: {r['seconds']:.2f} s for {r['records']:,} records{cap}, {r['us_per_record']:,.1f} us/record, "
        f"{r['windows']:,} windows, {r['dead_letters']} dead letters, peak RSS {r['peak_rss_mb'] or 0:,.0f} MB"
    )


# -- correctness ------------------------------------------------------------------------------------------


def check_sliding(D: int, n: int = 400, keys: int = 4, seed: int = 7) -> dict:
    """Every sliding pane's count and sum equal the brute-force ones over its inclusive bounds, no
    window twice, and the windows are KIP-450's. Small input with duplicate timestamps, arriving in
    random order in uneven batches, nothing late."""
    rng = np.random.default_rng(seed)
    span = max(4 * D, 2_000)
    ts = BASE_MS + rng.integers(0, span, size=n, dtype=np.int64)
    dup = rng.choice(n, size=n // 10, replace=False)
    ts[dup] = ts[rng.choice(n, size=len(dup))]  # ties
    key = rng.integers(0, keys, size=n, dtype=np.int64)
    amount = rng.integers(1, 1001, size=n, dtype=np.int64)
    labels = np.array([f"k{i}" for i in range(keys)], dtype=object)
    perm = rng.permutation(n)
    cuts = np.sort(rng.choice(np.arange(1, n), size=6, replace=False))
    eng = Engine(panes.pipeline(sliding_spec(D, 10 * span)))  # max delay beyond the span: nothing late
    state = eng.new_state()
    got, dead = [], 0
    for idx in np.split(perm, cuts):
        res = eng.step(state, pd.DataFrame({TS: ts[idx], "key": labels[key[idx]], "amount": amount[idx]}))
        got += res.panes
        dead += len(res.dead_letters)
    res = eng.step(state, None, end=True)
    got += res.panes
    dead += len(res.dead_letters)

    problems: list[str] = []
    seen = set()
    for p in got:
        k = int(p.key[0][1:])
        w = (k, p.window_start, p.window_end)
        if w in seen:
            problems.append(f"window emitted twice: {w}")
        seen.add(w)
        inside = (key == k) & (ts >= p.window_start) & (ts <= p.window_end)  # inclusive both ends
        if p.values[0] != int(inside.sum()) or p.values[1] != int(amount[inside].sum()):
            problems.append(f"{w}: count/sum {p.values} != brute force {int(inside.sum())}/{int(amount[inside].sum())}")
        if p.window_end - p.window_start != D:
            problems.append(f"{w}: not D = {D} wide")
    # the windows KIP-450 defines
    expected = set()
    for k in range(keys):
        tk = np.unique(ts[key == k])
        for t in tk.tolist():
            expected.add((k, t - D, t))
            if ((tk >= t + 1) & (tk <= t + 1 + D)).any():
                expected.add((k, t + 1, t + 1 + D))
    if seen != expected:
        problems.append(f"windows differ from KIP-450's: {len(seen - expected)} extra, {len(expected - seen)} missing")
    if dead:
        problems.append(f"{dead} dead letters")
    return {"D_ms": D, "records": n, "windows": len(got), "ok": not problems, "problems": problems[:10]}


# -- main -----------------------------------------------------------------------------------------------


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=None, help="events (default 20,000; --quick 5,000)")
    ap.add_argument("--keys", type=int, default=100, help="distinct keys (default 100)")
    ap.add_argument("--batches", type=int, default=20, help="engine steps before the end (default 20)")
    ap.add_argument("--diffs", default="100,1000,10000", help="time differences D in ms (default 100,1000,10000)")
    ap.add_argument("--quick", action="store_true", help="5,000 events")
    ap.add_argument(
        "--limit",
        type=float,
        default=120,
        help="a hopping run projected to take longer than this many seconds is capped (default 120)",
    )
    ap.add_argument(
        "--wait-idle",
        type=float,
        default=120,
        help="before each timed run, wait up to this many seconds for Spark JVMs on the machine to end",
    )
    ap.add_argument("--no-check", action="store_true", help="skip the correctness check")
    ap.add_argument(
        "--out",
        default=str(HERE / "results" / "latest.json"),
        help="JSON file the figures are merged into (default benchmarks/results/latest.json)",
    )
    ap.add_argument(
        "--details", default=None, help="where everything measured goes (default: sliding_details.json next to --out)"
    )
    a = ap.parse_args(argv)
    n = a.events or (5_000 if a.quick else 20_000)
    diffs = [int(x) for x in a.diffs.split(",")]
    started = dt.datetime.now(dt.UTC)
    span = n * 10
    max_delay = -(-span // a.batches)  # one batch's event-time span
    log(
        f"sliding vs hopping (core engine): {n:,} events, {a.keys} keys, event times over {span:,} ms, "
        f"{a.batches} batches, max_delay {max_delay:,} ms, D in {diffs} ms"
    )

    errors: dict[str, str] = {}
    checks = []
    if not a.no_check:
        for D in diffs:
            try:
                c = check_sliding(D)
            except Exception:
                errors[f"check_{D}"] = traceback.format_exc()
                log(f"check D={D} FAILED:\n{errors[f'check_{D}']}")
                continue
            checks.append(c)
            log(
                f"check D={dur_label(D)}: {c['windows']} sliding windows over {c['records']} records -> "
                f"{'OK' if c['ok'] else 'FAILED: ' + '; '.join(c['problems'])}"
            )

    ts, key, amount, rng = make_events(n, a.keys)
    batches = make_batches(ts, key, amount, a.keys, a.batches, rng)
    labels = key_labels(a.keys)
    bounds = np.cumsum([len(b) for b in batches])

    results = []
    s: dict | None  # a run of each side (None in a row where it failed)
    h: dict | None
    cost_per_window = None  # seconds per hopping window, from the last hopping run (or a pilot)
    for D in diffs:
        row: dict = {"D_ms": D, "hopping_windows_formula_full": hopping_window_count(ts, key, D)}
        log(f"D={dur_label(D)}: sliding ...")
        others = wait_idle(a.wait_idle)
        load = os.getloadavg()[0]
        try:
            s = run(sliding_spec(D, max_delay), batches)
            s.update(loadavg_1m_before=round(load, 2), other_spark_jvms=len(set(others) | set(other_spark_jvms())))
            row["sliding"] = s
            report_run("sliding", s)
        except Exception:
            errors[f"sliding_{D}"] = traceback.format_exc()
            log(f"sliding D={D} FAILED:\n{errors[f'sliding_{D}']}")

        # hopping: the whole input if it is predicted to fit in --limit, else the events of the first
        # k keys (same per-key density and batches: the per-record cost is comparable)
        try:
            if cost_per_window is None:
                pk = max(1, a.keys // 50)
                log(f"D={dur_label(D)}: hopping pilot on {pk} key(s) (untimed, to predict the time) ...")
                wait_idle(a.wait_idle)
                pilot = run(hopping_spec(D, max_delay), key_subset(batches, labels, pk))
                cost_per_window = pilot["seconds"] / max(1, pilot["windows"])
                row["hopping_pilot"] = pilot
            predicted = row["hopping_windows_formula_full"] * cost_per_window * 1.5
            row["hopping_predicted_s"] = predicted
            hop_keys = a.keys
            if predicted > a.limit:
                hop_keys = max(1, min(a.keys, int(a.keys * 0.5 * a.limit / predicted)))
            hop_batches = batches if hop_keys == a.keys else key_subset(batches, labels, hop_keys)
            log(
                f"D={dur_label(D)}: hopping (predicted {predicted:,.0f} s for the whole input"
                + (f"; CAPPED to the events of the first {hop_keys} of {a.keys} keys" if hop_keys < a.keys else "")
                + ") ..."
            )
            others = wait_idle(a.wait_idle)
            load = os.getloadavg()[0]
            h = run(hopping_spec(D, max_delay), hop_batches, limit=a.limit)
            h.update(
                loadavg_1m_before=round(load, 2),
                other_spark_jvms=len(set(others) | set(other_spark_jvms())),
                keys_fed=hop_keys,
            )
            h["capped"] = h["capped"] or hop_keys < a.keys
            cost_per_window = h["seconds"] / max(1, h["windows"])
            row["hopping"] = h
            report_run("hopping", h)
            # the events the hopping run got: the first keys_fed keys, in the first batches_fed batches
            fed_n = int(bounds[h["batches_fed"] - 1])
            sel = key[:fed_n] < hop_keys
            row["hopping_windows_formula_fed"] = hopping_window_count(ts[:fed_n][sel], key[:fed_n][sel], D)
            if h["windows"] != row["hopping_windows_formula_fed"]:
                errors[f"hopping_windows_{D}"] = (
                    f"hopping emitted {h['windows']:,} windows, the formula "
                    f"gives {row['hopping_windows_formula_fed']:,}"
                )
                log(f"  MISMATCH: {errors[f'hopping_windows_{D}']}")
            if h["capped"]:
                log(f"D={dur_label(D)}: sliding on the hopping run's input (for the windows ratio) ...")
                wait_idle(a.wait_idle)
                same = key_subset(hop_batches[: h["batches_fed"]], labels, hop_keys)
                row["sliding_same_input"] = run(sliding_spec(D, max_delay), same)
                report_run("sliding", row["sliding_same_input"])
        except Exception:
            errors[f"hopping_{D}"] = traceback.format_exc()
            log(f"hopping D={D} FAILED:\n{errors[f'hopping_{D}']}")
        results.append(row)

    # -- report ------------------------------------------------------------------------------------------
    figures = {}
    print()
    print(
        f"== KIP-450 sliding vs hopping (size D + 1 ms, hop 1 ms), core engine, {n:,} events, "
        f"{a.keys} keys, {a.batches} batches =="
    )
    hdr = (
        f"{'D':>6} | {'sliding s':>9} {'us/rec':>8} {'windows':>9} | {'hopping s':>9} {'records':>8} "
        f"{'us/rec':>9} {'windows':>11} | {'time hop/sl':>11} {'windows hop/sl':>14} {'(full input)':>12}"
    )
    print(hdr)
    print("-" * len(hdr))
    base = None
    for row in results:
        D, s, h = row["D_ms"], row.get("sliding"), row.get("hopping")
        if not s or not h:
            print(f"{dur_label(D):>6} | (failed)")
            continue
        same = row.get("sliding_same_input", s)
        time_ratio = h["us_per_record"] / s["us_per_record"]
        win_ratio = h["windows"] / same["windows"]
        row["time_ratio_hopping_over_sliding_per_record"] = time_ratio
        row["windows_ratio_hopping_over_sliding"] = win_ratio
        row["windows_ratio_full_input_formula"] = row["hopping_windows_formula_full"] / s["windows"]
        print(
            f"{dur_label(D):>6} | {s['seconds']:>9.2f} {s['us_per_record']:>8.1f} {s['windows']:>9,} | "
            f"{h['seconds']:>9.2f} {h['records']:>8,} {h['us_per_record']:>9.1f} {h['windows']:>11,} | "
            f"{time_ratio:>11.1f} {win_ratio:>14.1f} {row['windows_ratio_full_input_formula']:>12.1f}"
            + ("  (hopping CAPPED)" if h["capped"] else "")
        )
        figures[f"sliding_vs_hopping_{dur_label(D)}"] = {
            "events_per_s": round(s["events_per_s"], 1),
            "baseline_events_per_s": round(h["events_per_s"], 1),
            "ratio": round(s["events_per_s"] / h["events_per_s"], 4),
        }
        if base is None:
            base = row
    for row in results:
        h = row.get("hopping")
        if h and h["capped"]:
            same = row["sliding_same_input"]
            what = []
            if h.get("keys_fed", a.keys) < a.keys:
                what.append(f"the events of the first {h['keys_fed']} of {a.keys} keys")
            if h["batches_fed"] < h["batches"]:
                what.append(f"the first {h['batches_fed']} of {h['batches']} batches")
            print(
                f"note: hopping at D={dur_label(row['D_ms'])} was predicted to take "
                f"{row.get('hopping_predicted_s', 0):,.0f} s (> {a.limit:.0f} s) on the whole input: it got only "
                f"{' and '.join(what)} ({h['records']:,} events; same per-key density and batches), and its "
                f"time is compared per record. Windows on that input: hopping {h['windows']:,} / sliding "
                f"{same['windows']:,}; on the full input (hopping by formula): "
                f"{row['hopping_windows_formula_full']:,} / {row['sliding']['windows']:,} = "
                f"{row['windows_ratio_full_input_formula']:.0f}x"
            )
    if base is not None and len(results) > 1:
        print("growth with D (per-record time relative to the smallest D):")
        for row in results:
            s, h = row.get("sliding"), row.get("hopping")
            if not s or not h:
                continue
            f_d = row["D_ms"] / base["D_ms"]
            f_s = s["us_per_record"] / base["sliding"]["us_per_record"]
            f_h = h["us_per_record"] / base["hopping"]["us_per_record"]
            row["growth_vs_smallest_D"] = {"D": f_d, "sliding": f_s, "hopping": f_h}
            print(
                f"  D x{f_d:>5.0f}: sliding us/record x{f_s:.2f}, hopping us/record x{f_h:.1f} "
                f"(windows per record: sliding {s['windows'] / s['records']:.2f}, "
                f"hopping {h['windows'] / h['records']:.0f})"
            )
    if checks:
        print(
            "correctness (sliding counts and sums = brute force over inclusive bounds, windows = KIP-450's): "
            + ", ".join(f"D={dur_label(c['D_ms'])} {'OK' if c['ok'] else 'FAILED'}" for c in checks)
        )
    dead = sum(row[k]["dead_letters"] for row in results for k in ("sliding", "hopping") if k in row)
    print(f"dead letters in the timed runs: {dead} (should be 0)")
    if errors:
        print(f"ERRORS in: {', '.join(errors)}")

    out = Path(a.out)
    if figures:
        merge_figures(out, figures)
    details_path = Path(a.details) if a.details else out.with_name("sliding_details.json")
    details = {
        "command": command_line(),
        "started_utc": started.isoformat(timespec="seconds"),
        "params": {
            "events": n,
            "keys": a.keys,
            "batches": a.batches,
            "span_ms": span,
            "max_delay_ms": max_delay,
            "diffs_ms": diffs,
            "limit_s": a.limit,
            "seed": SEED,
        },
        "machine": machine(),
        "checks": checks,
        "results": results,
        "figures": figures,
        "errors": errors,
    }
    details_path.parent.mkdir(parents=True, exist_ok=True)
    details_path.write_text(json.dumps(details, indent=2, default=str) + "\n")
    log(f"merged {len(figures)} figures into {out} and wrote {details_path.name}")
    bad_check = any(not c["ok"] for c in checks)
    return 1 if errors or bad_check or dead else 0


if __name__ == "__main__":
    sys.exit(main())
