"""What ``panes.window()`` returns, one type per mode: ``BoundedResult`` (bounded input: the panes and
dead letters as DataFrames), ``NativeStreamResult`` (streaming input on the native plan:
``write_stream`` runs it) and ``StatefulStreamResult`` (streaming input on the stateful plan:
streaming DataFrames of panes and dead letters, and ``write_stream``)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as ST

from ..core.engine.columnar import StateFormatError
from ..core.pipeline import Pipeline
from .connect import check_stream, is_connect, local_checkpoint_refusal
from .metrics import INPUT, counted_per_read
from .native.arrow_sink import PLAN_TEXT as SINK_PLAN_TEXT
from .session import plan_building
from .state_reader import layout_refusal
from .stateful import dead_letters_of, panes_of
from .stateful_batch import CountsCallback, StatefulBatches
from .stateful_counts import COUNTS, observed
from .window_pipeline import is_sql

if TYPE_CHECKING:
    from pyspark.sql.streaming import StreamingQuery

    from .native.arrow_stream import ArrowStream
    from .native.step import NativeStep
    from .native.store import NativeStream

#: a callback ``f(df, batch_id)`` of ``write_stream``
Callback = Callable[[DataFrame, int], Any]


class WindowedResult:
    """The result of ``window()``: ``plan`` says which plan runs it, and why."""

    def __init__(self, plan: str):
        self.plan = plan

    @property
    def panes(self) -> DataFrame:
        raise NotImplementedError

    @property
    def dead_letters(self) -> DataFrame:
        raise NotImplementedError

    def write_stream(
        self,
        on_panes: Callback,
        on_dead_letters: Callback,
        checkpoint: str,
        query_name: str | None = None,
        ordered: bool = False,
        **trigger: Any,
    ) -> StreamingQuery:
        """Start one streaming query that hands each micro-batch's panes and dead letters to the
        two callbacks ``f(df, batch_id)`` (the dead letters only for a micro-batch that has some).
        ``trigger`` is passed to ``DataStreamWriter.trigger``. ``ordered`` (native plan): the
        panes carry the engine's emission order (for replays). panes' counts: on the native plan
        in Spark's progress (``observedMetrics["panes"]``), on the stateful plan handed to its
        ``on_counts``."""
        raise ValueError("write_stream is for streaming input; write .panes and .dead_letters directly")

    def no_panes(self, panes: DataFrame) -> bool:
        """Whether ``panes``, handed to ``write_stream``'s panes callback, are the stateful plan's
        DataFrame of a micro-batch without panes (a callback need not count or write them)."""
        return False

    def has_rows(self, df: DataFrame) -> bool:
        """Whether ``df``, handed to one of ``write_stream``'s callbacks, is known to hold rows (the
        stateful plan counts them first: ``stateful_batch``), so a sink need not count it first."""
        return False

    @staticmethod
    def _start(
        source: DataFrame,
        each: Callback,
        checkpoint: str,
        query_name: str | None,
        trigger: dict[str, Any],
        plan: str,
        client_files: tuple[str, ...] = (),
    ) -> StreamingQuery:
        """Starts the query; on Spark Connect, once the server said it can run ``plan``."""
        check_stream(source.sparkSession, plan, checkpoint, client_files)
        w = source.writeStream.foreachBatch(each).option("checkpointLocation", checkpoint)
        if query_name:
            w = w.queryName(query_name)
        if trigger:
            w = w.trigger(**trigger)
        return w.start()


class BoundedResult(WindowedResult):
    """Bounded input: the final answer, ``panes`` and ``dead_letters`` as DataFrames."""

    def __init__(self, plan: str, panes: DataFrame, dead_letters: DataFrame | Callable[[], DataFrame]):
        super().__init__(plan)
        # (dead letters may come as a function: planned when first asked for, as planning costs
        # JVM round trips)
        self._panes, self._dead_letters = panes, dead_letters

    @property
    def panes(self) -> DataFrame:
        return self._panes

    @property
    def dead_letters(self) -> DataFrame:
        if callable(self._dead_letters):
            with plan_building():
                self._dead_letters = self._dead_letters()
        return self._dead_letters


class NativeStreamResult(WindowedResult):
    """Streaming input on the native plan: the windows are computed per micro-batch in
    ``foreachBatch``; ``write_stream`` runs it. There is no streaming DataFrame of panes to hand
    out (``plan="stateful"`` gives one, e.g. to chain further streaming operators). ``step``:
    the native step; ``source``: the prepared stream it runs on."""

    def __init__(
        self,
        plan: str,
        step: NativeStep,
        source: DataFrame,
        end_rows: Callable[[], DataFrame] | None = None,
        sink: bool = False,
    ):
        super().__init__(SINK_PLAN_TEXT if sink else plan)
        self.step = step
        self.source = source
        #: the sink plan runs it (``native.arrow_sink``), not foreachBatch
        self.sink = sink
        self.arrow: ArrowStream | None = None  # the last query's (``write_stream``), on the sink plan
        #: the micro-batch of one control row that ends the input (a stream with a control column)
        self.end_rows = end_rows
        self.stream: NativeStream | None = None  # the last query's (``write_stream``): its watermark

    def _none(self, what: str) -> ValueError:
        return ValueError(
            f"the native streaming plan has no streaming DataFrame of {what}: run it with "
            f"write_stream(on_panes, on_dead_letters, checkpoint), or pass plan='stateful'"
        )

    @property
    def panes(self) -> DataFrame:
        raise self._none("panes")

    @property
    def dead_letters(self) -> DataFrame:
        raise self._none("dead letters")

    def write_stream(
        self,
        on_panes: Callback,
        on_dead_letters: Callback,
        checkpoint: str,
        query_name: str | None = None,
        ordered: bool = False,
        **trigger: Any,
    ) -> StreamingQuery:
        """See ``WindowedResult.write_stream``; ``on_dead_letters`` is called only for a
        micro-batch that has some."""
        from .native.store import NativeStream

        why = local_checkpoint_refusal(checkpoint)
        if why:
            raise ValueError(why)
        if is_connect(self.source.sparkSession):  # (the server's foreachBatch worker resolves the state's path)
            checkpoint = str(Path(checkpoint).resolve())
        if self.sink:
            from .native.arrow_stream import ArrowStream

            arrow = self.arrow = ArrowStream(self.step, self.source, checkpoint, ordered)
            self.stream = arrow.stream
            check_stream(self.source.sparkSession, "native", checkpoint, (str(arrow.root),))
            return arrow.start(checkpoint, query_name, trigger, (on_panes, on_dead_letters))
        stream = self.stream = NativeStream(self.step, checkpoint, ordered)
        cache = counted_per_read(self.source.sparkSession.version)

        def each(batch: DataFrame, batch_id: int) -> None:
            if not cache:
                stream.run(batch, batch_id, on_panes, on_dead_letters)
                return
            batch = batch.cache()  # (its observed metrics: see counted_per_read)
            try:
                stream.run(batch, batch_id, on_panes, on_dead_letters)
            finally:
                batch.unpersist()

        return self._start(self.source, each, checkpoint, query_name, trigger, "native", (str(stream.root),))

    def end_input(self, on_panes: Callback, on_dead_letters: Callback, batch_id: int) -> None:
        """Ends the input of the stream the last ``write_stream`` ran, once its query stopped: in
        this process, the step of micro-batch ``batch_id`` (the one after the query's last) over
        one control row that moves the watermark to the end of time, as the control stream's
        record would in a micro-batch of its own, without starting a query for it. Its version of
        the state is the one a micro-batch ``batch_id`` that Spark runs later rewrites. For the
        default trigger, that step's panes without the row (``NativeStream.end``)."""
        if self.stream is None or self.end_rows is None:
            raise ValueError("end_input ends the input of a stream that write_stream ran, with a control column")
        if self.stream.end(self.source.sparkSession, batch_id, on_panes):
            if self.arrow is not None:  # (its version delivered here, not by the sink's delivery)
                self.arrow.mark_delivered(batch_id)
            return
        with plan_building():
            rows = self.end_rows()
        self.stream.run(rows, batch_id, on_panes, on_dead_letters)


class StatefulStreamResult(WindowedResult):
    """Streaming input on the stateful plan: ``panes`` and ``dead_letters`` are streaming
    DataFrames, both from ``combined`` (one query computes both: ``write_stream`` writes each to
    its callback). With allowed lateness, ``write_stream`` decides the timing of the panes that
    other buckets' holds may keep ON_TIME (``stateful_timing.OutputWatermarks``, its decisions kept in
    the checkpoint); the streaming ``panes`` gives them ON_TIME, as their bucket alone would not."""

    def __init__(self, plan: str, combined: DataFrame, pipeline: Pipeline, input_schema: ST.StructType, buckets: int):
        super().__init__(plan)
        self.combined = combined
        self.pipeline = pipeline
        self.input_schema = input_schema
        self.buckets = buckets
        #: the table of a micro-batch's window pipeline rows (its SQL reads it), one per result
        self.view = f"__panes_rows_{uuid.uuid4().hex}"
        # (planned when first asked for: ``write_stream`` reads each micro-batch's output itself,
        # and planning costs JVM round trips)
        self._panes: DataFrame | None = None
        self._dead_letters: DataFrame | None = None
        self.batches: StatefulBatches | None = None  # the last query's (``write_stream``)

    @property
    def panes(self) -> DataFrame:
        if is_sql(self.pipeline):  # (a streaming DataFrame has no ranking by row)
            raise ValueError(
                "a window pipeline's SQL runs per micro-batch, over the rows of the windows that fire: "
                "run it with write_stream(on_panes, on_dead_letters, checkpoint)"
            )
        if self._panes is None:
            with plan_building():
                self._panes = panes_of(self.observed(), self.pipeline, self.input_schema)
        return self._panes

    @property
    def dead_letters(self) -> DataFrame:
        if self._dead_letters is None:
            with plan_building():
                self._dead_letters = dead_letters_of(self.observed())
        return self._dead_letters

    def observed(self) -> DataFrame:
        """The processor's output with panes' counts as Spark observed metrics
        (``observedMetrics["panes"]``, ``stateful_counts``): a query the user writes from ``panes``
        or ``dead_letters`` shows them in its progress. (``write_stream`` hands them to its
        ``on_counts``, without an observation.)"""
        return self.combined.observe(INPUT, *observed(F.col(COUNTS)))

    def no_panes(self, panes: DataFrame) -> bool:
        return self.batches is not None and self.batches.is_no_panes(panes)

    def has_rows(self, df: DataFrame) -> bool:
        return self.batches is not None and self.batches.has_rows(df)

    def write_stream(
        self,
        on_panes: Callback,
        on_dead_letters: Callback,
        checkpoint: str,
        query_name: str | None = None,
        ordered: bool = False,
        on_counts: CountsCallback | None = None,
        **trigger: Any,
    ) -> StreamingQuery:
        """See ``WindowedResult.write_stream`` (and ``stateful_batch``: a micro-batch's callbacks
        get only what there is). ``on_counts(counts, batch_id)``: each micro-batch's counts, a dict
        (``stateful_counts``), before its callbacks run."""
        refusal = layout_refusal(self.combined.sparkSession, checkpoint, self.buckets)
        if refusal is not None:
            raise StateFormatError(refusal)
        batches = self.batches = StatefulBatches(self.pipeline, self.input_schema, checkpoint, self.view)

        def each(batch: DataFrame, batch_id: int) -> None:
            batches.run(batch, batch_id, on_panes, on_dead_letters, on_counts)

        return self._start(self.combined, each, checkpoint, query_name, trigger, "stateful")
