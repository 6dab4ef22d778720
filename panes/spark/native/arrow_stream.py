"""The driver's side of the sink plan (``arrow_sink``): the query that writes the stream's rows into
the sink, and the delivery of each committed version's dead letters and panes to the callbacks,
version by version in order, as the foreachBatch plan hands them (``store.NativeStream._version``).

The delivery runs in this process: a thread follows the commits while the query runs; the query
handed back (``DeliveringQuery``) finishes it when it is stopped or ends, and raises a callback's
error. A delivered version is marked (``arrow_sink.DELIVERED``), so a process that restarts from
the checkpoint hands on what the last one committed but did not deliver, and never a version
twice (a micro-batch that Spark runs again writes the same version)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from pyspark.sql import DataFrame
from pyspark.sql import types as ST

from ...core.time import MIN_TIME
from .arrow_partials import arrow_partials, sink_unsupported
from .arrow_sink import CLOSED, DEAD, DELIVERED, SINK_NAME, SinkPlan, writer_classes
from .names import PARTIAL, ROW_IN_WINDOW, ROW_VALUE, ROW_WINDOW_END, ROW_WINDOW_EXPIRY, ROW_WINDOW_START
from .state_versions import META, versions, windows_meta
from .store import NativeStream, as_read

if TYPE_CHECKING:
    from pyspark.sql.streaming import StreamingQuery

    from .step import NativeStep

#: the stream's columns of a row's window, which the sink's tasks assign themselves (the core's rule)
ASSIGNED = (ROW_WINDOW_START, ROW_WINDOW_END, ROW_WINDOW_EXPIRY, ROW_IN_WINDOW)
#: how often the delivery thread looks for new versions (s)
POLL_S = 0.02


def sink_plan(step: NativeStep, source: DataFrame, root: Path) -> tuple[SinkPlan, ST.StructType]:
    """The sink's plan for ``step`` over the prepared stream ``source``, and the windows tables'
    Spark schema (that of the foreachBatch plan's tables: its first step's, analysed only)."""
    from ..session import plan_building

    with plan_building():
        state = step.combine(step.on_time(source, MIN_TIME), None, MIN_TIME, metrics=True).schema
    read = set(step.read_values)

    def value(c: str) -> str:
        return ROW_VALUE + c if c in read else c

    partials = []
    for i, (pt, a) in enumerate(zip(step.parts, step.p.aggregates)):
        forms = arrow_partials(f"{PARTIAL}{i}", a.fn, value)
        assert forms is not None and [f.name for f in forms] == list(pt.names), (forms, pt.names)
        partials += [[f.name, f.column, f.of_rows, f.merge] for f in forms]
    p = step.p
    plan = SinkPlan(str(root), list(p.key), p.window, partials, p.allowed_lateness, step.delay, state.json())
    return plan, state


class ArrowStream:
    """Runs ``step`` over ``source`` with the sink plan; ``stream`` is the store's view of the same
    versions (the watermark for progress, the end of the input)."""

    def __init__(self, step: NativeStep, source: DataFrame, checkpoint: str, ordered: bool = False):
        self.step, self.ordered = step, ordered
        self.stream = NativeStream(step, checkpoint, ordered)
        self.root = self.stream.root
        self.plan, state = sink_plan(step, source, self.root)
        self.state = cast(ST.StructType, as_read(state))  # (the tables as Spark reads them)
        # (the tasks assign the windows themselves: fewer columns to hand to Python)
        self.source = source.drop(*ASSIGNED)
        self.stream.knows_schema(state)
        self._lock = threading.Lock()
        self.error: BaseException | None = None

    def start(self, checkpoint: str, query_name: str | None, trigger: dict, callbacks: tuple[Any, Any]) -> Any:
        spark = self.source.sparkSession
        sink, _ = writer_classes()
        spark.dataSource.register(sink)
        w = self.source.writeStream.format(SINK_NAME).option("plan", self.plan.to_option())
        w = w.option("checkpointLocation", checkpoint)
        if query_name:
            w = w.queryName(query_name)
        if trigger:
            w = w.trigger(**trigger)
        return DeliveringQuery(w.start(), self, callbacks)

    def deliver(self, on_panes: Any, on_dead_letters: Any, through: int | None = None) -> None:
        """Hands on every committed version not yet delivered (up to ``through``), in order."""
        with self._lock:
            if self.error is not None:
                raise self.error
            try:
                for v in versions(self.root):
                    if through is not None and v > through:
                        break
                    self._deliver(v, on_panes, on_dead_letters)
            except BaseException as e:
                self.error = e
                raise

    def _deliver(self, v: int, on_panes: Any, on_dead_letters: Any) -> None:
        here = self.root / f"v{v}"
        if (here / DELIVERED).exists():
            return
        m = windows_meta(self.root, v)
        if "closed" not in m:  # (a version the foreachBatch plan's step wrote, the end of the input: delivered by it)
            return
        spark, step = self.source.sparkSession, self.step
        if m["dead"]:
            rows = spark.read.schema(self.source.schema).parquet(str(here / DEAD))
            on_dead_letters(step.dead_letters(rows, m["watermark_before"], stream=True), v)
        if m["closed"]:
            windows = spark.read.schema(self.state).parquet(str(here / CLOSED))
            panes = step.closed(windows, m["watermark"], self.ordered, table=True)
        else:
            panes = self.stream.empty_panes(spark)
        on_panes(panes, v)
        self.mark_delivered(v)
        self.stream.watermark = m["watermark"]
        self.stream.clean(v)

    def mark_delivered(self, batch_id: int) -> None:
        """Marks a committed version as handed on (the sink's, or the one the end of the input wrote:
        ``NativeStream.end`` delivered it)."""
        here = self.root / f"v{batch_id}"
        if (here / META).exists():
            (here / DELIVERED).touch()


class DeliveringQuery:
    """A running sink plan's query: Spark's ``StreamingQuery`` with the delivery of its versions
    beside it (a thread while it runs; the rest when it is stopped, ends or processed all that is
    there), raising a callback's error where Spark raises the query's."""

    def __init__(self, query: StreamingQuery, stream: ArrowStream, callbacks: tuple[Any, Any]):
        self.query, self.stream, self.callbacks = query, stream, callbacks
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._follow, name="panes-delivery", daemon=True)
        self._thread.start()

    def _follow(self) -> None:
        """Delivers while the query runs, and once more after it ended (what it committed last)."""
        while True:
            stopping = self._stop.wait(POLL_S)
            active = self.query.isActive
            try:
                self.deliver()
            except BaseException:  # (kept in the stream: raised by the calls below)
                self.query.stop()
                return
            if stopping or not active:
                return

    def deliver(self, through: int | None = None) -> None:
        """Hands on the versions committed so far (up to ``through``), in the calling thread."""
        self.stream.deliver(self.callbacks[0], self.callbacks[1], through)

    def _finish(self) -> None:
        self._stop.set()
        self._thread.join()
        self.deliver()

    def stop(self) -> None:
        self.query.stop()
        self._finish()

    def awaitTermination(self, timeout: int | None = None) -> bool | None:
        ended = self.query.awaitTermination(timeout)
        if not self.query.isActive:
            self._finish()
        return ended

    def processAllAvailable(self) -> None:
        self.query.processAllAvailable()
        self.deliver()

    def exception(self) -> Any:
        return self.query.exception() or self.stream.error

    def __getattr__(self, name: str) -> Any:
        return getattr(self.query, name)


def arrow_unsupported(step: NativeStep, source: DataFrame) -> str | None:
    """Why the native step cannot run on the sink plan (None: it can): ``sink_unsupported``, and
    what only the stream tells."""
    from ..session import is_connect

    why = sink_unsupported(step.p)
    if why is not None:
        return why
    try:
        from pyspark.sql.datasource import DataSourceStreamArrowWriter  # noqa: F401
    except ImportError:
        return "the sink plan needs PySpark 4.1 or later (DataSourceStreamArrowWriter)"
    if is_connect(source.sparkSession):
        return "the sink plan runs on a classic Spark session (its tasks read the state where the driver writes it)"
    if step.never_late:  # (stamps clamped to the latest one: ``LateSplit.on_time``)
        return "the sink plan does not run ingestion time without a control column"
    integral = (ST.ByteType, ST.ShortType, ST.IntegerType, ST.LongType)
    for a in step.p.aggregates:
        c = a.fn.column
        if c in (None, "*") or c in step.read_values:  # (read as doubles)
            continue
        if not isinstance(step.schema[str(c)].dataType, integral):
            return f"the sink plan aggregates integers and floating-point numbers, not {c}"
    return None


def sink_checked(step: NativeStep, source: DataFrame) -> bool:
    """True, or ValueError saying why the sink plan cannot run ``step`` (``plan='arrow'``)."""
    why = arrow_unsupported(step, source)
    if why is not None:
        raise ValueError(f"plan 'arrow' cannot run this pipeline: {why}")
    return True
