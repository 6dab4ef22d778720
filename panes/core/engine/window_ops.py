"""What an ingest strategy does to windows: when one expires, create one, add rows to one (its
accumulators, its trigger, its hold on the output watermark)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import rules
from ..pipeline import Pipeline
from ..triggers import Ctx, TriggerMachine
from ..windows import Window
from .holds import Holds
from .state import WindowState


class WindowOps:
    def __init__(self, pipeline: Pipeline, machine: TriggerMachine, holds: Holds):
        self.aggs = list(pipeline.accumulators)
        self.machine = machine
        self.holds = holds
        self.lateness = pipeline.allowed_lateness
        self.merging = pipeline.window.family == "merging"

    def expiry(self, end: int) -> int:
        """The watermark at which a window ending at ``end`` expires."""
        return rules.expiry(end, self.lateness)

    def is_expired(self, end: int, watermark: int) -> bool:
        """Whether the watermark reached the window's expiry: its state goes, a record for it is late."""
        return rules.is_expired(end, self.lateness, watermark)

    def new_window(self, w: Window) -> WindowState:
        """A window that comes into being."""
        return WindowState(w[0], w[1], [a.create() for a in self.aggs], self.machine.new_state())

    def add(
        self,
        ws: WindowState,
        rows: np.ndarray,
        ts: np.ndarray,
        seq: np.ndarray,
        values: dict,
        watermark: int,
        processing_time: int,
        partials: list | None = None,
        group: int = 0,
    ) -> None:
        """Add rows (indices into ``ts``, ``seq`` and ``values``) that came at this input
        ``watermark`` and clock to a window: its accumulators, from ``partials[j][group]`` where
        aggregate j has them, its trigger, and its hold."""
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
        self.holds.add(ws, watermark)
        self.machine.on_element(ws.trig, k, Ctx(watermark, processing_time, ws.end, self.merging))
