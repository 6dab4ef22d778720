"""The columns a multi-stage stream carries, and how each input's rows become them.

One streaming query reads the union of every input's source, each row tagged with its input's
name (``INPUT``). An input's rows are checked where they are read, as a single-stage plan checks
them (``planner.engine_columns``: event time, punctuation, the reader's malformed rows) and carry
their record as JSON (``RECORD``), so that inputs of different columns and types share one
stream; a step reads a record back with its input's schema (``from_json``, in Spark).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as ST

from ...core.stages import Input, input_pipeline
from ..bucket_layout import bucket_column
from ..columns import CLOCK, DETAIL, INVALID, MALFORMED, PUNCT, TS, record_json
from ..planner import engine_columns

INPUT = "__panes_input"  # the input a row came from
RECORD = "__panes_record"  # the row's record as JSON (null on a control row)
SEQ = "__panes_seq"  # a row's arrival number in the micro-batch (unique with its input)

#: what every row of the stream carries
COLUMNS = (INPUT, TS, PUNCT, INVALID, DETAIL, CLOCK, RECORD)


def record_columns(schema: ST.StructType, inp: Input) -> list[str]:
    """An input's record columns: its declared columns, else every column but panes' own (and
    the punctuation column, which carries watermarks, not data)."""
    if inp.columns is not None:
        return [c for c in inp.columns if c in schema.fieldNames()]
    skip = {inp.watermark.punctuation_column} if inp.watermark.punctuation else set()
    return [c for c in schema.fieldNames() if not c.startswith("__panes") and c not in skip]


def input_rows(
    df: DataFrame, name: str, inp: Input, ingestion: Column | None = None, control_wm: str | None = None
) -> DataFrame:
    """An input's rows as the stream's columns (``COLUMNS``)."""
    schema = df.schema
    cols, _ = engine_columns(schema, input_pipeline(inp), ingestion, control_wm, watermark=False)
    out = df.withColumns(cols)
    record = record_json(record_columns(schema, inp))
    if MALFORMED in schema.fieldNames():
        # a line the reader could not make a record of keeps what it read, whatever its columns
        read = [c for c in schema.fieldNames() if not c.startswith("__panes")]
        record = F.when(F.col(MALFORMED).isNull(), record).otherwise(record_json(read))
    return out.select(
        F.lit(name).alias(INPUT),
        F.col(TS),
        F.col(PUNCT),
        F.col(INVALID),
        F.col(DETAIL),
        F.col(CLOCK).cast("long").alias(CLOCK),
        # (a control row is no record: it only moves the watermark)
        (record if control_wm is None else F.when(F.col(control_wm).isNull(), record)).alias(RECORD),
    )


def data_rows(batch: DataFrame, name: str) -> DataFrame:
    """A micro-batch's valid records of one input (not punctuation, control or clock rows)."""
    return batch.filter(
        (F.col(INPUT) == F.lit(name))
        & F.col(INVALID).isNull()
        & F.col(PUNCT).isNull()
        & F.col(CLOCK).isNull()
        & F.col(TS).isNotNull()
    )


def typed_records(rows: DataFrame, schema: ST.StructType, columns: list[str]) -> DataFrame:
    """The records of an input's rows as its typed columns (``from_json`` with its schema)."""
    fields = ST.StructType([schema[c] for c in columns])
    parsed = F.from_json(F.col(RECORD), fields)
    return rows.select(*[c for c in rows.columns if c != RECORD], *[parsed[c].alias(c) for c in columns])


def bucket_of(values: list[Column], buckets: int) -> Column:
    """The hash bucket of a key's values (as strings, so that a key read from a record's column and
    from a stage's JSON row lands alike)."""
    return bucket_column([v.cast("string") for v in values], buckets)
