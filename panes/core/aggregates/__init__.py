"""Aggregate functions as accumulators (Beam's CombineFn shape: create / add / merge / extract).

``base`` holds the base class; the built-ins are grouped by kind; ``registry`` maps spec function
names to classes. ``first`` / ``last`` and ``collect_list`` follow event time; equal event times
keep arrival order. Null inputs are ignored, as in SQL, except by ``count`` of ``"*"``.
"""

from .arithmetic import Avg, Sum
from .base import Aggregate, AggregateFn
from .combine import CombineFn, UserCombine, load_combine_fn
from .counting import Count, CountDistinct
from .extremes import Max, Min
from .ordered import CollectList, First, Last, TopK
from .percentile import Median, Percentile
from .registry import FUNCTIONS, make_aggregate

__all__ = [
    "Aggregate",
    "AggregateFn",
    "Avg",
    "CollectList",
    "CombineFn",
    "Count",
    "CountDistinct",
    "FUNCTIONS",
    "First",
    "Last",
    "Max",
    "Median",
    "Min",
    "Percentile",
    "Sum",
    "TopK",
    "UserCombine",
    "load_combine_fn",
    "make_aggregate",
]
