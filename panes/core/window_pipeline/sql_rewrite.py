"""A window pipeline's SQL (per window, over ``rows``) rewritten into one query over the rows of many
panes at once, each row tagged with its pane (``PANE``), so that an engine runs it once for every
window that fires: Spark natively over a micro-batch's firing windows, the core's embedded engine
over one window. Both run the same rewritten query, so they agree on ties and order.

Over a table holding the rows of several panes, the rewritten query gives, for each pane, exactly
the rows the user's query gives over that pane's rows alone:

- every SELECT carries ``PANE``: it is added to the selected columns, to ``GROUP BY`` (a SELECT that
  aggregates without ``GROUP BY`` gets ``GROUP BY PANE``), and to every window's ``PARTITION BY``;
- ``DISTINCT`` then keeps distinct rows per pane;
- ``ORDER BY ... LIMIT n`` becomes ``row_number() OVER (PARTITION BY PANE ORDER BY ...) <= n``;
  ``ORDER BY`` without ``LIMIT`` inside the query orders nothing and is dropped;
- the outermost SELECT gives each output row its place in the pane (``ROW_ORDER``): its ``ORDER BY``.

Ties are broken the same way everywhere: rows of the window (a SELECT that neither aggregates nor
is DISTINCT passes them on) by event time, then arrival (``ROW_TS``, ``ROW_SEQ``); aggregated or
distinct rows by their columns in order. ``row_number``, ``lag`` and ``lead`` take tying rows in
event-time, then arrival order too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from .sql_subset import ROW_ORDER_SENSITIVE, SOURCE

PANE = "__panes_pane"  # which pane a row belongs to
ROW_TS = "__panes_row_ts"  # a window row's event time (ms)
ROW_SEQ = "__panes_row_seq"  # its arrival order
ROW_ORDER = "__panes_row_order"  # an output row's place in its pane (1, 2, ...)
RANK = "__panes_rank"
SORT = "__panes_sort_"
HIDDEN = (PANE, ROW_TS, ROW_SEQ, ROW_ORDER)


@dataclass
class Scope:
    """What a SELECT gives the one reading it: its column names, and whether it passes on the
    window rows' order columns."""

    columns: list[str]
    carries_rows: bool


@dataclass
class Rewritten:
    """The rewritten query (outputs: ``columns``, then ``PANE`` and ``ROW_ORDER``)."""

    tree: exp.Select
    columns: list[str]

    def sql(self, dialect: str) -> str:
        return self.tree.sql(dialect=dialect)


def col(name: str, table: str | None = None) -> exp.Column:
    return exp.column(name, table=table, quoted=True)


class Rewriter:
    def __init__(self, columns: Sequence[str], source: str):
        self.columns = list(columns)
        self.source = source
        self.ctes: dict[str, Scope] = {}
        self.subqueries = 0

    def rewrite(self, tree: exp.Select) -> Rewritten:
        tree = tree.copy()
        with_ = tree.args.get("with_")
        tree.set("with_", None)
        if with_ is not None:
            for cte in with_.expressions:
                sel, scope = self.select(cte.this, top=False)
                cte.set("this", sel)
                self.ctes[cte.alias_or_name.lower()] = scope
        out, scope = self.select(tree, top=True)
        if with_ is not None:
            out.set("with_", with_)
        names = [c.lower() for c in scope.columns]
        dupes = sorted({c for c in scope.columns if names.count(c.lower()) > 1})
        if dupes:
            raise ValueError(f"the pipeline's output columns need distinct names: {', '.join(dupes)}")
        return Rewritten(out, scope.columns)

    def alias(self) -> str:
        self.subqueries += 1
        return f"__panes_q{self.subqueries}"

    def source_scope(self, sel: exp.Select) -> Scope:
        """The scope of the SELECT's source; ``rows`` is renamed to the engine's table."""
        src = sel.args["from_"].this
        if isinstance(src, exp.Subquery):
            inner, scope = self.select(src.this, top=False)
            src.set("this", inner)
            return scope
        name = src.name.lower()
        if name in self.ctes:
            return self.ctes[name]
        assert name == SOURCE
        table = exp.to_table(self.source, quoted=True)
        table.set("alias", src.args.get("alias") or exp.TableAlias(this=exp.to_identifier(src.name)))
        src.replace(table)
        return Scope(list(self.columns), True)

    def select(self, sel: exp.Select, top: bool) -> tuple[exp.Select, Scope]:
        source = self.source_scope(sel)
        sel.set("expressions", self.expand_stars(sel.expressions, source))
        names = [e.alias_or_name for e in sel.expressions]
        distinct = sel.args.get("distinct") is not None
        aggregated = sel.args.get("group") is not None or aggregates(sel)
        carries = source.carries_rows and not aggregated and not distinct
        for window in own_windows(sel):
            window.set("partition_by", [col(PANE), *(window.args.get("partition_by") or [])])
            if carries and isinstance(window.this, ROW_ORDER_SENSITIVE) and window.args.get("order") is not None:
                window.args["order"].set("expressions", [*window.args["order"].expressions, *row_order()])
        sel.select(col(PANE), append=True, copy=False)
        if aggregated:
            group = sel.args.get("group") or exp.Group(expressions=[])
            group.set("expressions", [*group.expressions, col(PANE)])
            sel.set("group", group)
        if carries:
            sel.select(col(ROW_TS), col(ROW_SEQ), append=True, copy=False)
        if sel.args.get("limit") is None and not top:
            sel.set("order", None)
            return sel, Scope(names, carries)
        return self.ranked(sel, names, carries, distinct, top), Scope(names, carries)

    def expand_stars(self, projections: list[exp.Expression], source: Scope) -> list[exp.Expression]:
        out: list[exp.Expression] = []
        for e in projections:
            if isinstance(e, exp.Star):
                out += [col(c) for c in source.columns]
            elif isinstance(e, exp.Column) and isinstance(e.this, exp.Star):
                out += [col(c, e.table) for c in source.columns]
            else:
                out.append(e)
        return out

    def ranked(self, sel: exp.Select, names: list[str], carries: bool, distinct: bool, top: bool) -> exp.Select:
        """``sel`` with its ORDER BY and LIMIT applied per pane: its rows ranked within their pane,
        those past the limit dropped; at the top, the rank is each row's place (``ROW_ORDER``)."""
        order = sel.args.get("order")
        limit = sel.args.get("limit")
        sel.set("order", None)
        sel.set("limit", None)
        keys = []
        for i, o in enumerate(order.expressions if order is not None else []):
            name = output_name(o.this, sel, names)
            if name is None:
                if distinct:
                    raise ValueError(f"ORDER BY {o.this.sql('spark')}: a SELECT DISTINCT orders by its output columns")
                name = f"{SORT}{i}"
                sel.select(exp.alias_(o.this, name, quoted=True), append=True, copy=False)
            keys.append(exp.Ordered(this=col(name), desc=o.args.get("desc"), nulls_first=o.args.get("nulls_first")))
        ties = row_order() if carries else [exp.Ordered(this=col(n), nulls_first=True) for n in names]
        rank = exp.Window(this=exp.RowNumber(), partition_by=[col(PANE)], order=exp.Order(expressions=keys + ties))
        inner = exp.select(exp.Star(), exp.alias_(rank, RANK, quoted=True)).from_(sel.subquery(self.alias()))
        picked: list[Any] = [col(n) for n in names] + [col(PANE)]
        if carries and not top:
            picked += [col(ROW_TS), col(ROW_SEQ)]
        if top:
            picked.append(exp.alias_(col(RANK), ROW_ORDER, quoted=True))
        outer = exp.select(*picked).from_(inner.subquery(self.alias()))
        if limit is not None:
            outer = outer.where(exp.LTE(this=col(RANK), expression=limit.expression.copy()))
        return outer


def row_order() -> list[exp.Ordered]:
    return [exp.Ordered(this=col(ROW_TS), nulls_first=True), exp.Ordered(this=col(ROW_SEQ), nulls_first=True)]


def output_name(e: exp.Expression, sel: exp.Select, names: list[str]) -> str | None:
    """The output column an ORDER BY item names: by position, by output name (an output name
    before an input column, as Spark resolves it), or as the same expression; else None."""
    if isinstance(e, exp.Literal) and not e.is_string and e.this.isdigit():
        pos = int(e.this)
        if not 1 <= pos <= len(names):
            raise ValueError(f"ORDER BY {pos}: the SELECT has {len(names)} columns")
        return names[pos - 1]
    if isinstance(e, exp.Column) and not e.table:
        for n in names:
            if n.lower() == e.name.lower():
                return n
    for n, p in zip(names, sel.expressions):
        if (p.this if isinstance(p, exp.Alias) else p) == e:
            return n
    return None


def aggregates(sel: exp.Select) -> bool:
    """Whether the SELECT aggregates: an aggregate function that is not a window's function."""
    for part in [*sel.expressions, sel.args.get("having"), sel.args.get("order")]:
        if part is not None and any(not window_function(node) for node in part.find_all(exp.AggFunc)):
            return True
    return False


def window_function(node: exp.Expression) -> bool:
    """Whether ``node`` is (inside) the function of a window, ``f(...) OVER (...)``."""
    child: Any = node
    parent = node.parent
    while parent is not None and not isinstance(parent, exp.Select):
        if isinstance(parent, exp.Window):
            return child is parent.this
        child = parent
        parent = parent.parent
    return False


def own_windows(sel: exp.Select) -> list[exp.Window]:
    """The window functions of the SELECT itself (not of its source)."""
    out: list[exp.Window] = []
    for part in [*sel.expressions, sel.args.get("having"), sel.args.get("order")]:
        if part is not None:
            out += list(part.find_all(exp.Window))
    return out


def rewrite(tree: exp.Select, columns: Sequence[str], source: str) -> Rewritten:
    """The query over a table ``source`` of many panes' rows: the user's ``columns`` (what ``rows``
    shows: the records' columns, ``window_start``, ``window_end``) and ``PANE``, ``ROW_TS``,
    ``ROW_SEQ``."""
    return Rewriter(columns, source).rewrite(tree)
