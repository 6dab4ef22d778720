"""Ingest for inherited windows (``windows.Inherited``): fixed windows whose bounds each row
carries (a stage's panes feeding the next stage), added like any fixed windows."""

from __future__ import annotations

import numpy as np

from ..windows import WINDOW_END, WINDOW_START
from ..windows.inherited import Inherited
from .fixed import FixedWindowsIngest
from .ingest import BatchRows


class InheritedWindowsIngest(FixedWindowsIngest):
    window: Inherited

    def assign(self, rows: BatchRows) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        frame = rows.frame
        starts = frame[WINDOW_START].to_numpy(dtype=np.int64)
        ends = frame[WINDOW_END].to_numpy(dtype=np.int64)
        return self.window.assign_bounds(starts, ends)
