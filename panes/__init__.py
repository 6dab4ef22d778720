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

from typing import Any

from .core.aggregates import CombineFn
from .core.pipeline import Pipeline, WatermarkStrategy

__version__ = "0.1.0"
__all__ = ["window", "pipeline", "Pipeline", "WatermarkStrategy", "CombineFn", "__version__"]


def pipeline(spec: "dict | str | Pipeline") -> Pipeline:
    """A core Pipeline from a spec mapping, a YAML/JSON file path, or a Pipeline."""
    if isinstance(spec, Pipeline):
        return spec
    from .spec import load_document, parse_pipeline_spec

    doc = load_document(spec) if isinstance(spec, str) else dict(spec)
    run_fields = ("source", "sink", "dead_letter", "checkpoint", "spark", "mode", "timeout")
    return parse_pipeline_spec({k: v for k, v in doc.items() if k not in run_fields}).to_pipeline()


def window(df: Any, spec: "dict | str | Pipeline", *, buckets: int = 8, plan: str = "auto"):
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
