"""Each rule of panes.core.rules, evaluated by Spark on Columns (``ops.COLUMN``) and as SQL text
(``ops.SQL``, the form the native plans write inside higher-order functions), equals the core's
evaluation (``rules.SCALAR``) on a grid of values around each rule's edges."""

import itertools

import pytest
from pyspark.sql import functions as F

from panes.core import rules
from panes.core.time import END_OF_INPUT, MAX_TIME, MIN_TIME
from panes.spark.ops import COLUMN, SQL, Sql, sql

ENDS = [-5_000, 0, 999, 1_000, 5_000, MAX_TIME]
WATERMARKS = [MIN_TIME, -1, 0, 999, 1_000, 1_001, 2_999, 3_000, 6_999, 7_000, MAX_TIME - 1, MAX_TIME, END_OF_INPUT]
TIMINGS = [t.value for t in rules.Timing]

#: name -> (the rule over an Ops and a mapping of its inputs, the inputs' grid, their Spark types)
RULES = {
    "expiry": (lambda ops, v: rules.expiry(v["end"], 2_000, ops), {"end": ENDS}, {}),
    "expiry_without_lateness": (lambda ops, v: rules.expiry(v["end"], 0, ops), {"end": ENDS}, {}),
    "is_expired": (lambda ops, v: rules.is_expired(v["end"], 2_000, v["wm"], ops), {"end": ENDS, "wm": WATERMARKS}, {}),
    "end_passed": (lambda ops, v: rules.end_passed(v["end"], v["wm"]), {"end": ENDS, "wm": WATERMARKS}, {}),
    "end_of_window_timer": (lambda ops, v: rules.end_of_window_timer(v["end"]), {"end": ENDS}, {}),
    "gc_timer": (lambda ops, v: rules.gc_timer(v["end"], 2_000, ops), {"end": ENDS}, {}),
    "element_hold": (
        lambda ops, v: rules.element_hold(v["end"], 2_000, v["wm"], ops),
        {"end": ENDS, "wm": WATERMARKS},
        {},
    ),
    "processing_timer_fires": (
        lambda ops, v: rules.processing_timer_fires(v["t"], v["pt"]),
        {"t": [0, 5_000], "pt": [4_999, 5_000, 5_001]},
        {},
    ),
    "output_watermark": (
        lambda ops, v: rules.output_watermark(v["wm"], v["hold"], ops),
        {"wm": WATERMARKS, "hold": [999, 6_999, END_OF_INPUT]},
        {},
    ),
    "on_time_reached": (lambda ops, v: rules.on_time_reached(v["end"], v["wm"]), {"end": ENDS, "wm": WATERMARKS}, {}),
    "pane_timing": (
        lambda ops, v: rules.pane_timing(v["late"], v["reached"], ops),
        {"late": [False, True], "reached": [False, True]},
        {"late": "boolean", "reached": "boolean"},
    ),
    # (as a closing window's pane: reached, a constant)
    "pane_timing_of_a_closing_window": (
        lambda ops, v: rules.pane_timing(v["late"], True, ops),
        {"late": [False, True]},
        {"late": "boolean"},
    ),
    "pane_is_emitted": (
        lambda ops, v: rules.pane_is_emitted(v["new"], v["timing"]),
        {"new": [0, 1, 3], "timing": TIMINGS},
        {"timing": "string"},
    ),
    "ingestion_stamp": (
        lambda ops, v: rules.ingestion_stamp(v["stamp"], v["latest"], ops),
        {"stamp": [MIN_TIME, 0, 11_999, 12_000, 12_001], "latest": [MIN_TIME, 0, 12_000]},
        {},
    ),
}


@pytest.mark.parametrize("name", sorted(RULES))
def test_a_rule_on_spark_columns_and_as_sql_equals_the_core(spark, name):
    rule, grid, types = RULES[name]
    names = list(grid)
    df = spark.createDataFrame(
        list(itertools.product(*grid.values())), ", ".join(f"{n} {types.get(n, 'long')}" for n in names)
    )
    by_column = rule(COLUMN, {n: F.col(n) for n in names})
    by_sql = rule(SQL, {n: Sql(n) for n in names})
    assert isinstance(by_sql, Sql)
    rows = df.select(*names, by_column.alias("by_column"), F.expr(str(by_sql)).alias("by_sql")).collect()
    assert len(rows) == len(list(itertools.product(*grid.values())))
    for r in rows:
        core = rule(rules.SCALAR, {n: r[n] for n in names})
        assert (r.by_column, r.by_sql) == (core, core), (r, core)


def test_the_sql_of_a_rule_reads_as_written():
    expiry = rules.expiry(Sql("e"), 3, SQL)
    assert str(expiry) == f"CASE WHEN (e >= {MAX_TIME}) THEN {END_OF_INPUT} ELSE (e + 3) END"
    assert str(Sql("c.w") >= expiry) == f"(c.w >= {expiry})"
    assert str(rules.end_passed(Sql("e"), Sql("w"))) == f"((e < {MAX_TIME}) AND (w >= e))"
    assert str(~Sql("a") | (1 - Sql("b") != 0)) == "((NOT a) OR ((1 - b) <> 0))"
    assert [sql(v) for v in (True, False, -7, "it's")] == ["TRUE", "FALSE", "-7", "'it\\'s'"]
    with pytest.raises(TypeError):
        sql(1.5)


def test_column_ops_take_python_values_as_literals(spark):
    row = (
        spark.range(1)
        .select(
            COLUMN.where(F.lit(True), 1, 2).alias("a"),
            COLUMN.where(False, "x", "y").alias("b"),
            COLUMN.greatest(F.col("id") + 5, 3).alias("c"),
            COLUMN.greatest(-1, -4).alias("d"),
        )
        .first()
    )
    assert (row.a, row.b, row.c, row.d) == (1, "y", 5, -1)
