"""The open windows of a stream's state as rows (``panes state``; Kafka Streams' window-store
``fetch(key, from, to)``): each window's key, bounds, current aggregates and what a pane has not yet
shown, read without changing the state.

A row's values are what the window's next pane would carry now (accumulating: all its records; in
discarding mode, those since its last pane). ``pending_records``: its records that no pane has
shown yet; ``panes_emitted``: the panes it gave so far; ``closes_at``: the watermark at which it
gives its last pane and is dropped (its end plus the allowed lateness). Times are epoch ms here; the
plans' readers make them timestamps. A window whose trigger finished (kept only as a tombstone of
its bounds until it expires) is not open.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from . import rules
from .engine import Engine, EngineState
from .pipeline import Pipeline
from .windows import GlobalWindows

#: the columns of an open window after its key columns and before its aggregates, and after them
HEAD = ("window_start", "window_end")
TAIL = ("panes_emitted", "pending_records", "closes_at", "watermark")


@dataclass(frozen=True)
class WindowQuery:
    """Which windows to list: of one key (its values in key-column order, compared as text), whose
    start is in ``[time_from, time_to]`` (ms, inclusive; None: unbounded), as ``fetch(key, from, to)``."""

    key: tuple[str, ...] | None = None
    time_from: int | None = None
    time_to: int | None = None

    def check(self, pipeline: Pipeline) -> str | None:
        """Why the query does not fit the pipeline (None: it does)."""
        if self.key is not None and len(self.key) != len(pipeline.key):
            if not pipeline.key:
                return "the pipeline has no key"
            return (
                f"the key has {len(pipeline.key)} column(s) ({', '.join(pipeline.key)}); {len(self.key)} value(s) given"
            )
        if self.time_from is not None and self.time_to is not None and self.time_from > self.time_to:
            return "--from is after --to"
        return None

    def wants_key(self, key: Sequence[Any]) -> bool:
        return self.key is None or tuple(key_text(v) for v in key) == self.key

    def wants_start(self, start: int | None) -> bool:
        if start is None:  # (the global window: no start, in every range)
            return True
        return (self.time_from is None or start >= self.time_from) and (self.time_to is None or start <= self.time_to)


def key_text(v: Any) -> str:
    """A key value as the command line gives it (a boolean as ``true``/``false``)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def columns(pipeline: Pipeline) -> list[str]:
    """The columns of an open window's row, in order."""
    return [*pipeline.key, *HEAD, *(a.output for a in pipeline.aggregates), *TAIL]


def open_windows(
    pipeline: Pipeline, states: Iterable[EngineState], watermark: int, query: WindowQuery = WindowQuery()
) -> list[dict]:
    """The open windows of the engine states ``states`` (the stateful plan keeps one per hash bucket
    of the key) as rows, in (key, start) order; ``watermark``: the stream's."""
    engine = Engine(pipeline)
    is_global = isinstance(pipeline.window, GlobalWindows)
    rows = []
    for state in states:
        for key, windows in state.keys.items():
            if not query.wants_key(key):
                continue
            for ws in windows.values():
                start = None if is_global else ws.start
                if ws.closed or ws.acc is None or not query.wants_start(start):
                    continue
                values = () if pipeline.window_pipeline is not None else engine.firing.values(key, ws)
                rows.append(
                    {
                        **dict(zip(pipeline.key, key)),
                        "window_start": start,
                        "window_end": None if is_global else pipeline.window.report_end(ws.end),
                        **{a.output: v for a, v in zip(pipeline.aggregates, values)},
                        "panes_emitted": ws.next_index,
                        "pending_records": ws.new_count,
                        "closes_at": None if is_global else rules.expiry(ws.end, pipeline.allowed_lateness),
                        "watermark": watermark,
                    }
                )
    rows.sort(key=lambda r: (tuple(key_text(r[k]) for k in pipeline.key), r["window_start"] or 0, r["window_end"] or 0))
    return rows
