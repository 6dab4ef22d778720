"""Aggregate functions as accumulators (Beam's CombineFn shape: create / add / merge / extract).

Each aggregate also adds a whole group of rows at once (``add_group``): the engine sorts a batch by
(key, window) and calls it once per group with numpy slices, so no Python runs per row for the
built-in functions. Accumulators are plain Python values (picklable): they are the window state.

Null inputs are ignored, as in SQL, except by ``count`` of ``"*"``. ``first`` / ``last`` and
``collect_list`` follow event time; equal event times keep arrival order.
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np


def _non_null(values: np.ndarray) -> np.ndarray:
    """A boolean mask of the entries that are not None / NaN."""
    if values.dtype.kind == "f":
        return ~np.isnan(values)
    if values.dtype.kind in "iub":
        return np.ones(len(values), dtype=bool)
    return np.array([v is not None and not (isinstance(v, float) and math.isnan(v)) for v in values], dtype=bool)


def _py(v: Any) -> Any:
    """numpy scalars to plain Python values (so results compare and serialise plainly)."""
    if isinstance(v, np.generic):
        return v.item()
    return v


class AggregateFn:
    """One aggregate over one input column. Subclasses define the accumulator."""

    name = "aggregate"
    #: True when Spark's own aggregate functions compute exactly this (the native planner uses it).
    native = True
    #: numeric input required
    numeric = False

    def __init__(self, column: str | None):
        self.column = column

    def create(self) -> Any:
        raise NotImplementedError

    def add_group(self, acc: Any, values: np.ndarray | None, ts: np.ndarray, seq: np.ndarray) -> Any:
        raise NotImplementedError

    def merge(self, a: Any, b: Any) -> Any:
        raise NotImplementedError

    def extract(self, acc: Any) -> Any:
        raise NotImplementedError

    def partials(self, values: np.ndarray | None, begins: np.ndarray, n_rows: int) -> list | None:
        """Accumulators of many groups at once, for rows already sorted by group (group g is
        rows[begins[g]:begins[g+1]]), or None when the function has no vectorised form."""
        return None

    def describe(self) -> dict:
        return {self.name: self.column}

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.__dict__ == other.__dict__

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.column))


class Count(AggregateFn):
    name = "count"

    def create(self):
        return 0

    def add_group(self, acc, values, ts, seq):
        if self.column in (None, "*"):
            return acc + len(ts)
        return acc + int(_non_null(values).sum())

    def merge(self, a, b):
        return a + b

    def extract(self, acc):
        return acc

    def partials(self, values, begins, n_rows):
        if self.column in (None, "*"):
            return np.diff(np.append(begins, n_rows)).tolist()
        if values.dtype.kind not in "iubf":
            return None
        return np.add.reduceat(_non_null(values).astype(np.int64), begins).tolist()

    def describe(self):
        return {"count": self.column or "*"}


class Sum(AggregateFn):
    name = "sum"
    numeric = True

    def create(self):
        return None

    def add_group(self, acc, values, ts, seq):
        vals = values[_non_null(values)]
        if len(vals) == 0:
            return acc
        s = _py(vals.sum()) if vals.dtype != object else sum(vals)
        return s if acc is None else acc + s

    def merge(self, a, b):
        if a is None:
            return b
        if b is None:
            return a
        return a + b

    def extract(self, acc):
        return acc

    def partials(self, values, begins, n_rows):
        if values.dtype.kind in "iub":
            return np.add.reduceat(values, begins).tolist()
        if values.dtype.kind == "f":
            ok = ~np.isnan(values)
            sums = np.add.reduceat(np.where(ok, values, 0.0), begins).tolist()
            counts = np.add.reduceat(ok.astype(np.int64), begins).tolist()
            return [s if c else None for s, c in zip(sums, counts)]
        return None


class Min(AggregateFn):
    name = "min"

    def create(self):
        return None

    def add_group(self, acc, values, ts, seq):
        vals = values[_non_null(values)]
        if len(vals) == 0:
            return acc
        m = _py(vals.min()) if vals.dtype != object else min(vals)
        return m if acc is None else min(acc, m)

    def merge(self, a, b):
        if a is None:
            return b
        if b is None:
            return a
        return min(a, b)

    def extract(self, acc):
        return acc

    _ufunc = np.minimum
    _nan_ufunc = np.fmin

    def partials(self, values, begins, n_rows):
        if values.dtype.kind in "iu":
            return self._ufunc.reduceat(values, begins).tolist()
        if values.dtype.kind == "f":
            out = self._nan_ufunc.reduceat(values, begins).tolist()
            return [None if v != v else v for v in out]
        return None


class Max(Min):
    name = "max"
    _ufunc = np.maximum
    _nan_ufunc = np.fmax

    def add_group(self, acc, values, ts, seq):
        vals = values[_non_null(values)]
        if len(vals) == 0:
            return acc
        m = _py(vals.max()) if vals.dtype != object else max(vals)
        return m if acc is None else max(acc, m)

    def merge(self, a, b):
        if a is None:
            return b
        if b is None:
            return a
        return max(a, b)


class Avg(AggregateFn):
    name = "avg"
    numeric = True

    def create(self):
        return (0, 0)

    def add_group(self, acc, values, ts, seq):
        vals = values[_non_null(values)]
        if len(vals) == 0:
            return acc
        return (acc[0] + _py(vals.sum()), acc[1] + len(vals))

    def merge(self, a, b):
        return (a[0] + b[0], a[1] + b[1])

    def partials(self, values, begins, n_rows):
        if values.dtype.kind not in "iuf":
            return None
        ok = _non_null(values)
        sums = np.add.reduceat(np.where(ok, values, 0), begins).tolist()
        counts = np.add.reduceat(ok.astype(np.int64), begins).tolist()
        return list(zip(sums, counts))

    def extract(self, acc):
        return None if acc[1] == 0 else acc[0] / acc[1]


class Percentile(AggregateFn):
    """Exact percentile with linear interpolation between closest ranks (Spark's ``percentile``)."""

    name = "percentile"
    numeric = True

    def __init__(self, column: str, p: float = 0.5):
        super().__init__(column)
        if not 0.0 <= float(p) <= 1.0:
            raise ValueError(f"percentile p must be within [0, 1], got {p}")
        self.p = float(p)

    def create(self):
        return []

    def add_group(self, acc, values, ts, seq):
        vals = values[_non_null(values)]
        return acc + [_py(v) for v in vals]

    def merge(self, a, b):
        return a + b

    def extract(self, acc):
        if not acc:
            return None
        return float(np.percentile(np.asarray(acc, dtype=float), self.p * 100.0, method="linear"))

    def describe(self):
        return {"percentile": {"column": self.column, "p": self.p}}

    def __hash__(self):
        return hash(("percentile", self.column, self.p))


class Median(Percentile):
    name = "median"

    def __init__(self, column: str):
        super().__init__(column, 0.5)

    def describe(self):
        return {"median": self.column}


class First(AggregateFn):
    """The value of the record with the earliest event time (ties: the earliest arrival)."""

    name = "first"

    def create(self):
        return None

    def _pick(self, ts, seq):
        order = np.lexsort((seq, ts))
        return order[0]

    def add_group(self, acc, values, ts, seq):
        mask = _non_null(values)
        if not mask.any():
            return acc
        v, t, s = values[mask], ts[mask], seq[mask]
        i = self._pick(t, s)
        cand = (int(t[i]), int(s[i]), _py(v[i]))
        return cand if acc is None else self.merge(acc, cand)

    def merge(self, a, b):
        if a is None:
            return b
        if b is None:
            return a
        return a if (a[0], a[1]) <= (b[0], b[1]) else b

    def extract(self, acc):
        return None if acc is None else acc[2]


class Last(First):
    """The value of the record with the latest event time (ties: the latest arrival)."""

    name = "last"

    def _pick(self, ts, seq):
        order = np.lexsort((seq, ts))
        return order[-1]

    def merge(self, a, b):
        if a is None:
            return b
        if b is None:
            return a
        return a if (a[0], a[1]) >= (b[0], b[1]) else b


class CollectList(AggregateFn):
    """All non-null values, in event-time order (ties: arrival order)."""

    name = "collect_list"
    native = True

    def create(self):
        return []

    def add_group(self, acc, values, ts, seq):
        mask = _non_null(values)
        return acc + [(int(t), int(s), _py(v)) for t, s, v in zip(ts[mask], seq[mask], values[mask])]

    def merge(self, a, b):
        return a + b

    def extract(self, acc):
        return [v for _, _, v in sorted(acc, key=lambda e: (e[0], e[1]))]


class CountDistinct(AggregateFn):
    name = "count_distinct"

    def create(self):
        return set()

    def add_group(self, acc, values, ts, seq):
        vals = values[_non_null(values)]
        return acc | {_py(v) for v in vals}

    def merge(self, a, b):
        return a | b

    def extract(self, acc):
        return len(acc)


class TopK(AggregateFn):
    """The k largest values, largest first (duplicates kept)."""

    name = "top_k"

    def __init__(self, column: str, k: int = 3):
        super().__init__(column)
        if int(k) < 1:
            raise ValueError(f"top_k k must be at least 1, got {k}")
        self.k = int(k)

    def create(self):
        return []

    def add_group(self, acc, values, ts, seq):
        vals = values[_non_null(values)]
        return self.merge(acc, [_py(v) for v in vals])

    def merge(self, a, b):
        return sorted(a + b, reverse=True)[: self.k]

    def extract(self, acc):
        return list(acc)

    def describe(self):
        return {"top_k": {"column": self.column, "k": self.k}}

    def __hash__(self):
        return hash(("top_k", self.column, self.k))


class CombineFn:
    """A user aggregate, as Beam's CombineFn. Subclass it and define the four methods; define
    ``add_inputs`` too to add a whole group at once (it gets a numpy array)."""

    def create_accumulator(self) -> Any:
        raise NotImplementedError

    def add_input(self, accumulator: Any, value: Any) -> Any:
        raise NotImplementedError

    def merge_accumulators(self, accumulators: list) -> Any:
        raise NotImplementedError

    def extract_output(self, accumulator: Any) -> Any:
        raise NotImplementedError

    def add_inputs(self, accumulator: Any, values: np.ndarray) -> Any:
        for v in values:
            accumulator = self.add_input(accumulator, _py(v))
        return accumulator


class UserCombine(AggregateFn):
    """Wraps a CombineFn (an instance, or 'module:ClassName' / 'module.ClassName')."""

    name = "combine"
    native = False

    def __init__(self, column: str | None, fn: CombineFn | str):
        super().__init__(column)
        self.fn_ref = fn if isinstance(fn, str) else f"{type(fn).__module__}:{type(fn).__qualname__}"
        self.fn = load_combine_fn(fn) if isinstance(fn, str) else fn

    def create(self):
        return self.fn.create_accumulator()

    def add_group(self, acc, values, ts, seq):
        if values is None:
            values = np.array([None] * len(ts), dtype=object)
        return self.fn.add_inputs(acc, values)

    def merge(self, a, b):
        return self.fn.merge_accumulators([a, b])

    def extract(self, acc):
        return self.fn.extract_output(acc)

    def describe(self):
        return {"combine": {"fn": self.fn_ref, "column": self.column}}

    def __eq__(self, other):
        return isinstance(other, UserCombine) and (self.fn_ref, self.column) == (other.fn_ref, other.column)

    def __hash__(self):
        return hash(("combine", self.fn_ref, self.column))


def load_combine_fn(ref: str) -> CombineFn:
    """Import a CombineFn class or factory named 'package.module:Name' (or 'package.module.Name')."""
    if ":" in ref:
        mod, _, attr = ref.partition(":")
    else:
        mod, _, attr = ref.rpartition(".")
    if not mod or not attr:
        raise ValueError(f"a combine function is named 'module:ClassName', got {ref!r}")
    try:
        obj = importlib.import_module(mod)
    except ImportError as e:
        raise ValueError(f"cannot import module {mod!r} for combine function {ref!r}: {e}") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"module {mod!r} has no {attr!r} (combine function {ref!r})")
        obj = getattr(obj, part)
    fn = obj() if isinstance(obj, type) or callable(obj) and not hasattr(obj, "create_accumulator") else obj
    for method in ("create_accumulator", "add_input", "merge_accumulators", "extract_output"):
        if not hasattr(fn, method):
            raise ValueError(f"combine function {ref!r} has no {method}() method")
    if not hasattr(fn, "add_inputs"):
        fn.add_inputs = lambda acc, values: CombineFn.add_inputs(fn, acc, values)  # type: ignore[attr-defined]
    return fn


#: spec name -> constructor(argument) ; the argument is the column name or a dict of options
FUNCTIONS: dict[str, Callable[..., AggregateFn]] = {
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


@dataclass(frozen=True)
class Aggregate:
    """An output column and the function that fills it."""

    output: str
    fn: AggregateFn = field(compare=True)


def make_aggregate(output: str, function: str, argument: Any) -> Aggregate:
    """Build an aggregate from its spec form ``{output: {function: argument}}``.

    ``argument`` is a column name ("*" for count of rows), or for percentile / top_k / combine a
    mapping with ``column`` and the function's options (``p``, ``k``, ``fn``)."""
    if function not in FUNCTIONS:
        raise ValueError(f"unknown aggregate function {function!r}; one of {sorted(FUNCTIONS)}")
    ctor = FUNCTIONS[function]
    if isinstance(argument, dict):
        opts = dict(argument)
        column = opts.pop("column", None)
        if function == "percentile":
            if "p" not in opts:
                raise ValueError("percentile needs p (e.g. {column: latency, p: 0.95})")
            return Aggregate(output, Percentile(column, float(opts.pop("p"))))
        if function == "top_k":
            return Aggregate(output, TopK(column, int(opts.pop("k", 3))))
        if function == "combine":
            if "fn" not in opts:
                raise ValueError("combine needs fn: 'module:ClassName'")
            return Aggregate(output, UserCombine(column, opts.pop("fn")))
        if opts:
            raise ValueError(f"{function} takes no options {sorted(opts)}")
        return Aggregate(output, ctor(column))
    if function == "combine":
        raise ValueError("combine needs {fn: 'module:ClassName', column: COL}")
    if function == "percentile":
        raise ValueError("percentile needs {column: COL, p: FRACTION}")
    if argument is None and function != "count":
        raise ValueError(f"{function} needs a column")
    if function != "count" and argument == "*":
        raise ValueError(f"{function} needs a column, not '*'")
    return Aggregate(output, ctor(argument))
