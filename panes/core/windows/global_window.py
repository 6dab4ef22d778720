"""The global window: one window per key for all of time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..time import MAX_TIME, MIN_TIME
from .base import WindowFn


@dataclass(frozen=True)
class GlobalWindows(WindowFn):
    """One window per key for all of time; it closes only when the input ends."""

    kind: ClassVar[str] = "global"

    def assign(self, ts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        n = len(ts)
        return np.arange(n), np.full(n, MIN_TIME, dtype=np.int64), np.full(n, MAX_TIME, dtype=np.int64)

    def describe(self) -> dict:
        return {"global": {}}

    @classmethod
    def from_spec(cls, options: dict) -> WindowFn:
        return cls()
