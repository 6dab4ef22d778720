"""Ingest for fixed windows (tumbling, hopping, global): each row's windows follow from its event
time alone, so a batch is assigned with numpy and added a whole (key, window) group at a time."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..windows import WindowFn
from .ingest import BatchRows, Ingested
from .state import EngineState
from .window_ops import WindowOps


class FixedWindowsIngest:
    def __init__(self, window: WindowFn, ops: WindowOps):
        self.window = window
        self.ops = ops

    def ingest(self, state: EngineState, rows: BatchRows, out: Ingested) -> None:
        row, starts, ends = self.assign(rows)
        out.in_no_window += int(len(rows.ts) - len(np.unique(row)))
        if not len(row):
            return
        kc = rows.codes[row]
        order = np.lexsort((starts, ends, kc))
        row, starts, ends, kc = row[order], starts[order], ends[order], kc[order]
        bounds = np.flatnonzero(np.diff(kc) | np.diff(starts) | np.diff(ends)) + 1
        begins = np.concatenate(([0], bounds))
        stops = np.concatenate((bounds, [len(row)]))
        # accumulators of every (key, window) group of the batch at once where the functions
        # allow it (count, sum, min, max, avg), else one call per group
        sorted_vals: dict[Any, np.ndarray] = {c: v[row] for c, v in rows.values.items()}
        partials = [a.partials(sorted_vals.get(a.column), begins, len(row)) for a in self.ops.aggs]
        group_starts, group_ends, group_keys = starts[begins].tolist(), ends[begins].tolist(), kc[begins].tolist()
        wm, ops = rows.watermark, self.ops
        for g, (b, e) in enumerate(zip(begins.tolist(), stops.tolist())):
            key = rows.keys[group_keys[g]]
            w = (group_starts[g], group_ends[g])
            wins = state.keys.get(key)
            if wins is None:
                wins = state.keys[key] = {}
            ws = wins.get(w)
            if ops.is_expired(w[1], wm) or (ws is not None and ws.closed):
                closed = not ops.is_expired(w[1], wm)
                for i in row[b:e].tolist():
                    out.miss(i, w, closed=closed)
                continue
            if ws is None:
                ws = wins[w] = ops.new_window(w)
            ops.add(ws, row[b:e], rows.ts, rows.seq, rows.values, wm, rows.processing_time, partials, g)
            out.touch(key, w, row[b:e])
        for key in [k for k, v in state.keys.items() if not v]:
            del state.keys[key]

    def assign(self, rows: BatchRows) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The rows' windows: (row index, start, end), one entry per (row, window)."""
        return self.window.assign(rows.ts)

    def purge(self, state: EngineState) -> None:
        pass
