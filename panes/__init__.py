"""panes: event-time windowing for PySpark — the Dataflow model (windows, watermarks, triggers,
accumulation modes, late data) on Spark Structured Streaming and on bounded DataFrames.

    import panes
    result = panes.window(df, {
        "event_time": "created_at",
        "key": ["traffic_light"],
        "window": {"tumbling": {"size": "1 hour"}},
        "aggregates": {"cars": {"count_distinct": "registration_plate"},
                       "passengers": {"sum": "passengers"}},
    })
    result.panes          # DataFrame of window results (bounded input; streaming with plan="stateful")
    result.dead_letters   # DataFrame of late and malformed records, with the reason
    result.write_stream(on_panes, on_dead_letters, checkpoint)   # streaming input, any plan

The spec mapping, a YAML/JSON file and ``panes.core.Pipeline`` objects are interchangeable.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

from .core.aggregates import (
    Aggregate,
    AggregateFn,
    Avg,
    CollectList,
    CombineFn,
    Count,
    CountDistinct,
    First,
    Last,
    Max,
    Median,
    Min,
    Percentile,
    Sum,
    TopK,
    UserCombine,
)
from .core.pipeline import Pipeline, WatermarkStrategy
from .core.stages import Input, MergeAccumulation, Stage, StageGraph
from .core.table import Table
from .core.triggers import (
    BEAM_DEFAULT,
    AfterAll,
    AfterAny,
    AfterCount,
    AfterEach,
    AfterProcessingTime,
    AfterWatermark,
    Never,
    OrFinally,
    Repeatedly,
    Trigger,
)
from .core.window_pipeline import FunctionTransform, SqlTransform, WindowPipeline
from .core.windows import GlobalWindows, Hopping, Sessions, Sliding, Tumbling, WindowFn

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from .spark.planner import WindowedResult
    from .spark.stages.plan import StagesResult

__version__ = "0.1.0"
__all__ = [
    "window",
    "pipeline",
    "state",
    "Pipeline",
    "WatermarkStrategy",
    "__version__",
    # multi-stage pipelines
    "stages",
    "stage_graph",
    "StageGraph",
    "Stage",
    "Input",
    "MergeAccumulation",
    # windows
    "WindowFn",
    "Tumbling",
    "Hopping",
    "Sessions",
    "Sliding",
    "GlobalWindows",
    # triggers
    "Trigger",
    "Never",
    "AfterWatermark",
    "AfterCount",
    "AfterProcessingTime",
    "Repeatedly",
    "AfterAny",
    "AfterAll",
    "AfterEach",
    "OrFinally",
    "BEAM_DEFAULT",
    # aggregates
    "Aggregate",
    "AggregateFn",
    "Count",
    "Sum",
    "Min",
    "Max",
    "Avg",
    "Median",
    "Percentile",
    "First",
    "Last",
    "CollectList",
    "CountDistinct",
    "TopK",
    "UserCombine",
    "CombineFn",
    # window pipelines: a pane that is a table
    "WindowPipeline",
    "SqlTransform",
    "FunctionTransform",
    "Table",
]


def _document(path: str | Path) -> dict:
    from .spec import load_document

    return load_document(path)


def pipeline(spec: dict | str | Path | Pipeline) -> Pipeline:
    """A core Pipeline from a spec mapping, a YAML/JSON file path, or a Pipeline."""
    if isinstance(spec, Pipeline):
        return spec
    from .spec import RUN_FIELDS, load_document, parse_pipeline_spec

    doc = load_document(spec) if isinstance(spec, (str, Path)) else dict(spec)
    return parse_pipeline_spec({k: v for k, v in doc.items() if k not in RUN_FIELDS}).to_pipeline()


def stage_graph(spec: dict | str | Path | StageGraph) -> StageGraph:
    """A core StageGraph from a multi-stage spec mapping (``inputs``, ``stages``, ``output``), a
    YAML/JSON file path, or a StageGraph."""
    if isinstance(spec, StageGraph):
        return spec
    from .spec import load_document
    from .stage_spec import RUN_ONLY, parse_stages_spec

    doc = load_document(spec) if isinstance(spec, (str, Path)) else dict(spec)
    doc = {k: v for k, v in doc.items() if k not in RUN_ONLY}
    doc["inputs"] = {n: {k: v for k, v in (i or {}).items() if k != "source"} for n, i in doc.get("inputs", {}).items()}
    return parse_stages_spec(doc).to_graph()


def stages(
    inputs: dict[str, DataFrame], spec: dict | str | Path | StageGraph, *, buckets: int | None = None
) -> StagesResult:
    """Run a multi-stage pipeline (chained stages, merges of two streams) on named DataFrames, one
    per input of the spec. Bounded inputs: ``result.panes`` (the output stage's), ``result.stage(name)``
    and ``result.dead_letters``. Streaming inputs: ``result.write_stream(on_panes, on_dead_letters,
    checkpoint)``. ``buckets``: of each stage's key (None: one per shuffle partition of the session)."""
    from .spark.bucket_layout import default_buckets
    from .spark.session import plan_building
    from .spark.stages.plan import stages_batch, stages_stream

    graph = stage_graph(spec)
    streaming = {n: df.isStreaming for n, df in inputs.items()}
    if len(set(streaming.values())) > 1:
        raise ValueError(f"the inputs are all streaming or all bounded, not a mix: {streaming}")
    if buckets is None:
        buckets = default_buckets(next(iter(inputs.values())).sparkSession)
    with plan_building():
        if any(streaming.values()):
            return stages_stream(inputs, graph, buckets=buckets)
        return stages_batch(inputs, graph, buckets=buckets)


def window(
    df: DataFrame | dict[str, DataFrame],
    spec: dict | str | Path | Pipeline | StageGraph,
    *,
    buckets: int | None = None,
    plan: Literal["auto", "native", "stateful"] = "auto",
) -> WindowedResult | StagesResult:
    """Window a Spark DataFrame (a dict of named DataFrames and a multi-stage spec: ``stages``).
    Bounded input gives the final answer the stream converges to (one pane per window). Streaming
    input: ``result.write_stream(on_panes, on_dead_letters, checkpoint)`` runs it; ``plan`` picks
    native Spark (``auto`` when the pipeline allows it) or the stateful engine (``"stateful"``:
    also gives ``result.panes`` as a streaming DataFrame). ``buckets``: hash buckets of the key on
    the engine's plans, fixed for a checkpoint (None: one per shuffle partition of the session)."""
    from .spark.planner import window_batch, window_stream
    from .spark.session import plan_building
    from .stage_spec import is_stages_document

    multi = (isinstance(spec, dict) and is_stages_document(spec)) or (
        isinstance(spec, (str, Path)) and is_stages_document(_document(spec))
    )
    if isinstance(spec, StageGraph) or isinstance(df, dict) or multi:
        if isinstance(spec, Pipeline):
            raise TypeError("a dict of DataFrames takes a multi-stage spec (inputs, stages, output), not a Pipeline")
        graph = stage_graph(spec)
        frames = df if isinstance(df, dict) else {graph.input_names[0]: df}
        return stages(frames, graph, buckets=buckets)
    p = pipeline(spec)
    with plan_building():
        if df.isStreaming:
            return window_stream(df, p, buckets=buckets, plan=plan)
        return window_batch(df, p, buckets=buckets)


def state(
    spec: str | Path | dict, key: object = None, time_from: object = None, time_to: object = None, spark=None
) -> DataFrame:
    """The open windows of a stream's checkpoint (the spec's ``checkpoint``) as a DataFrame: key,
    window bounds, each aggregate's value now, ``panes_emitted``, ``pending_records``, ``closes_at``
    and ``watermark``; of one ``key`` and with a start in ``[time_from, time_to]`` when given, as
    Kafka Streams' window-store ``fetch(key, from, to)``. Reads the last committed version and
    changes nothing: safe while the query runs."""
    from .window_state import state as read_state

    return read_state(spec, key, time_from, time_to, spark)
