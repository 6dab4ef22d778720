"""One converter from the engine's panes and dead letters to records (plain mappings), as the
replay prints them and the sinks receive them."""

from __future__ import annotations

from typing import Any

from .engine import DeadLetter, Pane
from .pipeline import Pipeline
from .time import format_instant
from .windows import GlobalWindows


def pane_record(p: Pane, pipeline: Pipeline) -> dict:
    """A pane as a record: key columns, window bounds (ISO-8601), pane metadata, aggregates."""
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
    for a, v in zip(pipeline.aggregates, p.values):
        out[a.output] = _jsonable(v)
    return out


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
