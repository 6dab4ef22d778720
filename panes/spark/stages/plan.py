"""Multi-stage pipelines on DataFrames: ``stages_stream`` (streaming inputs: the foreachBatch plan
of ``stream``) and ``stages_batch`` (bounded inputs: the final answer the stream converges to).

The batch plan is the stream's step run once over all the rows, then the end of every input,
with each stage's final-answer form (one pane per window: the default trigger, accumulating, no
lateness): so a batch's answer is, by construction, what the stream says at the end.
"""

from __future__ import annotations

import functools
import shutil
import tempfile
import time
from dataclasses import replace

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as ST

from ...core.engine.columnar import StateFormatError
from ...core.stages import StageGraph
from ...core.stages.accounts import GraphAccounting, StagesProgress
from ...core.triggers import Never
from ..columns import CLOCK, DETAIL, INVALID, PUNCT, SPARK_END_MS, TS
from ..connect import check_stream
from .buckets import HIDDEN, KIND, ROW
from .schema import DEAD_LETTERS, pane_schema, typed
from .stream import StagesStream
from .transport import INPUT, RECORD, input_rows, record_columns

EXPLAIN = (
    "stages: one foreachBatch query over the union of the inputs; per micro-batch each stage's step "
    "runs in order as the core engine over hash buckets of its key (its state under the checkpoint), "
    "the driver keeping each input's watermark and each stage's output watermark"
)


BATCH_EXPLAIN = (
    "batch: every stage's step once over all the rows (the core engine over hash buckets of its "
    "key), then the end of every input; each stage one pane per window"
)


class StagesResult:
    """What ``panes.stages`` returns.

    - Bounded inputs: ``panes`` (the output stage's), ``stage(name)`` (any stage's) and
      ``dead_letters`` are DataFrames, read from rows the result keeps cached until ``unpersist()``.
    - Streaming inputs: ``write_stream(on_panes, on_dead_letters, checkpoint)`` runs it; each
      micro-batch's output-stage panes and dead letters go to the callbacks.
    """

    def __init__(
        self,
        graph: StageGraph,
        schemas: dict[str, ST.StructType],
        source: DataFrame | None = None,
        buckets: int = 8,
        frames: dict[str, DataFrame] | None = None,
        dead: DataFrame | None = None,
    ):
        self.graph, self.schemas, self.source, self.buckets = graph, schemas, source, buckets
        self.frames, self.dead = frames, dead
        self.plan = EXPLAIN
        #: bounded inputs: what the result's DataFrames read, cached (``unpersist``)
        self.cached: list[DataFrame] = []
        #: bounded inputs (``stages_batch(account=True)``): where each input's records went
        self.accounting: GraphAccounting | None = None

    def schema(self, stage: str | None = None) -> ST.StructType:
        """A stage's panes' schema (the output stage's by default)."""
        return pane_schema(self.graph, stage or self.graph.output_stage.name, self.schemas)

    def stage(self, name: str) -> DataFrame:
        if self.frames is None:
            raise ValueError("a stream's panes go to write_stream(on_panes, on_dead_letters, checkpoint)")
        return typed(self.frames[name], self.schema(name))

    @property
    def panes(self) -> DataFrame:
        return self.stage(self.graph.output_stage.name)

    def unpersist(self) -> None:
        """Bounded inputs: free the cached rows the result's DataFrames read (the input and every
        stage's rows: the core engine ran once, over all of them). A DataFrame of the result read
        after this runs every stage again."""
        for df in self.cached:
            df.unpersist()
        self.cached = []

    @property
    def dead_letters(self) -> DataFrame:
        if self.dead is None:
            raise ValueError("a stream's dead letters go to write_stream(on_panes, on_dead_letters, checkpoint)")
        return typed(self.dead, DEAD_LETTERS)

    def write_stream(
        self,
        on_panes,
        on_dead_letters,
        checkpoint: str,
        query_name: str | None = None,
        scripted_clock: bool = False,
        on_accounting=None,
        on_progress=None,
        client_files: tuple[str, ...] = (),
        **trigger,
    ):
        """Start the streaming query; ``f(df, batch_id)`` gets each micro-batch's output-stage panes
        and dead letters (typed DataFrames); ``on_accounting(accounting, batch_id)``, when given,
        where its input records went (``core.stages.accounts.GraphAccounting``); ``on_progress``,
        when given, the micro-batch after its callbacks (``StagesProgress``). On Spark Connect they
        run on the server, on a copy of what they close over; ``client_files``: paths this process
        wrote that the server must read (``connect.stream_refusal``)."""
        if self.source is None:
            raise ValueError("write_stream is for streaming inputs; read .panes and .dead_letters")
        # (on Spark Connect the plan and the callbacks run in the server's foreachBatch worker)
        check_stream(self.source.sparkSession, "stages", checkpoint, client_files)
        plan = StagesStream(
            self.graph,
            self.schemas,
            checkpoint,
            self.buckets,
            scripted_clock,
            account=on_accounting is not None or on_progress is not None,
        )
        refusal = plan.layout_refusal()
        if refusal is not None:
            raise StateFormatError(refusal)
        each = each_micro_batch(plan, self.schema(), on_panes, on_dead_letters, on_accounting, on_progress)
        w = self.source.writeStream.foreachBatch(each).option("checkpointLocation", checkpoint)
        if query_name:
            w = w.queryName(query_name)
        if trigger:
            w = w.trigger(**trigger)
        return w.start()


def each_micro_batch(plan: StagesStream, pane_type, on_panes, on_dead_letters, on_accounting, on_progress):
    """The query's ``foreachBatch`` function: the plan's step, then the callbacks (``write_stream``)."""

    def each(batch, batch_id):
        started = time.time()
        out = plan.run(batch, batch_id)
        try:
            on_dead_letters(typed(out.dead_letters, DEAD_LETTERS), batch_id)
            on_panes(typed(out.panes, pane_type), batch_id)
            if on_accounting is not None:
                on_accounting(out.accounting, batch_id)
            if on_progress is not None:
                marks = out.watermarks
                on_progress(
                    StagesProgress(
                        batch_id,
                        int(started * 1000),
                        time.time() - started,
                        out.accounting or GraphAccounting(),
                        {name: m["watermark"] for name, m in marks.inputs.items()},
                        {name: m["output"] for name, m in marks.stages.items()},
                    )
                )
        finally:
            out.release()

    return each


def transported(
    frames: dict[str, DataFrame], graph: StageGraph, ingestion: Column | None = None, control_wm: str | None = None
) -> DataFrame:
    """Every input's rows as the stream's columns, in one DataFrame."""
    missing = [n for n in graph.input_names if n not in frames]
    if missing:
        raise ValueError(f"no DataFrame for the inputs {missing} (the spec's inputs: {list(graph.input_names)})")
    parts = [
        input_rows(frames[n], n, graph.input(n), ingestion, control_wm if control_wm in frames[n].columns else None)
        for n in graph.input_names
    ]
    return functools.reduce(lambda a, b: a.unionByName(b), parts)


def with_columns(graph: StageGraph, schemas: dict[str, ST.StructType]) -> StageGraph:
    """The graph with each input's record columns, from its DataFrame's schema where the spec
    does not list them (what a merge's rows hold)."""
    inputs = tuple(
        i
        if i.columns is not None or i.name not in schemas
        else replace(i, columns=tuple(record_columns(schemas[i.name], i)))
        for i in graph.inputs
    )
    return replace(graph, inputs=inputs)


def stages_stream(
    frames: dict[str, DataFrame], graph: StageGraph, buckets: int = 8, control_wm: str | None = None
) -> StagesResult:
    schemas = {n: df.schema for n, df in frames.items()}
    graph = with_columns(graph, schemas)
    return StagesResult(graph, schemas, transported(frames, graph, control_wm=control_wm), buckets)


def final_answer(graph: StageGraph) -> StageGraph:
    """Bounded input: one final pane per window in every stage, whatever its trigger."""
    return replace(
        graph,
        stages=tuple(
            replace(s, trigger=Never(), accumulation="accumulating", allowed_lateness=0, only_updated_panes=False)
            for s in graph.stages
        ),
    )


def stages_batch(
    frames: dict[str, DataFrame], graph: StageGraph, buckets: int = 8, account: bool = False
) -> StagesResult:
    """The final answer over bounded inputs: the stream's step once, then the end of every input.
    ``account``: the result's ``accounting`` says where each input's records went (two small jobs)."""
    spark = next(iter(frames.values())).sparkSession
    final = final_answer(with_columns(graph, {n: df.schema for n, df in frames.items()}))
    rows = transported(frames, final)
    ends = spark.createDataFrame([(n, SPARK_END_MS) for n in graph.input_names], f"{INPUT} string, {PUNCT} long")
    end_rows = ends.select(
        F.col(INPUT),
        F.lit(None).cast("long").alias(TS),
        F.col(PUNCT),
        F.lit(None).cast("string").alias(INVALID),
        F.lit(None).cast("string").alias(DETAIL),
        F.lit(None).cast("long").alias(CLOCK),
        F.lit(None).cast("string").alias(RECORD),
    )
    checkpoint = tempfile.mkdtemp(prefix="panes-stages-batch-")
    try:
        stream = StagesStream(final, {n: df.schema for n, df in frames.items()}, checkpoint, buckets, account=account)
        out = stream.run(rows.unionByName(end_rows), 0)
    finally:
        shutil.rmtree(checkpoint, ignore_errors=True)
    # (every stage's rows are cached: the result reads them, not the inputs again)
    frames_out = {name: df.filter((F.col(KIND) == "P") & ~F.col(HIDDEN)).select(ROW) for name, df in out.rows.items()}
    result = StagesResult(
        final, {n: df.schema for n, df in frames.items()}, None, buckets, frames_out, out.dead_letters.select(ROW)
    )
    result.plan = BATCH_EXPLAIN
    result.accounting = out.accounting
    result.cached = out.cached
    return result
