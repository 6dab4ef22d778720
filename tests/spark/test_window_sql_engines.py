"""The core's SQL engine (DuckDB, through sqlglot) and Spark SQL give the same rows for the rewritten
window pipeline queries, over the functions and operators the core runs (``CORE_FUNCTIONS``): every
function there is exercised here, over several panes at once, with nulls, ties and text."""

import datetime as dt

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import types as ST

from panes.core.table import Table
from panes.core.window_pipeline import PANE, ROW_ORDER, ROW_SEQ, ROW_TS, parse_sql
from panes.core.window_pipeline.embedded_sql import CORE_FUNCTIONS, arrow_table, core_refusal, duckdb_sql, run_query
from panes.core.window_pipeline.sql_rewrite import rewrite

pytest.importorskip("duckdb")
pytestmark = pytest.mark.spark

COLUMNS = ["k", "v", "x", "s", "window_start", "window_end"]
ROWS = [  # pane, k, v, x, s, event time
    (0, "a", 5, 1.5, "Ada", 1),
    (0, "b", None, 2.0, "bob", 2),
    (0, "a", 9, None, " cy ", 3),
    (0, "c", 5, -0.5, None, 4),
    (0, "b", 2, 3.25, "dee", 5),
    (1, "a", 7, 1.0, "eve", 1),
    (1, "a", 7, 1.0, "eve", 2),
    (1, "z", -3, 8.0, "Fay", 3),
    (2, "q", None, None, None, 1),
]
QUERIES = [
    "SELECT k, count(*) AS n, count(v) AS nv, sum(v) AS s, min(x) AS lo, max(s) AS hi, avg(v) AS a, "
    "count_if(v > 4) AS big FROM rows GROUP BY k ORDER BY k",
    "SELECT count(DISTINCT k) AS d, sum(x) AS sx, max(window_end) AS closes FROM rows",
    "SELECT k, v, row_number() OVER (PARTITION BY k ORDER BY v DESC) AS i, rank() OVER (ORDER BY v) AS r, "
    "dense_rank() OVER (ORDER BY v) AS dr, lag(v) OVER (ORDER BY x) AS prev, lead(s) OVER (ORDER BY x) AS nxt "
    "FROM rows",
    "SELECT abs(v) AS a, round(x, 1) AS r, floor(x) AS f, ceil(x) AS c, upper(s) AS u, lower(s) AS l, "
    "length(s) AS n, substring(s, 2, 2) AS sub, concat(k, '-', s) AS cat, trim(s) AS t, k || s AS pipe "
    "FROM rows ORDER BY v DESC NULLS LAST LIMIT 4",
    "SELECT coalesce(v, -1) AS v0, greatest(v, 3) AS g, least(v, 3) AS le, nullif(v, 5) AS nv, "
    "if(v > 4, 'big', 'small') AS size, CASE WHEN x IS NULL THEN 'none' WHEN x < 0 THEN 'neg' ELSE 'pos' END AS sign, "
    "CAST(v AS DOUBLE) / 2 AS half, v % 2 AS odd, -v AS neg FROM rows",
    "SELECT k, sort_array(collect_list(v)) AS vs, size(collect_list(s)) AS ns FROM rows GROUP BY k",
    "SELECT DISTINCT k FROM rows WHERE v BETWEEN 2 AND 7 AND s LIKE '%e%' OR k IN ('z', 'q') ORDER BY k",
    "WITH t AS (SELECT k, sum(v) AS s FROM rows GROUP BY k HAVING count(*) >= 1) "
    "SELECT k, s FROM t WHERE s IS NOT NULL ORDER BY s DESC, k LIMIT 2",
    "SELECT * FROM rows ORDER BY v DESC LIMIT 2",
]


def core_rows(sql):
    q = rewrite(parse_sql(sql), COLUMNS, "rows_t")
    cols = {
        "k": np.array([r[1] for r in ROWS], dtype=object),
        "v": np.array([r[2] for r in ROWS], dtype=object),
        "x": np.array([r[3] for r in ROWS], dtype=object),
        "s": np.array([r[4] for r in ROWS], dtype=object),
        "window_start": np.full(len(ROWS), np.datetime64(0, "ms")),
        "window_end": np.array([np.datetime64(10_000 * (r[0] + 1), "ms") for r in ROWS]),
        PANE: np.array([r[0] for r in ROWS]),
        ROW_TS: np.array([r[5] for r in ROWS]),
        ROW_SEQ: np.arange(len(ROWS)),
    }
    table = arrow_table(cols).cast(
        pa.schema(
            [
                ("k", pa.string()),
                ("v", pa.int64()),
                ("x", pa.float64()),
                ("s", pa.string()),
                ("window_start", pa.timestamp("ms")),
                ("window_end", pa.timestamp("ms")),
                (PANE, pa.int64()),
                (ROW_TS, pa.int64()),
                (ROW_SEQ, pa.int64()),
            ]
        )
    )
    return q, Table.from_arrow(run_query(duckdb_sql(q.tree), "rows_t", table)).records()


def spark_rows(spark, q):
    schema = ST.StructType(
        [
            ST.StructField("k", ST.StringType()),
            ST.StructField("v", ST.LongType()),
            ST.StructField("x", ST.DoubleType()),
            ST.StructField("s", ST.StringType()),
            ST.StructField("window_start", ST.TimestampType()),
            ST.StructField("window_end", ST.TimestampType()),
            ST.StructField(PANE, ST.LongType()),
            ST.StructField(ROW_TS, ST.LongType()),
            ST.StructField(ROW_SEQ, ST.LongType()),
        ]
    )
    epoch = dt.datetime(1970, 1, 1)
    data = [
        (r[1], r[2], r[3], r[4], epoch, epoch + dt.timedelta(seconds=10 * (r[0] + 1)), r[0], r[5], i)
        for i, r in enumerate(ROWS)
    ]
    spark.createDataFrame(data, schema).createOrReplaceTempView("rows_t")
    rows = [r.asDict(recursive=True) for r in spark.sql(q.sql("spark")).collect()]
    return (
        Table({c: np.array([r[c] for r in rows] + [None], dtype=object)[:-1] for c in rows[0]}).records()
        if rows
        else []
    )


def by_pane(records, columns):
    out: dict = {}
    for r in sorted(records, key=lambda r: (r[PANE], r[ROW_ORDER])):
        out.setdefault(r[PANE], []).append({c: r[c] for c in columns})
    return out


def same(a, b):
    if isinstance(a, float) and isinstance(b, float):
        return abs(a - b) <= 1e-9 * max(1.0, abs(a))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b and type(a) is type(b)


@pytest.mark.parametrize("sql", QUERIES)
def test_the_core_and_spark_give_the_same_rows(spark, sql):
    assert core_refusal(parse_sql(sql)) is None
    q, core = core_rows(sql)
    on_spark = spark_rows(spark, q)
    core_panes, spark_panes = by_pane(core, q.columns), by_pane(on_spark, q.columns)
    assert core_panes.keys() == spark_panes.keys() and core_panes
    for pane in core_panes:
        assert len(core_panes[pane]) == len(spark_panes[pane])
        for a, b in zip(core_panes[pane], spark_panes[pane]):
            assert all(same(a[c], b[c]) for c in q.columns), (pane, a, b)


def test_every_core_function_is_exercised():
    used = {type(n) for sql in QUERIES for n in parse_sql(sql).walk()}
    assert [f for f in CORE_FUNCTIONS if not any(issubclass(u, f) for u in used)] == []
