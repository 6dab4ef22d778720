"""Tumbling windows: fixed size, no overlap, aligned to the Unix epoch + offset."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .base import WindowFn, option_duration


@dataclass(frozen=True)
class Tumbling(WindowFn):
    """Fixed windows [k*size + offset, (k+1)*size + offset), aligned to the Unix epoch + offset."""

    size: int
    offset: int = 0
    kind: ClassVar[str] = "tumbling"
    options: ClassVar[frozenset[str]] = frozenset({"size", "offset"})
    required: ClassVar[tuple[str, ...]] = ("size",)

    def __post_init__(self) -> None:
        if self.size <= 0:
            raise ValueError("tumbling size must be positive")

    def assign(self, ts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        start = ts - np.mod(ts - self.offset, self.size)
        return np.arange(len(ts)), start, start + self.size

    def describe(self) -> dict:
        return {"tumbling": {"size": self.size, "offset": self.offset}}

    @classmethod
    def from_spec(cls, options: dict) -> WindowFn:
        size = option_duration(options, "size")
        offset = option_duration(options, "offset")
        if size <= 0:
            raise ValueError("tumbling size must be positive")
        if offset >= size:
            raise ValueError("tumbling offset must be smaller than size")
        return cls(size, offset)
