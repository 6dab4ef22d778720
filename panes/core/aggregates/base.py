"""The aggregate base class (Beam's CombineFn shape: create / add / merge / extract) and the
output column an aggregate fills.

Each aggregate also adds a whole group of rows at once (``add_group``): the engine sorts a batch by
(key, window) and calls it once per group with numpy slices, so no Python runs per row for the
built-in functions. Accumulators are plain Python values (picklable): they are the window state.
Null inputs are ignored, as in SQL, except by ``count`` of ``"*"``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np


def non_null(values: np.ndarray) -> np.ndarray:
    """A boolean mask of the entries that are not None / NaN."""
    if values.dtype.kind == "f":
        return ~np.isnan(values)
    if values.dtype.kind in "iub":
        return np.ones(len(values), dtype=bool)
    return np.array([v is not None and not (isinstance(v, float) and math.isnan(v)) for v in values], dtype=bool)


def plain(v: Any) -> Any:
    """numpy scalars to plain Python values (so results compare and serialise plainly)."""
    if isinstance(v, np.generic):
        return v.item()
    return v


def split_options(argument: dict) -> tuple[Any, dict]:
    """A spec argument mapping -> (its column, its other options)."""
    options = dict(argument)
    return options.pop("column", None), options


def column_argument(function: str, argument: Any) -> Any:
    """The column a spec names for a function that reads one column (not ``"*"``)."""
    if argument is None:
        raise ValueError(f"{function} needs a column")
    if argument == "*":
        raise ValueError(f"{function} needs a column, not '*'")
    return argument


class AggregateFn:
    """One aggregate over one input column. Subclasses define the accumulator, ``describe`` and,
    when their spec form has options, ``from_spec``."""

    name = "aggregate"
    #: numeric input required
    numeric = False

    def __init__(self, column: str | None):
        self.column = column

    @classmethod
    def from_spec(cls, function: str, argument: Any) -> AggregateFn:
        """The aggregate of the spec ``{function: argument}``: a column name, or a mapping with
        ``column`` (and the options the function takes); raises ValueError with the reason."""
        return single_column_from_spec(cls, function, argument)

    def create(self) -> Any:
        raise NotImplementedError

    def add_group(self, acc: Any, values: Any, ts: np.ndarray, seq: np.ndarray) -> Any:
        """Add a group of rows: ``values`` (a numpy array; None for an aggregate that reads no column),
        their event times and arrival order."""
        raise NotImplementedError

    def merge(self, a: Any, b: Any) -> Any:
        raise NotImplementedError

    def extract(self, acc: Any) -> Any:
        raise NotImplementedError

    def empty_value(self) -> Any:
        """The value of a pane with no input (an empty ON_TIME pane in discarding mode): the
        combiner's identity where there is one, as Beam's ``extractOutput(createAccumulator())``
        (count 0, count_distinct 0, collect_list and top_k []), else None (min, max, avg, first,
        last, median, percentile)."""
        return self.extract(self.create())

    def input(self, values: dict, rows: np.ndarray) -> Any:
        """What ``add_group`` gets of a batch's input columns (``values``) for the group's ``rows``:
        the aggregate's own column (None when it reads none)."""
        return values[self.column][rows] if self.column in values else None

    def extract_window(self, acc: Any, window: Any) -> Any:
        """The pane's value for a window (``panes.core.window_pipeline.PaneWindow``); most
        aggregates need only their accumulator."""
        return self.extract(acc)

    def partials(self, values: Any, begins: np.ndarray, n_rows: int) -> list | None:
        """Accumulators of many groups at once, for rows already sorted by group (group g is
        rows[begins[g]:begins[g+1]]), or None when the function has no vectorised form."""
        return None

    def describe(self) -> dict:
        return {self.name: self.column}

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.__dict__ == other.__dict__

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.column))


def single_column_from_spec(cls: type[AggregateFn], function: str, argument: Any) -> AggregateFn:
    """``{function: column}`` or ``{function: {column: C}}`` for a function without options."""
    if isinstance(argument, dict):
        column, options = split_options(argument)
        if options:
            raise ValueError(f"{function} takes no options {sorted(options)}")
        return cls(column)
    return cls(column_argument(function, argument))


@dataclass(frozen=True)
class Aggregate:
    """An output column and the function that fills it."""

    output: str
    fn: AggregateFn = field(compare=True)
