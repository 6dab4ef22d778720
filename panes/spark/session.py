"""A SparkSession with what panes needs: RocksDB state store (transformWithStateInPandas refuses
the default one), Arrow, UTC, few shuffle partitions for a local run. Any master works: ``local[2]``
by default, a cluster URL (``spark://...``, ``yarn``, ``k8s://...``) or whatever ``spark-submit``
set up."""

from __future__ import annotations

import functools
import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
CHANGELOG_CHECKPOINTS = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"


def spark_conf(shuffle_partitions: int = 2) -> dict[str, str]:
    return {
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB,
        # a state store's commit uploads the micro-batch's changes, not a snapshot of the store
        # (snapshots are made in the background); Spark reads a checkpoint written either way
        CHANGELOG_CHECKPOINTS: "true",
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.streaming.noDataMicroBatches.enabled": "true",
        "spark.sql.adaptive.enabled": "false",
        "spark.driver.memory": os.environ.get("PANES_DRIVER_MEMORY", "3g"),
        "spark.sql.streaming.statefulOperator.checkCorrectness.enabled": "false",
        # Spark puts a small first-level hash map (2^16 entries) before its aggregation map when
        # every grouping and buffer column is a number or a string, as panes' (key, window start)
        # are. Once a task has more groups than it holds, each row probes both. Measured here
        # (batch, 2M events, same process, on / off): 10k keys 0.58 / 0.50 s, 100k keys 1.17 /
        # 1.01 s, Nexmark q5 1.17 / 1.07 s, 1k keys 0.30 / 0.29 s; Nexmark q7 (a few windows,
        # no key) 0.195 / 0.215 s. Spark's own window() groups by a struct, which never has it.
        "spark.sql.codegen.aggregate.map.twolevel.enabled": "false",
        # Spark keeps the classes it generated for 100 plans' pieces; one stateful query of panes
        # has about 60, so two queries in one session (two stages, a replay beside a stream)
        # compile each other's out and every query start compiles them again (13-43 ms each here,
        # then the JIT's work on the new classes)
        "spark.sql.codegen.cache.maxEntries": "1000",
        # PySpark otherwise wraps each call of a Column function with about five JVM round trips
        # (the session, the conf, the call site's stack walk sent and cleared) to name the Python
        # line in an error's query context; panes builds its plans from hundreds of such calls
        "spark.python.sql.dataFrameDebugging.enabled": "false",
    }


#: Spark's checkpoint file manager that writes with Hadoop ``FileSystem`` calls (Spark 4.1 moved it);
#: the default one renames through ``FileContext``, which on a local disk starts a ``readlink``
#: process for each file it renames (four per entry of the offset, commit and source logs)
CHECKPOINT_FILE_MANAGER = "spark.sql.streaming.checkpointFileManagerClass"
FILE_SYSTEM_MANAGERS = (
    "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager",
    "org.apache.spark.sql.execution.streaming.FileSystemBasedCheckpointFileManager",
)


def is_connect(spark) -> bool:
    """Whether ``spark`` is a Spark Connect session: its foreachBatch functions and stateful
    processors are pickled and run in Python workers of the server."""
    return type(spark).__module__.startswith("pyspark.sql.connect.")


#: the Python of Spark's Python workers in a session on a local master (``panes_spark_python``), beside
#: this Python when panes is installed
WORKER_PYTHON = "panes-spark-python"


def worker_python(master: str | None) -> str:
    """The Python that Spark's Python workers run (``PYSPARK_PYTHON``, unless set already): on a
    local master this environment's ``panes-spark-python`` (they import PySpark from the installed
    package, with its cached bytecode, rather than from the copy Spark zips: see
    ``panes_spark_python``), else, or when panes is not installed, this Python. (Not on a cluster:
    its workers' machines may not have it.)"""
    launcher = Path(sys.executable).parent / WORKER_PYTHON
    if master and (master == "local" or master.startswith("local[")) and os.access(launcher, os.X_OK):
        return str(launcher)
    return sys.executable


def get_spark(
    master: str | None = None,
    shuffle_partitions: int = 2,
    conf: dict | None = None,
    app_name: str = "panes",
    remote: str | None = None,
):
    """The active SparkSession, or a new one configured for panes: a Spark Connect session when
    ``remote`` or ``master`` is an ``sc://`` URL, or when no master is given and ``SPARK_REMOTE`` is
    set (PySpark's variable); else a classic one."""
    if remote is None and master and master.startswith("sc://"):
        remote = master
    if remote is None and not master:
        remote = os.environ.get("SPARK_REMOTE")
    if remote:
        return _connect(remote, shuffle_partitions, conf, app_name)
    # Python workers must import panes: make sure they find it even when it is not installed
    pkg_root = str(Path(__file__).resolve().parents[2])
    pp = os.environ.get("PYTHONPATH", "")
    if pkg_root not in pp.split(os.pathsep):
        os.environ["PYTHONPATH"] = pkg_root + (os.pathsep + pp if pp else "")
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    builder = SparkSession.builder.appName(app_name)
    if master or "PYSPARK_GATEWAY_PORT" not in os.environ:  # spark-submit sets the master itself
        master = master or os.environ.get("PANES_MASTER", "local[2]")
        builder = builder.master(master)
    os.environ.setdefault("PYSPARK_PYTHON", worker_python(master))
    for k, v in {**spark_conf(shuffle_partitions), **(conf or {})}.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("PANES_SPARK_LOG_LEVEL", "ERROR"))
    if CHECKPOINT_FILE_MANAGER not in (conf or {}):
        _file_system_checkpoints(spark)
    return spark


def _file_system_checkpoints(spark) -> None:
    """Streaming queries write their checkpoint through ``FILE_SYSTEM_MANAGERS`` (the one this
    Spark has): each write is a temporary file renamed into place, as with Spark's default, which
    goes through Hadoop's ``FileContext`` and on a local disk starts a process per rename (a
    micro-batch of a file source: about 16). A runtime setting: the queries read it as they start.
    On Spark Connect the server's JVM says which it has (one small query); a server that will not
    say (``reflect`` refused) keeps its default."""
    if is_connect(spark):
        found = [f"reflect('org.apache.spark.util.Utils', 'classIsLoadable', '{n}')" for n in FILE_SYSTEM_MANAGERS]
        try:
            loadable: Iterable[bool] = [v == "true" for v in spark.sql(f"SELECT {', '.join(found)}").first()]
        except Exception:  # (reflect off on the server, or no such method there)
            return
    else:
        utils = spark._jvm.org.apache.spark.util.Utils
        loadable = (utils.classIsLoadable(n) for n in FILE_SYSTEM_MANAGERS)  # (asked until one is)
    for name, ok in zip(FILE_SYSTEM_MANAGERS, loadable):
        if ok:
            spark.conf.set(CHECKPOINT_FILE_MANAGER, name)
            return


def connect_client_check(url: str) -> None:
    """The Spark Connect client's packages (grpcio-status, googleapis-common-protos...) are there:
    else one line saying what to install (PySpark's own error is a traceback, or, under
    ``python -c``, a silent exit)."""
    from pyspark.errors import PySparkImportError
    from pyspark.sql.connect import utils

    for name in dir(utils):
        if name.startswith("require_minimum_") and name.endswith("_version"):
            try:
                getattr(utils, name)()
            except PySparkImportError as e:
                raise RuntimeError(
                    f"a Spark Connect session ({url}) needs more packages in this Python: "
                    f"pip install 'pyspark[connect]' ({str(e).splitlines()[0]})"
                ) from None


def _connect(url: str, shuffle_partitions: int, conf: dict | None, app_name: str):
    """A Spark Connect session with panes' SQL settings (a client sets only those: the server's
    own, such as its memory or UI, are the server's)."""
    from pyspark.sql import SparkSession

    connect_client_check(url)
    builder = SparkSession.builder.remote(url).appName(app_name)
    for k, v in {**spark_conf(shuffle_partitions), **(conf or {})}.items():
        if k.startswith("spark.sql."):
            builder = builder.config(k, v)
    spark = builder.getOrCreate()
    if CHECKPOINT_FILE_MANAGER not in (conf or {}):
        _file_system_checkpoints(spark)
    return spark


#: the switch of ``plan_building``'s shortcuts: ``PANES_FAST_PLANNING=1`` in the environment turns
#: them on (read as each block starts); off by default
FAST_PLANNING = "PANES_FAST_PLANNING"

_building = threading.Lock()
_depth = 0
_restore: list = []
_patched: list[str] = []


def fast_planning() -> bool:
    """Whether ``plan_building`` patches PySpark (``FAST_PLANNING``)."""
    return os.environ.get(FAST_PLANNING) == "1"


@contextmanager
def plan_building() -> Iterator[None]:
    """A block in which panes builds Spark plans. With ``PANES_FAST_PLANNING=1`` (off by default),
    with fewer JVM round trips (each 0.1-0.3 ms; the plans panes builds make hundreds, per
    micro-batch on the native streaming plan), by patching private PySpark and py4j internals
    while a block runs:

    - without PySpark's call-site capture (``pyspark.errors.utils._enable_debugging_cache``
      set to False): PySpark (classic) records the Python call site of every DataFrame function
      call for its error messages, at a few round trips per call; these would all point into
      panes anyway;
    - with each JVM function PySpark calls while building a plan looked up once: it looks up
      Spark's ``functions`` (for ``F.col``, ``F.when``...) and ``PythonUtils.toSeq`` (for every
      list of columns) by reflection, two round trips, on each call, then makes the call; the
      block puts py4j ``JavaClass`` views that keep their ``JavaMember`` methods into the JVM
      view's ``__dict__`` (``SparkContext._active_spark_context._jvm``).

    Both are process-wide while a block runs (nested or in several threads: the first to enter
    sets them, the last to leave restores them); user code (callbacks) runs outside. ``patches()``
    says what is patched; ``tests/spark/test_plan_building.py`` fails on a PySpark whose internals
    changed."""
    global _depth
    if not fast_planning():
        yield
        return
    with _building:
        if _depth == 0:
            _restore[:] = _speed_up()
        _depth += 1
    try:
        yield
    finally:
        with _building:
            _depth -= 1
            if _depth == 0:
                for undo in _restore:
                    undo()
                _restore.clear()
                _patched.clear()


def patches() -> list[str]:
    """What ``plan_building`` has patched now: "call sites" (the call-site capture off) and the JVM
    classes whose members are looked up once (``HOT_CLASSES``); empty: PySpark as it was."""
    return list(_patched)


def active_blocks() -> int:
    """How many ``plan_building`` blocks that patched PySpark run now (in any thread)."""
    return _depth


#: classes whose members PySpark looks up on each call: its functions (``F.col``, ``F.when``...,
#: under two names) and the list-to-Seq conversion of every select, groupBy, agg and struct
HOT_CLASSES = ("org.apache.spark.sql.functions", "functions", "PythonUtils")


def _speed_up() -> list[Callable[[], object]]:
    """Set the two shortcuts; the functions that undo them."""
    undo: list[Callable[[], object]] = []
    import pyspark.errors.utils as U

    if hasattr(U, "_enable_debugging_cache"):
        before = U._enable_debugging_cache
        # (PySpark declares the cache None until it is first read, and a bool after)
        U._enable_debugging_cache = False  # type: ignore[assignment]
        undo.append(lambda: setattr(U, "_enable_debugging_cache", before))
        _patched.append("call sites")
    from pyspark import SparkContext

    sc = SparkContext._active_spark_context
    jvm = getattr(sc, "_jvm", None)
    if jvm is None or not hasattr(jvm, "__dict__"):
        return undo
    classes = _classes_of(jvm)
    for name, cls in classes.items():
        if name not in jvm.__dict__:  # a JVM view answers an unknown name with a round trip
            jvm.__dict__[name] = cls
            undo.append(functools.partial(jvm.__dict__.pop, name, None))
            _patched.append(name)
    return undo


_classes: dict[int, tuple] = {}  # id of a JVM view -> (the view, {name: class with members looked up once})


def _classes_of(jvm) -> dict:
    hit = _classes.get(id(jvm))
    if hit is None or hit[0] is not jvm:  # (another gateway's view under a reused id)
        from py4j.java_gateway import JavaClass, JavaMember

        class MembersOnce(JavaClass):
            def __getattr__(self, name):
                m = super().__getattr__(name)
                if isinstance(m, JavaMember):  # (a method: the same object serves every call)
                    self.__dict__[name] = m
                return m

        found = {}
        for name in HOT_CLASSES:
            try:
                cls = getattr(jvm, name)
            except Exception:  # (py4j raises its own error for a name the JVM does not know)
                continue
            if isinstance(cls, JavaClass):
                found[name] = MembersOnce(cls._fqn, cls._gateway_client)
        hit = _classes[id(jvm)] = (jvm, found)
    return hit[1]
