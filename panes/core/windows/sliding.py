"""Record-defined sliding windows (Kafka KIP-450)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from .base import Family, WindowFn, option_duration


@dataclass(frozen=True)
class Sliding(WindowFn):
    """Kafka KIP-450 record-defined sliding windows: each record at t defines [t - D, t] and, when
    records fall in it, [t + 1, t + 1 + D]; both ends inclusive; each distinct set of records is
    aggregated in exactly one window."""

    time_difference: int
    kind: ClassVar[str] = "sliding"
    family: ClassVar[Family] = "record_defined"
    record_defined: ClassVar[bool] = True
    options: ClassVar[frozenset[str]] = frozenset({"time_difference"})
    required: ClassVar[tuple[str, ...]] = ("time_difference",)

    def __post_init__(self) -> None:
        if self.time_difference <= 0:
            raise ValueError("sliding time_difference must be positive")

    def report_end(self, end: Any) -> Any:
        return end - 1

    def internal_end(self, reported: Any) -> Any:
        return reported + 1

    def assign(self, ts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        # the window each record defines that contains it: [t - D, t]
        return np.arange(len(ts)), ts - self.time_difference, ts + 1

    def describe(self) -> dict:
        return {"sliding": {"time_difference": self.time_difference}}

    @classmethod
    def from_spec(cls, options: dict) -> WindowFn:
        d = option_duration(options, "time_difference")
        if d <= 0:
            raise ValueError("sliding time_difference must be positive")
        return cls(d)
