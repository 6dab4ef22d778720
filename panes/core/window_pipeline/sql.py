"""``window_pipeline: {sql: "SELECT ... FROM rows ..."}``: Spark SQL over a window's rows.

The query is checked against the subset when the spec is read (``sql_subset``). The core runs it
with its embedded engine (``embedded_sql``), over one window at a time, in the form rewritten for
many panes at once (``sql_rewrite``) that Spark runs over every window firing in a micro-batch.
"""

from __future__ import annotations

import numpy as np

from ..table import Table
from .base import WindowRows
from .embedded_sql import arrow_table, core_refusal, duckdb_sql, run_query
from .sql_rewrite import HIDDEN, PANE, ROW_ORDER, ROW_SEQ, ROW_TS, Rewritten, rewrite
from .sql_subset import parse_sql

#: the name the core's engine gives a window's rows
CORE_TABLE = "__panes_rows"


class SqlTransform:
    kind = "sql"

    def __init__(self, sql: str):
        self.sql = sql
        self.tree = parse_sql(sql)
        #: the core's query (DuckDB's dialect) for a ``rows`` of these columns
        self.core_queries: dict[tuple[str, ...], str] = {}

    def describe(self) -> str:
        return self.sql

    def rewrite(self, columns: list[str], source: str) -> Rewritten:
        """The query over many panes' rows, for a ``rows`` showing ``columns``."""
        return rewrite(self.tree, columns, source)

    def core_refusal(self) -> str | None:
        """Why the core cannot run this query (Spark can), or None."""
        return core_refusal(self.tree)

    def run(self, rows: WindowRows) -> Table:
        names = rows.names
        query = self.core_queries.get(tuple(names))
        if query is None:
            query = self.core_queries[tuple(names)] = duckdb_sql(self.rewrite(names, CORE_TABLE).tree)
        n = len(rows)
        cols = rows.table_columns()
        cols.update({PANE: np.zeros(n, np.int64), ROW_TS: rows.ts, ROW_SEQ: rows.seq})
        result = Table.from_arrow(run_query(query, CORE_TABLE, arrow_table(cols)))
        order = np.argsort(result.columns[ROW_ORDER].astype(np.int64), kind="stable")
        return result.take(order).without(HIDDEN)
