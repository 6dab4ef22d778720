"""Where the driver JVM's time goes during a run: Java Flight Recorder (the JDK's ``jcmd`` and
``jfr`` on the PATH, of the JVM's Java version: ``openjdk-17-jdk-headless``, which ``make setup``'s
Java runtime lacks) samples the JVM's Java threads every 2 ms; each sample counts once, in the first
category its stack matches (``CATEGORIES``: Catalyst's analysis, optimizer and physical planning,
the tasks, the state store, Arrow, task serialization ...), and the JIT compilations of 100 ms or
more are summed (compiler threads are not sampled: on 2 cores they take CPU from the rest).
Samples cover Java code only: not the Python workers, not native code, not waiting.

    with Recording(spark, "/tmp/prof/panes_tw_agg.jfr") as rec:
        ...the run...
    print(rec.profile())   # {"samples_ms": {category: ms}, "jit_ms": ..., "jit_compilations": ...}

``nexmark_run.py --jfr DIR`` records each timed run of both sides. A category's milliseconds are
samples times the period: compare the sides of one run, not absolute figures (JFR samples a few
threads per period, not all)."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from collections import Counter
from pathlib import Path

#: the sampling period of Java code (JFR's "profile" settings take 10 ms)
PERIOD_MS = 2
#: (category, a pattern of the frames of a sample's stack): the first that matches counts it
CATEGORIES = [
    ("codegen compile", r"CodeGenerator\$\.doCompile|org\.codehaus\.janino"),
    ("analysis", r"Analyzer\.executeAndCheck|HybridAnalyzer"),
    ("optimizer", r"QueryExecution\.\$anonfun\$lazyOptimizedPlan|Optimizer\.execute"),
    (
        "physical planning",
        r"QueryExecution\.\$anonfun\$lazy(Spark|Executed)Plan|QueryExecution\$\.prepareForExecution|QueryPlanner\.plan",
    ),
    ("state store", r"execution\.streaming\.state\.(RocksDB|HDFSBackedStateStore|StateStore)"),
    ("tasks: shuffle map", r"ShuffleWriter\.write"),
    ("tasks: shuffle read", r"ShuffleBlockFetcherIterator|BlockStoreShuffleReader"),
    ("tasks: generated code", r"GeneratedClass"),
    ("tasks: other", r"executor\.Executor\$TaskRunner\.run"),
    ("Arrow", r"[Aa]rrow"),
    ("serialization, closure cleaning", r"JavaSerializer|ObjectOutputStream|ObjectInputStream|ClosureCleaner"),
    ("py4j", r"py4j\."),
    ("scheduler", r"DAGScheduler|TaskScheduler|TaskSetManager"),
    ("checkpoint logs", r"HDFSMetadataLog|CheckpointFileManager"),
    ("listeners", r"ListenerBus|AsyncEventQueue"),
]
_COMPILED = [(name, re.compile(rx, re.M)) for name, rx in CATEGORIES]
#: the frames JFR keeps of a sample's stack
STACK_DEPTH = 2048


def category(stack: list[str], thread: str = "") -> str:
    """The category of a sample (its frames, innermost first; ``thread``: its thread's name)."""
    text = "\n".join(stack)
    for name, rx in _COMPILED:
        if rx.search(text):
            return name
    if thread.startswith("stream execution thread"):
        return "other: streaming engine"
    return "other"


def samples(jfr: Path) -> list[tuple[str, list[str]]]:
    """(thread, frames innermost first) of each execution sample in a recording."""
    text = _print(jfr, "jdk.ExecutionSample", "--stack-depth", str(STACK_DEPTH))
    out = []
    for block in text.split("jdk.ExecutionSample {")[1:]:
        thread = re.search(r'sampledThread = "([^"]*)"', block)
        stack = re.search(r"stackTrace = \[(.*?)\n\s*\]", block, re.S)
        frames = [re.sub(r"\s+line:.*", "", f.strip()) for f in stack.group(1).strip().split("\n")] if stack else []
        out.append((thread.group(1) if thread else "", [f for f in frames if f and f != "..."]))
    return out


def jit(jfr: Path) -> tuple[int, float]:
    """The JIT compilations a recording holds (JFR's "profile" settings keep those of 100 ms or
    more) and their total ms."""
    ms = []
    for block in _print(jfr, "jdk.Compilation").split("jdk.Compilation {")[1:]:
        d = re.search(r"duration = ([\d.]+) (ms|s)\b", block)
        if d:
            ms.append(float(d.group(1)) * (1000 if d.group(2) == "s" else 1))
    return len(ms), round(sum(ms))


def profile(jfr: Path) -> dict:
    """A recording's samples by category (ms: samples x ``PERIOD_MS``, largest first) and its JIT."""
    counted = Counter(category(frames, thread) for thread, frames in samples(jfr))
    n, ms = jit(jfr)
    return {
        "samples_ms": {k: v * PERIOD_MS for k, v in counted.most_common()},
        "jit_compilations": n,
        "jit_ms": ms,
    }


def _print(jfr: Path, event: str, *options: str) -> str:
    command = ["jfr", "print", "--events", event, *options, str(jfr)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:  # (else a recording it cannot read would count no sample)
        raise RuntimeError(f"{' '.join(command)}: {done.stderr.strip()}")
    return done.stdout


def settings(directory: Path) -> Path:
    """JFR's "profile" settings with Java code sampled every ``PERIOD_MS``, written to ``directory``."""
    home = (
        subprocess.run(["java", "-XshowSettings:properties", "-version"], capture_output=True, text=True)
        .stderr.split("java.home = ")[1]
        .split("\n")[0]
    )
    text = (Path(home.strip()) / "lib" / "jfr" / "profile.jfc").read_text()
    period = r'(<event name="jdk.ExecutionSample">\s*<setting name="enabled"[^>]*>true</setting>\s*'
    period += r'<setting name="period"[^>]*>)[^<]*'
    sampled = re.sub(period, rf"\g<1>{PERIOD_MS} ms", text)
    if sampled == text:
        raise RuntimeError(f"no Java sampling period in {home}/lib/jfr/profile.jfc")
    path = directory / "sampled.jfc"
    path.write_text(sampled)
    return path


class Recording:
    """A JFR recording of this process's JVM (the SparkSession's driver) over a ``with`` block,
    written to ``path``."""

    _settings: Path | None = None
    _configured: set[str] = set()  # (the JVMs whose stack depth is set)

    def __init__(self, spark, path: str | Path):
        missing = [tool for tool in ("jcmd", "jfr") if shutil.which(tool) is None]
        if missing:  # (make setup installs Java's runtime, which has neither)
            raise RuntimeError(f"no {' or '.join(missing)}: the JDK has them (apt-get install openjdk-17-jdk-headless)")
        self.pid = str(spark._jvm.java.lang.ProcessHandle.current().pid())
        self.path = Path(path)
        self.name = f"panes-{self.path.stem}"
        if Recording._settings is None:
            Recording._settings = settings(Path(tempfile.mkdtemp(prefix="panes-jfr-")))
        if self.pid not in Recording._configured:
            # (JFR keeps 64 frames of a stack by default: Catalyst's recursion is deeper, and a
            # sample cut there loses the frames that tell its category; set before any recording)
            self._jcmd("JFR.configure", f"stackdepth={STACK_DEPTH}")
            Recording._configured.add(self.pid)

    def __enter__(self) -> Recording:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._jcmd("JFR.start", f"name={self.name}", f"settings={Recording._settings}")
        return self

    def __exit__(self, *exc) -> None:
        self._jcmd("JFR.stop", f"name={self.name}", f"filename={self.path}")

    def profile(self) -> dict:
        return profile(self.path)

    def _jcmd(self, *args: str) -> None:
        done = subprocess.run(["jcmd", self.pid, *args], capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"jcmd {' '.join(args)}: {done.stdout.strip()} {done.stderr.strip()}")
