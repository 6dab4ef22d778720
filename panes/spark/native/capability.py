"""What the native plans cover: which windows, triggers and aggregates, on streams and on bounded
input. Pure Python (no Spark import): the command line asks before Spark starts.

A window kind or an aggregate runs natively when it has a line in ``NATIVE_WINDOWS`` or
``NATIVE_AGGREGATES``: its Spark form, named as ``"module:attribute"`` under
``panes.spark.native`` (imported when a plan is built, ``spark_form``), and what it allows.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from ...core import aggregates as A
from ...core.pipeline import Pipeline
from ...core.triggers import AfterCount, AfterWatermark, Never, Repeatedly, Trigger
from ...core.windows import GlobalWindows, Hopping, Sessions, Sliding, Tumbling
from ..registry import registered


@dataclass(frozen=True)
class NativeWindow:
    """A window kind the native plans run."""

    plan: str  # its ``windows.WindowPlan``, "module:class" under panes.spark.native
    streams: bool = True  # on streams too (else on bounded input only)
    #: its windows merge (sessions): a stream step rewrites the kept windows, and a trigger that
    #: fires before the window closes needs the engine
    merges: bool = False


NATIVE_WINDOWS: dict[type, NativeWindow] = {
    Tumbling: NativeWindow("fixed:TumblingPlan"),
    Hopping: NativeWindow("fixed:HoppingPlan"),
    GlobalWindows: NativeWindow("fixed:GlobalPlan"),
    Sessions: NativeWindow("sessions:SessionPlan", merges=True),
    Sliding: NativeWindow("sliding:SlidingPlan", streams=False),
}

#: aggregates whose partial results merge natively across micro-batches: their ``partials`` form
#: (a subclass without a line of its own takes its base class's; user combine functions need the
#: engine)
NATIVE_AGGREGATES: dict[type, str] = {
    A.Count: "partials:count",
    A.Sum: "partials:total",
    A.Avg: "partials:average",
    A.Min: "partials:minimum",
    A.Max: "partials:maximum",
    A.First: "partials:first",
    A.Last: "partials:last",
    A.Percentile: "partials:percentile",  # (and Median)
    A.CollectList: "partials:collect_list",
    A.CountDistinct: "partials:count_distinct",
    A.TopK: "partials:top_k",
}


def spark_form(ref: str) -> Any:
    """The attribute a registry names (``"module:attribute"`` under ``panes.spark.native``)."""
    module, attribute = ref.split(":")
    return getattr(importlib.import_module(f"{__package__}.{module}"), attribute)


def _aggregates_unsupported(p: Pipeline) -> str | None:
    bad = [a.output for a in p.aggregates if registered(NATIVE_AGGREGATES, a.fn) is None]
    return f"aggregates {bad} have no native form" if bad else None


#: why a window pipeline is not the native plans' (``panes.spark.window_pipeline`` runs it)
WINDOW_PIPELINE = (
    "a window pipeline keeps its windows' rows in the engine's state (its SQL runs as Spark SQL "
    "over the rows of the windows that fire)"
)


def batch_unsupported(p: Pipeline) -> str | None:
    """Why a bounded pipeline cannot run on the native plan (None: it can)."""
    if p.window_pipeline is not None:
        return WINDOW_PIPELINE
    if registered(NATIVE_WINDOWS, p.window) is None:
        return f"{p.window.kind} windows"
    return _aggregates_unsupported(p)


def appends(p: Pipeline) -> bool:
    """Whether a stream step may add its rows' partials to the kept windows as a table of their
    own instead of rewriting them all (``store.NativeStream``): the default trigger on windows
    that do not merge, whose partials of a window merge whichever steps made them (the firing
    plans keep each window's trigger state)."""
    native = registered(NATIVE_WINDOWS, p.window)
    return isinstance(p.trigger, Never) and native is not None and not native.merges


def count_of(t: Trigger | None) -> int | None:
    """n for after_count(n) (also under repeatedly), 0 for no trigger, None for anything else."""
    if t is None:
        return 0
    if isinstance(t, Repeatedly):
        t = t.trigger
    return t.count if isinstance(t, AfterCount) else None


def never_late(p: Pipeline) -> bool:
    """Whether no record of a stream can be late: ingestion time (stamps never go back,
    ``rules.ingestion_stamp``) whose watermark follows the stamps alone (no punctuation). Its
    watermark is then the latest stamp - max_delay: a record's window ends after its stamp, which
    is at least the latest one, so no window of it has expired."""
    return p.event_time is None and not p.watermark.punctuation


def _trigger_unsupported(p: Pipeline, native: NativeWindow | None) -> str | None:
    t = p.trigger
    if isinstance(t, Never):
        return None
    desc = t.describe()
    if not isinstance(t, AfterWatermark) or count_of(t.early) is None or count_of(t.late) is None:
        return f"trigger {desc} needs the engine (natively: after_watermark with counts)"
    if t.late is None and p.allowed_lateness > 0:
        return f"trigger {desc} closes windows before they expire, which needs the engine"
    if native is not None and native.merges:
        return f"trigger {desc} on merging {p.window.kind}s needs the engine"
    if p.only_updated_panes:
        return "only_updated_panes needs the engine"
    return None


def stream_unsupported(p: Pipeline) -> str | None:
    """Why a streaming pipeline cannot run on the native plan (None: it can). Natively: the default
    trigger, and after_watermark with early / late firings by count, in any accumulation mode."""
    if p.window_pipeline is not None:
        return WINDOW_PIPELINE
    native = registered(NATIVE_WINDOWS, p.window)
    why = _trigger_unsupported(p, native)
    if why is not None:
        return why
    if native is None or not native.streams:
        return f"{p.window.kind} windows need the engine"
    if p.watermark.idle_timeout is not None:
        return "the idleness timeout needs the processing-time clock"
    return _aggregates_unsupported(p)
