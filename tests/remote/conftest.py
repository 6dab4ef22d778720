"""Fixtures that start and stop real Spark servers for the tests in this directory: a Spark Connect
server (``connect_server``) and a standalone master with two workers (``standalone_cluster``), each
once per test session, both from the pyspark package's own scripts and jars (servers.py).

The tests talk to them from a driver process of their own (``run_driver``): one Python process
holds one classic SparkContext (the ``spark`` fixture's local[2]), and PySpark refuses a Connect
session in a process that has a classic one.

Robustness: free ports picked at start (and a retry when the port was lost to a race); a start
timeout (PANES_TEST_SERVER_TIMEOUT, default 240 s: a busy 2-core machine needs 10-60 s); the
servers' logs under the session's temporary directory, and their tails attached to the report of
a failed test; the servers stopped in the fixtures' teardown even when tests fail, and by a
watchdog process if pytest itself is killed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from servers import WORKER_START, ConnectServer, ServerError, StandaloneCluster, java_home, worker_start_timed_out

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = float(os.environ.get("PANES_TEST_SERVER_TIMEOUT", "240"))
#: what the servers' Python workers and executors import: the repository (panes, when it is not
#: installed) and the tests' user functions
PYTHONPATH = os.pathsep.join([str(ROOT), str(ROOT / "tests" / "spark")])


def _need_java():
    if java_home() is None:
        pytest.skip("no Java runtime: the servers are JVMs (make setup installs one)")


def _keep_or_clean(request, run_dir: Path) -> None:
    """Keep the logs; drop what the servers kept for work (block manager, executors' files),
    unless the session failed (then everything stays for a look)."""
    if request.session.testsfailed:
        sys.stderr.write(f"\nSpark server files kept in {run_dir}\n")
        return
    for d in run_dir.iterdir():
        if d.name not in ("logs", "conf"):
            shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def connect_server(tmp_path_factory, request):
    """A Spark Connect server on 127.0.0.1 (driver ``local[2]``, panes' confs), its Python workers
    running the Python panes' session would give them (``worker_python``) with the repository on
    their path. ``.url`` is ``sc://127.0.0.1:PORT``."""
    _need_java()
    run_dir = tmp_path_factory.mktemp("connect-server")
    server = ConnectServer(run_dir, env={"PYTHONPATH": PYTHONPATH})
    try:
        server.start(timeout=TIMEOUT)
    except ServerError as e:
        server.stop()
        pytest.fail(str(e), pytrace=False)
    try:
        yield server
    finally:
        server.stop_seconds = server.stop()
        _keep_or_clean(request, run_dir)


@pytest.fixture(scope="session")
def standalone_cluster(tmp_path_factory, request):
    """A standalone master and two workers (1 core, 1 GB each) on 127.0.0.1; the executors they
    launch run this Python with the repository on their path (the workers' environment)."""
    _need_java()
    run_dir = tmp_path_factory.mktemp("standalone-cluster")
    cluster = StandaloneCluster(run_dir, workers=2, cores=1, memory="1g", env={"PYTHONPATH": PYTHONPATH})
    try:
        cluster.start(timeout=TIMEOUT)
    except ServerError as e:
        cluster.stop()
        pytest.fail(str(e), pytrace=False)
    try:
        yield cluster
    finally:
        cluster.stop_seconds = cluster.stop()
        _keep_or_clean(request, run_dir)


@pytest.fixture(scope="session")
def run_driver():
    """``run_driver(script, *args, env={}, timeout=s)``: runs a Python driver script in a process
    of its own and returns what it printed on its last line, parsed as JSON. A failing or hanging
    driver fails the test with its output."""

    def run(script: Path, *args: str, env: dict | None = None, timeout: float = 900) -> object:
        done = _drive(script, args, env, timeout)
        if done.returncode != 0 and worker_start_timed_out(done.stdout + done.stderr):
            sys.stderr.write(f"\n{script.name}: {WORKER_START}: run again\n")
            done = _drive(script, args, env, timeout)
        lines = done.stdout.strip().splitlines()
        if done.returncode != 0 or not lines:
            pytest.fail(
                f"driver {script.name} {' '.join(args)} exited {done.returncode}:\n"
                f"{_tail(done.stdout)}\n{_tail(done.stderr)}",
                pytrace=False,
            )
        return json.loads(lines[-1])

    return run


def _drive(script: Path, args: tuple, env: dict | None, timeout: float) -> subprocess.CompletedProcess:
    full = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([PYTHONPATH, os.environ.get("PYTHONPATH", "")]),
        "TZ": "UTC",
        "PANES_DRIVER_MEMORY": "1g",
        **(env or {}),
    }
    for k in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED"):
        full.pop(k, None)
    try:
        return subprocess.run(
            [sys.executable, str(script), *args],
            env=full,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=ROOT,
        )
    except subprocess.TimeoutExpired as e:
        pytest.fail(
            f"driver {script.name} {' '.join(args)} ran over {timeout} s; its output:\n"
            f"{_tail(e.stdout)}\n{_tail(e.stderr)}",
            pytrace=False,
        )


def _tail(text, lines: int = 60) -> str:
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    return "\n".join((text or "").splitlines()[-lines:])


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed test that used a server gets the tail of the server's logs in its report."""
    outcome = yield
    report = outcome.get_result()
    if not report.failed:
        return
    funcargs = getattr(item, "funcargs", {})
    for name in ("connect_server", "standalone_cluster"):
        server = funcargs.get(name)
        if server is None:
            continue
        processes = [server.process] if name == "connect_server" else server.logs()
        for p in processes:
            if p is not None:
                report.sections.append((f"{name}: {p.name} log {p.log} (tail)", p.tail(60)))
