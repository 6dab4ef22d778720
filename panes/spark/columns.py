"""Spark column expressions shared by the plans: event time, validation, output types."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as ST

from ..core import aggregates as A
from ..core.pipeline import Pipeline
from ..core.windows import Sessions

TS = "__panes_ts"            # event time, epoch ms (long)
INVALID = "__panes_invalid"  # dead-letter reason for malformed rows, else null
DETAIL = "__panes_detail"
WMARK = "__panes_wmark"      # the column Spark's watermark tracks (timestamp)
PUNCT = "__panes_punct"      # a punctuation record's watermark (ms), else null
CLOCK = "__panes_clock"      # a scripted processing-time control row (ms), else null
ACTIVE = "__panes_active"    # on a scripted clock row: the step also carries records (not idle)
BUCKET = "__panes_bucket"
SEQ = "__panes_seq"
MALFORMED = "__panes_malformed"  # set by a reader that could not make a record of the input
NUM = "__panes_num_"         # prefix: a numeric copy of a string column a numeric aggregate reads

#: Spark's watermark at or past this means "the input has ended" (+infinity)
SPARK_END_MS = 221845392000000  # 9000-01-01T00:00:00Z


@dataclass(frozen=True)
class Check:
    """A test every record must pass: ``ok`` (true or false, never null); a record that fails
    it goes to the dead letters with ``reason`` and ``detail`` (a text, or a column)."""

    ok: Column
    reason: str
    detail: str | Column


def event_time_ms(df: DataFrame | ST.StructType, column: str) -> tuple[Column, list[Check]]:
    """(epoch ms, the checks of the column: missing, not a time) for the event-time column of
    a DataFrame (or of its schema), whatever its type: timestamps, dates, integers (epoch ms)
    or strings (ISO-8601, or digits = epoch ms). The ms are null when a check fails."""
    dtype = (df if isinstance(df, ST.StructType) else df.schema)[column].dataType
    c = F.col(column)
    detail = f"event_time column {column}"
    checks = [Check(c.isNotNull(), "missing_event_time", detail)]
    if isinstance(dtype, (ST.TimestampType, ST.TimestampNTZType, ST.DateType)):
        ms = F.unix_millis(c.cast("timestamp"))
    elif isinstance(dtype, (ST.IntegralType, ST.DecimalType, ST.DoubleType, ST.FloatType)):
        ms = c.cast("long")
    else:
        s = F.trim(c.cast("string"))
        digits = s.rlike(r"^-?[0-9]+$")
        parsed = F.unix_millis(F.try_to_timestamp(s))
        ms = F.when(digits, s.cast("long")).otherwise(parsed)
        checks.append(Check(ms.isNotNull(), "invalid_event_time", detail))
    return ms, checks


def validation(df: DataFrame | ST.StructType, pipeline: Pipeline, num: dict[str, Column],
               ts_checks: list[Check]) -> list[Check]:
    """The checks of a record, in the order they are reported (the first that fails gives
    the dead letter's reason): the reader's (malformed), the event time's (``ts_checks``), the
    key's, numbers in the string columns a numeric aggregate reads (``num``, see
    ``numeric_string_columns``), a session gap column's."""
    out = []
    if MALFORMED in (df if isinstance(df, ST.StructType) else df.schema).fieldNames():
        out.append(Check(F.col(MALFORMED).isNull(), "malformed", F.col(MALFORMED)))
    out += ts_checks
    if pipeline.key:
        out.append(Check(functools.reduce(lambda a, b: a & b, [F.col(k).isNotNull() for k in pipeline.key]),
                         "missing_key", f"no value for key column(s) {list(pipeline.key)}"))
    # numbers in a string column (e.g. JSON whose values mix types): not a number = malformed
    for c, n in num.items():
        out.append(Check(F.col(c).isNull() | n.isNotNull(), "invalid_value", f"not a number: ['{c}']"))
    w = pipeline.window
    if isinstance(w, Sessions) and w.gap_column:
        g = F.col(w.gap_column)
        out.append(Check(g.isNotNull() & F.coalesce(g.cast("long") > 0, F.lit(True)), "invalid_value",
                         f"{w.gap_column}: a session gap must be a positive number of milliseconds"))
    return out


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
        reason = F.when(bad, F.lit(c.reason)) if reason is None else reason.when(bad, F.lit(c.reason))
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


def output_type(fn: A.AggregateFn, schema: ST.StructType) -> ST.DataType:
    """The Spark type of an aggregate's result."""
    def col_type():
        return schema[fn.column].dataType
    if isinstance(fn, A.Count) or isinstance(fn, A.CountDistinct):
        return ST.LongType()
    if isinstance(fn, A.Sum):
        t = col_type()
        return ST.LongType() if isinstance(t, ST.IntegralType) else ST.DoubleType()
    if isinstance(fn, A.Percentile) or isinstance(fn, A.Avg):
        return ST.DoubleType()
    if isinstance(fn, (A.Avg, A.Percentile)):
        return ST.DoubleType()
    if isinstance(fn, (A.Min, A.First)):  # Max, Last are subclasses
        return col_type()
    if isinstance(fn, (A.CollectList, A.TopK)):
        return ST.ArrayType(col_type())
    if isinstance(fn, A.UserCombine):
        t = getattr(fn.fn, "output_type", "double")
        return ST._parse_datatype_string(t) if isinstance(t, str) else t
    raise TypeError(f"no Spark type for {fn!r}")


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
