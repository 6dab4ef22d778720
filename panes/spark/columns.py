"""Spark column expressions shared by the plans: event time, validation, output types."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as ST

from ..core import aggregates as A
from ..core.pipeline import Pipeline
from ..core.rules import Reason
from .registry import registered

TS = "__panes_ts"            # event time, epoch ms (long)
INVALID = "__panes_invalid"  # dead-letter reason for malformed rows, else null
DETAIL = "__panes_detail"
WMARK = "__panes_wmark"      # the column Spark's watermark tracks (timestamp)
PUNCT = "__panes_punct"      # a punctuation record's watermark (ms), else null
CLOCK = "__panes_clock"      # a scripted processing-time control row (ms), else null
ACTIVE = "__panes_active"    # on a scripted clock row: the step also carries records (not idle)
BUCKET = "__panes_bucket"
SEQ = "__panes_seq"
#: the engine's emission order, for replays: the phase of the step that emitted a pane or dead
#: letter, and its order within the phase
EMISSION_PHASE = "__panes_phase"
EMISSION_ORDER = "__panes_emission_order"
MALFORMED = "__panes_malformed"  # set by a reader that could not make a record of the input
NUM = "__panes_num_"         # prefix: a numeric copy of a string column a numeric aggregate reads

#: Spark's watermark at or past this means "the input has ended" (+infinity)
SPARK_END_MS = 221845392000000  # 9000-01-01T00:00:00Z


@dataclass(frozen=True)
class Check:
    """A test every record must pass: ``ok`` (true or false, never null); a record that fails
    it goes to the dead letters with ``reason`` and ``detail`` (a text, or a column)."""

    ok: Column
    reason: Reason
    detail: str | Column


def event_time_ms(df: DataFrame | ST.StructType, column: str) -> tuple[Column, list[Check]]:
    """(epoch ms, the checks of the column: missing, not a time) for the event-time column of
    a DataFrame (or of its schema), whatever its type: timestamps, dates, integers (epoch ms)
    or strings (ISO-8601, or digits = epoch ms). The ms are null when a check fails."""
    dtype = (df if isinstance(df, ST.StructType) else df.schema)[column].dataType
    c = F.col(column)
    detail = f"event_time column {column}"
    checks = [Check(c.isNotNull(), Reason.MISSING_EVENT_TIME, detail)]
    if isinstance(dtype, (ST.TimestampType, ST.TimestampNTZType, ST.DateType)):
        ms = F.unix_millis(c.cast("timestamp"))
    elif isinstance(dtype, (ST.IntegralType, ST.DecimalType, ST.DoubleType, ST.FloatType)):
        ms = c.cast("long")
    else:
        s = F.trim(c.cast("string"))
        digits = s.rlike(r"^-?[0-9]+$")
        parsed = F.unix_millis(F.try_to_timestamp(s))
        ms = F.when(digits, s.cast("long")).otherwise(parsed)
        checks.append(Check(ms.isNotNull(), Reason.INVALID_EVENT_TIME, detail))
    return ms, checks


def validation(df: DataFrame | ST.StructType, pipeline: Pipeline, num: dict[str, Column],
               ts_checks: list[Check], window_checks: list[Check]) -> list[Check]:
    """The checks of a record, in the order they are reported (the first that fails gives
    the dead letter's reason): the reader's (malformed), the event time's (``ts_checks``), the
    key's, numbers in the string columns a numeric aggregate reads (``num``, see
    ``numeric_string_columns``), the window kind's (``window_checks``: a column it reads, such as
    a session gap column)."""
    out = []
    if MALFORMED in (df if isinstance(df, ST.StructType) else df.schema).fieldNames():
        out.append(Check(F.col(MALFORMED).isNull(), Reason.MALFORMED, F.col(MALFORMED)))
    out += ts_checks
    if pipeline.key:
        out.append(Check(functools.reduce(lambda a, b: a & b, [F.col(k).isNotNull() for k in pipeline.key]),
                         Reason.MISSING_KEY, f"no value for key column(s) {list(pipeline.key)}"))
    # numbers in a string column (e.g. JSON whose values mix types): not a number = malformed
    for c, n in num.items():
        out.append(Check(F.col(c).isNull() | n.isNotNull(), Reason.INVALID_VALUE, f"not a number: ['{c}']"))
    return out + window_checks


def valid(checks: list[Check]) -> Column:
    """The test of a record that passes ``checks``, a conjunction of their simple tests: Spark
    pushes those to the scan (``IsNotNull(ts)``...), which it cannot do with the null test of
    the reason's nested CASE."""
    return functools.reduce(lambda a, b: a & b, [c.ok for c in checks]) if checks else F.lit(True)


def reason_detail(checks: list[Check]) -> tuple[Column, Column]:
    """The dead letter's (reason, detail) of a record: those of the first check it fails, null
    when it passes them all."""
    if not checks:
        none = F.lit(None).cast("string")
        return none, none
    reason = detail = None
    for c in checks:
        bad, why = ~c.ok, c.detail if isinstance(c.detail, Column) else F.lit(c.detail)
        reason = F.when(bad, F.lit(c.reason.value)) if reason is None else reason.when(bad, F.lit(c.reason.value))
        detail = F.when(bad, why) if detail is None else detail.when(bad, why)
    return reason, detail


def record_json(columns: list[str]) -> Column:
    """A row's record (these input columns) as JSON, for its dead letter. (Quoted: a name such as
    ``a.b`` is a column of its own, not a field of ``a``.)"""
    return F.to_json(F.struct(*[F.col(f"`{c}`") for c in columns]))


def numeric_string_columns(df: DataFrame | ST.StructType, pipeline: Pipeline) -> list[str]:
    """String columns that a numeric aggregate (sum, avg, percentile...) reads (of a DataFrame or
    of its schema)."""
    schema = df if isinstance(df, ST.StructType) else df.schema
    names = schema.fieldNames()
    out = []
    for a in pipeline.aggregates:
        c = a.fn.column
        if a.fn.numeric and c in names and isinstance(schema[c].dataType, ST.StringType) and c not in out:
            out.append(c)
    return out


def cast_to(c: Column, t: ST.DataType) -> Column:
    """``c`` cast to ``t``: an atomic type (or an array of one) by its SQL name, one JVM call
    (``Column.cast`` of a ``DataType`` makes five: the session, the type parsed, the cast)."""
    e = t
    while isinstance(e, ST.ArrayType):
        e = e.elementType
    return c.cast(t) if isinstance(e, (ST.StructType, ST.MapType, ST.UserDefinedType)) else c.cast(t.simpleString())


def _long(fn: A.AggregateFn, schema: ST.StructType) -> ST.DataType:
    return ST.LongType()


def _double(fn: A.AggregateFn, schema: ST.StructType) -> ST.DataType:
    return ST.DoubleType()


def _column_type(fn: A.AggregateFn, schema: ST.StructType) -> ST.DataType:
    return schema[fn.column].dataType


def _array_of_column_type(fn: A.AggregateFn, schema: ST.StructType) -> ST.DataType:
    return ST.ArrayType(_column_type(fn, schema))


def _sum_type(fn: A.AggregateFn, schema: ST.StructType) -> ST.DataType:
    return ST.LongType() if isinstance(_column_type(fn, schema), ST.IntegralType) else ST.DoubleType()


def _user_type(fn: A.AggregateFn, schema: ST.StructType) -> ST.DataType:
    """A user combine function's ``output_type`` (a DDL string or a Spark type; default double)."""
    t = getattr(getattr(fn, "fn", None), "output_type", "double")
    return ST.DataType.fromDDL(t) if isinstance(t, str) else t


#: the Spark type of an aggregate's result, by the core's aggregate class (a subclass without a
#: line of its own takes its base class's: Median's is Percentile's)
OUTPUT_TYPES: dict[type, Callable[[A.AggregateFn, ST.StructType], ST.DataType]] = {
    A.Count: _long,
    A.CountDistinct: _long,
    A.Sum: _sum_type,
    A.Avg: _double,
    A.Percentile: _double,
    A.Min: _column_type,
    A.Max: _column_type,
    A.First: _column_type,
    A.Last: _column_type,
    A.CollectList: _array_of_column_type,
    A.TopK: _array_of_column_type,
    A.UserCombine: _user_type,
}


def output_type(fn: A.AggregateFn, schema: ST.StructType) -> ST.DataType:
    """The Spark type of an aggregate's result."""
    typed = registered(OUTPUT_TYPES, fn)
    if typed is None:
        raise TypeError(f"no Spark type for {fn!r}")
    return typed(fn, schema)


def pane_schema(pipeline: Pipeline, schema: ST.StructType) -> ST.StructType:
    """The panes DataFrame's schema: key columns, window bounds, pane metadata, aggregates."""
    fields = [ST.StructField(k, schema[k].dataType, True) for k in pipeline.key]
    fields += [
        ST.StructField("window_start", ST.TimestampType(), True),
        ST.StructField("window_end", ST.TimestampType(), True),
        ST.StructField("timing", ST.StringType(), False),
        ST.StructField("pane_index", ST.LongType(), False),
        ST.StructField("is_last", ST.BooleanType(), False),
        ST.StructField("retraction", ST.BooleanType(), False),
    ]
    fields += [ST.StructField(a.output, output_type(a.fn, schema), True) for a in pipeline.aggregates]
    return ST.StructType(fields)


DEAD_LETTER_SCHEMA = ST.StructType([
    ST.StructField("reason", ST.StringType(), False),
    ST.StructField("record", ST.StringType(), True),
    ST.StructField("watermark", ST.TimestampType(), True),
    ST.StructField("windows", ST.ArrayType(ST.StructType([
        ST.StructField("start", ST.TimestampType(), True),
        ST.StructField("end", ST.TimestampType(), True),
    ])), True),
    ST.StructField("detail", ST.StringType(), True),
])
