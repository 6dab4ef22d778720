"""What the benchmarks share: logging, the SparkSession, waiting for a quiet machine, peak memory
of the Spark processes, the data sets (generated once with numpy, cached under benchmarks/data/)
and the JSON result files.

Data sets:

- ``generate(events, keys, files, minutes=60, late=0.0)``: ``events`` records over ``minutes``
  of event time from 2024-01-01 00:00 UTC (key string ``k00042``, ts timestamp at ms precision,
  amount long 1-1000), sorted by event time and cut into ``files`` consecutive parquet files.
  With ``late`` > 0 that fraction of the records is 30-90 s older than its neighbours (out of
  order: behind a watermark of max event time - 5 s, but within an allowed lateness of 2 minutes
  as long as a file holds at most a few minutes of event time).
- ``generate_nexmark(bids)``: the Nexmark bid stream (auction, bidder, price, channel, dateTime)
  following /work/shared/nexmark/NEXMARK.md's generator rules, 10 parquet part files.

File modification times increase with the file number (set again on every use), so a file source
reads them in event-time order. ``stream_input(path, sentinel)`` gives the directory the streaming
runs read: hard links to the data files plus one last file holding a single sentinel record a day
after the data, which moves the watermark past every real window so that every window closes on
both sides (plain Spark's ``availableNow`` never emits a final watermark); the sentinel's own
windows stay open and the benchmarks filter them out of what they count.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DATA = HERE / "data"
RESULTS = HERE / "results"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

SEED = 42
# 2024-01-01T00:00:00Z
BASE_MS = 1_704_067_200_000
MINUTE_MS = 60_000
DAY_MS = 86_400_000
# fixed file mtimes: a file source reads files in modification-time order
MTIME_BASE = 1_600_000_000
SENTINEL_FILE = "part-99999-sentinel.parquet"
LATE_MIN_MS, LATE_MAX_MS = 30_000, 90_000


# -- logging and the machine ----------------------------------------------------------------------------


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def human(n: int) -> str:
    for div, suffix in ((1_000_000, "m"), (1_000, "k")):
        if n >= div and n % div == 0:
            return f"{n // div}{suffix}"
    return str(n)


def _ppid(pid: int) -> int:
    stat = (Path("/proc") / str(pid) / "stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[1])


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
                pid = _ppid(pid)
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
    info: dict[str, object] = {
        "nproc": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
    with contextlib.suppress(OSError):
        info["free_g"] = subprocess.run(["free", "-g"], capture_output=True, text=True).stdout.strip()
    with contextlib.suppress(OSError, IndexError):
        java = subprocess.run(["java", "-version"], capture_output=True, text=True)
        info["java"] = java.stderr.splitlines()[0]
    with contextlib.suppress(OSError):
        info["loadavg"] = os.getloadavg()
    return info


def start_spark():
    """The benchmarks' SparkSession (panes' defaults: local[2], 2 shuffle partitions), logged."""
    from panes.spark.session import get_spark

    t0 = time.perf_counter()
    spark = get_spark()
    log(
        f"spark {spark.version} session ready in {time.perf_counter() - t0:.1f} s "
        f"(master {spark.sparkContext.master}, shuffle partitions "
        f"{spark.conf.get('spark.sql.shuffle.partitions')}, two-level aggregation map "
        f"{spark.conf.get('spark.sql.codegen.aggregate.map.twolevel.enabled')}: both sides)"
    )
    return spark


#: the state store a session uses (unset: Spark's own, HDFS-backed)
STATE_STORE_PROVIDER = "spark.sql.streaming.stateStore.providerClass"


@contextlib.contextmanager
def plain_spark_settings(spark, state_store: bool = False):
    """A block in which plain Spark's queries run with Spark's own checkpoint file manager and
    RocksDB's snapshot checkpoints, as its users run them: panes' session switches both
    (``session.CHECKPOINT_FILE_MANAGER``, ``session.CHANGELOG_CHECKPOINTS``; a streaming query
    reads them as it starts and as each micro-batch plans its state stores), which a plain Spark
    user would have to set. ``state_store``: and with Spark's own state store (panes' session
    sets RocksDB), as the shared Nexmark harness runs plain Spark (``spark_nexmark.py``)."""
    from panes.spark.session import CHANGELOG_CHECKPOINTS, CHECKPOINT_FILE_MANAGER

    keys = [CHECKPOINT_FILE_MANAGER, CHANGELOG_CHECKPOINTS, *([STATE_STORE_PROVIDER] if state_store else [])]
    before = {k: spark.conf.get(k, None) for k in keys}
    for k, v in before.items():
        if v is not None:
            spark.conf.unset(k)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is not None:
                spark.conf.set(k, v)


def command_line() -> str:
    """This run's command, with the interpreter relative to the repo when it is the venv's."""
    exe = os.path.relpath(sys.executable) if sys.executable.startswith(str(ROOT)) else sys.executable
    return " ".join([exe, *sys.argv])


def merge_details(path: Path, details: dict) -> dict:
    """A run with --only: its ``results`` (and ``figures``, ``errors``) added to / replacing those of
    the details file at ``path``, so the file still holds every benchmark of ``latest.json``; the
    run's own fields on top, and in ``runs`` which command measured which benchmarks."""
    path = Path(path)
    try:
        old = json.loads(path.read_text()) if path.exists() else {}
    except ValueError:
        old = {}
    old = old if isinstance(old, dict) else {}
    runs = old.get("runs") or (
        [
            {
                "command": old["command"],
                "started_utc": old.get("started_utc"),
                "benchmarks": sorted(old.get("results", {})),
            }
        ]
        if "command" in old
        else []
    )
    merged = dict(details)
    for k in ("results", "figures", "errors"):
        merged[k] = {**(old.get(k) or {}), **(details.get(k) or {})}
    merged["runs"] = [
        *runs,
        {
            "command": details["command"],
            "started_utc": details["started_utc"],
            "benchmarks": sorted(details.get("results", {})),
        },
    ]
    write_json(path, merged)
    return merged


def merge_figures(path: Path, figures: dict) -> dict:
    """Add / replace ``figures``' keys in the JSON object at ``path`` (other benchmarks' keys stay)."""
    path = Path(path)
    merged: dict = {}
    if path.exists():
        try:
            merged = json.loads(path.read_text())
        except ValueError:
            merged = {}
        if not isinstance(merged, dict):
            merged = {}
    merged.update(figures)
    write_json(path, merged)
    return merged


def write_json(path: Path, obj) -> None:
    """Write atomically (a reader never sees half a file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, default=str) + "\n")
    tmp.replace(path)


# -- peak memory -----------------------------------------------------------------------------------------


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                children.setdefault(_ppid(int(d.name)), []).append(int(d.name))
            except (OSError, ValueError, IndexError):
                continue
    out, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def _rss_kb(pid: int) -> int:
    try:
        for line in (Path("/proc") / str(pid) / "status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _kind(pid: int) -> str | None:
    """ "jvm" for the Spark JVM, "python" for a PySpark worker (``pyspark.daemon`` and the workers
    it forks), None for anything else: the short-lived helpers the JVM spawns are skipped, since a
    vfork()ed child reports its parent's whole RSS until it execs."""
    proc = Path("/proc") / str(pid)
    try:
        if proc.joinpath("comm").read_text().strip() == "java":
            threads = next(
                (
                    int(line.split()[1])
                    for line in proc.joinpath("status").read_text().splitlines()
                    if line.startswith("Threads:")
                ),
                1,
            )
            return "jvm" if threads > 1 else None
        cmd = proc.joinpath("cmdline").read_bytes()
        return "python" if b"pyspark.daemon" in cmd or b"pyspark.worker" in cmd else None
    except (OSError, ValueError, IndexError):
        return None


class RssSampler:
    """Samples, every ``interval`` s in a thread, the resident memory of the processes this
    Python process started: the Spark JVM and its Python workers (``pyspark.daemon`` and the
    workers it forks). The sum of VmRSS double-counts the pages the forked workers share with
    the daemon, so the Python figure is an upper bound. The process tree is listed again every
    second (workers come and go); a process's kind is decided again until it is known (a fresh
    fork has not exec'd yet)."""

    def __init__(self, interval: float = 0.2):
        self.interval = interval
        self.peak_total_kb = self.peak_jvm_kb = self.peak_python_kb = 0
        self.start_total_kb: int | None = None
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        me, pids, listed = os.getpid(), [], 0.0
        kinds: dict[int, str | None] = {}
        while True:
            now = time.monotonic()
            if now - listed > 1.0:
                pids, listed = _descendants(me), now
                kinds = {p: k for p, k in kinds.items() if p in pids and k is not None}
            jvm = py = 0
            for pid in pids:
                kind = kinds.get(pid)
                if kind is None and pid not in kinds:
                    kind = kinds[pid] = _kind(pid)
                if kind == "jvm":
                    jvm += _rss_kb(pid)
                elif kind == "python":
                    py += _rss_kb(pid)
            total = jvm + py
            if self.start_total_kb is None:
                self.start_total_kb = total
            self.peak_total_kb = max(self.peak_total_kb, total)
            self.peak_jvm_kb = max(self.peak_jvm_kb, jvm)
            self.peak_python_kb = max(self.peak_python_kb, py)
            self.samples += 1
            if self._stop.wait(self.interval):
                return

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def result(self) -> dict:
        mb = lambda kb: round((kb or 0) / 1024, 1)  # noqa: E731
        return {
            "peak_rss_mb": mb(self.peak_total_kb),
            "peak_jvm_rss_mb": mb(self.peak_jvm_kb),
            "peak_python_workers_rss_mb": mb(self.peak_python_kb),
            "start_rss_mb": mb(self.start_total_kb),
            "rss_samples": self.samples,
        }


# -- data: keyed events -------------------------------------------------------------------------------


def events_schema():
    from pyspark.sql import types as T

    return T.StructType(
        [
            T.StructField("key", T.StringType()),
            T.StructField("ts", T.TimestampType()),
            T.StructField("amount", T.LongType()),
        ]
    )


schema = events_schema  # the name the older scripts import


def data_dir(events: int, keys: int, files: int, minutes: int = 60, late: float = 0.0, untimed: float = 0.0) -> Path:
    name = f"events{events}_keys{keys}_files{files}_seed{SEED}_ms"
    if minutes != 60:
        name += f"_min{minutes}"
    if late:
        name += f"_late{late:g}_{LATE_MIN_MS // 1000}-{LATE_MAX_MS // 1000}s"
    if untimed:
        name += f"_untimed{untimed:g}"
    return DATA / name


def _publish(tmp: Path, out: Path, meta: dict, what: str, t0: float) -> Path:
    """Finish a generated data set: its _meta.json, then the directory renamed into place (so a
    half-written set is never reused), file mtimes in order."""
    (tmp / "_meta.json").write_text(json.dumps(meta, indent=1))
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    log(f"data: wrote {what} to {out.relative_to(ROOT)} in {time.time() - t0:.1f} s")
    set_mtimes(out)
    return out


def set_mtimes(path: Path) -> None:
    """Increasing modification times in name order (a copy or checkout loses them)."""
    files = sorted(path.glob("part-*.parquet"))
    for i, f in enumerate(files):
        t = MTIME_BASE + (10_000 if f.name == SENTINEL_FILE else i)
        os.utime(f, (t, t), follow_symlinks=False)


def generate(events: int, keys: int, files: int, minutes: int = 60, late: float = 0.0, untimed: float = 0.0) -> Path:
    """``events`` records over ``minutes`` of event time, sorted by event time (then a ``late``
    fraction moved 1-4 minutes back, and an ``untimed`` fraction without event time: null ts),
    cut into ``files`` consecutive parquet files. Written once, reused when present. (The same
    records as without ``untimed``, but for the null times.)"""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = data_dir(events, keys, files, minutes, late, untimed)
    meta = out / "_meta.json"
    if meta.exists():
        log(f"data: reusing {out.relative_to(ROOT)}")
    else:
        t0 = time.time()
        rng = np.random.default_rng(SEED)
        ts = BASE_MS + np.sort(rng.integers(0, minutes * MINUTE_MS, size=events, dtype=np.int64))
        key_idx = rng.integers(0, keys, size=events, dtype=np.int64)
        amount = rng.integers(1, 1001, size=events, dtype=np.int64)
        n_late = 0
        if late:
            moved = rng.random(events) < late
            n_late = int(moved.sum())
            ts = np.where(moved, ts - rng.integers(LATE_MIN_MS, LATE_MAX_MS, size=events), ts)
        no_time = rng.random(events) < untimed if untimed else np.zeros(events, dtype=bool)
        width = len(str(keys - 1))
        labels = pa.array([f"k{i:0{width}d}" for i in range(keys)], type=pa.string())
        tmp = out.with_name(out.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        bounds = np.linspace(0, events, files + 1).astype(np.int64)
        for i in range(files):
            lo, hi = int(bounds[i]), int(bounds[i + 1])
            table = pa.table(
                {
                    "key": labels.take(pa.array(key_idx[lo:hi])),
                    "ts": pa.array(ts[lo:hi], type=pa.timestamp("ms", tz="UTC"), mask=no_time[lo:hi]),
                    "amount": pa.array(amount[lo:hi], type=pa.int64()),
                }
            )
            pq.write_table(table, tmp / f"part-{i:05d}.parquet")
        meta_obj = {
            "events": events,
            "keys": keys,
            "files": files,
            "minutes": minutes,
            "late": late,
            "late_ms": [LATE_MIN_MS, LATE_MAX_MS],
            "late_records": n_late,
            "untimed": untimed,
            "untimed_records": int(no_time.sum()),
            "seed": SEED,
            "ts_min_ms": int(ts.min()),
            "ts_max_ms": int(ts.max()),
            "amount_sum": int(amount.sum()),
        }
        return _publish(tmp, out, meta_obj, f"{events:,} events in {files} files", t0)
    set_mtimes(out)
    return out


def meta_of(path: Path) -> dict:
    return json.loads((path / "_meta.json").read_text())


# -- data: Nexmark bids ---------------------------------------------------------------------------------

NEXMARK_PARTS = 10
NEXMARK_RATE = 10_000  # events per second of event time
FIRST_PERSON_ID = 1000
FIRST_AUCTION_ID = 1000
HOT_CHANNELS = ["Google", "Facebook", "Baidu", "Apple"]


def nexmark_schema():
    from pyspark.sql import types as T

    return T.StructType(
        [
            T.StructField("auction", T.LongType()),
            T.StructField("bidder", T.LongType()),
            T.StructField("price", T.LongType()),
            T.StructField("channel", T.StringType()),
            T.StructField("dateTime", T.TimestampType()),
        ]
    )


def _nexmark_part(lo: int, hi: int, part: int, rate: int = NEXMARK_RATE) -> dict:
    """Bids among events [lo, hi), vectorised over event numbers (``rate`` events per second of
    event time)."""
    rng = np.random.Generator(np.random.PCG64([SEED, part]))
    ev = np.arange(lo, hi, dtype=np.int64)
    ev = ev[(ev % 50) >= 4]
    n = len(ev)
    epoch, off = ev // 50, ev % 50
    # last 0-based person / auction id created at or before this event (off >= 4: all of the
    # epoch's person (residue 0) and auctions (1-3) exist)
    last_person = epoch
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
    ts_ms = BASE_MS + (ev * 1_000_000 // rate) // 1000
    return {"auction": auction, "bidder": bidder, "price": price, "chan": chan, "ts_ms": ts_ms}


def generate_nexmark(bids: int, parts: int = NEXMARK_PARTS, rate: int = NEXMARK_RATE) -> Path:
    """The bid stream of about ``bids`` bids (the events holding them: bids * 50 / 46), ``parts``
    parquet part files contiguous in event time, ``rate`` events per second of event time.
    Written once, reused when present."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    shape = "" if (parts, rate) == (NEXMARK_PARTS, NEXMARK_RATE) else f"-{parts}files-{rate}per_s"
    out = DATA / f"nexmark-{bids}{shape}"
    meta_f = out / "_meta.json"
    if meta_f.exists():
        log(f"data: reusing {out.relative_to(ROOT)}")
    else:
        t0 = time.time()
        events = -(-bids * 50 // 46)
        labels = pa.array(HOT_CHANNELS + [f"channel-{k}" for k in range(10_000)], type=pa.string())
        tmp = out.with_name(out.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        bounds = np.linspace(0, events, parts + 1).astype(np.int64)
        total, price_sum, tmin, tmax = 0, 0, 0, 0
        for i in range(parts):
            g = _nexmark_part(int(bounds[i]), int(bounds[i + 1]), i, rate)
            table = pa.table(
                {
                    "auction": pa.array(g["auction"], type=pa.int64()),
                    "bidder": pa.array(g["bidder"], type=pa.int64()),
                    "price": pa.array(g["price"], type=pa.int64()),
                    "channel": labels.take(pa.array(g["chan"])),
                    "dateTime": pa.array(g["ts_ms"], type=pa.timestamp("ms", tz="UTC")),
                }
            )
            pq.write_table(table, tmp / f"part-{i:05d}.parquet")
            total += len(g["price"])
            price_sum += int(g["price"].sum())
            tmin = int(g["ts_ms"][0]) if i == 0 else tmin
            tmax = int(g["ts_ms"][-1])
        meta_obj = {
            "requested_bids": bids,
            "events": int(events),
            "bids": total,
            "parts": parts,
            "seed": SEED,
            "rate": rate,
            "ts_min_ms": tmin,
            "ts_max_ms": tmax,
            "event_time_s": (tmax - tmin) / 1000,
            "price_sum": price_sum,
        }
        return _publish(tmp, out, meta_obj, f"{total:,} bids ({events:,} events) in {parts} files", t0)
    set_mtimes(out)
    return out


# -- streaming input: the data files plus a sentinel --------------------------------------------------


def sentinel_ms(path: Path) -> int:
    """The sentinel's event time: a day after the data's last record, on a whole day."""
    return (meta_of(path)["ts_max_ms"] // DAY_MS + 2) * DAY_MS


def write_sentinel(path: Path, row: dict, like: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pq.read_schema(like)
    arrays = [pa.array([row[f.name]], type=f.type) for f in schema]
    pq.write_table(pa.Table.from_arrays(arrays, schema=schema), path)


def stream_input(path: Path, sentinel: dict | None, warmup: bool = False) -> Path:
    """The directory a streaming run reads: hard links to ``path``'s part files (only the first
    one when ``warmup``) and, when ``sentinel`` is given, a last file with that one record."""
    suffix = "_warmup" if warmup else "_stream"
    out = path.with_name(path.name + suffix + ("" if sentinel is not None else "_nosentinel"))
    parts = sorted(p for p in path.glob("part-*.parquet") if p.name != SENTINEL_FILE)
    if warmup:
        parts = parts[:1]
    marker = out / "_done"
    # what the directory was made from: rebuilt when the data or the sentinel change
    made_from = json.dumps(
        {"meta": meta_of(path), "sentinel": sentinel, "parts": [p.name for p in parts]}, sort_keys=True, default=str
    )
    if not marker.exists() or marker.read_text() != made_from:
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        for p in parts:
            try:
                os.link(p, out / p.name)
            except OSError:
                shutil.copy2(p, out / p.name)
        if sentinel is not None:
            write_sentinel(out / SENTINEL_FILE, sentinel, parts[0])
        marker.write_text(made_from)
    set_mtimes(out)
    return out
