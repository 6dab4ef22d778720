"""Hopping windows: fixed size, a new one every hop (overlapping, or with gaps when hop > size)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .base import WindowFn, option_duration


@dataclass(frozen=True)
class Hopping(WindowFn):
    """Windows of ``size`` starting every ``hop`` (at k*hop + offset). Overlapping when hop < size,
    with gaps (times in no window) when hop > size."""

    size: int
    hop: int
    offset: int = 0
    kind: ClassVar[str] = "hopping"
    options: ClassVar[frozenset[str]] = frozenset({"size", "hop", "offset"})
    required: ClassVar[tuple[str, ...]] = ("size", "hop")

    def __post_init__(self) -> None:
        if self.size <= 0 or self.hop <= 0:
            raise ValueError("hopping size and hop must be positive")

    @property
    def windows_per_record(self) -> int:
        return -(-self.size // self.hop)

    def assign(self, ts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        last_start = ts - np.mod(ts - self.offset, self.hop)
        rows, starts = [], []
        idx = np.arange(len(ts))
        for j in range(self.windows_per_record):
            s = last_start - j * self.hop
            keep = s + self.size > ts
            rows.append(idx[keep])
            starts.append(s[keep])
        row = np.concatenate(rows) if rows else idx[:0]
        start = np.concatenate(starts) if starts else ts[:0]
        order = np.lexsort((start, row))
        return row[order], start[order], start[order] + self.size

    def describe(self) -> dict:
        return {"hopping": {"size": self.size, "hop": self.hop, "offset": self.offset}}

    @classmethod
    def from_spec(cls, options: dict) -> WindowFn:
        size = option_duration(options, "size")
        hop = option_duration(options, "hop")
        offset = option_duration(options, "offset")
        if size <= 0 or hop <= 0:
            raise ValueError("hopping size and hop must be positive")
        if offset >= hop:
            raise ValueError("hopping offset must be smaller than hop")
        return cls(size, hop, offset)
