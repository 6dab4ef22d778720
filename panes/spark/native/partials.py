"""Partial aggregates: how each aggregate is kept between micro-batches on the native plans, one
form per aggregate (``capability.NATIVE_AGGREGATES`` names them by the core's aggregate class)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as ST

from ...core import aggregates as A
from ..columns import SEQ, TS, cast_to, output_type
from ..registry import registered
from .capability import NATIVE_AGGREGATES, spark_form
from .names import PARTIAL


class _BuiltOnUse:
    """An attribute built by a zero-argument function (``obj.builders[name]``) on first use, then kept."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, objtype: type | None = None) -> Any:
        if obj is None:
            return self
        value = obj.__dict__[self.name] = obj.builders[self.name]()
        return value


class Partial:
    """How one aggregate is kept between micro-batches: partial columns, their combination, the
    result. Each form is built when a plan first asks for it, then kept (each Column costs JVM
    round trips, and a plan reads only some of them: a batch plan neither ``merge`` nor
    ``one_row``)."""

    of_rows = _BuiltOnUse()  # tuple: partials from the rows of a group (unnamed: also used over frames)
    merge = _BuiltOnUse()  # tuple: partials from partials
    final = _BuiltOnUse()  # the result from the partials
    one_row = _BuiltOnUse()  # tuple: the partials of a single row (sessions merge rows and partials)
    #: tuple: the partials of no rows, which a discarding pane resets to: a value, None (null) or
    #: "array" (empty)
    empty = _BuiltOnUse()

    def __init__(
        self,
        names: tuple[str, ...],
        of_rows: Callable,
        merge: Callable,
        final: Callable,
        one_row: Callable,
        empty: Callable = lambda: (),
        ordered: bool = False,
    ):
        self.names = names
        #: it breaks event-time ties by arrival order (``columns.SEQ``)
        self.ordered = ordered
        self.builders = {"of_rows": of_rows, "merge": merge, "final": final, "one_row": one_row, "empty": empty}


def partial(i: int, a: A.Aggregate, schema: ST.StructType) -> Partial:
    """The partial form of the pipeline's ``i``-th aggregate, in columns ``__panes_partial_<i>...``."""
    ref = registered(NATIVE_AGGREGATES, a.fn)
    if ref is None:
        raise TypeError(f"{a.fn!r} has no native partial form")
    form: Callable[[str, A.AggregateFn, ST.StructType], Partial] = spark_form(ref)
    return form(f"{PARTIAL}{i}", a.fn, schema)


def _value(fn: A.AggregateFn) -> Column:
    """The column an aggregate reads."""
    assert fn.column is not None
    return F.col(fn.column)


def count(n: str, fn: A.AggregateFn, schema: ST.StructType) -> Partial:
    c = None if fn.column in (None, "*") else _value(fn)  # (None: count(*))
    return Partial(
        (n,),
        lambda: (F.count(F.lit(1)) if c is None else F.count(c),),
        lambda: (F.sum(n).alias(n),),
        lambda: F.col(n),
        lambda: ((F.lit(1) if c is None else F.when(c.isNotNull(), 1).otherwise(0)).cast("long").alias(n),),
        lambda: (F.lit(0).cast("long"),),
    )


def total(n: str, fn: A.AggregateFn, schema: ST.StructType) -> Partial:
    c, t = _value(fn), output_type(fn, schema)
    return Partial(
        (n,),
        lambda: (F.sum(cast_to(c, t)),),
        lambda: (cast_to(F.sum(n), t).alias(n),),
        lambda: F.col(n),
        lambda: (cast_to(c, t).alias(n),),
        lambda: (None,),
    )


def average(n: str, fn: A.AggregateFn, schema: ST.StructType) -> Partial:
    c = _value(fn)
    s, k = f"{n}_sum", f"{n}_count"
    # (Spark sums decimal(p, s) as decimal(p + 10, s): the total of totals kept at that type, or
    # each micro-batch's merge would widen it and the next one read its table wrong)
    ct = schema[str(fn.column)].dataType
    kept = (
        (lambda e: e)
        if not isinstance(ct, ST.DecimalType)
        else (lambda e: cast_to(e, ST.DecimalType(min(38, ct.precision + 10), ct.scale)))
    )
    return Partial(
        (s, k),
        lambda: (kept(F.sum(c)), F.count(c)),
        lambda: (kept(F.sum(s)).alias(s), F.sum(k).alias(k)),
        lambda: F.when(F.col(k) > 0, F.col(s).cast("double") / F.col(k)),
        lambda: (kept(c).alias(s), F.when(c.isNotNull(), 1).otherwise(0).cast("long").alias(k)),
        lambda: (None, F.lit(0).cast("long")),
    )


def _extreme(n: str, pick: Callable, item: Callable[[], Column], final: Callable, ordered: bool = False) -> Partial:
    return Partial(
        (n,),
        lambda: (pick(item()),),
        lambda: (pick(n).alias(n),),
        final,
        lambda: (item().alias(n),),
        lambda: (None,),
        ordered,
    )


def minimum(n: str, fn: A.AggregateFn, schema: ST.StructType) -> Partial:
    c = _value(fn)
    return _extreme(n, F.min, lambda: c, lambda: F.col(n))


def maximum(n: str, fn: A.AggregateFn, schema: ST.StructType) -> Partial:
    c = _value(fn)
    return _extreme(n, F.max, lambda: c, lambda: F.col(n))


def _once(build: Callable[[], Column]) -> Callable[[], Column]:
    """``build()`` on the first call, then the same Column. (Not functools.cache: on Spark Connect
    the foreachBatch function is pickled with the step it closes over, and a cache of a local
    lambda pickles by name, which fails; a closure pickles by value.)"""
    kept: list[Column] = []

    def value() -> Column:
        if not kept:
            kept.append(build())
        return kept[0]

    return value


def _timed(c: Column) -> Callable[[], Column]:
    """A row's value with its event time and arrival order (built once: several forms read it)."""
    return _once(lambda: F.when(c.isNotNull(), F.struct(F.col(TS).alias("t"), F.col(SEQ).alias("q"), c.alias("v"))))


def first(n: str, fn: A.AggregateFn, schema: ST.StructType) -> Partial:
    """The value at the least (event time, arrival order)."""
    c = _value(fn)
    return _extreme(n, F.min, _timed(c), lambda: F.col(n)["v"], ordered=True)


def last(n: str, fn: A.AggregateFn, schema: ST.StructType) -> Partial:
    """The value at the greatest (event time, arrival order)."""
    c = _value(fn)
    return _extreme(n, F.max, _timed(c), lambda: F.col(n)["v"], ordered=True)


def _holistic(
    n: str, c: Column, item: Callable[[], Column], final: Callable, distinct: bool = False, ordered: bool = False
) -> Partial:
    """The values kept in an array (as the engine keeps them in a list). ``item``: a row's value
    as kept."""

    def of_rows() -> tuple:
        return (F.collect_set(c) if distinct else F.collect_list(F.when(c.isNotNull(), item())),)

    return Partial(
        (n,),
        of_rows,
        lambda: (F.flatten(F.collect_list(n)).alias(n),),
        final,
        lambda: (F.filter(F.array(item()), lambda x: c.isNotNull()).alias(n),),
        lambda: ("array",),
        ordered,
    )


def collect_list(n: str, fn: A.AggregateFn, schema: ST.StructType) -> Partial:
    """In event-time order (then arrival order)."""
    c = _value(fn)
    item = _once(lambda: F.struct(F.col(TS).alias("t"), F.col(SEQ).alias("q"), c.alias("v")))
    return _holistic(n, c, item, lambda: F.transform(F.array_sort(F.col(n)), lambda x: x["v"]), ordered=True)


def count_distinct(n: str, fn: A.AggregateFn, schema: ST.StructType) -> Partial:
    c = _value(fn)
    return _holistic(n, c, lambda: c, lambda: F.size(F.array_distinct(F.col(n))), distinct=True)


def top_k(n: str, fn: A.TopK, schema: ST.StructType) -> Partial:
    c = _value(fn)
    return _holistic(n, c, lambda: c, lambda: F.slice(F.sort_array(F.col(n), asc=False), 1, fn.k))


def percentile(n: str, fn: A.Percentile, schema: ST.StructType) -> Partial:
    c = _value(fn)
    return _holistic(n, c, _once(lambda: c.cast("double")), lambda: _percentile(F.array_sort(F.col(n)), fn.p))


def _percentile(values: Column, p: float) -> Column:
    """The exact percentile of a sorted array, interpolated linearly as numpy (and the core) do."""
    n = F.size(values)
    pos = (n - 1).cast("double") * F.lit(p * 100.0 / 100.0)  # the core hands numpy p * 100 percent
    lo = F.floor(pos)
    frac = pos - lo
    a = F.element_at(values, (lo + 1).cast("int"))
    b = F.element_at(values, F.least(lo + 2, n).cast("int"))
    return F.when(n > 0, F.when(frac >= 0.5, b - (b - a) * (1 - frac)).otherwise(a + (b - a) * frac))
