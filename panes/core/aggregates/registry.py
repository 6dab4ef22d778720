"""The aggregate registry: spec function names to aggregate classes.

An aggregate spec is ``{output: {function: argument}}``; the class's ``from_spec`` reads the
argument. Adding an aggregate: its class (an ``AggregateFn`` with ``from_spec`` when its argument
has options) and one line in ``FUNCTIONS``.
"""

from __future__ import annotations

from typing import Any

from .arithmetic import Avg, Sum
from .base import Aggregate, AggregateFn
from .combine import UserCombine
from .counting import Count, CountDistinct
from .extremes import Max, Min
from .ordered import CollectList, First, Last, TopK
from .percentile import Median, Percentile

FUNCTIONS: dict[str, type[AggregateFn]] = {
    "count": Count,
    "sum": Sum,
    "min": Min,
    "max": Max,
    "avg": Avg,
    "mean": Avg,
    "median": Median,
    "percentile": Percentile,
    "first": First,
    "last": Last,
    "collect_list": CollectList,
    "count_distinct": CountDistinct,
    "top_k": TopK,
    "combine": UserCombine,
}


def make_aggregate(output: str, function: str, argument: Any) -> Aggregate:
    """Build an aggregate from its spec form ``{output: {function: argument}}``.

    ``argument`` is a column name ("*" for count of rows), or for percentile / top_k / combine a
    mapping with ``column`` and the function's options (``p``, ``k``, ``fn``)."""
    cls = FUNCTIONS.get(function)
    if cls is None:
        raise ValueError(f"unknown aggregate function {function!r}; one of {sorted(FUNCTIONS)}")
    return Aggregate(output, cls.from_spec(function, argument))
