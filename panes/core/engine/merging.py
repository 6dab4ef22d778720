"""Ingest for merging windows (sessions): a record at t opens the proto-session [t, t + gap);
proto-sessions and open sessions of a key that overlap merge into one window. A session whose
trigger finished is closed: it merges with nothing, and records whose merged session is exactly
it are dropped (dead letters ``window_closed``); a record near it opens a new session."""

from __future__ import annotations

import numpy as np

from ..triggers import Ctx
from ..windows import Sessions, Window
from .ingest import BatchRows, Ingested
from .state import EngineState, WindowState
from .window_ops import WindowOps


class MergingWindowsIngest:
    def __init__(self, window: Sessions, ops: WindowOps):
        self.window = window
        self.ops = ops

    def ingest(self, state: EngineState, rows: BatchRows, out: Ingested) -> None:
        ts, codes = rows.ts, rows.codes
        if self.window.gap_column:
            gaps = rows.frame[self.window.gap_column].to_numpy(dtype=np.int64)
        else:
            gaps = np.full(len(ts), self.window.gap, dtype=np.int64)
        ends = ts + gaps
        order = np.lexsort((ts, codes))
        bounds = np.flatnonzero(np.diff(codes[order])) + 1
        for grp in np.split(order, bounds):
            if not len(grp):
                continue
            key = rows.keys[codes[grp[0]]]
            wins = state.keys.setdefault(key, {})
            self._ingest_key(state, key, wins, grp, ends, rows, out)
            if not wins:
                del state.keys[key]

    def _ingest_key(
        self,
        state: EngineState,
        key: tuple,
        wins: dict,
        grp: np.ndarray,
        ends: np.ndarray,
        rows: BatchRows,
        out: Ingested,
    ) -> None:
        ts, wm, ops = rows.ts, rows.watermark, self.ops
        # late proto-sessions: expired already
        alive = []
        for i in grp.tolist():
            if ops.is_expired(int(ends[i]), wm):
                out.miss(i, (int(ts[i]), int(ends[i])))
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
            # a session whose trigger finished takes no part in merges (Beam's
            # MergingActiveWindowSet.remove); it stays as a tombstone of its bounds until it expires
            overlapping = [w for w, ws in wins.items() if not ws.closed and w[0] < e and s < w[1]]
            new_w = (min([s] + [w[0] for w in overlapping]), max([e] + [w[1] for w in overlapping]))
            tombstone = wins.get(new_w)
            if tombstone is not None and tombstone.closed:
                # merged, the records' session is exactly a closed one: dropped
                # (ReduceFnRunner.processElement: droppedDueToClosedWindow)
                for i in members:
                    out.miss(i, new_w, closed=True)
                continue
            protos = {(int(ts[i]), int(ends[i])) for i in members}
            if not overlapping:
                ws = wins[new_w] = ops.new_window(new_w)
            elif overlapping == [new_w] and protos == {new_w}:
                ws = wins[new_w]  # the records' window is the session itself: no merge
            else:
                # a merge (also of records into a session that keeps its bounds): the merged
                # windows' holds and timers go, the session's holds come from its new records
                # (WatermarkHold.onMerge); they held the output watermark as the phase began
                for w in overlapping:
                    ops.holds.release(state, wins[w])
                if overlapping == [new_w]:
                    ws = wins[new_w]
                    ws.hold = None
                else:
                    ws = wins[new_w] = self.merge([wins.pop(w) for w in overlapping], new_w, wm, rows.processing_time)
            added = np.asarray(members, dtype=np.int64)
            ops.add(ws, added, ts, rows.seq, rows.values, wm, rows.processing_time)
            out.touch(key, new_w, added)

    def merge(self, olds: list[WindowState], new_w: Window, wm: int, pt: int) -> WindowState:
        """The window merged from ``olds``: their accumulators and trigger states merged; the
        panes they emitted are to be retracted (unless it keeps the bounds of one of them). The
        merged-away windows' timers and holds go; one that keeps its bounds keeps its timers."""
        ops = self.ops
        keep = next((o for o in olds if (o.start, o.end) == new_w), None)
        trig = ops.machine.merge([o.trig for o in olds], Ctx(wm, pt, new_w[1], merging=True))
        acc = [a.create() for a in ops.aggs]
        for o in olds:
            acc = [a.merge(x, y) for a, x, y in zip(ops.aggs, acc, o.acc)]
        if keep is not None:
            trig.eow = keep.trig.eow
            for t in keep.trig.clock:
                trig.set_clock_timer(t)
        ws = keep if keep is not None else ops.new_window(new_w)
        ws.acc = acc
        ws.trig = trig
        ws.hold = None
        ws.new_count = sum(o.new_count for o in olds)
        for o in olds:
            if o is keep:
                continue
            ws.pending_retractions.extend(o.pending_retractions)
            if o.last_values is not None:
                ws.pending_retractions.append(
                    (o.start, o.end, o.last_values, o.next_index - 1, o.last_timing, o.last_provisional)
                )
        return ws

    def purge(self, state: EngineState) -> None:
        pass
