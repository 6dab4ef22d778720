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
from .core.table import Table
from .core.window_pipeline import FunctionTransform, SqlTransform, WindowPipeline
from .core.windows import GlobalWindows, Hopping, Sessions, Sliding, Tumbling, WindowFn

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from .spark.planner import WindowedResult

__version__ = "0.1.0"
__all__ = [
    "window", "pipeline", "Pipeline", "WatermarkStrategy", "__version__",
    # windows
    "WindowFn", "Tumbling", "Hopping", "Sessions", "Sliding", "GlobalWindows",
    # triggers
    "Trigger", "Never", "AfterWatermark", "AfterCount", "AfterProcessingTime", "Repeatedly", "AfterAny", "AfterAll",
    "AfterEach", "OrFinally", "BEAM_DEFAULT",
    # aggregates
    "Aggregate", "AggregateFn", "Count", "Sum", "Min", "Max", "Avg", "Median", "Percentile", "First", "Last",
    "CollectList", "CountDistinct", "TopK", "UserCombine", "CombineFn",
    # window pipelines: a pane that is a table
    "WindowPipeline", "SqlTransform", "FunctionTransform", "Table",
]


def pipeline(spec: dict | str | Path | Pipeline) -> Pipeline:
    """A core Pipeline from a spec mapping, a YAML/JSON file path, or a Pipeline."""
    if isinstance(spec, Pipeline):
        return spec
    from .spec import RUN_FIELDS, load_document, parse_pipeline_spec

    doc = load_document(spec) if isinstance(spec, (str, Path)) else dict(spec)
    return parse_pipeline_spec({k: v for k, v in doc.items() if k not in RUN_FIELDS}).to_pipeline()


def window(df: DataFrame, spec: dict | str | Path | Pipeline, *, buckets: int = 8,
           plan: Literal["auto", "native", "stateful"] = "auto") -> WindowedResult:
    """Window a Spark DataFrame. Bounded input gives the final answer the stream converges to (one
    pane per window). Streaming input: ``result.write_stream(on_panes, on_dead_letters,
    checkpoint)`` runs it; ``plan`` picks native Spark (``auto`` when the pipeline allows it) or
    the stateful engine (``"stateful"``: also gives ``result.panes`` as a streaming DataFrame)."""
    from .spark.planner import window_batch, window_stream
    from .spark.session import plan_building

    p = pipeline(spec)
    with plan_building():
        if df.isStreaming:
            return window_stream(df, p, buckets=buckets, plan=plan)
        return window_batch(df, p, buckets=buckets)
