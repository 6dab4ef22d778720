"""The core's SQL engine for window pipelines: DuckDB, embedded, an optional extra
(``pip install 'panes[sql]'``). It runs the rewritten query (``sql_rewrite``) translated from Spark
SQL by sqlglot, on the subset both engines agree on (``CORE_FUNCTIONS``); Spark answers the rest."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pyarrow as pa
from sqlglot import exp

from ..table import Columns, object_array

INSTALL = "the core runs window_pipeline.sql with DuckDB: pip install 'panes[sql]' (or replay it with --engine spark)"

#: what the core's engine runs as Spark does (each is checked on both engines by the Spark tests)
CORE_FUNCTIONS: tuple[type[exp.Expression], ...] = (
    # aggregates
    exp.Count,
    exp.Sum,
    exp.Min,
    exp.Max,
    exp.Avg,
    exp.CountIf,
    # window functions
    exp.RowNumber,
    exp.Rank,
    exp.DenseRank,
    exp.Lag,
    exp.Lead,
    # scalar functions
    exp.Abs,
    exp.Round,
    exp.Floor,
    exp.Ceil,
    exp.Upper,
    exp.Lower,
    exp.Length,
    exp.Substring,
    exp.Concat,
    exp.Trim,
    exp.Coalesce,
    exp.Greatest,
    exp.Least,
    exp.Nullif,
    exp.If,
    exp.Case,
    exp.Cast,
    exp.DPipe,
    exp.ArraySort,
    exp.ArrayAgg,
    exp.ArraySize,
)
#: the operators and structure of a query (anything in a query that is neither a function nor one of
#: these is outside the core's subset)
CORE_SYNTAX: tuple[type[exp.Expression], ...] = (
    exp.Select,
    exp.From,
    exp.Table,
    exp.TableAlias,
    exp.Subquery,
    exp.With,
    exp.CTE,
    exp.Where,
    exp.Group,
    exp.Having,
    exp.Order,
    exp.Ordered,
    exp.Limit,
    exp.Column,
    exp.Identifier,
    exp.Star,
    exp.Alias,
    exp.Literal,
    exp.Null,
    exp.Boolean,
    exp.Paren,
    exp.Distinct,
    exp.Window,
    exp.WindowSpec,
    exp.DataType,
    exp.Interval,
    exp.Add,
    exp.Sub,
    exp.Mul,
    exp.Div,
    exp.Mod,
    exp.Neg,
    exp.EQ,
    exp.NEQ,
    exp.GT,
    exp.GTE,
    exp.LT,
    exp.LTE,
    exp.NullSafeEQ,
    exp.And,
    exp.Or,
    exp.Not,
    exp.Is,
    exp.In,
    exp.Between,
    exp.Like,
    exp.If,
    exp.Case,
    exp.Filter,
    exp.Var,
    exp.Tuple,
    exp.Bracket,
)


def core_refusal(tree: exp.Expression) -> str | None:
    """Why the core cannot run a (checked) query, or None."""
    try:
        import duckdb  # noqa: F401
    except ImportError:
        return INSTALL
    for node in tree.walk():
        if isinstance(node, CORE_FUNCTIONS + CORE_SYNTAX):
            continue
        name = node.sql_name() if isinstance(node, exp.Func) else type(node).__name__
        what = (
            f"function {node.name if isinstance(node, exp.Anonymous) else name.lower()}"
            if isinstance(node, exp.Func)
            else name
        )
        return (
            f"the core's SQL engine does not run {what} as Spark does; replay it with --engine spark "
            f"(the core runs {', '.join(sorted(core_function_names()))})"
        )
    return None


def duckdb_sql(tree: exp.Expression) -> str:
    """A (rewritten) query in DuckDB's dialect, where a function's result differs from Spark's made
    Spark's: ``collect_list`` of nothing is an empty array, ``count_if`` of nothing 0, ``floor`` and
    ``ceil`` (without a scale) a long."""

    def spark_like(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.ArrayAgg):
            return exp.Coalesce(this=node.copy(), expressions=[exp.Array(expressions=[])])
        if isinstance(node, exp.CountIf):
            return exp.Coalesce(this=node.copy(), expressions=[exp.Literal.number(0)])
        if isinstance(node, (exp.Floor, exp.Ceil)) and node.args.get("decimals") is None:
            return exp.Cast(this=node.copy(), to=exp.DataType.build("BIGINT"))
        return node

    return tree.copy().transform(spark_like, copy=False).sql(dialect="duckdb")


def core_function_names() -> set[str]:
    return {f.sql_name().lower() for f in CORE_FUNCTIONS if issubclass(f, exp.Func)}


def arrow_table(columns: Columns) -> pa.Table:
    """Columns as an Arrow table. A column of mixed types (which Spark reads as text) is text."""
    arrays = {}
    for name, values in columns.items():
        arrays[name] = arrow_array(values)
    return pa.table(arrays)


def arrow_array(values: np.ndarray) -> pa.Array:
    if values.dtype.kind == "M":
        return pa.array(values.astype("datetime64[ms]"))
    if values.dtype.kind != "O":
        return pa.array(values)
    try:
        return pa.array(list(values), from_pandas=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array(object_array(None if v is None else text(v) for v in values), type=pa.string())


def text(v: Any) -> str:
    """A value as Spark's JSON reader gives it in a text column."""
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


class Connections(threading.local):
    """One DuckDB connection per thread."""

    connection: Any = None


CONNECTIONS = Connections()


def run_query(sql: str, table_name: str, table: pa.Table) -> pa.Table:
    """Run ``sql`` (DuckDB's dialect) over ``table`` registered as ``table_name``."""
    import duckdb

    if CONNECTIONS.connection is None:
        CONNECTIONS.connection = duckdb.connect(config={"threads": 1})
    con = CONNECTIONS.connection
    con.register(table_name, table)
    try:
        return con.sql(sql).to_arrow_table()
    finally:
        con.unregister(table_name)
