"""Session windows: per key, records closer than the gap share a window."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .base import Family, WindowFn, option_duration


@dataclass(frozen=True)
class Sessions(WindowFn):
    """Per-key sessions: a record at t opens the proto-session [t, t + gap); sessions that overlap
    merge. ``gap_column`` takes each record's gap from a column instead."""

    gap: int | None = None
    gap_column: str | None = None
    kind: ClassVar[str] = "session"
    family: ClassVar[Family] = "merging"
    merging: ClassVar[bool] = True
    record_defined: ClassVar[bool] = True
    options: ClassVar[frozenset[str]] = frozenset({"gap", "gap_column"})

    def __post_init__(self) -> None:
        if (self.gap is None) == (self.gap_column is None):
            raise ValueError("a session window needs exactly one of gap and gap_column")
        if self.gap is not None and self.gap <= 0:
            raise ValueError("session gap must be positive")

    def assign(self, ts: np.ndarray, gaps: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Proto-sessions of the rows (merging happens per key in the engine)."""
        g = gaps if gaps is not None else np.full(len(ts), self.gap, dtype=np.int64)
        return np.arange(len(ts)), ts.copy(), ts + g

    def describe(self) -> dict:
        if self.gap_column:
            return {"session": {"gap_column": self.gap_column}}
        return {"session": {"gap": self.gap}}

    @classmethod
    def from_spec(cls, options: dict) -> WindowFn:
        if ("gap" in options) == ("gap_column" in options):
            raise ValueError("session window needs exactly one of gap and gap_column")
        if "gap_column" in options:
            return cls(gap_column=str(options["gap_column"]))
        gap = option_duration(options, "gap")
        if gap <= 0:
            raise ValueError("session gap must be positive")
        return cls(gap=gap)
