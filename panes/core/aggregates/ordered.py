"""Aggregates that follow event time: ``first``, ``last``, ``collect_list`` (equal event times keep
arrival order), and ``top_k``."""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import AggregateFn, column_argument, non_null, plain, split_options


class First(AggregateFn):
    """The value of the record with the earliest event time (ties: the earliest arrival)."""

    name = "first"

    def create(self) -> Any:
        return None

    def pick(self, ts: np.ndarray, seq: np.ndarray) -> int:
        order = np.lexsort((seq, ts))
        return order[0]

    def add_group(self, acc: Any, values: Any, ts: np.ndarray, seq: np.ndarray) -> Any:
        mask = non_null(values)
        if not mask.any():
            return acc
        v, t, s = values[mask], ts[mask], seq[mask]
        i = self.pick(t, s)
        cand = (int(t[i]), int(s[i]), plain(v[i]))
        return cand if acc is None else self.merge(acc, cand)

    def merge(self, a: Any, b: Any) -> Any:
        if a is None:
            return b
        if b is None:
            return a
        return a if (a[0], a[1]) <= (b[0], b[1]) else b

    def extract(self, acc: Any) -> Any:
        return None if acc is None else acc[2]


class Last(First):
    """The value of the record with the latest event time (ties: the latest arrival)."""

    name = "last"

    def pick(self, ts: np.ndarray, seq: np.ndarray) -> int:
        order = np.lexsort((seq, ts))
        return order[-1]

    def merge(self, a: Any, b: Any) -> Any:
        if a is None:
            return b
        if b is None:
            return a
        return a if (a[0], a[1]) >= (b[0], b[1]) else b


class CollectList(AggregateFn):
    """All non-null values, in event-time order (ties: arrival order)."""

    name = "collect_list"

    def create(self) -> Any:
        return []

    def add_group(self, acc: Any, values: Any, ts: np.ndarray, seq: np.ndarray) -> Any:
        mask = non_null(values)
        return acc + [(int(t), int(s), plain(v)) for t, s, v in zip(ts[mask], seq[mask], values[mask])]

    def merge(self, a: Any, b: Any) -> Any:
        return a + b

    def extract(self, acc: Any) -> Any:
        return [v for _, _, v in sorted(acc, key=lambda e: (e[0], e[1]))]


class TopK(AggregateFn):
    """The k largest values, largest first (duplicates kept)."""

    name = "top_k"

    def __init__(self, column: str, k: int = 3):
        super().__init__(column)
        if int(k) < 1:
            raise ValueError(f"top_k k must be at least 1, got {k}")
        self.k = int(k)

    @classmethod
    def from_spec(cls, function: str, argument: Any) -> AggregateFn:
        """``{top_k: column}`` (k = 3) or ``{top_k: {column, k}}``."""
        if isinstance(argument, dict):
            column, options = split_options(argument)
            return cls(column, int(options.get("k", 3)))
        return cls(column_argument(function, argument))

    def create(self) -> Any:
        return []

    def add_group(self, acc: Any, values: Any, ts: np.ndarray, seq: np.ndarray) -> Any:
        vals = values[non_null(values)]
        return self.merge(acc, [plain(v) for v in vals])

    def merge(self, a: Any, b: Any) -> Any:
        return sorted(a + b, reverse=True)[: self.k]

    def extract(self, acc: Any) -> Any:
        return list(acc)

    def describe(self) -> dict:
        return {"top_k": {"column": self.column, "k": self.k}}

    def __hash__(self) -> int:
        return hash(("top_k", self.column, self.k))
