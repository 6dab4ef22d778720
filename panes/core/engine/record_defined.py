"""Ingest for record-defined sliding windows (Kafka KIP-450).

For a key with records R, the windows are left(r) = [r - D, r] for every r in R and
right(r) = [r + 1, r + 1 + D] for every r whose right window holds a record; both ends inclusive,
kept as half-open [start, last + 1). Windows are identified by their bounds, so each distinct set of
records is aggregated once, in whatever order the records arrive.

When a batch adds records N to a key: windows that existed before get the new records that fall in
them (one slice per window); windows that come into being (left(n), a non-empty right(n), and the
right window of the last earlier record within D + 1 of n) are aggregated from the key's retained
records, a slice each. The work per record depends on the records within D, never on D divided by
the timestamp granularity (hopping windows with a 1 ms hop do D of them per record).

A record is late for the windows containing it that have expired; a record late for all of them is
dead-lettered and defines no window; one late for some is dead-lettered once (naming those) and
counted in the others. Retained records are dropped once no window that can still change could
contain them (watermark >= t + D + 2 + allowed lateness).
"""

from __future__ import annotations

import numpy as np

from .. import rules
from ..windows import Sliding, Window
from .ingest import BatchRows, Ingested
from .state import EngineState
from .window_ops import WindowOps


class KeyRecords:
    """A key's retained records, sorted by (ts, seq)."""

    __slots__ = ("ts", "seq", "values")

    def __init__(self, ts: np.ndarray, seq: np.ndarray, values: dict):
        self.ts, self.seq, self.values = ts, seq, values

    def __getstate__(self):
        return (self.ts, self.seq, self.values)

    def __setstate__(self, st):
        self.ts, self.seq, self.values = st

    def range(self, lo: int, hi: int) -> slice:
        """Records with lo <= ts < hi."""
        return slice(int(np.searchsorted(self.ts, lo, "left")), int(np.searchsorted(self.ts, hi, "left")))


def concat_records(a: KeyRecords | None, ts: np.ndarray, seq: np.ndarray, values: dict) -> KeyRecords:
    """``a``'s records and these, sorted by (ts, seq)."""
    if a is not None:
        ts = np.concatenate((a.ts, ts))
        seq = np.concatenate((a.seq, seq))
        values = {c: np.concatenate((a.values[c], values[c])) for c in values}
    order = np.lexsort((seq, ts))
    return KeyRecords(ts[order], seq[order], {c: v[order] for c, v in values.items()})


class RecordDefinedIngest:
    def __init__(self, window: Sliding, ops: WindowOps):
        self.window = window
        self.ops = ops

    def ingest(self, state: EngineState, rows: BatchRows, out: Ingested) -> None:
        D = self.window.time_difference
        ts, codes = rows.ts, rows.codes
        order = np.lexsort((rows.seq, ts, codes))
        bounds = np.flatnonzero(np.diff(codes[order])) + 1
        for grp in np.split(order, bounds):
            if not len(grp):
                continue
            key = rows.keys[codes[grp[0]]]
            wins = state.keys.setdefault(key, {})
            # records late for every window that could contain them: left(n) expired and every
            # window containing n ends no later than n + D + 1
            fully_late = rules.is_expired(ts[grp] + D + 1, self.ops.lateness, rows.watermark, rules.ARRAY)
            for i in grp[fully_late].tolist():
                out.miss(i, (int(ts[i]) - D, int(ts[i]) + 1))
            grp = grp[~fully_late]
            if len(grp):
                self._ingest_key(state, key, wins, grp, rows, out)
            if not wins:
                del state.keys[key]

    def _ingest_key(
        self, state: EngineState, key: tuple, wins: dict, grp: np.ndarray, rows: BatchRows, out: Ingested
    ) -> None:
        wm, pt, ops = rows.watermark, rows.processing_time, self.ops
        new_ts = rows.ts[grp]
        # 1. windows that existed before get the new records that fall in them
        for w, ws in wins.items():
            lo = int(np.searchsorted(new_ts, w[0], "left"))
            hi = int(np.searchsorted(new_ts, w[1], "left"))
            if lo == hi:
                continue
            if ws.closed or ops.is_expired(w[1], wm):
                closed = not ops.is_expired(w[1], wm)
                for i in grp[lo:hi].tolist():
                    out.miss(i, w, closed=closed)
                continue
            ops.add(ws, grp[lo:hi], rows.ts, rows.seq, rows.values, wm, pt)
            out.touch(key, w, grp[lo:hi])
        # 2. retain the new records, then create the windows they define
        recs = state.records[key] = concat_records(
            state.records.get(key), new_ts, rows.seq[grp], {c: v[grp] for c, v in rows.values.items()}
        )
        for w in sorted(self._candidates(recs.ts, new_ts)):
            if w in wins:
                continue
            sl = recs.range(w[0], w[1])
            if sl.start == sl.stop:
                continue
            # the new records in the window
            fresh = grp[int(np.searchsorted(new_ts, w[0], "left")) : int(np.searchsorted(new_ts, w[1], "left"))]
            if ops.is_expired(w[1], wm):
                # a window that is already closed: the new records in it missed it
                for i in fresh.tolist():
                    out.miss(i, w)
                continue
            ws = wins[w] = ops.new_window(w)
            ops.add(ws, np.arange(sl.start, sl.stop), recs.ts, recs.seq, recs.values, wm, pt)
            out.touch(key, w, fresh)

    def _candidates(self, all_ts: np.ndarray, new_ts: np.ndarray) -> set[Window]:
        """The windows the new records may define (given all the key's records)."""
        D = self.window.time_difference
        candidates = set()
        for n in np.unique(new_ts).tolist():
            candidates.add((n - D, n + 1))  # left(n)
            nxt = int(np.searchsorted(all_ts, n, "right"))
            if nxt < len(all_ts) and all_ts[nxt] <= n + D + 1:
                candidates.add((n + 1, n + D + 2))  # right(n), non-empty
            prv = int(np.searchsorted(all_ts, n, "left")) - 1
            if prv >= 0 and all_ts[prv] >= n - D - 1:
                s = int(all_ts[prv])
                candidates.add((s + 1, s + D + 2))  # right of the previous record now holds n
        return candidates

    def purge(self, state: EngineState) -> None:
        """Drop retained records no window that can still change could contain."""
        if not state.records:
            return
        horizon = state.watermark - self.window.time_difference - 2 - self.ops.lateness
        for key in list(state.records):
            recs = state.records[key]
            cut = int(np.searchsorted(recs.ts, horizon, "right"))
            if cut >= len(recs.ts):
                del state.records[key]
            elif cut > 0:
                state.records[key] = KeyRecords(
                    recs.ts[cut:], recs.seq[cut:], {c: v[cut:] for c, v in recs.values.items()}
                )
