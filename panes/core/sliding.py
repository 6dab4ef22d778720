"""Record-defined sliding windows (Kafka KIP-450) inside the engine.

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


def _concat(a: KeyRecords | None, ts, seq, values) -> KeyRecords:
    if a is not None:
        ts = np.concatenate((a.ts, ts))
        seq = np.concatenate((a.seq, seq))
        values = {c: np.concatenate((a.values[c], values[c])) for c in values}
    order = np.lexsort((seq, ts))
    return KeyRecords(ts[order], seq[order], {c: v[order] for c, v in values.items()})


def ingest_sliding(engine, state, ts, seq, values, codes, key_tuples, missed, touched):
    D = engine.p.window.time_difference
    wm, pt = state.watermark, state.processing_time
    expiry = engine._expiry
    order = np.lexsort((seq, ts, codes))
    sc = codes[order]
    bounds = np.flatnonzero(np.diff(sc)) + 1
    for grp in np.split(order, bounds):
        if not len(grp):
            continue
        key = key_tuples[codes[grp[0]]]
        wins = state.keys.setdefault(key, {})
        old = state.records.get(key)
        # records late for every window that could contain them: left(n) expired and every
        # window containing n ends no later than n + D + 1
        g_ts = ts[grp]
        fully_late = wm >= np.minimum(g_ts + D + 1 + engine.lateness, 2**63 - 1)
        for i in grp[fully_late].tolist():
            missed.setdefault(i, []).append((int(ts[i]) - D, int(ts[i]) + 1))
        grp = grp[~fully_late]
        if not len(grp):
            if not wins:
                del state.keys[key]
            continue
        new_ts = ts[grp]
        new_vals = {c: v[grp] for c, v in values.items()}
        # 1. windows that existed before get the new records that fall in them
        for w, ws in wins.items():
            lo = int(np.searchsorted(new_ts, w[0], "left"))
            hi = int(np.searchsorted(new_ts, w[1], "left"))
            if lo == hi:
                continue
            rows = grp[lo:hi]
            if ws.closed or wm >= expiry(w[1]):
                for i in rows.tolist():
                    missed.setdefault(i, []).append(w)
                continue
            engine._add(ws, rows, ts, seq, values, pt)
            touched.append((key, w))
        # 2. retain the new records, then create the windows they define
        recs = _concat(old, new_ts, seq[grp], new_vals)
        state.records[key] = recs
        candidates = set()
        all_ts = recs.ts
        for n in np.unique(new_ts).tolist():
            candidates.add((n - D, n + 1))  # left(n)
            nxt = int(np.searchsorted(all_ts, n, "right"))
            if nxt < len(all_ts) and all_ts[nxt] <= n + D + 1:
                candidates.add((n + 1, n + D + 2))  # right(n), non-empty
            prv = int(np.searchsorted(all_ts, n, "left")) - 1
            if prv >= 0 and all_ts[prv] >= n - D - 1:
                s = int(all_ts[prv])
                candidates.add((s + 1, s + D + 2))  # right of the previous record now holds n
        for w in sorted(candidates):
            if w in wins:
                continue
            sl = recs.range(w[0], w[1])
            if sl.start == sl.stop:
                continue
            if wm >= expiry(w[1]):
                # a window that is already closed: the new records in it missed it
                lo = int(np.searchsorted(new_ts, w[0], "left"))
                hi = int(np.searchsorted(new_ts, w[1], "left"))
                for i in grp[lo:hi].tolist():
                    missed.setdefault(i, []).append(w)
                continue
            ws = wins[w] = engine._new_window(w, wm)
            idx = np.arange(sl.start, sl.stop)
            engine._add(ws, idx, recs.ts, recs.seq, recs.values, pt)
            touched.append((key, w))
        if not wins:
            del state.keys[key]


def purge_records(engine, state) -> None:
    D = engine.p.window.time_difference
    horizon = state.watermark - D - 2 - engine.lateness
    for key in list(state.records):
        recs = state.records[key]
        cut = int(np.searchsorted(recs.ts, horizon, "right"))
        if cut >= len(recs.ts):
            del state.records[key]
        elif cut > 0:
            state.records[key] = KeyRecords(recs.ts[cut:], recs.seq[cut:],
                                            {c: v[cut:] for c, v in recs.values.items()})
