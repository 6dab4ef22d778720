"""The windowing engine: (state, rows, watermark, processing time) -> (panes, dead letters, state).

Deterministic, with no clock and no I/O. A step of the engine has three phases, each one bundle
of Beam Java's direct runner:

1. the processing-time clock moves: the windows whose processing-time timers fire (the clock is
   strictly after them) are evaluated;
2. ``ingest(state, batch)``: the batch's rows are assigned to windows and checked for lateness
   against the watermark from *before* the batch; rows for windows that expired go to the dead
   letters (once per row, naming the windows they missed), as do rows for windows whose trigger
   finished (``window_closed``); the others are added to their windows' accumulators, a whole
   (key, window) group at a time, and hold the output watermark; then the triggers of the windows
   that got rows are evaluated (Beam evaluates triggers after a bundle, not per element). The
   window family's strategy (``INGEST``) does the adding;
3. the watermark moves (it never goes back): windows whose end-of-window timer fires are
   evaluated, windows that expire (watermark >= end + allowed lateness) emit their final pane if
   there is anything left to say and are purged.

A window's trigger is evaluated only on its own records and its own timers. Pane timing reads the
output watermark as it stood when the phase began (``holds``). ``step`` does all three, computing
the watermark with the pipeline's watermark strategy; the Spark adapter calls ``advance`` with
Spark's watermark and then ``ingest`` for each micro-batch, which is the same sequence of operations.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from .. import rules
from ..pipeline import Pipeline
from ..time import END_OF_INPUT, MAX_TIME, MIN_TIME
from ..triggers import Ctx, TriggerMachine
from .firing import Emitted, Firing, ordered
from .fixed import FixedWindowsIngest
from .holds import Holds
from .ingest import BatchRows, Ingested, IngestStrategy, key_codes, late_letters
from .inherited import InheritedWindowsIngest
from .merging import MergingWindowsIngest
from .record_defined import RecordDefinedIngest
from .state import TS, EngineState, Pane, StepResult, WindowState
from .window_ops import WindowOps

#: window family (``WindowFn.family``) -> its ingest strategy
INGEST: dict[str, type] = {
    "fixed": FixedWindowsIngest,
    "merging": MergingWindowsIngest,
    "record_defined": RecordDefinedIngest,
    "inherited": InheritedWindowsIngest,
}


class Engine:
    """Runs one pipeline. The engine holds no data; all of it is in ``EngineState``."""

    def __init__(self, pipeline: Pipeline, partial: bool = False):
        """``partial``: the engine runs one part of a stage (a Spark bucket), which cannot see the
        other parts' holds: a pane whose timing hangs on them is provisional (``Pane.provisional``)."""
        self.p = pipeline
        self.machine = TriggerMachine(pipeline.trigger)
        self.holds = Holds(pipeline.allowed_lateness)
        self.ops = WindowOps(pipeline, self.machine, self.holds)
        self.firing = Firing(pipeline, self.machine, self.holds, partial)
        self.strategy: IngestStrategy = INGEST[pipeline.window.family](pipeline.window, self.ops)

    def new_state(self) -> EngineState:
        return EngineState()

    def step(
        self,
        state: EngineState,
        batch: pd.DataFrame | None = None,
        *,
        watermark: int | None = None,
        processing_time: int | None = None,
        end: bool = False,
        record_of: Callable[[int], dict | str] | None = None,
        active: bool = False,
    ) -> StepResult:
        """One replay step: the clock moves, the batch is ingested (lateness against the current
        watermark), the watermark moves by the pipeline's strategy and any explicit ``watermark``,
        then what is due fires. ``active``: records arrived even if none is valid (idleness)."""
        out = StepResult()
        has_data = batch is not None and len(batch) > 0
        if processing_time is not None and processing_time > state.processing_time:
            # the clock moves first: processing-time triggers due by then fire before the batch
            # (the batch's records make the source active at that instant: no idleness close)
            out.extend(self.advance(state, None, processing_time, idle=not (has_data or active)))
        if batch is not None and has_data:
            out.extend(self.ingest(state, batch, record_of=record_of))
        strategy = self.p.watermark
        new_wm = rules.watermark_after(
            state.watermark,
            state.max_event_time,
            strategy.max_delay,
            strategy.punctuation,
            MIN_TIME if watermark is None else watermark,
            end,
        )
        out.extend(self.advance(state, new_wm))
        out.output_watermark = self.output_watermark(state)
        return out

    def output_watermark(self, state: EngineState) -> int:
        """The stage's output watermark: the input watermark held back by every window's holds and
        pending event-time timers (what a downstream stage takes as its input watermark)."""
        return self.holds.output_watermark(state)

    def earliest_hold(self, state: EngineState) -> int:
        """The earliest hold or pending event-time timer of the state's windows (END_OF_INPUT: none)."""
        return self.holds.earliest_of_state(state)

    def idle_watermark(self, state: EngineState) -> int:
        """The watermark the idleness timeout allows: the end of the earliest open window whose end
        processing time passed at least ``idle_timeout`` ago while no record arrived since."""
        timeout = self.p.watermark.idle_timeout
        if timeout is None:
            return MIN_TIME
        pt = state.processing_time
        idle_since = state.last_data_time if state.last_data_time is not None else MIN_TIME
        best = MIN_TIME
        # close windows one after another while each one's timeout has run out
        ends = sorted(
            {
                ws.end
                for wins in state.keys.values()
                for ws in wins.values()
                if ws.end > state.watermark and ws.end < MAX_TIME
            }
        )
        for e in ends:
            start_of_timeout = max(e, idle_since)
            if pt >= start_of_timeout + timeout:
                best = e
            else:
                break
        return best

    def ingest(
        self,
        state: EngineState,
        batch: pd.DataFrame,
        processing_time: int | None = None,
        record_of: Callable[[int], dict | str] | None = None,
    ) -> StepResult:
        """Add a batch of valid rows (``__ts`` int64 ms, the key and value columns)."""
        if processing_time is not None:
            state.processing_time = max(state.processing_time, processing_time)
        out = StepResult()
        if len(batch) == 0:
            return out
        self.holds.begin(state)
        rows = self._rows(state, batch)
        ingested = Ingested()
        self.strategy.ingest(state, rows, ingested)
        if ingested.missed:
            out.dead_letters.extend(late_letters(ingested, batch, rows.watermark, record_of, self.p.window.report_end))
            state.metrics["rows_late"] += len(ingested.late)
            state.metrics["rows_closed"] += len(ingested.missed) - len(ingested.late)
        out.counted, out.in_no_window = ingested.counted(len(batch)), ingested.in_no_window
        for name, n in (("rows_counted", out.counted), ("rows_in_gap", out.in_no_window)):
            state.metrics[name] = state.metrics.get(name, 0) + n
        out.panes.extend(self._evaluate(state, ingested.touched))
        state.phase = None
        out.dead_letters.extend(self.firing.take_dead_letters())
        return out

    def _rows(self, state: EngineState, batch: pd.DataFrame) -> BatchRows:
        """The batch as arrays; the state counts its rows and notes its event times."""
        n = len(batch)
        ts = batch[TS].to_numpy(dtype=np.int64)
        seq = np.arange(state.seq, state.seq + n, dtype=np.int64)
        state.seq += n
        state.metrics["rows"] += n
        state.max_event_time = max(state.max_event_time, int(ts.max()))
        state.last_data_time = state.processing_time
        values = {c: batch[c].to_numpy() for c in self.p.input_columns(batch.columns)}
        codes, keys = key_codes(batch, self.p.key)
        return BatchRows(batch, ts, seq, values, codes, keys, state.watermark, state.processing_time)

    def _evaluate(self, state: EngineState, touched: list) -> list[Pane]:
        """Evaluate the triggers of the windows that got data, after the whole batch."""
        wm, pt = state.watermark, state.processing_time
        fired: list[Emitted] = []
        seen = set()
        for key, w in touched:
            if (key, w) in seen:
                continue
            seen.add((key, w))
            ws = state.keys.get(key, {}).get(w)
            if ws is None:
                continue
            if not ws.closed:
                ctx = Ctx(wm, pt, ws.end, self.ops.merging)
                if self.machine.should_fire(ws.trig, ctx):
                    fired.extend(self.firing.fire(state, key, ws, ctx))
            self._wake(state, ws)
        return ordered(fired)

    def advance(
        self, state: EngineState, watermark: int | None = None, processing_time: int | None = None, idle: bool = True
    ) -> StepResult:
        """Move the watermark / processing time and fire what their timers make due. With an
        idleness timeout (and ``idle``: no record arrived at this instant), windows the timeout
        closes move the watermark to their end."""
        if watermark is not None and watermark > state.watermark:
            state.watermark = watermark
        if processing_time is not None and processing_time > state.processing_time:
            state.processing_time = processing_time
        if idle and self.p.watermark.idle_timeout is not None:
            state.watermark = max(state.watermark, self.idle_watermark(state))
        wm, pt = state.watermark, state.processing_time
        clock_due = state.wake_clock is not None and rules.processing_timer_fires(state.wake_clock, pt)
        if wm < state.wake_event and not clock_due:
            return StepResult()  # no timer is due: no window to look at
        self.holds.begin(state)
        emitted: list[Emitted] = []
        state.wake_event, state.wake_clock = END_OF_INPUT, None
        # ([end-of-window timer pending][end] -> ``_due``: windows share their ends, each end's once)
        due_of: tuple[dict, dict] = ({}, {})
        for key in list(state.keys):
            wins = state.keys[key]
            for w in list(wins):
                ws = wins[w]
                dues = due_of[ws.trig.eow]
                due = dues.get(ws.end) or dues.setdefault(ws.end, self._due(ws))
                if due > wm and not ws.trig.clock:
                    if due < state.wake_event:  # (most windows: no timer of theirs is due)
                        state.wake_event = due
                elif self.ops.is_expired(ws.end, wm):
                    # the garbage-collection timer: the final pane, if there is something to say
                    self.holds.release(state, ws)
                    if not ws.closed:
                        emitted.extend(
                            self.firing.emit(state, key, ws, Ctx(wm, pt, ws.end, self.ops.merging), final=True)
                        )
                    del wins[w]
                elif self._timers_fire(ws, wm, pt):
                    self.holds.release(state, ws)
                    if not ws.closed:
                        ctx = Ctx(wm, pt, ws.end, self.ops.merging)
                        if self.machine.should_fire(ws.trig, ctx):
                            emitted.extend(self.firing.fire(state, key, ws, ctx))
                    self._consume_timers(ws, wm, pt)
                    self._wake(state, ws)
                else:
                    self._wake(state, ws)
            if not wins:
                del state.keys[key]
        state.phase = None
        self.strategy.purge(state)
        state.metrics["windows_open"] = sum(len(v) for v in state.keys.values())
        return StepResult(panes=ordered(emitted), dead_letters=self.firing.take_dead_letters())

    @staticmethod
    def _timers_fire(ws: WindowState, wm: int, pt: int) -> bool:
        """Whether one of the window's trigger timers fires: its end-of-window timer (the watermark
        passed its end) or a processing-time timer (the clock is after it)."""
        trig = ws.trig
        return (trig.eow and rules.end_passed(ws.end, wm)) or bool(
            trig.clock and rules.processing_timer_fires(trig.clock[0], pt)
        )

    @staticmethod
    def _consume_timers(ws: WindowState, wm: int, pt: int) -> None:
        trig = ws.trig
        if trig.eow and rules.end_passed(ws.end, wm):
            trig.eow = False
        trig.due_clock_timers(pt)

    def _due(self, ws: WindowState) -> int:
        """The watermark at which something can next happen to a window: its end-of-window timer
        fires, or it expires."""
        expiry = self.ops.expiry(ws.end)
        return min(ws.end, expiry) if ws.trig.eow else expiry

    def next_event_deadline(self, state: EngineState) -> int | None:
        """The smallest watermark at which something can happen (an end-of-window timer or an expiry)."""
        best = None
        for wins in state.keys.values():
            for ws in wins.values():
                d = self._due(ws)
                if best is None or d < best:
                    best = d
        return best

    def _wake(self, state: EngineState, ws: WindowState) -> None:
        """Lower the wake marks to a window's timers."""
        due = self._due(ws)
        if due < state.wake_event:
            state.wake_event = due
        clock = ws.trig.clock
        if clock and (state.wake_clock is None or clock[0] < state.wake_clock):
            state.wake_clock = clock[0]
