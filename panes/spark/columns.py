"""Spark column expressions shared by the plans: event time, validation, output types."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as ST

from ..core import aggregates as A
from ..core import rules
from ..core.pipeline import Pipeline
from ..core.rules import Reason
from ..core.time import EVENT_TIME_RANGE, LATEST_EVENT_TIME, TIME_UNITS
from .registry import registered

TS = "__panes_ts"  # event time, epoch ms (long)
INVALID = "__panes_invalid"  # dead-letter reason for malformed rows, else null
DETAIL = "__panes_detail"
WMARK = "__panes_wmark"  # the column Spark's watermark tracks (timestamp)
PUNCT = "__panes_punct"  # a punctuation record's watermark (ms), else null
CLOCK = "__panes_clock"  # a scripted processing-time control row (ms), else null
ACTIVE = "__panes_active"  # on a scripted clock row: the step also carries records (not idle)
BUCKET = "__panes_bucket"
SEQ = "__panes_seq"
#: the engine's emission order, for replays: the phase of the step that emitted a pane or dead
#: letter, and its order within the phase
EMISSION_PHASE = "__panes_phase"
EMISSION_ORDER = "__panes_emission_order"
MALFORMED = "__panes_malformed"  # set by a reader that could not make a record of the input
#: the line a file reader could not read whole into the schema (Spark's corrupt-record column), as
#: read: not a JSON object (malformed), or a value that does not fit its column's type
RAW = "__panes_raw"
#: a string event-time column's digits as numbers (``metrics.numeric_event_time``), for the unit warning
EVENT_TIME_NUMBER = "__panes_event_time_number"
NUM = "__panes_num_"  # prefix: a numeric copy of a string column a numeric aggregate reads

#: Spark's watermark at or past this means "the input has ended" (+infinity): no event time
#: reaches it (``panes.core.time.LATEST_EVENT_TIME``, 9000-01-01T00:00:00Z)
SPARK_END_MS = LATEST_EVENT_TIME


@dataclass(frozen=True)
class Check:
    """A test every record must pass: ``ok`` (true or false, never null); a record that fails
    it goes to the dead letters with ``reason`` and ``detail`` (a text, or a column)."""

    ok: Column
    reason: Reason
    detail: str | Column


def punctuation_records(schema: ST.StructType, p: Pipeline) -> bool:
    """Whether the input can hold punctuation records (a watermark in their punctuation column)."""
    return p.watermark.punctuation and p.watermark.punctuation_column in schema.fieldNames()


def event_time_ms(df: DataFrame | ST.StructType, column: str, unit: str = "ms") -> tuple[Column, list[Check]]:
    """(epoch ms, the checks of the column: missing, not a time, out of the event-time range) for
    the event-time column of a DataFrame (or of its schema), whatever its type: timestamps, dates,
    numbers in ``unit`` (``panes.core.time.TIME_UNITS``) or strings (ISO-8601, or digits: numbers
    in ``unit``). The ms are null when a check fails. A value the reader could not fit into the
    column (``RAW``) is not missing: it is not a time."""
    schema = df if isinstance(df, ST.StructType) else df.schema
    dtype = schema[column].dataType
    c = F.col(column)
    detail = f"event_time column {column}"
    misfit = misfits(schema, [column]).get(column)
    present = c.isNotNull() if misfit is None else c.isNotNull() | misfit
    if isinstance(dtype, (ST.TimestampType, ST.TimestampNTZType, ST.DateType)):
        ms = F.unix_millis(c.cast("timestamp"))
    elif isinstance(dtype, ST.IntegralType):
        ms = epoch_ms(c.cast("long"), unit)
    elif isinstance(dtype, ST.DecimalType):
        mul, div = TIME_UNITS[unit]
        ms = (F.try_multiply(c, F.lit(mul)) if mul != 1 else c / F.lit(div)).try_cast("long")
    elif isinstance(dtype, (ST.DoubleType, ST.FloatType)):
        mul, div = TIME_UNITS[unit]
        ms = (c.cast("double") * F.lit(mul) if div == 1 else c.cast("double") / F.lit(div)).try_cast("long")
    else:
        s = F.trim(c.cast("string"))
        digits = s.rlike(r"^-?[0-9]+$")
        parsed = F.unix_millis(F.try_to_timestamp(s))
        ms = F.when(digits, epoch_ms(s.try_cast("long"), unit)).otherwise(parsed)
    checks = [
        Check(present, Reason.MISSING_EVENT_TIME, detail),
        Check(ms.isNotNull(), Reason.INVALID_EVENT_TIME, detail),
        Check(
            ms.isNull() | rules.event_time_in_range(ms),
            Reason.INVALID_EVENT_TIME,
            f"{detail}: out of the event-time range ({EVENT_TIME_RANGE})",
        ),
    ]
    return ms, checks


def epoch_ms(number: Column, unit: str) -> Column:
    """An epoch number (a long) in ``unit`` as milliseconds, exactly, truncated toward zero as
    ``panes.core.time.epoch_ms`` does; null when it does not fit a long. (Milliseconds: the
    number itself, no arithmetic per row; smaller units divide as decimals, which hold a long.)"""
    mul, div = TIME_UNITS[unit]
    if mul != 1:
        return F.try_multiply(number, F.lit(mul))
    if div != 1:
        return (number.cast("decimal(20,0)") / F.lit(div)).try_cast("long")
    return number


def misfits(schema: ST.StructType, columns: list[str] | None = None) -> dict[str, Column]:
    """For each of ``columns`` (default: every column of the record), the test of a row whose
    line (``RAW``) holds a value for it that the reader could not fit into its type (the column
    is then null); none without ``RAW``."""
    names = schema.fieldNames()
    if RAW not in names:
        return {}
    raw = F.col(RAW)
    out = {}
    for c in columns if columns is not None else [n for n in names if not n.startswith("__panes")]:
        path = "$['" + c.replace("\\", "\\\\").replace("'", "\\'") + "']"
        out[c] = raw.isNotNull() & F.col(f"`{c}`").isNull() & F.get_json_object(raw, path).isNotNull()
    return out


def validation(
    df: DataFrame | ST.StructType,
    pipeline: Pipeline,
    num: dict[str, Column],
    ts_checks: list[Check],
    window_checks: list[Check],
) -> list[Check]:
    """The checks of a record, in the order they are reported (the first that fails gives
    the dead letter's reason): the reader's (malformed: not a record; ``RAW``: a line that is not
    a JSON object), the event time's (``ts_checks``), the key's, the reader's values that do not
    fit their column's type (``RAW``), numbers in the string columns a numeric aggregate reads
    (``num``, see ``numeric_string_columns``), the window kind's (``window_checks``: a column it
    reads, such as a session gap column)."""
    schema = df if isinstance(df, ST.StructType) else df.schema
    names = schema.fieldNames()
    out = []
    if MALFORMED in names:
        out.append(Check(F.col(MALFORMED).isNull(), Reason.MALFORMED, F.col(MALFORMED)))
    if RAW in names:
        out.append(
            Check(
                F.col(RAW).isNull() | F.json_object_keys(F.col(RAW)).isNotNull(), Reason.MALFORMED, "not a JSON object"
            )
        )
    out += ts_checks
    bad = misfits(schema)
    if pipeline.key:
        present = [F.col(k).isNotNull() | bad[k] if k in bad else F.col(k).isNotNull() for k in pipeline.key]
        out.append(
            Check(
                functools.reduce(lambda a, b: a & b, present),
                Reason.MISSING_KEY,
                f"no value for key column(s) {list(pipeline.key)}",
            )
        )
    if bad:
        unfit = F.array_compact(F.array(*[F.when(t, F.lit(c)) for c, t in bad.items()]))
        out.append(
            Check(
                F.col(RAW).isNull(),
                Reason.INVALID_VALUE,
                F.concat(F.lit("does not fit its column's type: "), F.array_join(unfit, ", ")),
            )
        )
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
    first, *rest = checks
    reason, detail = F.when(~first.ok, F.lit(first.reason.value)), F.when(~first.ok, _detail_of(first))
    for c in rest:
        bad = ~c.ok
        reason, detail = reason.when(bad, F.lit(c.reason.value)), detail.when(bad, _detail_of(c))
    return reason, detail


def _detail_of(check: Check) -> Column:
    return check.detail if isinstance(check.detail, Column) else F.lit(check.detail)


def record_json(columns: list[str], schema: ST.StructType | None = None) -> Column:
    """A row's record (these input columns) as JSON, for its dead letter; the line as read when
    the reader could not read it whole (``RAW`` in ``schema``). (Quoted: a name such as ``a.b`` is
    a column of its own, not a field of ``a``.)"""
    record = F.to_json(F.struct(*[F.col(f"`{c}`") for c in columns]))
    return F.coalesce(F.col(RAW), record) if schema is not None and RAW in schema.fieldNames() else record


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
    assert fn.column is not None, f"{fn.name} reads a column"  # (only count reads none: a long)
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


DEAD_LETTER_SCHEMA = ST.StructType(
    [
        ST.StructField("reason", ST.StringType(), False),
        ST.StructField("record", ST.StringType(), True),
        ST.StructField("watermark", ST.TimestampType(), True),
        ST.StructField(
            "windows",
            ST.ArrayType(
                ST.StructType(
                    [
                        ST.StructField("start", ST.TimestampType(), True),
                        ST.StructField("end", ST.TimestampType(), True),
                    ]
                )
            ),
            True,
        ),
        ST.StructField("detail", ST.StringType(), True),
    ]
)
