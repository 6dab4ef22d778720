"""The windowing engine: (state, rows, watermark, processing time) -> (panes, dead letters, state).

Deterministic, with no clock and no I/O. A step of the engine is

1. ``ingest(state, batch, processing_time)``: the batch's rows are assigned to windows and checked
   for lateness against the watermark from *before* the batch; rows for windows that are closed go
   to the dead letters (once per row, naming the windows they missed); the others are added to
   their windows' accumulators, a whole (key, window) group at a time; then the triggers of the
   windows that got data are evaluated (Beam evaluates triggers after a bundle, not per element).
2. ``advance(state, watermark, processing_time)``: the watermark (which never goes back) and the
   processing-time clock move; windows whose triggers are ready fire, windows that expire
   (watermark >= end + allowed lateness) emit their final pane if there is anything left to say and
   are purged.

``step`` does both, computing the watermark with the pipeline's watermark strategy; the Spark
adapter calls ``advance`` with Spark's watermark and then ``ingest`` for each micro-batch, which is
the same sequence of operations.

Pane timing follows Beam Java's PaneInfoTracker: EARLY before the watermark passes the window end;
the first pane after it ON_TIME (even when empty, as Beam's FIRE_ALWAYS on-time behaviour); LATE
after a non-early pane, or for a window that came into being when the watermark had already passed
its end.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import numpy as np
import pandas as pd

from . import rules
from .pipeline import Pipeline
from .rules import Reason, Timing
from .time import END_OF_INPUT, MAX_TIME, MIN_TIME
from .triggers import Ctx, TriggerMachine, TriggerState
from .windows import Sessions, Sliding

EARLY, ON_TIME, LATE = Timing.EARLY.value, Timing.ON_TIME.value, Timing.LATE.value

TS = "__ts"  # the event-time column of a batch: int64 epoch milliseconds


@dataclass(frozen=True)
class Pane:
    """One output row: a pane of a window, or (``retraction``) the restatement of an earlier one."""

    key: tuple
    window_start: int
    window_end: int
    timing: str
    pane_index: int
    is_last: bool
    retraction: bool
    values: tuple


@dataclass(frozen=True)
class DeadLetter:
    reason: str
    record: dict
    watermark: int | None = None
    windows: tuple = ()  # ((start, end), ...) the windows the record missed
    detail: str | None = None


class WindowState:
    """A window of a key: its accumulators and its trigger state."""

    __slots__ = (
        "start", "end", "acc", "trig", "new_count", "next_index", "last_values", "last_timing",
        "nonearly", "created_late", "closed", "pending_retractions",
    )

    def __init__(self, start: int, end: int, acc: list, trig: TriggerState, created_late: bool):
        self.start = start
        self.end = end
        self.acc = acc
        self.trig = trig
        self.new_count = 0
        self.next_index = 0
        self.last_values: tuple | None = None
        self.last_timing: str | None = None
        self.nonearly = False
        self.created_late = created_late
        self.closed = False  # the trigger finished: no more data accepted, kept as a tombstone
        self.pending_retractions: list = []  # (start, end, values, index, timing) of merged-away windows

    def __getstate__(self):
        return tuple(getattr(self, s) for s in self.__slots__)

    def __setstate__(self, st):
        for s, v in zip(self.__slots__, st):
            setattr(self, s, v)


@dataclass
class EngineState:
    watermark: int = MIN_TIME
    max_event_time: int = MIN_TIME
    processing_time: int = 0
    #: processing time of the last record seen (idleness)
    last_data_time: int | None = None
    seq: int = 0
    keys: dict = field(default_factory=dict)  # key tuple -> {(start, end): WindowState}
    #: records seen per key for record-defined sliding windows: key -> sorted list of (ts, seq, values)
    records: dict = field(default_factory=dict)
    #: nothing can fire before the watermark reaches wake_event or the clock reaches wake_clock
    wake_event: int = MIN_TIME
    wake_clock: int | None = None
    metrics: dict = field(default_factory=lambda: {
        "rows": 0, "rows_late": 0, "rows_in_gap": 0, "panes": 0, "retractions": 0, "windows_open": 0,
    })


@dataclass
class StepResult:
    panes: list[Pane] = field(default_factory=list)
    dead_letters: list[DeadLetter] = field(default_factory=list)

    def extend(self, other: "StepResult") -> None:
        self.panes.extend(other.panes)
        self.dead_letters.extend(other.dead_letters)


def _sort_key(v: Any) -> tuple:
    return (type(v).__name__, v) if v is not None else ("", 0)


def _values_equal(a: tuple | None, b: tuple | None) -> bool:
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


class Engine:
    """Runs one pipeline. The engine holds no data; all of it is in ``EngineState``."""

    def __init__(self, pipeline: Pipeline):
        self.p = pipeline
        self.machine = TriggerMachine(pipeline.trigger)
        self.aggs = [a.fn for a in pipeline.aggregates]
        self.lateness = pipeline.allowed_lateness
        self.discarding = pipeline.accumulation == "discarding"
        self.retracting = pipeline.accumulation == "retracting"
        self.report_end = pipeline.window.report_end

    # -- public API -----------------------------------------------------------------------------
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
        record_of: Callable[[int], dict] | None = None,
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
        if has_data:
            out.extend(self.ingest(state, batch, record_of=record_of))
        new_wm = state.watermark
        wm_strategy = self.p.watermark
        if not wm_strategy.punctuation and state.max_event_time > MIN_TIME:
            new_wm = max(new_wm, state.max_event_time - wm_strategy.max_delay)
        if watermark is not None:
            new_wm = max(new_wm, watermark)
        if end:
            new_wm = END_OF_INPUT
        out.extend(self.advance(state, new_wm))
        return out

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
        ends = sorted({ws.end for wins in state.keys.values() for ws in wins.values()
                       if ws.end > state.watermark and ws.end < MAX_TIME})
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
        record_of: Callable[[int], dict] | None = None,
    ) -> StepResult:
        """Add a batch of valid rows (``__ts`` int64 ms, the key and value columns)."""
        if processing_time is not None:
            state.processing_time = max(state.processing_time, processing_time)
        out = StepResult()
        n = len(batch)
        if n == 0:
            return out
        ts = batch[TS].to_numpy(dtype=np.int64)
        seq = np.arange(state.seq, state.seq + n, dtype=np.int64)
        state.seq += n
        state.metrics["rows"] += n
        state.max_event_time = max(state.max_event_time, int(ts.max()))
        state.last_data_time = state.processing_time
        wm = state.watermark
        pt = state.processing_time
        values = {c: batch[c].to_numpy() for c in self.p.value_columns}
        missed: dict[int, list] = {}
        touched: list[tuple[tuple, tuple]] = []

        key_cols = list(self.p.key)
        if key_cols:
            codes, uniques = pd.factorize(pd.MultiIndex.from_frame(batch[key_cols])) if len(key_cols) > 1 \
                else pd.factorize(batch[key_cols[0]])
            key_tuples = [tuple(u) if len(key_cols) > 1 else (u,) for u in uniques]
            key_tuples = [tuple(v.item() if isinstance(v, np.generic) else v for v in k) for k in key_tuples]
        else:
            codes = np.zeros(n, dtype=np.int64)
            key_tuples = [()]

        window = self.p.window
        if isinstance(window, Sessions):
            self._ingest_sessions(state, ts, seq, values, codes, key_tuples, batch, missed, touched)
        elif isinstance(window, Sliding):
            self._ingest_sliding(state, ts, seq, values, codes, key_tuples, missed, touched)
        else:
            rows, starts, ends = window.assign(ts)
            state.metrics["rows_in_gap"] += int(n - len(np.unique(rows)))
            if len(rows):
                kc = codes[rows]
                order = np.lexsort((starts, ends, kc))
                rows, starts, ends, kc = rows[order], starts[order], ends[order], kc[order]
                bounds = np.flatnonzero(np.diff(kc) | np.diff(starts) | np.diff(ends)) + 1
                begins = np.concatenate(([0], bounds))
                stops = np.concatenate((bounds, [len(rows)]))
                # accumulators of every (key, window) group of the batch at once where the
                # functions allow it (count, sum, min, max, avg), else one call per group
                sorted_vals = {c: v[rows] for c, v in values.items()}
                parts = [a.partials(sorted_vals.get(a.column), begins, len(rows)) for a in self.aggs]
                st_, en_, kc_ = starts[begins].tolist(), ends[begins].tolist(), kc[begins].tolist()
                for g, (b, e) in enumerate(zip(begins.tolist(), stops.tolist())):
                    key = key_tuples[kc_[g]]
                    w = (st_[g], en_[g])
                    wins = state.keys.get(key)
                    if wins is None:
                        wins = state.keys[key] = {}
                    ws = wins.get(w)
                    if wm >= self._expiry(w[1]) or (ws is not None and ws.closed):
                        for i in rows[b:e].tolist():
                            missed.setdefault(i, []).append(w)
                        continue
                    if ws is None:
                        ws = wins[w] = self._new_window(w, wm)
                    self._add(ws, rows[b:e], ts, seq, values, pt, parts, g)
                    touched.append((key, w))
                for key in [k for k, v in state.keys.items() if not v]:
                    del state.keys[key]

        if missed:
            out.dead_letters.extend(self._late_letters(missed, batch, wm, record_of))
            state.metrics["rows_late"] += len(missed)

        # evaluate the triggers of the windows that got data, after the whole batch
        fired = []
        seen = set()
        for key, w in touched:
            if (key, w) in seen:
                continue
            seen.add((key, w))
            ws = state.keys.get(key, {}).get(w)
            if ws is None or ws.closed:
                if ws is not None:
                    self._wake(state, ws)
                continue
            ctx = Ctx(wm, pt, ws.end)
            if self.machine.should_fire(ws.trig, ctx):
                fired.extend(self._fire(state, key, ws, ctx))
            self._wake(state, ws)
        out.panes.extend(self._ordered(fired))
        return out

    def advance(self, state: EngineState, watermark: int | None = None,
                processing_time: int | None = None, idle: bool = True) -> StepResult:
        """Move the watermark / processing time and fire what is due. With an idleness timeout
        (and ``idle``: no record arrived at this instant), windows the timeout closes move the
        watermark to their end."""
        if watermark is not None and watermark > state.watermark:
            state.watermark = watermark
        if processing_time is not None and processing_time > state.processing_time:
            state.processing_time = processing_time
        if idle and self.p.watermark.idle_timeout is not None:
            state.watermark = max(state.watermark, self.idle_watermark(state))
        wm, pt = state.watermark, state.processing_time
        if wm < state.wake_event and (state.wake_clock is None or pt < state.wake_clock):
            return StepResult()  # nothing is due: no window to look at
        emitted = []
        wake_event, wake_clock = END_OF_INPUT, None
        next_clock = self.machine.next_processing_deadline
        for key in list(state.keys):
            wins = state.keys[key]
            for w in list(wins):
                ws = wins[w]
                expiry = self._expiry(ws.end)
                if wm >= expiry:
                    if not ws.closed:
                        emitted.extend(self._emit(state, key, ws, Ctx(wm, pt, ws.end), final=True))
                    del wins[w]
                    continue
                if not ws.closed:
                    ctx = Ctx(wm, pt, ws.end)
                    if self.machine.should_fire(ws.trig, ctx):
                        emitted.extend(self._fire(state, key, ws, ctx))
                if not ws.closed:
                    d = next_clock(ws.trig)
                    if d is not None and (wake_clock is None or d < wake_clock):
                        wake_clock = d
                due = ws.end if (wm < ws.end and not ws.closed and ws.end < MAX_TIME) else expiry
                if due < wake_event:
                    wake_event = due
            if not wins:
                del state.keys[key]
        state.wake_event, state.wake_clock = wake_event, wake_clock
        self._purge_records(state)
        state.metrics["windows_open"] = sum(len(v) for v in state.keys.values())
        return StepResult(panes=self._ordered(emitted))

    def next_event_deadline(self, state: EngineState) -> int | None:
        """The smallest watermark at which something can happen (a window end or expiry)."""
        best = None
        wm = state.watermark
        for wins in state.keys.values():
            for ws in wins.values():
                d = ws.end if (wm < ws.end and not ws.closed and ws.end < MAX_TIME) else self._expiry(ws.end)
                if best is None or d < best:
                    best = d
        return best

    def next_processing_deadline(self, state: EngineState) -> int | None:
        best = None
        for wins in state.keys.values():
            for ws in wins.values():
                if ws.closed:
                    continue
                d = self.machine.next_processing_deadline(ws.trig)
                if d is not None and (best is None or d < best):
                    best = d
        return best

    # -- internals ------------------------------------------------------------------------------
    def _expiry(self, end: int) -> int:
        return rules.expiry(end, self.lateness)

    def _new_window(self, w: tuple, wm: int) -> WindowState:
        return WindowState(w[0], w[1], [a.create() for a in self.aggs], self.machine.new_state(),
                           created_late=rules.created_late(w[1], wm))

    def _wake(self, state: EngineState, ws: WindowState) -> None:
        due = ws.end if (state.watermark < ws.end and ws.end < MAX_TIME) else self._expiry(ws.end)
        if due < state.wake_event:
            state.wake_event = due
        d = self.machine.next_processing_deadline(ws.trig)
        if d is not None and (state.wake_clock is None or d < state.wake_clock):
            state.wake_clock = d

    def _add(self, ws: WindowState, rows: np.ndarray, ts, seq, values, pt, parts=None, g=0) -> None:
        t = s = None
        for j, a in enumerate(self.aggs):
            if parts is not None and parts[j] is not None:
                ws.acc[j] = a.merge(ws.acc[j], parts[j][g])
                continue
            if t is None:
                t, s = ts[rows], seq[rows]
            col = a.column
            v = values[col][rows] if col in values else None
            ws.acc[j] = a.add_group(ws.acc[j], v, t, s)
        k = len(rows)
        ws.new_count += k
        self.machine.on_element(ws.trig, k, pt)

    def _late_letters(self, missed: dict, batch: pd.DataFrame, wm: int, record_of) -> list[DeadLetter]:
        out = []
        for i in sorted(missed):
            record = record_of(i) if record_of else _row_record(batch, i)
            ws = tuple(sorted(set(missed[i])))
            out.append(DeadLetter(Reason.LATE, record, wm, tuple((s, self.report_end(e)) for s, e in ws)))
        return out

    def _timing(self, ws: WindowState, wm: int) -> str:
        return rules.pane_timing(ws.created_late or ws.nonearly, rules.on_time_reached(ws.end, wm))

    def _fire(self, state: EngineState, key: tuple, ws: WindowState, ctx: Ctx) -> list:
        self.machine.on_fire(ws.trig, ctx)
        finished = self.machine.is_finished(ws.trig)
        rows = self._emit(state, key, ws, ctx, final=finished)
        if finished:
            ws.closed = True
            ws.acc = None
        return rows

    def _emit(self, state: EngineState, key: tuple, ws: WindowState, ctx: Ctx, final: bool) -> list:
        """onTrigger: emit the pane (and retractions) if there is something to say."""
        timing = self._timing(ws, ctx.watermark)
        empty = ws.new_count == 0
        out: list = []
        if not rules.pane_is_emitted(ws.new_count, timing):
            return out
        values = tuple(a.extract(acc) for a, acc in zip(self.aggs, ws.acc))
        skip = False
        if self.p.only_updated_panes:
            if empty or (not self.discarding and _values_equal(values, ws.last_values)):
                skip = True
        if not skip:
            order_key = (ws.end, ws.start, tuple(_sort_key(v) for v in key))
            rend = self.report_end
            if self.retracting:
                for (s, e, vals, idx, tm) in ws.pending_retractions:
                    out.append((order_key, Pane(key, s, rend(e), tm, idx, False, True, vals)))
                    state.metrics["retractions"] += 1
                ws.pending_retractions = []
                if ws.last_values is not None:
                    out.append((order_key, Pane(key, ws.start, rend(ws.end), ws.last_timing,
                                                ws.next_index - 1, False, True, ws.last_values)))
                    state.metrics["retractions"] += 1
            out.append((order_key, Pane(key, ws.start, rend(ws.end), timing, ws.next_index, final, False, values)))
            state.metrics["panes"] += 1
            ws.next_index += 1
            ws.last_values = values
            ws.last_timing = timing
            if timing != EARLY:
                ws.nonearly = True
        if self.discarding:
            ws.acc = [a.create() for a in self.aggs]
        ws.new_count = 0
        return out

    @staticmethod
    def _ordered(emitted: list) -> list[Pane]:
        # stable: retractions stay before the pane they precede
        return [p for _, p in sorted(emitted, key=lambda e: e[0])]

    # -- sessions ---------------------------------------------------------------------------------
    def _ingest_sessions(self, state, ts, seq, values, codes, key_tuples, batch, missed, touched):
        window: Sessions = self.p.window
        wm, pt = state.watermark, state.processing_time
        if window.gap_column:
            gaps = batch[window.gap_column].to_numpy(dtype=np.int64)
        else:
            gaps = np.full(len(ts), window.gap, dtype=np.int64)
        ends = ts + gaps
        order = np.lexsort((ts, codes))
        sc = codes[order]
        bounds = np.flatnonzero(np.diff(sc)) + 1
        for grp in np.split(order, bounds):
            if not len(grp):
                continue
            key = key_tuples[codes[grp[0]]]
            wins = state.keys.setdefault(key, {})
            # late proto-sessions: expired already
            alive = []
            for i in grp.tolist():
                if wm >= self._expiry(int(ends[i])):
                    missed.setdefault(i, []).append((int(ts[i]), int(ends[i])))
                else:
                    alive.append(i)
            # sweep the batch's proto-sessions (sorted by start) into merged runs
            runs: list[list] = []
            for i in alive:
                s, e = int(ts[i]), int(ends[i])
                if runs and s < runs[-1][1]:
                    runs[-1][1] = max(runs[-1][1], e)
                    runs[-1][2].append(i)
                else:
                    runs.append([s, e, [i]])
            for s, e, members in runs:
                overlapping = [w for w in wins if w[0] < e and s < w[1]]
                if any(wins[w].closed for w in overlapping):
                    for i in members:
                        missed.setdefault(i, []).extend(w for w in overlapping if wins[w].closed)
                    continue
                ns = min([s] + [w[0] for w in overlapping])
                ne = max([e] + [w[1] for w in overlapping])
                new_w = (ns, ne)
                rows = np.asarray(members, dtype=np.int64)
                if not overlapping:
                    ws = wins[new_w] = self._new_window(new_w, wm)
                elif len(overlapping) == 1 and overlapping[0] == new_w:
                    ws = wins[new_w]
                else:
                    ws = self._merge_sessions(key, wins, overlapping, new_w, wm, pt)
                self._add(ws, rows, ts, seq, values, pt)
                touched.append((key, new_w))
            if not wins:
                del state.keys[key]

    def _merge_sessions(self, key, wins: dict, overlapping: list, new_w: tuple, wm: int, pt: int) -> WindowState:
        olds = [wins.pop(w) for w in overlapping]
        keep = next((o for o in olds if (o.start, o.end) == new_w), None)
        ctx = Ctx(wm, pt, new_w[1])
        trig = self.machine.merge([o.trig for o in olds], ctx)
        acc = [a.create() for a in self.aggs]
        for o in olds:
            acc = [a.merge(x, y) for a, x, y in zip(self.aggs, acc, o.acc)]
        if keep is not None:
            ws = keep
        else:
            ws = self._new_window(new_w, wm)
        ws.acc = acc
        ws.trig = trig
        ws.new_count = sum(o.new_count for o in olds)
        for o in olds:
            if o is keep:
                continue
            ws.pending_retractions.extend(o.pending_retractions)
            if o.last_values is not None:
                ws.pending_retractions.append((o.start, o.end, o.last_values, o.next_index - 1, o.last_timing))
        wins[new_w] = ws
        return ws

    # -- record-defined sliding windows (KIP-450) ---------------------------------------------------
    def _ingest_sliding(self, state, ts, seq, values, codes, key_tuples, missed, touched):
        from .sliding import ingest_sliding

        ingest_sliding(self, state, ts, seq, values, codes, key_tuples, missed, touched)

    def _purge_records(self, state: EngineState) -> None:
        if not isinstance(self.p.window, Sliding) or not state.records:
            return
        from .sliding import purge_records

        purge_records(self, state)


def _row_record(batch: pd.DataFrame, i: int) -> dict:
    row = batch.iloc[i]
    out = {}
    for c, v in row.items():
        if isinstance(c, str) and c.startswith("__"):
            continue
        if isinstance(v, np.generic):
            v = v.item()
        elif isinstance(v, pd.Timestamp):
            v = v.isoformat()
        elif v is not None and isinstance(v, float) and math.isnan(v):
            v = None
        out[c] = v
    return out


def run_timeline(engine: Engine, steps: Iterable[dict]) -> StepResult:
    """Convenience for tests: run steps of the form {"batch": df | None, "watermark": int,
    "processing_time": int, "end": bool}."""
    state = engine.new_state()
    out = StepResult()
    for s in steps:
        out.extend(engine.step(state, s.get("batch"), watermark=s.get("watermark"),
                               processing_time=s.get("processing_time"), end=s.get("end", False)))
    return out
