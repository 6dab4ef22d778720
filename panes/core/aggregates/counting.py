"""Counts: ``count`` (of rows, or of a column's non-null values) and ``count_distinct``."""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import AggregateFn, non_null, plain


class Count(AggregateFn):
    name = "count"

    @classmethod
    def from_spec(cls, function: str, argument: Any) -> AggregateFn:
        """``{count: "*"}`` (rows), ``{count: column}`` (its non-null values)."""
        if isinstance(argument, dict):
            return super().from_spec(function, argument)
        return cls(argument)

    def create(self) -> Any:
        return 0

    def add_group(self, acc: Any, values: Any, ts: np.ndarray, seq: np.ndarray) -> Any:
        if self.column in (None, "*"):
            return acc + len(ts)
        return acc + int(non_null(values).sum())

    def merge(self, a: Any, b: Any) -> Any:
        return a + b

    def extract(self, acc: Any) -> Any:
        return acc

    def partials(self, values: Any, begins: np.ndarray, n_rows: int) -> list | None:
        if self.column in (None, "*"):
            return np.diff(np.append(begins, n_rows)).tolist()
        if values.dtype.kind not in "iubf":
            return None
        return np.add.reduceat(non_null(values).astype(np.int64), begins).tolist()

    def describe(self) -> dict:
        return {"count": self.column or "*"}


class CountDistinct(AggregateFn):
    name = "count_distinct"

    def create(self) -> Any:
        return set()

    def add_group(self, acc: Any, values: Any, ts: np.ndarray, seq: np.ndarray) -> Any:
        vals = values[non_null(values)]
        return acc | {plain(v) for v in vals}

    def merge(self, a: Any, b: Any) -> Any:
        return a | b

    def extract(self, acc: Any) -> Any:
        return len(acc)
