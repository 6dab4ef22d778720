"""Inherited windows (Apex's window propagation): a downstream stage without a window of its own
puts each upstream pane in exactly that pane's window, whose bounds the row carries.

Re-assigning by time would be wrong: a hopping pane's event time (its window's end minus 1 ms)
lies in several hopping windows. The bounds are internal (exclusive) ends, in the columns
``WINDOW_START`` and ``WINDOW_END`` of the stage's batch; the engine ingests them with the
``inherited`` family's strategy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from .base import Family, WindowFn

#: the columns of a batch that carry each row's window (int64 epoch ms, end exclusive)
WINDOW_START = "__window_start"
WINDOW_END = "__window_end"


@dataclass(frozen=True)
class Inherited(WindowFn):
    """The windows of the stage upstream (``source``: the window kind that assigned them, which
    says how their ends are shown)."""

    source: WindowFn
    kind: ClassVar[str] = "inherited"
    family: ClassVar[Family] = "inherited"

    def assign(self, ts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        raise TypeError("inherited windows come from the rows' bounds, not from their event times")

    def assign_bounds(self, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each row in the one window its bounds name."""
        return np.arange(len(starts)), starts.astype(np.int64), ends.astype(np.int64)

    def report_end(self, end: Any) -> Any:
        return self.source.report_end(end)

    def internal_end(self, reported: Any) -> Any:
        return self.source.internal_end(reported)

    def describe(self) -> dict:
        return {"inherited": self.source.describe()}
