"""Window pipelines on Spark: a pane is a table, the pipeline's output over the window's rows.

Streams run on the stateful plan: the core engine, inside ``transformWithStateInPandas`` over hash
buckets of the key, keeps each window's rows in its state as columns (a ``RowBuffer``: numpy
arrays per batch, pickled with the bucket's state), and decides when a window fires, in which
accumulation mode, what a retraction restates.

- ``sql``: the engine's pane is the window's rows as they are (``KeepRows``); the processor emits
  them, tagged with their pane. Per micro-batch, the rows of every pane that fired go through the
  query rewritten for many panes at once (``core.window_pipeline.sql_rewrite``) as Spark SQL: one
  query per micro-batch, not one per window. A retraction is a pane of the rows the previous pane
  ran over, so the same query restates the previous pane's rows.
- ``fn``: the engine runs the pandas function per window inside the processor; each output row
  is JSON text, parsed with the function's ``schema`` when it declares one.

Bounded input: a ``sql`` pipeline over fixed windows (tumbling, hopping, global) runs natively (rows
assigned to their windows by expressions, then the rewritten query over every window at once);
otherwise the engine runs over hash buckets of the key (``applyInPandas``), then the query.
"""

from __future__ import annotations

import functools
import json
import math
import uuid
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as ST

from ..core.engine import Pane
from ..core.output import pane_table
from ..core.pipeline import Pipeline
from ..core.rules import Reason
from ..core.table import Table, object_array, plain_value
from ..core.time import MAX_TIME, MIN_TIME
from ..core.window_pipeline import (
    PANE,
    ROW_ORDER,
    ROW_SEQ,
    ROW_TS,
    WINDOW_COLUMNS,
    KeepRows,
    SqlTransform,
    WindowPipeline,
)
from ..core.windows import GlobalWindows, Hopping, Tumbling
from .columns import TS
from .native.names import WINDOW_END, WINDOW_START

if TYPE_CHECKING:
    from .native.windows import WindowPlan

#: window kinds whose rows bounded input assigns by expressions (each row's windows from its time alone)
FIXED_WINDOWS = (Tumbling, Hopping, GlobalWindows)
#: which pane a processor output row of a table-valued pane belongs to (unique in a micro-batch)
PANE_ID = "__panes_pane_id"
#: a ``fn`` pipeline's output row, as JSON text
VALUES = "__panes_values"
#: the pane columns besides the key
PANE_COLUMNS = ("window_start", "window_end", "timing", "pane_index", "is_last", "retraction")
#: an instant as ``format_instant`` writes it (Spark's session time zone is UTC)
ISO_INSTANT = "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"


def is_sql(p: Pipeline) -> bool:
    return p.window_pipeline is not None and isinstance(p.window_pipeline.transform, SqlTransform)


def engine_pipeline(p: Pipeline) -> Pipeline:
    """The pipeline the engine runs: a ``sql`` pipeline's panes are its windows' rows (Spark runs
    the query over them); a ``fn`` pipeline runs in the engine."""
    return replace(p, window_pipeline=WindowPipeline(KeepRows())) if is_sql(p) else p


def plan_text(p: Pipeline, mode: str) -> str:
    """What ``panes explain`` says of a window pipeline's plan."""
    sql = is_sql(p)
    runs = (
        "the SQL, rewritten over the rows of every window that fires, as one Spark SQL query"
        if sql
        else "the function per window"
    )
    if mode == "batch":
        if sql and isinstance(p.window, FIXED_WINDOWS):
            return "batch: rows assigned to their windows by expressions, then " + runs
        return "batch: the core engine over hash buckets of the key keeps each window's rows, then " + runs
    where = "per micro-batch" if sql else "in the engine"
    return (
        "stream: transformWithStateInPandas over hash buckets of the key, the core engine keeping each "
        f"window's rows as columns in its state; {where}, " + runs
    )


def record_columns(schema: ST.StructType) -> list[str]:
    """The input columns ``rows`` shows (besides the window bounds)."""
    return [f.name for f in schema.fields if not f.name.startswith("__panes") and f.name not in WINDOW_COLUMNS]


def rows_columns(schema: ST.StructType) -> list[str]:
    """What ``rows`` shows: the record columns, then ``window_start`` and ``window_end``."""
    return record_columns(schema) + list(WINDOW_COLUMNS)


def table_fields(p: Pipeline, schema: ST.StructType) -> list[ST.StructField]:
    """The processor's output columns for the rows of table-valued panes."""
    fields = [ST.StructField(PANE_ID, ST.LongType())]
    if is_sql(p):
        # (the key columns are the pane's)
        fields += [ST.StructField(c, schema[c].dataType, True) for c in record_columns(schema) if c not in p.key]
        return fields + [ST.StructField(ROW_TS, ST.LongType()), ST.StructField(ROW_SEQ, ST.LongType())]
    return fields + [ST.StructField(ROW_ORDER, ST.LongType()), ST.StructField(VALUES, ST.StringType())]


def table_rows(panes: list[Pane], p: Pipeline, columns: list[str], first_id: int, is_global: bool) -> dict[str, list]:
    """The rows of the engine's table-valued panes as the processor's columns (one list per
    column): each row with its pane's key, bounds (ms), metadata and id (``first_id`` + its place
    in ``panes``), then the table's ``columns`` (``KeepRows``: the window's rows, for the SQL) or its
    row as JSON (a function's). ``p``: the engine's pipeline; ``columns``: every output column but
    the kind, phase and emission order."""
    out: dict[str, list] = {c: [] for c in columns}
    sql = p.window_pipeline is not None and isinstance(p.window_pipeline.transform, KeepRows)
    for n, pane in enumerate(panes):
        table = pane_table(pane)
        if table is None or not len(table):
            continue
        size = len(table)
        head = dict(zip(p.key, pane.key))
        head["window_start"] = None if is_global else pane.window_start
        head["window_end"] = None if is_global else pane.window_end
        head.update(timing=pane.timing, pane_index=pane.pane_index, is_last=pane.is_last, retraction=pane.retraction)
        head[PANE_ID] = first_id + n
        for c, v in head.items():
            out[c].extend([v] * size)
        if sql:
            for c in columns:
                if c not in head:
                    values = table.columns.get(c)
                    out[c].extend([None] * size if values is None else [plain_row_value(v) for v in values])
        else:
            records = table.without(head).records()
            out[ROW_ORDER].extend(range(size))
            out[VALUES].extend(json.dumps(r, default=str) for r in records)
    # (the columns the rows leave empty, such as the dead letters', are not theirs)
    return {c: v for c, v in out.items() if len(v) == len(out[PANE_ID])} if out[PANE_ID] else {}


def plain_row_value(v: Any) -> Any:
    """A value of the window's rows as the processor's output frame takes it: numpy scalars as
    Python values, instants as timestamps, NaN (how Arrow hands a null double to pandas) as null."""
    if isinstance(v, np.datetime64):
        return None if np.isnat(v) else pd.Timestamp(v)
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def assigned_rows(good: DataFrame, p: Pipeline, schema: ST.StructType, plan: WindowPlan) -> DataFrame:
    """Bounded input over fixed windows: each valid row once per window it is in (``plan``: the
    window kind's native plan), as the rows of its window's one final pane."""
    rows = plan.assign(good)
    if isinstance(p.window, GlobalWindows):
        start = end = F.lit(None).cast("long")
    else:
        start, end = F.col(WINDOW_START), p.window.report_end(F.col(WINDOW_END))
    return rows.select(
        *[F.col(f"`{c}`") for c in p.key],
        start.alias("window_start"),
        end.alias("window_end"),
        F.lit("ON_TIME").alias("timing"),
        F.lit(0).cast("long").alias("pane_index"),
        F.lit(True).alias("is_last"),
        F.lit(False).alias("retraction"),
        F.lit(0).cast("long").alias(PANE_ID),
        *[F.col(f"`{c}`") for c in record_columns(schema) if c not in p.key],
        F.col(TS).alias(ROW_TS),
        F.monotonically_increasing_id().alias(ROW_SEQ),
    )


# -- the panes of a micro-batch (or of bounded input) ----------------------------------------------------


def pane_struct(p: Pipeline, order: list[str]) -> Column:
    """The pane a row belongs to, as one column (the query's ``PANE``): its id, key, bounds (ms),
    metadata, and ``order`` (the plan's emission order columns)."""
    names = [PANE_ID, *p.key, *PANE_COLUMNS, *order]
    return F.struct(*[F.col(f"`{c}`").alias(c) for c in names])


def sql_panes(
    rows: DataFrame, p: Pipeline, schema: ST.StructType, view: str, order: list[str], ordered: bool = False
) -> DataFrame:
    """The panes of a ``sql`` pipeline from the rows of the panes that fired (a row per window row,
    with the pane's columns, ``PANE_ID``, ``ROW_TS``, ``ROW_SEQ``): the rewritten query, run once
    over them all as Spark SQL. ``ordered`` (replays): the emission ``order`` columns and each
    row's place (``ROW_ORDER``) come along, the bounds as ms and instants as ISO-8601 text."""
    assert p.window_pipeline is not None
    transform = p.window_pipeline.transform
    assert isinstance(transform, SqlTransform)
    visible = record_columns(schema)
    table = rows.select(
        *[F.col(f"`{c}`") for c in visible],
        *[F.timestamp_millis(F.col(c)).alias(c) for c in WINDOW_COLUMNS],
        pane_struct(p, order).alias(PANE),
        F.col(ROW_TS),
        F.col(ROW_SEQ),
    )
    table.createOrReplaceTempView(view)
    query = transform.rewrite(rows_columns(schema), view)
    result = rows.sparkSession.sql(query.sql("spark"))
    head = set(p.key) | set(PANE_COLUMNS)
    outputs = [c for c in query.columns if c not in head]
    pane = [F.col(f"{PANE}.`{c}`").alias(c) for c in p.key]
    if ordered:
        pane += [F.col(f"{PANE}.{c}").alias(c) for c in ("window_start", "window_end")]
        fields = {f.name: f.dataType for f in result.schema.fields}
        values = [iso(F.col(f"`{c}`"), fields[c]).alias(c) for c in outputs]
        extra = [F.col(f"{PANE}.`{c}`").alias(c) for c in [*order, PANE_ID]] + [F.col(ROW_ORDER)]
    else:
        pane += [F.timestamp_millis(F.col(f"{PANE}.{c}")).alias(c) for c in ("window_start", "window_end")]
        values = [F.col(f"`{c}`") for c in outputs]
        extra = []
    pane += [F.col(f"{PANE}.{c}").alias(c) for c in PANE_COLUMNS[2:]]
    return result.select(*pane, *values, *extra)


def sql_check(spark: SparkSession, p: Pipeline, schema: ST.StructType) -> None:
    """Analyse a SQL pipeline's query over the stream's columns before the query starts: a column
    ``rows`` does not have, a function Spark does not know, a type mismatch fail here, in one line."""
    if not is_sql(p):
        return
    empty = spark.createDataFrame(
        [],
        ST.StructType(
            [ST.StructField(c, schema[c].dataType, True) for c in record_columns(schema)]
            + [ST.StructField(c, ST.TimestampType(), True) for c in WINDOW_COLUMNS]
            + [
                ST.StructField(PANE, ST.LongType()),
                ST.StructField(ROW_TS, ST.LongType()),
                ST.StructField(ROW_SEQ, ST.LongType()),
            ]
        ),
    )
    view = f"__panes_check_{uuid.uuid4().hex}"
    empty.createOrReplaceTempView(view)
    assert p.window_pipeline is not None
    transform = p.window_pipeline.transform
    assert isinstance(transform, SqlTransform)
    try:
        spark.sql(transform.rewrite(rows_columns(schema), view).sql("spark"))
    except Exception as e:  # Spark's analysis of the user's query
        raise ValueError(f"window_pipeline.sql: {spark_error(e)}") from None
    finally:
        spark.catalog.dropTempView(view)


def spark_error(e: BaseException) -> str:
    """A Spark error in one line: its first line, without the JVM's trace."""
    text = next((line.strip() for line in str(e).splitlines() if line.strip()), type(e).__name__)
    return text[:300]


def guarded_sql_panes(
    rows: DataFrame, p: Pipeline, schema: ST.StructType, view: str, order: list[str], ordered: bool = False
) -> tuple[DataFrame, DataFrame | None]:
    """A micro-batch's SQL panes, computed now (cached), and the dead letters of the panes whose
    query failed at run time (an ANSI error: a failed cast, a division by zero): their rows, reason
    ``window_pipeline_failed``, with the error. On a failure the panes are split in halves until
    each failing one is found; the others' rows go on."""
    rows = rows.cache()
    good, bad = _run_halves(rows, p, schema, view, order, ordered, None)
    panes = (
        good[0]
        if len(good) == 1
        else functools.reduce(DataFrame.unionByName, good)
        if good
        else sql_panes(rows.limit(0), p, schema, view, order, ordered)
    )
    if not bad:
        return panes, None
    failed = rows.join(F.broadcast(rows.sparkSession.createDataFrame(bad, f"{PANE_ID} long, detail string")), PANE_ID)
    return panes, failed_letters(failed, p, schema)


def _run_halves(
    rows: DataFrame,
    p: Pipeline,
    schema: ST.StructType,
    view: str,
    order: list[str],
    ordered: bool,
    ids: list[int] | None,
) -> tuple[list[DataFrame], list[tuple[int, str]]]:
    part = rows if ids is None else rows.filter(F.col(PANE_ID).isin(ids))
    try:
        panes = sql_panes(part, p, schema, view, order, ordered).cache()
        panes.count()
        return [panes], []
    except Exception as e:  # the query failed at run time on some pane
        if ids is None:
            ids = sorted(r[0] for r in rows.select(PANE_ID).distinct().collect())
        if len(ids) <= 1:
            return [], [(i, spark_error(e)) for i in ids]
        half = len(ids) // 2
        a, b = (_run_halves(rows, p, schema, view, order, ordered, x) for x in (ids[:half], ids[half:]))
        return a[0] + b[0], a[1] + b[1]


def failed_letters(failed: DataFrame, p: Pipeline, schema: ST.StructType) -> DataFrame:
    """Dead letters of the rows of failed panes (``detail``: the error), as ``dead_letters_of``
    gives them."""
    record = F.to_json(F.struct(*[F.col(f"`{c}`") for c in record_columns(schema)]))
    bounds = F.struct(
        F.timestamp_millis(F.col("window_start")).alias("start"), F.timestamp_millis(F.col("window_end")).alias("end")
    )
    windows = F.when(F.col("window_start").isNotNull(), F.array(bounds))
    return failed.select(
        F.lit(Reason.WINDOW_PIPELINE_FAILED.value).alias("reason"),
        record.alias("record"),
        F.lit(None).cast("timestamp").alias("watermark"),
        windows.alias("windows"),
        F.col("detail"),
    )


def table_panes(
    rows: DataFrame, p: Pipeline, schema: ST.StructType, view: str, order: list[str], ordered: bool = False
) -> DataFrame:
    """The panes of a window pipeline from the rows of its panes (``sql_panes``, ``fn_panes``)."""
    if is_sql(p):
        return sql_panes(rows, p, schema, view, order, ordered)
    return fn_panes(rows, p, order, ordered)


def iso(c: Column, dtype: ST.DataType) -> Column:
    """Instants as the core writes them (a replay compares the text)."""
    if isinstance(dtype, (ST.TimestampType, ST.TimestampNTZType)):
        return F.date_format(c, ISO_INSTANT)
    return c


def fn_panes(rows: DataFrame, p: Pipeline, order: list[str], ordered: bool = False) -> DataFrame:
    """The panes of a ``fn`` pipeline from the processor's rows: the function's columns parsed
    with its ``schema``, else one JSON text column ``values``; ``ordered`` as ``sql_panes``."""
    assert p.window_pipeline is not None
    schema = getattr(p.window_pipeline.transform, "schema", None)
    pane = [F.col(f"`{c}`") for c in p.key]
    if ordered:
        return rows.select(
            *pane,
            *[F.col(c) for c in PANE_COLUMNS],
            *[F.col(c) for c in [*order, PANE_ID]],
            F.col(ROW_ORDER),
            F.col(VALUES),
        )
    pane += [F.timestamp_millis(F.col(c)).alias(c) for c in ("window_start", "window_end")]
    pane += [F.col(c) for c in PANE_COLUMNS[2:]]
    if schema is None:
        return rows.select(*pane, F.col(VALUES).alias("values"))
    parsed = rows.select(*pane, F.from_json(F.col(VALUES), schema).alias(VALUES))
    return parsed.select(*[F.col(f"`{c}`") for c in [*p.key, *PANE_COLUMNS]], F.col(f"{VALUES}.*"))


def replay_panes(rows: list[dict], p: Pipeline, order: list[str]) -> list[tuple]:
    """Collected rows of table-valued panes (``ordered``) as (phase, the pane with its table, its
    emission order), ``order`` naming the phase and order columns: the rows of one pane grouped, in their place;
    a function's rows parsed from JSON. The global window's bounds (null in the rows) are the
    engine's."""
    by_pane: dict[tuple, list[dict]] = {}
    for r in rows:
        by_pane.setdefault((*[r[c] for c in order], r[PANE_ID]), []).append(r)
    out = []
    head = set(p.key) | set(PANE_COLUMNS) | set(order) | {PANE_ID, ROW_ORDER, "__panes_kind"}
    for emitted, group in by_pane.items():
        group.sort(key=lambda r: r[ROW_ORDER])
        if VALUES in group[0]:
            records = [json.loads(r[VALUES]) for r in group]
        else:
            records = [{c: plain_value(v) for c, v in r.items() if c not in head} for r in group]
        names = list(records[0]) if records else []
        table = Table({c: object_array([rec.get(c) for rec in records]) for c in names}, len(records))
        r = group[0]
        start = MIN_TIME if r["window_start"] is None else r["window_start"]
        end = MAX_TIME if r["window_end"] is None else r["window_end"]
        pane = Pane(
            tuple(r[k] for k in p.key),
            start,
            end,
            r["timing"],
            r["pane_index"],
            r["is_last"],
            r["retraction"],
            (table,),
        )
        phase, position, _ = emitted
        out.append((phase, pane, position))
    return out
