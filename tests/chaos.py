"""Crash safety of ``panes run``: a run killed with SIGKILL at random moments and run again gives the
panes and dead letters of an uninterrupted run, each exactly once in its file sinks.

For a plan (native or stateful), on the same input (several files, one micro-batch each, with late
and malformed records): one uninterrupted ``panes run --end-input``; then, on a fresh checkpoint,
the same command killed (its whole process group: Python, the JVM, Spark's Python workers) at a
random moment, again and again until a run ends by itself (or is run to its end after the last
kill); then on another fresh checkpoint while kills remain. The rows of the file sinks are
compared as multisets. ``make chaos`` runs it 20 times per plan (``python tests/chaos.py``); the
suite runs it a few times (tests/spark/test_crash_safety.py).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
BASE_MS = 1_628_326_800_000  # 2021-08-07T09:00:00Z
FILES = 6
RECORDS_PER_FILE = 300


def write_input(directory: Path, seed: int = 7, files: int = FILES) -> None:
    """``files`` JSON-lines files, in modification-time order; event times move forward a few
    minutes per file, out of order within it; a few records late, missing their key, or lines
    that are not JSON."""
    r = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    for f in range(files):
        lines = []
        for _ in range(RECORDS_PER_FILE):
            t = BASE_MS + f * 240_000 + r.randrange(-60_000, 120_000)
            rec = {"k": f"key{r.randrange(12)}", "t": t, "v": r.randrange(100)}
            roll = r.random()
            if roll < 0.02:
                rec["t"] = BASE_MS - 3_600_000  # late (after the first file)
            elif roll < 0.03:
                del rec["k"]
            lines.append("not json {" if roll > 0.99 else json.dumps(rec))
        path = directory / f"part-{f}.json"
        path.write_text("\n".join(lines) + "\n")
        os.utime(path, (1_600_000_000 + f, 1_600_000_000 + f))


#: Spark's setting of how often its file-source log compacts its entries (every tenth by default)
COMPACT_INTERVAL = "spark.sql.streaming.fileSource.log.compactInterval"


def spec(workdir: Path, plan: str, compact_interval: int | None = None) -> Path:
    """The chaos spec; ``compact_interval``: the file-source logs compact every that many entries,
    so that kills land near a compaction (``<n>.compact``)."""
    doc = {
        "name": f"chaos_{plan}",
        "source": {
            "format": "json",
            "path": str(workdir.parent / "input"),
            "max_files_per_trigger": 1,
            "schema": "k STRING, t LONG, v LONG",
        },
        "event_time": "t",
        "key": "k",
        "window": {"tumbling": {"size": "1 minute"}},
        "watermark": {"max_delay": "1 minute"},
        "trigger": {"after_watermark": {"early": {"count": 20}, "late": {"count": 1}}},
        "allowed_lateness": "2 minutes",
        "aggregates": {"n": {"count": "*"}, "total": {"sum": "v"}},
        "sink": {"format": "json", "path": str(workdir / "panes")},
        "dead_letter": {"format": "json", "path": str(workdir / "dead")},
        "checkpoint": str(workdir / "checkpoint"),
        "spark": {"available_now": True, "plan": plan},
    }
    if compact_interval is not None:
        doc["spark"]["conf"] = {COMPACT_INTERVAL: str(compact_interval)}
    path = workdir / "spec.yaml"
    workdir.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc))
    return path


def command(spec_path: Path) -> list[str]:
    return [sys.executable, "-m", "panes.cli", "run", str(spec_path), "--end-input", "--quiet"]


def run_to_end(spec_path: Path, timeout: float = 1800) -> float:
    """Run the spec uninterrupted; its wall time (s). (A run takes a minute on a quiet 2-core
    machine; ``timeout`` leaves room for a busy one.)"""
    t0 = time.time()
    proc = subprocess.run(command(spec_path), cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"panes run failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return time.time() - t0


def run_killed(spec_path: Path, after: float) -> bool:
    """Start the spec and SIGKILL its process group ``after`` seconds; whether it was killed (it
    may have finished first)."""
    proc = subprocess.Popen(
        command(spec_path), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        proc.wait(timeout=after)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return True
    if proc.returncode != 0:
        raise RuntimeError(f"panes run failed ({proc.returncode}): {proc.stderr.read().decode()[-2000:]}")
    return False


def sink_rows(directory: Path) -> Counter:
    """The rows of a file sink (every ``batch=<id>`` directory's committed files) as a multiset of
    canonical JSON texts."""
    rows: Counter = Counter()
    for part in sorted(directory.glob("batch=*/part-*")):
        for line in part.read_text().splitlines():
            if line.strip():
                rows[json.dumps(json.loads(line), sort_keys=True)] += 1
    return rows


def outputs(workdir: Path) -> tuple[Counter, Counter]:
    return sink_rows(workdir / "panes"), sink_rows(workdir / "dead")


def chaos(
    root: Path,
    plan: str,
    kills: int,
    seed: int,
    log=print,
    files: int = FILES,
    budget: float | None = None,
    compact_interval: int | None = None,
) -> dict:
    """The uninterrupted run, then trials on fresh checkpoints: each one's run killed again and again
    until a run of it ends by itself (or is run to its end once the ``kills`` are made, or once
    they have taken ``budget`` seconds), and its output compared with the uninterrupted run's. A
    kill lands anywhere in the run's time, so a run that continues a killed one may end before its
    kill: its trial is compared then, and the next kill starts a new trial. Every kill is in a
    compared trial. ``compact_interval``: as ``spec``'s, in both."""
    write_input(root / "input", files=files)
    reference_dir = root / f"{plan}-reference"
    seconds = run_to_end(spec(reference_dir, plan, compact_interval))
    reference = outputs(reference_dir)
    t0 = time.time()  # (the budget is the kills': a slow uninterrupted run leaves them their time)
    r = random.Random(seed)
    killed, moments, trials = 0, [], []
    got, in_trial = reference, 0
    chaos_dir = root / f"{plan}-killed-0"
    path = spec(chaos_dir, plan, compact_interval)
    while killed < kills and (budget is None or time.time() - t0 < budget):
        after = r.uniform(0.15, 1.0) * seconds
        moments.append(round(after, 1))
        if run_killed(path, after):
            killed, in_trial = killed + 1, in_trial + 1
            log(f"{plan}: killed {killed}/{kills} at {after:.1f} s")
            continue
        got = outputs(chaos_dir)
        trials.append(_trial(in_trial, reference, got))
        log(f"{plan}: a run ended before the kill at {after:.1f} s: trial {len(trials)} compared ({in_trial} kills)")
        chaos_dir, in_trial = root / f"{plan}-killed-{len(trials)}", 0
        path = spec(chaos_dir, plan, compact_interval)
    if in_trial:
        run_to_end(path)
        got = outputs(chaos_dir)
        trials.append(_trial(in_trial, reference, got))
    differing = [t for t in trials if not t["identical"]]
    return {
        "plan": plan,
        "kills": killed,
        "trials": trials,
        "moments_s": moments,
        "uninterrupted_s": round(seconds, 1),
        "panes": sum(reference[0].values()),
        "dead_letters": sum(reference[1].values()),
        "panes_after_kills": sum(got[0].values()),
        "dead_letters_after_kills": sum(got[1].values()),
        "identical": not differing,
        "missing": differing[0]["missing"] if differing else [],
        "extra": differing[0]["extra"] if differing else [],
    }


def _trial(kills: int, reference: tuple[Counter, Counter], got: tuple[Counter, Counter]) -> dict:
    return {
        "kills": kills,
        "identical": got == reference,
        "missing": _diff(reference, got),
        "extra": _diff(got, reference),
    }


def _diff(a: tuple[Counter, Counter], b: tuple[Counter, Counter]) -> list[str]:
    return [row for x, y in zip(a, b) for row in (x - y).elements()][:10]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--plans", default="native,stateful")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--dir", default=None, help="work directory (default: a new temporary one)")
    ap.add_argument(
        "--compact-interval",
        type=int,
        default=None,
        help=f"{COMPACT_INTERVAL} of the runs (Spark's default: 10): 2 puts a compaction of the "
        "file-source logs at every second micro-batch, where kills can land",
    )
    a = ap.parse_args()
    import tempfile

    root = Path(a.dir or tempfile.mkdtemp(prefix="panes-chaos-"))
    ok = True
    for plan in a.plans.split(","):
        res = chaos(
            root,
            plan,
            a.kills,
            a.seed,
            log=lambda m: print(m, file=sys.stderr, flush=True),
            compact_interval=a.compact_interval,
        )
        print(json.dumps(res), flush=True)
        same = sum(t["identical"] for t in res["trials"])
        print(
            f"{plan}: {res['kills']} SIGKILL restarts in {len(res['trials'])} runs to the end; uninterrupted "
            f"{res['panes']} panes, {res['dead_letters']} dead letters; {same} of {len(res['trials'])} runs after "
            f"kills identical to it: {'identical' if res['identical'] else 'DIFFERENT'}",
            flush=True,
        )
        ok &= res["identical"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
