"""What the sink plan (``arrow_sink``) runs, known before Spark starts (``sink_unsupported``), and
its partial aggregates on Arrow: each aggregate's partial columns as ``partials.Partial`` names
them, how a task computes them from a group's rows and how the commit merges them, as pyarrow's
hash aggregates. ``ARROW_AGGREGATES`` names them by the core's aggregate class (one line per
aggregate; a pipeline with another aggregate keeps the foreachBatch plan)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ...core import aggregates as A
from ...core.pipeline import Pipeline
from ...core.triggers import Never
from .capability import stream_unsupported

#: the window kinds whose windows follow from a record's time alone (the core's ``WindowFn.assign``)
SINK_WINDOWS = ("tumbling", "hopping", "global")


@dataclass(frozen=True)
class ArrowPartial:
    """One partial column: ``name`` (``partials.Partial.names``), the hash aggregate of a group's
    rows (``column``: the input column; None: every row) and the one that merges partials."""

    name: str
    column: str | None
    of_rows: str
    merge: str


def _count(n: str, fn: A.AggregateFn, value: Callable[[str], str]) -> list[ArrowPartial]:
    if fn.column in (None, "*"):
        return [ArrowPartial(n, None, "count_all", "sum")]
    return [ArrowPartial(n, value(str(fn.column)), "count", "sum")]


def _total(n: str, fn: A.AggregateFn, value: Callable[[str], str]) -> list[ArrowPartial]:
    return [ArrowPartial(n, value(str(fn.column)), "sum", "sum")]


def _average(n: str, fn: A.AggregateFn, value: Callable[[str], str]) -> list[ArrowPartial]:
    c = value(str(fn.column))
    return [ArrowPartial(f"{n}_sum", c, "sum", "sum"), ArrowPartial(f"{n}_count", c, "count", "sum")]


def _minimum(n: str, fn: A.AggregateFn, value: Callable[[str], str]) -> list[ArrowPartial]:
    return [ArrowPartial(n, value(str(fn.column)), "min", "min")]


def _maximum(n: str, fn: A.AggregateFn, value: Callable[[str], str]) -> list[ArrowPartial]:
    return [ArrowPartial(n, value(str(fn.column)), "max", "max")]


ARROW_AGGREGATES: dict[type, Callable[[str, A.AggregateFn, Callable[[str], str]], list[ArrowPartial]]] = {
    A.Count: _count,
    A.Sum: _total,
    A.Avg: _average,
    A.Min: _minimum,
    A.Max: _maximum,
}


def arrow_partials(prefix: str, fn: A.AggregateFn, value: Callable[[str], str]) -> list[ArrowPartial] | None:
    """The Arrow partials of an aggregate whose Spark partials are named from ``prefix``; ``value``:
    the stream's column an input column is read from. None: the aggregate has no Arrow form."""
    form = ARROW_AGGREGATES.get(type(fn))
    return None if form is None else form(prefix, fn, value)


def sink_unsupported(p: Pipeline) -> str | None:
    """Why the sink plan cannot run a streaming pipeline (None: it can, on a classic Spark session
    of PySpark 4.1 or later: ``arrow_stream.arrow_unsupported`` checks the rest)."""
    why = stream_unsupported(p)
    if why is not None:
        return why
    if not isinstance(p.trigger, Never):
        return "the sink plan runs the default trigger"
    if p.window.kind not in SINK_WINDOWS:
        return f"the sink plan runs fixed windows ({', '.join(SINK_WINDOWS)}), not {p.window.kind}"
    bad = [a.output for i, a in enumerate(p.aggregates) if arrow_partials(str(i), a.fn, str) is None]
    return f"the sink plan has no Arrow form of {bad}" if bad else None
