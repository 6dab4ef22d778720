"""``min`` and ``max`` (of numbers, strings, anything ordered)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import AggregateFn, non_null, plain


class Min(AggregateFn):
    name = "min"
    #: the ufuncs of the vectorised form (integers; floats, NaN as no value)
    ufunc: Any = np.minimum
    nan_ufunc: Any = np.fmin

    def create(self) -> Any:
        return None

    def add_group(self, acc: Any, values: Any, ts: np.ndarray, seq: np.ndarray) -> Any:
        vals = values[non_null(values)]
        if len(vals) == 0:
            return acc
        m = plain(vals.min()) if vals.dtype != object else min(vals)
        return m if acc is None else min(acc, m)

    def merge(self, a: Any, b: Any) -> Any:
        if a is None:
            return b
        if b is None:
            return a
        return min(a, b)

    def extract(self, acc: Any) -> Any:
        return acc

    def partials(self, values: Any, begins: np.ndarray, n_rows: int) -> list | None:
        if values.dtype.kind in "iu":
            return self.ufunc.reduceat(values, begins).tolist()
        if values.dtype.kind == "f":
            out = self.nan_ufunc.reduceat(values, begins).tolist()
            return [None if v != v else v for v in out]
        return None


class Max(Min):
    name = "max"
    ufunc = np.maximum
    nan_ufunc = np.fmax

    def add_group(self, acc: Any, values: Any, ts: np.ndarray, seq: np.ndarray) -> Any:
        vals = values[non_null(values)]
        if len(vals) == 0:
            return acc
        m = plain(vals.max()) if vals.dtype != object else max(vals)
        return m if acc is None else max(acc, m)

    def merge(self, a: Any, b: Any) -> Any:
        if a is None:
            return b
        if b is None:
            return a
        return max(a, b)
