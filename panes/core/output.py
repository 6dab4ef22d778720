"""One converter from the engine's panes and dead letters to records (plain mappings), as the
replay prints them and the sinks receive them."""

from __future__ import annotations

from typing import Any

from .engine import DeadLetter, Pane, sort_key
from .pipeline import Pipeline
from .table import Table
from .time import format_instant
from .windows import GlobalWindows


def pane_head(p: Pane, pipeline: Pipeline) -> dict:
    """What every record of a pane starts with: key columns, window bounds (ISO-8601), pane
    metadata."""
    out: dict[str, Any] = {}
    for name, v in zip(pipeline.key, p.key):
        out[name] = v
    is_global = isinstance(pipeline.window, GlobalWindows)
    out["window_start"] = None if is_global else format_instant(p.window_start)
    out["window_end"] = None if is_global else format_instant(p.window_end)
    out["timing"] = p.timing
    out["pane_index"] = p.pane_index
    out["is_last"] = p.is_last
    out["retraction"] = p.retraction
    return out


def pane_record(p: Pane, pipeline: Pipeline) -> dict:
    """A pane of aggregates as a record: key columns, window bounds, pane metadata, aggregates."""
    out = pane_head(p, pipeline)
    for a, v in zip(pipeline.aggregates, p.values):
        out[a.output] = _jsonable(v)
    return out


def pane_table(p: Pane) -> Table | None:
    """A table-valued pane's table (a window pipeline's, a join's), else None."""
    return p.values[0] if len(p.values) == 1 and isinstance(p.values[0], Table) else None


def pane_records(p: Pane, pipeline: Pipeline) -> list[dict]:
    """A pane as records: one for a pane of aggregates; for a table-valued pane one per row of its
    table (none for an empty table), each with the pane's key, window bounds and metadata, then
    the table's columns. A table column named like one of those is the pane's own (a pipeline
    that selects the key or the window bounds), shown once."""
    table = pane_table(p)
    if table is None:
        return [pane_record(p, pipeline)]
    head = pane_head(p, pipeline)
    return [{**head, **row} for row in table.without(head).records()]


def _jsonable(v: Any) -> Any:
    if isinstance(v, (set, frozenset)):
        return sorted(v)
    if isinstance(v, tuple):
        return list(v)
    return v


def dead_letter_record(d: DeadLetter) -> dict:
    """A dead letter as a record: reason, the original record, and what made it late."""
    out: dict[str, Any] = {"reason": str(d.reason), "record": d.record}
    if d.watermark is not None:
        out["watermark"] = format_instant(d.watermark)
    if d.windows:
        wins = [{"start": format_instant(s), "end": format_instant(e)} for s, e in d.windows]
        out["window"] = wins[0]
        out["windows"] = wins
    if d.detail:
        out["detail"] = d.detail
    return out


# -- for columnar sinks and for plans that collect panes out of order (the Spark adapter) ----------------

#: a pane record's metadata fields, after the key columns and the window bounds
PANE_FIELDS = ("timing", "pane_index", "is_last", "retraction")


def emission_order(p: Pane) -> tuple:
    """The order in which one firing of the engine emits its panes: window end, start, key."""
    return (p.window_end, p.window_start, tuple(sort_key(v) for v in p.key))


def pane_columns(panes: list[Pane], pipeline: Pipeline) -> dict[str, list]:
    """Panes as columns, one list per field of ``pane_record`` in its order: the window bounds as
    epoch ms (None for the global window), the aggregates' values as the engine made them."""
    n = len(panes)
    cols: dict[str, list] = {name: [p.key[j] for p in panes] for j, name in enumerate(pipeline.key)}
    is_global = isinstance(pipeline.window, GlobalWindows)
    cols["window_start"] = [None] * n if is_global else [p.window_start for p in panes]
    cols["window_end"] = [None] * n if is_global else [p.window_end for p in panes]
    for name in PANE_FIELDS:
        cols[name] = [getattr(p, name) for p in panes]
    for j, a in enumerate(pipeline.aggregates):
        cols[a.output] = [p.values[j] for p in panes]
    return cols
