"""Window assigners: where in event time results are calculated.

A window is a pair ``(start, end)`` of epoch milliseconds, half-open ``[start, end)``; the global
window is ``(MIN_TIME, MAX_TIME)``. Record-defined sliding windows are inclusive at both ends and
are held internally as ``[start, last + 1)``; they report ``window_end`` as their last instant.

Fixed assigners (tumbling, hopping, global) map event times to windows with numpy, a whole batch
at once. Sessions merge per key; sliding windows depend on the key's other records: the engine
keeps those per key.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .time import MAX_TIME, MIN_TIME

Window = tuple[int, int]
GLOBAL_WINDOW: Window = (MIN_TIME, MAX_TIME)


class WindowFn:
    """Base of the window assigners."""

    kind = "window"
    merging = False
    #: the windows depend on the key's other records (sliding, sessions)
    record_defined = False

    def assign(self, ts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Rows' windows: (row index, window start, window end) arrays, one entry per (row,
        window); a row in no window (a hopping gap) has no entry."""
        raise NotImplementedError

    def report_end(self, end: int) -> int:
        """The ``window_end`` shown to users for an internal (exclusive) end."""
        return end

    def describe(self) -> dict:
        raise NotImplementedError


@dataclass(frozen=True)
class Tumbling(WindowFn):
    """Fixed windows [k*size + offset, (k+1)*size + offset), aligned to the Unix epoch + offset."""

    size: int
    offset: int = 0
    kind = "tumbling"

    def __post_init__(self):
        if self.size <= 0:
            raise ValueError("tumbling size must be positive")

    def assign(self, ts):
        start = ts - np.mod(ts - self.offset, self.size)
        return np.arange(len(ts)), start, start + self.size

    def describe(self):
        return {"tumbling": {"size": self.size, "offset": self.offset}}


@dataclass(frozen=True)
class Hopping(WindowFn):
    """Windows of ``size`` starting every ``hop`` (at k*hop + offset). Overlapping when hop < size,
    with gaps (times in no window) when hop > size."""

    size: int
    hop: int
    offset: int = 0
    kind = "hopping"

    def __post_init__(self):
        if self.size <= 0 or self.hop <= 0:
            raise ValueError("hopping size and hop must be positive")

    @property
    def windows_per_record(self) -> int:
        return -(-self.size // self.hop)

    def assign(self, ts):
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

    def describe(self):
        return {"hopping": {"size": self.size, "hop": self.hop, "offset": self.offset}}


@dataclass(frozen=True)
class GlobalWindows(WindowFn):
    """One window per key for all of time; it closes only when the input ends."""

    kind = "global"

    def assign(self, ts):
        n = len(ts)
        return np.arange(n), np.full(n, MIN_TIME, dtype=np.int64), np.full(n, MAX_TIME, dtype=np.int64)

    def describe(self):
        return {"global": {}}


@dataclass(frozen=True)
class Sessions(WindowFn):
    """Per-key sessions: a record at t opens the proto-session [t, t + gap); sessions that overlap
    merge. ``gap_column`` takes each record's gap from a column instead."""

    gap: int | None = None
    gap_column: str | None = None
    kind = "session"
    merging = True
    record_defined = True

    def __post_init__(self):
        if (self.gap is None) == (self.gap_column is None):
            raise ValueError("a session window needs exactly one of gap and gap_column")
        if self.gap is not None and self.gap <= 0:
            raise ValueError("session gap must be positive")

    def assign(self, ts, gaps=None):
        """Proto-sessions of the rows (merging happens per key in the engine)."""
        g = gaps if gaps is not None else np.full(len(ts), self.gap, dtype=np.int64)
        return np.arange(len(ts)), ts.copy(), ts + g

    def describe(self):
        if self.gap_column:
            return {"session": {"gap_column": self.gap_column}}
        return {"session": {"gap": self.gap}}


@dataclass(frozen=True)
class Sliding(WindowFn):
    """Kafka KIP-450 record-defined sliding windows: each record at t defines [t - D, t] and, when
    records fall in it, [t + 1, t + 1 + D]; both ends inclusive; each distinct set of records is
    aggregated in exactly one window."""

    time_difference: int
    kind = "sliding"
    record_defined = True

    def __post_init__(self):
        if self.time_difference <= 0:
            raise ValueError("sliding time_difference must be positive")

    def report_end(self, end):
        return end - 1

    def assign(self, ts):
        # the window each record defines that contains it: [t - D, t]
        return np.arange(len(ts)), ts - self.time_difference, ts + 1

    def describe(self):
        return {"sliding": {"time_difference": self.time_difference}}
