"""Local Spark servers for the tests under tests/remote, started from PySpark's own scripts and
jars: a Spark Connect server (``sbin/start-connect-server.sh``) and a standalone cluster (a
master and workers from ``bin/spark-class``). No Spark import: the servers are separate JVMs;
a test talks to them from a driver process of its own (a classic and a Connect session cannot
share one Python process, and one process holds one classic SparkContext).

Every server runs in the foreground of its own process group (``--wait`` for the Connect script,
``spark-class`` for the cluster), with its logs, pid and work directories under one run directory,
so that concurrent runs on the machine never share a pid file (spark-daemon.sh's default
``/tmp/spark-$USER-<class>-1.pid`` refuses a second server) and nothing is written into the
installed pyspark package (its default ``SPARK_LOG_DIR`` is ``$SPARK_HOME/logs``). ``stop()``
ends the whole group: SIGTERM (Spark's shutdown hooks), then SIGKILL after a grace period. A
watchdog process ends the group too if the process that started it dies without stopping it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from panes.spark.session import spark_conf, worker_python

#: what panes needs of any Spark it runs on (its session's settings), without the driver memory,
#: which is the server's own
PANES_CONF = {k: v for k, v in spark_conf(2).items() if k != "spark.driver.memory"}
#: the servers' log4j2 configuration: warnings, and the lines that say a server is up (the Connect
#: server's port, the master's election, a worker's registration); Spark's default INFO logging
#: writes tens of MB for a suite of streaming queries
LOG4J2 = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss.SSS} %p %c{1}: %m%n%ex
logger.connect.name = org.apache.spark.sql.connect.service.SparkConnectServer
logger.connect.level = info
logger.master.name = org.apache.spark.deploy.master.Master
logger.master.level = info
logger.worker.name = org.apache.spark.deploy.worker.Worker
logger.worker.level = info
logger.executor.name = org.apache.spark.deploy.worker.ExecutorRunner
logger.executor.level = info
"""
#: a small application on the standalone cluster: one core and 512 MB per executor, one executor
#: per worker, the driver on the loopback address
CLUSTER_APP_CONF = {
    "spark.executor.memory": "512m",
    "spark.executor.cores": "1",
    "spark.cores.max": "2",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
}
CONNECT_STARTED = re.compile(r"Spark Connect server started at: \S+?:(\d+)")

#: Spark waits 10 s (a constant of its PythonWorkerFactory) for a Python worker it starts to connect
#: back: on an overloaded machine (load 40 on 2 cores) one may start slower, and the query fails with
#: this; the tests run such a driver once more
WORKER_START = "Python worker failed to connect back"


def worker_start_timed_out(output: str) -> bool:
    return WORKER_START in output


def spark_home() -> Path:
    """The pyspark package directory: it holds bin/, sbin/ and jars/ (the spark-connect jar too)."""
    import importlib.util

    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise RuntimeError("pyspark is not installed in this Python")
    return Path(spec.origin).parent


def java_home() -> str | None:
    """JAVA_HOME, else the JDK of the ``java`` on the PATH (spark-class needs one or the other)."""
    if os.environ.get("JAVA_HOME"):
        return os.environ["JAVA_HOME"]
    java = shutil.which("java")
    return str(Path(java).resolve().parents[1]) if java else None


def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on now (the server may still lose it to a race: callers retry)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


class ServerError(RuntimeError):
    pass


@dataclass
class Process:
    """One server in its own process group, its output in ``log``."""

    name: str
    argv: list[str]
    env: dict
    log: Path
    popen: subprocess.Popen | None = None
    watchdog: subprocess.Popen | None = None
    started_at: float = 0.0

    def start(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as out:  # (the child keeps its own descriptor)
            self.popen = subprocess.Popen(
                self.argv,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                cwd=self.log.parent,
            )
        self.started_at = time.monotonic()
        self.watchdog = _watchdog(os.getpid(), self.popen.pid)

    @property
    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self, grace: float = 30.0) -> float:
        """SIGTERM to the group, SIGKILL after ``grace`` s; the seconds it took."""
        if self.popen is None:
            return 0.0
        t0 = time.monotonic()
        pgid = self.popen.pid  # (its own session: the group id is its pid)
        _signal_group(pgid, signal.SIGTERM)
        deadline = t0 + grace
        while _group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _group_alive(pgid):
            _signal_group(pgid, signal.SIGKILL)
            while _group_alive(pgid) and time.monotonic() < deadline + 10:
                time.sleep(0.1)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=5)
        if self.watchdog is not None and self.watchdog.poll() is None:
            self.watchdog.terminate()
            self.watchdog.wait(timeout=5)
        self.popen = None
        return time.monotonic() - t0


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # (a zombie leader counts until reaped: the caller waits on the Popen)
    return _has_live_member(pgid)


def _has_live_member(pgid: int) -> bool:
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid pgrp ...: comm may hold spaces, so split after the last ')'
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


_WATCHDOG = r"""
import os, signal, sys, time
parent, group = int(sys.argv[1]), int(sys.argv[2])
while True:
    time.sleep(1)
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        sys.exit(0)          # the server is gone: nothing to watch
    try:
        os.kill(parent, 0)
    except ProcessLookupError:
        os.killpg(group, signal.SIGTERM)
        time.sleep(20)
        try:
            os.killpg(group, signal.SIGKILL)
        except ProcessLookupError:
            pass
        sys.exit(0)
"""


def _watchdog(parent: int, group: int) -> subprocess.Popen:
    """A process that ends the server's group if ``parent`` (the test process) dies first (a
    SIGKILLed pytest runs no finalizer). It sits in a session of its own, outside the group."""
    return subprocess.Popen(
        [sys.executable, "-c", _WATCHDOG, str(parent), str(group)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def base_env(run_dir: Path, extra: dict | None = None, python: str | None = None) -> dict:
    """The environment of a server: Spark's directories under ``run_dir``, loopback only, the
    Python its workers run (``python``: this one by default) and what ``extra`` adds (e.g. a
    PYTHONPATH with the code under test)."""
    run_dir = Path(run_dir).resolve()
    env = dict(os.environ)
    for k in (
        "SPARK_REMOTE",
        "SPARK_CONNECT_MODE_ENABLED",
        "PYSPARK_GATEWAY_PORT",
        "PYSPARK_GATEWAY_SECRET",
        "SPARK_ENV_LOADED",
        "SPARK_MASTER",
    ):  # (SPARK_MASTER makes spark-daemon.sh rsync)
        env.pop(k, None)
    conf_dir = run_dir / "conf"
    conf_dir.mkdir(parents=True, exist_ok=True)  # (no spark-defaults.conf nor spark-env.sh)
    (conf_dir / "log4j2.properties").write_text(LOG4J2)
    env.update(
        {
            "SPARK_HOME": str(spark_home()),
            "SPARK_CONF_DIR": str(conf_dir),
            "SPARK_LOG_DIR": str(run_dir / "logs"),
            "SPARK_PID_DIR": str(run_dir / "pids"),
            "SPARK_IDENT_STRING": f"panes-test-{os.getpid()}",
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOCAL_DIRS": str(run_dir / "local"),
            "PYSPARK_PYTHON": python or sys.executable,
        }
    )
    jh = java_home()
    if jh:
        env["JAVA_HOME"] = jh
    env.update(extra or {})
    return env


def _conf_args(conf: dict) -> list[str]:
    out = []
    for k, v in conf.items():
        out += ["--conf", f"{k}={v}"]
    return out


# -- Spark Connect -------------------------------------------------------------------------------------


def connect_server_command() -> list[str]:
    """The command that runs a Spark Connect server in the foreground: the pyspark package's
    ``sbin/start-connect-server.sh --wait``; where the package has the server's jar but not the
    script (PySpark 4.0.x), ``spark-submit`` of the server's class, which is what the script runs."""
    script = spark_home() / "sbin" / "start-connect-server.sh"
    if script.exists():
        return [str(script), "--wait"]
    submit = str(spark_home() / "bin" / "spark-submit")
    return [
        submit,
        "--class",
        "org.apache.spark.sql.connect.service.SparkConnectServer",
        "--name",
        "Spark Connect server",
    ]


@dataclass
class ConnectServer:
    """A Spark Connect server (``sbin/start-connect-server.sh --wait``) on 127.0.0.1, its driver
    ``master`` (default ``local[2]``)."""

    run_dir: Path
    conf: dict = field(default_factory=dict)
    env: dict = field(default_factory=dict)
    master: str = "local[2]"
    driver_memory: str = "1g"
    port: int = 0
    process: Process | None = None
    start_seconds: float = 0.0

    def __post_init__(self):
        self.run_dir = Path(self.run_dir).resolve()

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    def start(self, timeout: float = 180.0, attempts: int = 3) -> ConnectServer:
        last = ""
        for attempt in range(attempts):
            wanted = free_port()
            t0 = time.monotonic()
            self.process = Process(
                "connect",
                [
                    *connect_server_command(),
                    "--master",
                    self.master,
                    "--driver-memory",
                    self.driver_memory,
                    *_conf_args(
                        {
                            **PANES_CONF,
                            **self.conf,
                            "spark.connect.grpc.binding.address": "127.0.0.1",
                            "spark.connect.grpc.binding.port": str(wanted),
                            "spark.connect.grpc.port.maxRetries": "0",
                            "spark.driver.host": "127.0.0.1",
                            "spark.driver.bindAddress": "127.0.0.1",
                        }
                    ),
                ],
                # (its workers' Python as panes' own session on that master would run them)
                base_env(self.run_dir, self.env, python=worker_python(self.master)),
                self.run_dir / "logs" / f"connect-{attempt}.log",
            )
            self.process.start()
            port = self._wait_started(t0 + timeout)
            if port is not None:
                self.port, self.start_seconds = port, time.monotonic() - t0
                return self
            last = self.process.tail()
            self.process.stop()
            if "Address already in use" not in last and "BindException" not in last:
                break  # (not a lost port race: no point in trying again)
        raise ServerError(f"the Spark Connect server did not start; log {self.process.log}:\n{last}")

    def _wait_started(self, deadline: float) -> int | None:
        while time.monotonic() < deadline:
            log = self.process.log.read_text(errors="replace")
            m = CONNECT_STARTED.search(log)
            if m and port_open(int(m.group(1))):
                return int(m.group(1))
            # (a server that lost its port logs the BindException and lingers: no need to wait)
            if not self.process.alive or "BindException" in log:
                return None
            time.sleep(0.2)
        return None

    def stop(self) -> float:
        return self.process.stop() if self.process else 0.0


# -- standalone cluster ---------------------------------------------------------------------------------


@dataclass
class StandaloneCluster:
    """A standalone master and ``workers`` workers (``spark-class``), each worker ``cores`` cores
    and ``memory`` for executors, all on 127.0.0.1. ``env`` reaches the workers and through them
    the executors they launch (PYTHONPATH there is how executors find code that is not installed)."""

    run_dir: Path
    workers: int = 2
    cores: int = 1
    memory: str = "1g"
    env: dict = field(default_factory=dict)
    port: int = 0
    webui_port: int = 0
    master_process: Process | None = None
    worker_processes: list = field(default_factory=list)
    start_seconds: float = 0.0

    def __post_init__(self):
        self.run_dir = Path(self.run_dir).resolve()

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def start(self, timeout: float = 180.0) -> StandaloneCluster:
        t0 = time.monotonic()
        deadline = t0 + timeout
        try:
            self._start_master(deadline)
            for i in range(self.workers):
                self._start_worker(i)
            self._wait_workers(deadline)
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - t0
        return self

    def _spark_class(self, cls: str, *args: str) -> list[str]:
        return [str(spark_home() / "bin" / "spark-class"), cls, *args]

    def _start_master(self, deadline: float, attempts: int = 3) -> None:
        for attempt in range(attempts):
            self.port, self.webui_port = free_port(), free_port()
            env = base_env(self.run_dir, {"SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false"})
            self.master_process = Process(
                "master",
                self._spark_class(
                    "org.apache.spark.deploy.master.Master",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(self.port),
                    "--webui-port",
                    str(self.webui_port),
                ),
                env,
                self.run_dir / "logs" / f"master-{attempt}.log",
            )
            self.master_process.start()
            while time.monotonic() < deadline and self.master_process.alive:
                if (
                    "I have been elected leader" in self.master_process.log.read_text(errors="replace")
                    and port_open(self.port)
                    and self._state() is not None
                ):
                    return
                time.sleep(0.2)
            tail = self.master_process.tail()
            self.master_process.stop()
            if "BindException" not in tail and "Address already in use" not in tail:
                raise ServerError(f"the standalone master did not start; log {self.master_process.log}:\n{tail}")
        raise ServerError("the standalone master found no free port")

    def _start_worker(self, i: int) -> None:
        work = self.run_dir / f"worker-{i}"
        work.mkdir(parents=True, exist_ok=True)
        env = base_env(
            self.run_dir,
            {**self.env, "SPARK_IDENT_STRING": f"panes-test-{os.getpid()}-w{i}", "SPARK_WORKER_DIR": str(work)},
        )
        p = Process(
            f"worker-{i}",
            self._spark_class(
                "org.apache.spark.deploy.worker.Worker",
                "--host",
                "127.0.0.1",
                "--cores",
                str(self.cores),
                "--memory",
                self.memory,
                "--work-dir",
                str(work),
                "--webui-port",
                str(free_port()),
                self.url,
            ),
            env,
            self.run_dir / "logs" / f"worker-{i}.log",
        )
        p.start()
        self.worker_processes.append(p)

    def _state(self) -> dict | None:
        """The master's state (its web UI's /json), None while it does not answer."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.webui_port}/json/", timeout=2) as r:
                return json.loads(r.read())
        except (OSError, ValueError):
            return None

    def _wait_workers(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            st = self._state() or {}
            if st.get("aliveworkers", 0) >= self.workers:
                return
            dead = [p for p in self.worker_processes if not p.alive]
            if dead:
                raise ServerError(f"{dead[0].name} exited; log {dead[0].log}:\n{dead[0].tail()}")
            time.sleep(0.2)
        raise ServerError(f"{self.workers} workers did not register in time; master log:\n{self.master_process.tail()}")

    def logs(self) -> list[Process]:
        return [p for p in (self.master_process, *self.worker_processes) if p is not None]

    def stop(self) -> float:
        t0 = time.monotonic()
        for p in reversed(self.worker_processes):
            p.stop()
        if self.master_process is not None:
            self.master_process.stop()
        return time.monotonic() - t0


def new_run_dir(prefix: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=f"{prefix}-{uuid.uuid4().hex[:6]}-"))
