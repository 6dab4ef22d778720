"""What an ingest strategy does to windows: when one expires, create one, add rows to one."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import rules
from ..pipeline import Pipeline
from ..triggers import TriggerMachine
from ..windows import Window
from .state import WindowState


class WindowOps:
    def __init__(self, pipeline: Pipeline, machine: TriggerMachine):
        self.aggs = list(pipeline.accumulators)
        self.machine = machine
        self.lateness = pipeline.allowed_lateness

    def expiry(self, end: int) -> int:
        """The watermark at which a window ending at ``end`` expires."""
        return rules.expiry(end, self.lateness)

    def is_expired(self, end: int, watermark: int) -> bool:
        """Whether the watermark reached the window's expiry: its state goes, a record for it is late."""
        return rules.is_expired(end, self.lateness, watermark)

    def new_window(self, w: Window, watermark: int) -> WindowState:
        """A window that comes into being at this watermark (LATE panes if its end passed)."""
        return WindowState(w[0], w[1], [a.create() for a in self.aggs], self.machine.new_state(),
                           created_late=rules.created_late(w[1], watermark))

    def add(self, ws: WindowState, rows: np.ndarray, ts: np.ndarray, seq: np.ndarray, values: dict,
            processing_time: int, partials: list | None = None, group: int = 0) -> None:
        """Add rows (indices into ``ts``, ``seq`` and ``values``) to a window: its accumulators,
        from ``partials[j][group]`` where aggregate j has them, and its trigger."""
        t: Any = None
        s: Any = None
        for j, a in enumerate(self.aggs):
            if partials is not None and partials[j] is not None:
                ws.acc[j] = a.merge(ws.acc[j], partials[j][group])
                continue
            if t is None:
                t, s = ts[rows], seq[rows]
            ws.acc[j] = a.add_group(ws.acc[j], a.input(values, rows), t, s)
        k = len(rows)
        ws.new_count += k
        self.machine.on_element(ws.trig, k, processing_time)
