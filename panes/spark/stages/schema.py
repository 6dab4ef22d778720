"""The Spark types of a multi-stage pipeline's output: each stage's panes (what its rows print)
and the dead letters, for the sinks (a stage's rows travel as JSON; ``typed`` reads them back)."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as ST

from ...core.stages import Cogroup, InnerJoin, Stage, StageGraph
from ..columns import DEAD_LETTER_SCHEMA, output_type
from .buckets import ROW
from .transport import record_columns

META = [
    ST.StructField("window_start", ST.TimestampType(), True),
    ST.StructField("window_end", ST.TimestampType(), True),
    ST.StructField("timing", ST.StringType(), True),
    ST.StructField("pane_index", ST.LongType(), True),
    ST.StructField("is_last", ST.BooleanType(), True),
    ST.StructField("retraction", ST.BooleanType(), True),
]
DEAD_LETTERS = ST.StructType(
    [
        *DEAD_LETTER_SCHEMA.fields,
        ST.StructField("input", ST.StringType(), True),
        ST.StructField("stage", ST.StringType(), True),
    ]
)


def row_schemas(graph: StageGraph, inputs: dict[str, ST.StructType]) -> dict[str, ST.StructType]:
    """Each input's and stage's row columns (an input's records; a stage's key and values)."""
    out: dict[str, ST.StructType] = {}
    for i in graph.inputs:
        schema = inputs[i.name]
        out[i.name] = ST.StructType([schema[c] for c in record_columns(schema, i)])
    for s in graph.stages:
        out[s.name] = stage_values(graph, s, out)
    return out


def stage_values(graph: StageGraph, s: Stage, rows: dict[str, ST.StructType]) -> ST.StructType:
    """A stage's key and value columns with their types."""
    left = rows[s.sources[0]]
    key = [ST.StructField(k, left[own].dataType, True) for k, own in zip(s.key, s.keys[0])]
    if not s.is_merge:
        return ST.StructType(key + [ST.StructField(a.output, output_type(a.fn, left), True) for a in s.aggregates])
    merge = graph.merge(s)
    if isinstance(merge, InnerJoin):
        names = (merge.left_names, merge.right_names)
        fields = [
            ST.StructField(out, rows[src][c].dataType, True)
            for src, mapping in zip(s.sources, names)
            for c, out in mapping.items()
        ]
        return ST.StructType(key + fields)
    if isinstance(merge, Cogroup):
        return ST.StructType(key + [ST.StructField(src, ST.ArrayType(rows[src]), True) for src in s.sources])
    declared = getattr(merge, "output_schema", None)
    if declared is None:
        raise ValueError(
            f"stage {s.name}: on Spark a user merge declares its rows' output_schema "
            "(a DDL string such as 'item STRING, bids LONG')"
        )
    schema = ST._parse_datatype_string(declared) if isinstance(declared, str) else declared
    if not isinstance(schema, ST.StructType):
        raise ValueError(f"stage {s.name}: a user merge's output_schema is a struct of columns, not {declared!r}")
    return ST.StructType(key + [f for f in schema.fields if f.name not in s.key])


def pane_schema(graph: StageGraph, stage: str, inputs: dict[str, ST.StructType]) -> ST.StructType:
    """A stage's panes: its key, the pane columns, its values (as ``panes replay`` prints them)."""
    values = row_schemas(graph, inputs)[stage]
    key = set(graph.stage(stage).key)
    fields = [f for f in values.fields if f.name in key]
    return ST.StructType(fields + META + [f for f in values.fields if f.name not in key])


def typed(rows: DataFrame, schema: ST.StructType) -> DataFrame:
    """Rows whose ``ROW`` holds a JSON record, as the record's typed columns."""
    parsed: Column = F.from_json(F.col(ROW), schema)
    return rows.select(*[parsed[f.name].alias(f.name) for f in schema.fields])
