"""window_pipeline.sql: the subset panes accepts (everything else refused in one line naming the
construct), its rewriting into one query over many panes (each pane's rows exactly those of the
query over that pane alone), and the core's embedded engine (DuckDB)."""

import random

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from panes.core.window_pipeline import PANE, ROW_ORDER, ROW_SEQ, ROW_TS, SqlRefused, SqlTransform, parse_sql
from panes.core.window_pipeline.embedded_sql import core_refusal, duckdb_sql, run_query
from panes.core.window_pipeline.sql_rewrite import rewrite

duckdb = pytest.importorskip("duckdb")

REFUSED = [
    ("SELECT a FROM rows r JOIN rows s ON r.a = s.a", "JOIN is not supported"),
    ("SELECT a FROM rows UNION ALL SELECT a FROM rows", "UNION is not supported (one SELECT over rows)"),
    ("SELECT a FROM rows WHERE a IN (SELECT a FROM rows)", "a subquery inside an expression is not supported"),
    ("SELECT a FROM rows LIMIT 3 OFFSET 1", "OFFSET is not supported"),
    ("SELECT a FROM rows QUALIFY row_number() OVER (ORDER BY a) = 1", "QUALIFY is not supported"),
    ("SELECT rank() OVER w AS r FROM rows WINDOW w AS (ORDER BY a)", "a named WINDOW clause is not supported"),
    ("SELECT a FROM rows GROUP BY ALL", "GROUP BY ALL is not supported"),
    ("SELECT a FROM rows GROUP BY ROLLUP(a)", "GROUP BY ROLLUP is not supported"),
    ("SELECT a FROM rows GROUP BY a WITH ROLLUP", "GROUP BY ROLLUP is not supported"),
    ("SELECT a FROM rows GROUP BY GROUPING SETS ((a))", "GROUPING SETS is not supported"),
    ("SELECT y FROM rows LATERAL VIEW explode(x) t AS y", "LATERAL VIEW is not supported"),
    ("SELECT a FROM rows TABLESAMPLE (10 PERCENT)", "TABLESAMPLE is not supported"),
    ("SELECT a FROM orders", "FROM orders: the pipeline reads only rows (and its WITH names)"),
    ("SELECT a FROM db.rows", "FROM db.rows: the pipeline reads only rows"),
    ("SELECT count(*) FROM rows", "give COUNT(*) a name: COUNT(*) AS name"),
    ("SELECT a, rand() AS r FROM rows", "RAND(): a function whose value differs between runs is not supported"),
    ("SELECT a AS timing FROM rows", "output column timing is pane metadata: name it otherwise"),
    ("SELECT __panes_pane FROM rows", "names starting with __panes are panes' own: __panes_pane"),
    ("SELECT a FROM rows; SELECT b FROM rows", "one SELECT statement, not 2"),
    ("INSERT INTO t SELECT a FROM rows", "one SELECT over the table rows, not INSERT"),
    ("SELECT a FROM rows LIMIT n", "LIMIT takes a whole number, not n"),
    ("SELECT a FROM rows DISTRIBUTE BY a", "DISTRIBUTE BY is not supported"),
    ("SELECT DISTINCT ON (a) a FROM rows", "DISTINCT ON is not supported"),
    ("SELECT 1 AS one", "a SELECT reads FROM rows (or a WITH name, or a subquery)"),
    ("SELECT a FROM (SELECT a FROM rows UNION SELECT a FROM rows)", "FROM"),
    ("SELECT FROM WHERE", "not valid Spark SQL"),
]


@pytest.mark.parametrize("sql, message", REFUSED, ids=[m.split(" ")[0] + str(i) for i, (_, m) in enumerate(REFUSED)])
def test_queries_outside_the_subset_are_refused_in_one_line_naming_the_construct(sql, message):
    with pytest.raises(SqlRefused) as e:
        parse_sql(sql)
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


ACCEPTED = [
    "SELECT * FROM rows ORDER BY v DESC LIMIT 3",
    "SELECT k, sum(v) AS total FROM rows GROUP BY k ORDER BY total DESC LIMIT 2",
    "WITH g AS (SELECT k, count(*) AS n FROM rows GROUP BY k) SELECT k, n, rank() OVER (ORDER BY n DESC) AS r FROM g",
    "SELECT DISTINCT k FROM rows",
    "SELECT k, v FROM (SELECT * FROM rows WHERE v > 1 ORDER BY v LIMIT 4) AS s WHERE k <> 'x'",
    "SELECT count(*) AS n, count(DISTINCT k) AS d, min(v) AS lo FROM rows HAVING count(*) > 1",
]


@pytest.mark.parametrize("sql", ACCEPTED)
def test_queries_in_the_subset_are_accepted(sql):
    assert parse_sql(sql).sql("spark")


def test_the_rewritten_query_carries_the_pane_through_every_select():
    r = rewrite(
        parse_sql("SELECT k, sum(v) AS total FROM rows GROUP BY k ORDER BY total DESC LIMIT 2"),
        ["k", "v", "window_start", "window_end"],
        "t",
    )
    assert r.columns == ["k", "total"]
    assert r.sql("spark") == (
        "SELECT `k`, `total`, `__panes_pane`, `__panes_rank` AS `__panes_row_order` FROM (SELECT *, ROW_NUMBER() OVER "
        "(PARTITION BY `__panes_pane` ORDER BY `total` DESC, `k`, `total`) AS `__panes_rank` FROM (SELECT k, "
        "SUM(v) AS total, `__panes_pane` FROM t AS rows GROUP BY k, `__panes_pane`) AS __panes_q1) AS __panes_q2 "
        "WHERE `__panes_rank` <= 2"
    )


def test_duplicate_output_names_are_refused_when_the_columns_are_known():
    with pytest.raises(ValueError, match="distinct names: k"):
        rewrite(parse_sql("SELECT *, k FROM rows"), ["k", "v"], "t")


# -- many panes at once, or one at a time: the same rows -------------------------------------------------------

QUERIES = [
    "SELECT * FROM rows ORDER BY v DESC LIMIT 3",
    "SELECT k, v FROM rows ORDER BY v LIMIT 2",
    "SELECT k, sum(v) AS total, count(*) AS n FROM rows GROUP BY k ORDER BY total DESC NULLS LAST LIMIT 2",
    "SELECT count(*) AS n, count(DISTINCT k) AS d, max(v) AS hi FROM rows",
    "SELECT DISTINCT k FROM rows ORDER BY k",
    "SELECT k, v, row_number() OVER (PARTITION BY k ORDER BY v) AS i, lag(v) OVER (ORDER BY v) AS prev FROM rows",
    "WITH g AS (SELECT k, sum(v) AS s FROM rows GROUP BY k) SELECT k, s, dense_rank() OVER (ORDER BY s) AS r FROM g",
    "SELECT k, v FROM (SELECT * FROM rows WHERE v IS NOT NULL ORDER BY v DESC LIMIT 4) AS s ORDER BY k, v LIMIT 3",
    "SELECT k FROM rows WHERE v > 2 LIMIT 2",
    "SELECT k, count(*) AS n FROM rows GROUP BY k HAVING count(*) > 1",
]


def run(sql, frames):
    """The rewritten query over the panes' rows (one table), each pane's rows in order."""
    q = rewrite(parse_sql(sql), ["k", "v", "window_start", "window_end"], "t")
    table = pa.table(
        {
            "k": pa.array([r[0] for f in frames for r in f[1]]),
            "v": pa.array([r[1] for f in frames for r in f[1]], pa.int64()),
            "window_start": pa.array([None] * sum(len(f[1]) for f in frames), pa.timestamp("ms")),
            "window_end": pa.array([None] * sum(len(f[1]) for f in frames), pa.timestamp("ms")),
            PANE: pa.array([f[0] for f in frames for _ in f[1]], pa.int64()),
            ROW_TS: pa.array([r[2] for f in frames for r in f[1]], pa.int64()),
            ROW_SEQ: pa.array([i for f in frames for i, _ in enumerate(f[1])], pa.int64()),
        }
    )
    out = run_query(duckdb_sql(q.tree), "t", table).to_pylist()
    by_pane: dict = {}
    for r in sorted(out, key=lambda r: (r[PANE], r[ROW_ORDER])):
        by_pane.setdefault(r[PANE], []).append(tuple(r[c] for c in q.columns))
    return by_pane


rows_st = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c"]), st.one_of(st.none(), st.integers(0, 5)), st.integers(0, 3)),
    min_size=1,
    max_size=8,
)


@settings(max_examples=60, deadline=None)
@given(panes=st.lists(rows_st, min_size=1, max_size=4), query=st.sampled_from(QUERIES))
def test_many_panes_at_once_give_each_pane_the_rows_of_that_pane_alone(panes, query):
    frames = list(enumerate(panes))
    together = run(query, frames)
    for pane, rows in frames:
        alone = run(query, [(pane, rows)])
        assert together.get(pane, []) == alone.get(pane, [])


@pytest.mark.parametrize("query", QUERIES)
def test_the_rewritten_query_over_one_pane_gives_what_the_query_gives(query):
    rnd = random.Random(7)
    rows = [(rnd.choice("abc"), rnd.choice([None, 1, 2, 3, 4]), rnd.randint(0, 3)) for _ in range(12)]
    rows.sort(key=lambda r: r[2])
    mine = run(query, [(0, rows)]).get(0, [])
    con = duckdb.connect()
    con.register("rows_t", pa.table({"k": [r[0] for r in rows], "v": pa.array([r[1] for r in rows], pa.int64())}))
    plain = con.sql(parse_sql(query).sql("duckdb").replace(" rows", " rows_t")).fetchall()
    if "LIMIT" in query or "row_number" in query:  # which of tying rows come first is the rewrite's choice
        assert len(mine) == len(plain)
    else:
        assert sorted(mine, key=repr) == sorted(plain, key=repr)


# -- the core's engine ----------------------------------------------------------------------------------------


def test_the_core_refuses_what_its_engine_does_not_run_as_spark_does():
    assert core_refusal(parse_sql("SELECT k, sum(v) AS s FROM rows GROUP BY k")) is None
    why = core_refusal(parse_sql("SELECT k, percentile_approx(v, 0.5) AS p FROM rows GROUP BY k"))
    assert why.startswith(
        "the core's SQL engine does not run function approx_quantile as Spark does; replay it "
        "with --engine spark (the core runs "
    )


def test_the_core_runs_a_window_in_the_rewritten_form_and_orders_its_rows():
    from panes.core.window_pipeline import PaneWindow, WindowRows

    t = SqlTransform("SELECT customer, amount, window_end AS closes FROM rows ORDER BY amount DESC LIMIT 2")
    rows = WindowRows(
        PaneWindow(("x",), 0, 3_600_000),
        np.array([1, 2, 3]),
        np.array([0, 1, 2]),
        {"customer": np.array(["a", "b", "c"], dtype=object), "amount": np.array([5, 9, 5])},
    )
    assert t.run(rows).records() == [
        {"customer": "b", "amount": 9, "closes": "1970-01-01T01:00:00.000Z"},
        {"customer": "a", "amount": 5, "closes": "1970-01-01T01:00:00.000Z"},
    ]
    total = SqlTransform("SELECT sum(amount) AS total, avg(amount) AS mean FROM rows").run(rows).records()
    assert total == [{"total": 19, "mean": 19 / 3}] and type(total[0]["total"]) is int
