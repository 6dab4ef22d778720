"""Exact percentiles: ``percentile`` (``{column, p}``) and ``median``."""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import AggregateFn, non_null, plain, single_column_from_spec, split_options


class Percentile(AggregateFn):
    """Exact percentile with linear interpolation between closest ranks (Spark's ``percentile``)."""

    name = "percentile"
    numeric = True

    def __init__(self, column: str, p: float = 0.5):
        super().__init__(column)
        if not 0.0 <= float(p) <= 1.0:
            raise ValueError(f"percentile p must be within [0, 1], got {p}")
        self.p = float(p)

    @classmethod
    def from_spec(cls, function: str, argument: Any) -> AggregateFn:
        if not isinstance(argument, dict):
            raise ValueError("percentile needs {column: COL, p: FRACTION}")
        column, options = split_options(argument)
        if "p" not in options:
            raise ValueError("percentile needs p (e.g. {column: latency, p: 0.95})")
        return cls(column, float(options["p"]))

    def create(self) -> Any:
        return []

    def add_group(self, acc: Any, values: Any, ts: np.ndarray, seq: np.ndarray) -> Any:
        vals = values[non_null(values)]
        return acc + [plain(v) for v in vals]

    def merge(self, a: Any, b: Any) -> Any:
        return a + b

    def extract(self, acc: Any) -> Any:
        if not acc:
            return None
        return float(np.percentile(np.asarray(acc, dtype=float), self.p * 100.0, method="linear"))

    def describe(self) -> dict:
        return {"percentile": {"column": self.column, "p": self.p}}

    def __hash__(self) -> int:
        return hash(("percentile", self.column, self.p))


class Median(Percentile):
    name = "median"

    def __init__(self, column: str):
        super().__init__(column, 0.5)

    @classmethod
    def from_spec(cls, function: str, argument: Any) -> AggregateFn:
        return single_column_from_spec(cls, function, argument)

    def describe(self) -> dict:
        return {"median": self.column}
