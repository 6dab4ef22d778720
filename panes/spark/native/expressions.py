"""Expressions the native plans share: a step's own values as columns (never as literals), and pane
timings as numbers.

A step's own values (its watermark, ...) are never literals in its plans: Spark writes a literal
number into the code it generates for a stage, so with the watermark as a literal each micro-batch
compiled its stages anew (tests in test_generated_code.py). A one-element array literal is handed
to the generated code as an object instead: the code stays the same from one micro-batch to the
next, and Spark's code cache serves it. Its values reach the rows as columns (``constants``, a
Generate in the stage's code) or a filter's test reads them (``where``). (Columns with lambda
functions are built once per step, ``NativeStep.memo``, for the same reason: the names Spark gives
their variables are new each time, and are in the generated code.)
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ...core import rules
from ..ops import Sql

#: pane timings in the order of their numbers (``timing_code``: 1-based)
TIMINGS = (rules.EARLY, rules.ON_TIME, rules.LATE)
#: the name of the one-row struct a ``where`` test reads the step's values from
STEP_VALUES = "c"


def one_row(values: dict[str, int]) -> str:
    """The SQL of an array literal of one struct of ``values`` (longs)."""
    fields = ", ".join(f"'{n}', CAST({int(v)} AS BIGINT)" for n, v in values.items())
    return f"array(named_struct({fields}))"  # (SQL: one JVM round trip, where Columns made eight)


def constants(df: DataFrame, values: dict[str, int], *columns: Any) -> DataFrame:
    """``df`` with a long column per name of ``values``, the same value on every row (see
    above). ``columns``: the others to keep (default: all), in the same step (each DataFrame step
    costs an analysis)."""
    generator = f"inline({one_row(values)})"
    if not columns:
        return df.selectExpr("*", generator)
    return df.select(*columns, F.expr(generator))


def step_value(name: str) -> Sql:
    """The step's value ``name`` as a ``where`` test reads it."""
    return Sql(f"{STEP_VALUES}.{name}")


def where(test: Sql | str, values: dict[str, int]) -> Column:
    """A generator for a select that keeps the rows for which ``test`` (SQL) holds and adds no
    column: a filter in the select's own step (each DataFrame step costs an analysis). ``test``
    reads ``values`` as fields of ``c`` (``step_value``; see above): Spark's higher-order functions
    evaluate it for the one element of their array, interpreted (~15 ns more per row than a
    filter, measured on 2M rows): for the windows tables, not the rows. (SQL: the same as Columns,
    with lambda functions, took ~10 ms more to build.)"""
    return F.expr(
        f"inline(transform(filter({one_row(values)}, {STEP_VALUES} -> {test}), {STEP_VALUES} -> named_struct()))"
    )


def mapped(c: Column, pairs: list[tuple[Any, Any]]) -> Column:
    """``c``'s value mapped by ``(from, to)`` pairs (a when-chain; null for any other value)."""
    out = None
    for a, b in pairs:
        out = (F.when if out is None else out.when)(c == a, F.lit(b))
    assert out is not None
    return out


def timing_code(timing: Column) -> Column:
    """A pane timing as its number in ``TIMINGS`` (1-based; null for null)."""
    return mapped(timing, [(t, i) for i, t in enumerate(TIMINGS, 1)])


def timing_of(code: Column) -> Column:
    """The pane timing of a number from ``timing_code``. (Not element_at: on a null index,
    Spark 4.3 gave the array's last element after an aggregation, and failed to optimise a plan
    of its own.)"""
    return mapped(code, [(i, t) for i, t in enumerate(TIMINGS, 1)])
