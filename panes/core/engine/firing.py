"""Firing a window: its trigger's ``on_fire``, then its pane (with retractions) if there is
something to say, in the accumulation mode of the pipeline.

Pane timing follows Beam Java's ``PaneInfoTracker.describePane`` (``rules.pane_timing``): LATE
after a pane that was not EARLY, or when the stage's output watermark (``holds``) had passed the
window; else EARLY while the input watermark has not passed the window's end; else ON_TIME. An
empty pane is emitted only when ON_TIME (Beam's FIRE_ALWAYS on-time behaviour), with each
aggregate's value for no input; a pane not emitted takes no index. Every firing releases the
window's holds.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, cast

from .. import rules
from ..aggregates.base import AggregateFn
from ..pipeline import Pipeline
from ..rules import Reason
from ..triggers import Ctx, TriggerMachine
from ..window_pipeline import PaneWindow, WindowPipelineFailed
from ..windows import GlobalWindows
from .holds import Holds
from .state import DeadLetter, EngineState, Pane, WindowState

#: a pane and the key that orders the panes of one evaluation (window end, start, key)
Emitted = tuple[tuple, Pane]


def sort_key(v: Any) -> tuple:
    """A key's value in the order panes of one evaluation are emitted (None first; values of
    different types apart)."""
    return (type(v).__name__, v) if v is not None else ("", 0)


def values_equal(a: tuple | None, b: tuple | None) -> bool:
    """Two panes' values are equal (NaN equal to NaN): an unchanged pane."""
    if a is None or b is None:
        return False
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y):
            continue
        if x != y:
            return False
    return True


def ordered(emitted: list[Emitted]) -> list[Pane]:
    # stable: retractions stay before the pane they precede
    return [p for _, p in sorted(emitted, key=lambda e: e[0])]


class Firing:
    def __init__(self, pipeline: Pipeline, machine: TriggerMachine, holds: Holds, partial: bool = False):
        self.machine = machine
        self.holds = holds
        #: the engine runs one part of the stage (a Spark bucket): see ``Pane.provisional``
        self.partial = partial
        self.aggs = list(pipeline.accumulators)
        self.keeps_rows = pipeline.keeps_rows
        self.discarding = pipeline.accumulation == "discarding"
        self.retracting = pipeline.accumulation == "retracting"
        self.only_updated_panes = pipeline.only_updated_panes
        self.report_end = pipeline.window.report_end
        self.is_global = isinstance(pipeline.window, GlobalWindows)
        #: an aggregate reads the pane's window (a window pipeline's table): else none is built
        self.reads_window = any(type(a).extract_window is not AggregateFn.extract_window for a in self.aggs)
        #: dead letters of windows whose pipeline failed, until the engine takes them
        self.dead_letters: list[DeadLetter] = []

    def fire(self, state: EngineState, key: tuple, ws: WindowState, ctx: Ctx) -> list[Emitted]:
        """The trigger fired: its pane; a finished trigger closes the window."""
        self.machine.on_fire(ws.trig, ctx)
        finished = self.machine.is_finished(ws.trig)
        rows = self.emit(state, key, ws, ctx, final=finished)
        if finished:
            ws.closed = True
            ws.acc = None
        return rows

    def emit(self, state: EngineState, key: tuple, ws: WindowState, ctx: Ctx, final: bool) -> list[Emitted]:
        """onTrigger: emit the pane (and retractions) if there is something to say."""
        timing, undecided = self.timing(state, ws, ctx)
        self.holds.release(state, ws)
        ws.hold = None
        out: list[Emitted] = []
        if not rules.pane_is_emitted(ws.new_count, timing):
            return out
        try:
            values = self.values(key, ws)
        except WindowPipelineFailed as e:
            self.failed(ws, e)
            return out
        skip = self.only_updated_panes and (
            ws.new_count == 0 or (not self.discarding and values_equal(values, ws.last_values))
        )
        if not skip:
            order_key = (ws.end, ws.start, tuple(map(sort_key, key)))
            provisional = (2 if ws.new_count == 0 else 1) if undecided else 0
            if self.retracting:
                retractions = self._retractions(state, key, ws)
                if provisional == 2:  # (the stage may not emit the empty pane: nor what it restates)
                    retractions = [p if p.provisional else replace(p, provisional=3) for p in retractions]
                out.extend((order_key, p) for p in retractions)
            end = self.report_end(ws.end)
            out.append((order_key, Pane(key, ws.start, end, timing, ws.next_index, final, False, values, provisional)))
            state.metrics["panes"] += 1
            ws.next_index += 1
            ws.last_values = values
            ws.last_timing = timing
            ws.last_provisional = provisional
            if timing != rules.EARLY:
                ws.nonearly = True
        if self.discarding:
            ws.acc = [a.create() for a in self.aggs]
        ws.new_count = 0
        return out

    def timing(self, state: EngineState, ws: WindowState, ctx: Ctx) -> tuple[str, bool]:
        """The pane's timing (``rules.pane_timing``), and whether it is provisional. The output
        watermark is looked at only when the input watermark has passed the window and no pane
        that was not EARLY came before; when this engine runs one part of the stage and its own
        holds let the output watermark pass the window, the other parts' may not: ON_TIME,
        provisional."""
        reached = rules.on_time_reached(ws.end, ctx.watermark)
        passed = reached and not ws.nonearly and self.holds.passed(state, ws)
        if passed and self.partial:
            return rules.ON_TIME, True
        return rules.pane_timing(ws.nonearly or passed, reached), False

    def values(self, key: tuple, ws: WindowState) -> tuple:
        """The pane's values: each accumulator's, extracted for the window (a window pipeline's
        table needs the window's bounds); with nothing added since the accumulators were created
        (an empty pane in discarding mode), each aggregate's value for no input."""
        if self.discarding and ws.new_count == 0 and not self.keeps_rows:
            return tuple(a.empty_value() for a in self.aggs)
        if not self.reads_window:
            return tuple([a.extract(acc) for a, acc in zip(self.aggs, ws.acc)])
        window = PaneWindow(key, None, None) if self.is_global else PaneWindow(key, ws.start, self.report_end(ws.end))
        return tuple(a.extract_window(acc, window) for a, acc in zip(self.aggs, ws.acc))

    def failed(self, ws: WindowState, error: WindowPipelineFailed) -> None:
        """The window's pipeline failed: no pane; the rows it ran over go to the dead letters with
        the error, and leave the window (a later pane runs over the rows that come after them)."""
        windows = () if self.is_global else ((ws.start, self.report_end(ws.end)),)
        self.dead_letters += [
            DeadLetter(Reason.WINDOW_PIPELINE_FAILED, r, None, windows, error.detail) for r in error.records
        ]
        ws.acc = [a.create() for a in self.aggs]
        ws.new_count = 0

    def take_dead_letters(self) -> list[DeadLetter]:
        out, self.dead_letters = self.dead_letters, []
        return out

    def _retractions(self, state: EngineState, key: tuple, ws: WindowState) -> list[Pane]:
        """The panes a new pane of ``ws`` restates: those of the windows merged into it, and its
        own previous one."""
        rend = self.report_end
        out = [
            Pane(key, s, rend(e), tm, idx, False, True, vals, prov)
            for (s, e, vals, idx, tm, prov) in ws.pending_retractions
        ]
        ws.pending_retractions = []
        if ws.last_values is not None:
            out.append(
                Pane(
                    key,
                    ws.start,
                    rend(ws.end),
                    cast(str, ws.last_timing),
                    ws.next_index - 1,
                    False,
                    True,
                    ws.last_values,
                    ws.last_provisional,
                )
            )
        state.metrics["retractions"] += len(out)
        return out
