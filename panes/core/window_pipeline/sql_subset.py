"""The SQL a window pipeline accepts: Spark SQL over one table ``rows`` (a window's records), in a
subset that panes can run over every firing window at once (``sql_rewrite``), checked before
anything runs. Everything outside it is refused with one line naming the construct.

The subset: one ``SELECT`` (optionally with ``WITH`` queries before it), each reading one source
(``rows``, an earlier ``WITH`` name, or a subquery of the same form) with ``WHERE``, ``GROUP BY``,
``HAVING``, ``SELECT DISTINCT``, ``ORDER BY`` and ``LIMIT n``; aggregate and window functions
(``OVER (PARTITION BY ... ORDER BY ...)``); scalar expressions. Every selected expression that is
not a column has a name (``AS``). Not: joins, set operations (``UNION`` ...), subqueries inside
expressions, ``OFFSET``, ``QUALIFY``, named windows, ``GROUP BY ALL`` / ``ROLLUP`` / ``CUBE`` /
``GROUPING SETS``, ``LATERAL VIEW``, ``TABLESAMPLE``, hints, ``DISTRIBUTE`` / ``SORT`` / ``CLUSTER
BY``, tables other than ``rows``, and functions whose value differs between runs (``rand``,
``uuid``, ``current_timestamp`` ...).
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

#: the table a window pipeline's SQL reads
SOURCE = "rows"
#: names panes uses for its own columns
RESERVED_PREFIX = "__panes"
#: pane metadata a pipeline's output cannot name (the key and window bounds are the pane's own)
PANE_METADATA = ("timing", "pane_index", "is_last", "retraction")

#: SELECT clauses outside the subset, by sqlglot's argument name
REFUSED_CLAUSES = {
    "joins": "JOIN",
    "laterals": "LATERAL VIEW",
    "windows": "a named WINDOW clause",
    "qualify": "QUALIFY",
    "offset": "OFFSET",
    "distribute": "DISTRIBUTE BY",
    "sort": "SORT BY",
    "cluster": "CLUSTER BY",
    "hint": "hints",
    "pivots": "PIVOT",
    "sample": "TABLESAMPLE",
    "into": "INTO",
    "kind": "SELECT AS STRUCT",
    "connect": "CONNECT BY",
    "prewhere": "PREWHERE",
    "match": "MATCH_RECOGNIZE",
    "locks": "FOR UPDATE",
    "settings": "SETTINGS",
    "format": "FORMAT",
    "options": "OPTIONS",
    "exclude": "EXCLUDE",
    "operation_modifiers": "query modifiers",
    "for_": "FOR",
}
REFUSED_GROUPING = {
    "all": "GROUP BY ALL",
    "rollup": "GROUP BY ROLLUP",
    "cube": "GROUP BY CUBE",
    "grouping_sets": "GROUPING SETS",
    "totals": "WITH TOTALS",
}
#: functions whose value differs between runs of the same window
NONDETERMINISTIC = (exp.Rand, exp.Uuid, exp.CurrentTimestamp, exp.CurrentDate, exp.CurrentTime)
NONDETERMINISTIC_NAMES = {
    "rand",
    "random",
    "randn",
    "uuid",
    "shuffle",
    "now",
    "monotonically_increasing_id",
    "spark_partition_id",
    "input_file_name",
    "current_timestamp",
    "current_date",
    "localtimestamp",
    "unix_timestamp",
    "current_timezone",
}
#: window functions that take the rows tying on the window's ORDER BY in an order of their own
ROW_ORDER_SENSITIVE = (exp.RowNumber, exp.Lag, exp.Lead)


class SqlRefused(ValueError):
    """A query outside the subset (the message names the construct)."""


def parse_sql(sql: str) -> exp.Select:
    """The query's tree, checked against the subset; raises ``SqlRefused`` with one line."""
    if not isinstance(sql, str) or not sql.strip():
        raise SqlRefused("a SELECT over the table rows is needed")
    try:
        statements = [s for s in sqlglot.parse(sql, read="spark") if s is not None]
    except ParseError as e:
        raise SqlRefused(f"not valid Spark SQL: {first_line(str(e))}") from None
    if len(statements) != 1:
        raise SqlRefused(f"one SELECT statement, not {len(statements)}")
    tree = statements[0]
    if isinstance(tree, exp.SetOperation):
        raise SqlRefused(f"{type(tree).__name__.upper()} is not supported (one SELECT over rows)")
    if not isinstance(tree, exp.Select):
        raise SqlRefused(f"one SELECT over the table rows, not {type(tree).__name__.upper()}")
    check_query(tree, set(), top=True)
    return tree


def first_line(text: str) -> str:
    return " ".join(text.split())[:300]


def check_query(sel: exp.Select, ctes: set[str], top: bool) -> None:
    """Check a SELECT and its ``WITH`` queries and FROM subqueries (``ctes``: names visible here)."""
    ctes = set(ctes)
    with_ = sel.args.get("with_")
    if with_ is not None:
        if with_.args.get("recursive"):
            raise SqlRefused("WITH RECURSIVE is not supported")
        if not top:
            raise SqlRefused("WITH is supported only before the outermost SELECT")
        for cte in with_.expressions:
            if not isinstance(cte.this, exp.Select):
                raise SqlRefused(f"WITH {cte.alias_or_name}: a SELECT, not {type(cte.this).__name__.upper()}")
            check_query(cte.this, ctes, top=False)
            ctes.add(cte.alias_or_name.lower())
    for arg, construct in REFUSED_CLAUSES.items():
        if sel.args.get(arg):
            raise SqlRefused(f"{construct} is not supported")
    distinct = sel.args.get("distinct")
    if distinct is not None and distinct.args.get("on") is not None:
        raise SqlRefused("DISTINCT ON is not supported")
    group = sel.args.get("group")
    if group is not None:
        for arg, construct in REFUSED_GROUPING.items():
            if group.args.get(arg):
                raise SqlRefused(f"{construct} is not supported")
        for e in group.expressions:
            if isinstance(e, (exp.Rollup, exp.Cube, exp.GroupingSets)):
                raise SqlRefused(
                    f"{REFUSED_GROUPING[type(e).__name__.lower().replace('groupingsets', 'grouping_sets')]}"
                    " is not supported"
                )
    limit = sel.args.get("limit")
    if limit is not None:
        n = limit.expression
        if not (isinstance(n, exp.Literal) and not n.is_string and n.this.isdigit()) or limit.args.get("offset"):
            raise SqlRefused(f"LIMIT takes a whole number, not {limit.expression.sql('spark')}")
    check_source(sel, ctes)
    check_projections(sel, top)
    for part in (sel.args.get(a) for a in ("expressions", "where", "group", "having", "order")):
        for node in part if isinstance(part, list) else [part]:
            if node is not None:
                check_expression(node)


def check_source(sel: exp.Select, ctes: set[str]) -> None:
    from_ = sel.args.get("from_")
    if from_ is None:
        raise SqlRefused("a SELECT reads FROM rows (or a WITH name, or a subquery)")
    src = from_.this
    if isinstance(src, exp.Table):
        if src.args.get("db") or src.args.get("catalog"):
            raise SqlRefused(f"FROM {src.sql('spark')}: the pipeline reads only rows")
        for arg in ("sample", "pivots", "joins", "laterals", "hints"):
            if src.args.get(arg):
                raise SqlRefused(f"{REFUSED_CLAUSES.get(arg, arg.upper())} is not supported")
        if src.name.lower() != SOURCE and src.name.lower() not in ctes:
            raise SqlRefused(f"FROM {src.name}: the pipeline reads only rows (and its WITH names)")
    elif isinstance(src, exp.Subquery) and isinstance(src.this, exp.Select):
        check_query(src.this, ctes, top=False)
    else:
        raise SqlRefused(f"FROM {src.sql('spark')}: the pipeline reads rows, a WITH name or a subquery")


def check_projections(sel: exp.Select, top: bool) -> None:
    for e in sel.expressions:
        star = (
            e
            if isinstance(e, exp.Star)
            else e.this
            if isinstance(e, exp.Column) and isinstance(e.this, exp.Star)
            else None
        )
        if star is not None:
            for arg in ("except", "replace", "rename"):
                if star.args.get(arg):
                    raise SqlRefused(f"SELECT * {arg.upper()} is not supported")
            continue
        if isinstance(e, exp.Column):
            name = e.name
        elif isinstance(e, exp.Alias):
            name = e.alias
        else:
            raise SqlRefused(f"give {e.sql('spark')} a name: {e.sql('spark')} AS name")
        if top and name.lower() in PANE_METADATA:
            raise SqlRefused(f"output column {name} is pane metadata: name it otherwise")


def check_expression(node: exp.Expression) -> None:
    for n in node.walk():
        if isinstance(n, (exp.Subquery, exp.Select, exp.Exists)) or isinstance(n, exp.In) and n.args.get("query"):
            raise SqlRefused(f"a subquery inside an expression is not supported: {first_line(node.sql('spark'))}")
        if isinstance(n, exp.Identifier) and n.name.lower().startswith(RESERVED_PREFIX):
            raise SqlRefused(f"names starting with {RESERVED_PREFIX} are panes' own: {n.name}")
        if isinstance(n, exp.Window) and n.args.get("alias"):
            raise SqlRefused("a named window (OVER w) is not supported")
        if isinstance(n, NONDETERMINISTIC) or isinstance(n, exp.Anonymous) and n.name.lower() in NONDETERMINISTIC_NAMES:
            raise SqlRefused(
                f"{first_line(n.sql('spark'))}: a function whose value differs between runs is not supported"
            )
