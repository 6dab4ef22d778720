"""Sums and means: ``sum``, ``avg`` (``mean``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import AggregateFn, non_null, plain


class Sum(AggregateFn):
    name = "sum"
    numeric = True

    def create(self) -> Any:
        return None

    def add_group(self, acc: Any, values: Any, ts: np.ndarray, seq: np.ndarray) -> Any:
        vals = values[non_null(values)]
        if len(vals) == 0:
            return acc
        s = plain(vals.sum()) if vals.dtype != object else sum(vals)
        return s if acc is None else acc + s

    def merge(self, a: Any, b: Any) -> Any:
        if a is None:
            return b
        if b is None:
            return a
        return a + b

    def extract(self, acc: Any) -> Any:
        return acc

    def empty_value(self) -> Any:
        # the identity of addition (Beam's Sum); a sum of only null values stays null, as in SQL
        return 0

    def partials(self, values: Any, begins: np.ndarray, n_rows: int) -> list | None:
        if values.dtype.kind in "iub":
            return np.add.reduceat(values, begins).tolist()
        if values.dtype.kind == "f":
            ok = ~np.isnan(values)
            sums = np.add.reduceat(np.where(ok, values, 0.0), begins).tolist()
            counts = np.add.reduceat(ok.astype(np.int64), begins).tolist()
            return [s if c else None for s, c in zip(sums, counts)]
        return None


class Avg(AggregateFn):
    name = "avg"
    numeric = True

    def create(self) -> Any:
        return (0, 0)

    def add_group(self, acc: Any, values: Any, ts: np.ndarray, seq: np.ndarray) -> Any:
        vals = values[non_null(values)]
        if len(vals) == 0:
            return acc
        return (acc[0] + plain(vals.sum()), acc[1] + len(vals))

    def merge(self, a: Any, b: Any) -> Any:
        return (a[0] + b[0], a[1] + b[1])

    def partials(self, values: Any, begins: np.ndarray, n_rows: int) -> list | None:
        if values.dtype.kind not in "iuf":
            return None
        ok = non_null(values)
        sums = np.add.reduceat(np.where(ok, values, 0), begins).tolist()
        counts = np.add.reduceat(ok.astype(np.int64), begins).tolist()
        return list(zip(sums, counts))

    def extract(self, acc: Any) -> Any:
        return None if acc[1] == 0 else acc[0] / acc[1]
