"""The rules of ``panes.core.rules`` on Spark: an ``Ops`` over Columns (``COLUMN``) and one over SQL
text (``SQL``, for the tests Spark's higher-order functions evaluate inside their lambdas, which
``native.expressions.where`` writes as SQL).

Each rule is written once, in ``panes.core.rules``; the native and stateful plans evaluate it
here, and ``tests/spark/test_spark_rules.py`` holds both forms equal to the core's evaluation.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F

from ..core.rules import Ops


def column(value: Any) -> Column:
    """A Column of ``value``: itself when it is one, else a literal."""
    return value if isinstance(value, Column) else F.lit(value)


class ColumnOps:
    """Rules over Spark Columns (Python values become literals)."""

    @staticmethod
    def where(cond: Any, yes: Any, no: Any) -> Column:
        return F.when(column(cond), column(yes)).otherwise(column(no))

    @staticmethod
    def greatest(a: Any, b: Any) -> Column:
        return F.greatest(column(a), column(b))

    @staticmethod
    def least(a: Any, b: Any) -> Column:
        return F.least(column(a), column(b))


class Sql:
    """A SQL expression as text, with Python's operators writing SQL's (``&`` is AND, ``|`` OR,
    ``~`` NOT, ``==`` =), so that a rule evaluated on ``Sql`` values gives its SQL."""

    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"Sql({self.text!r})"

    def _op(self, op: str, other: Any, reflected: bool = False) -> Sql:
        a, b = (sql(other), self.text) if reflected else (self.text, sql(other))
        return Sql(f"({a} {op} {b})")

    def __add__(self, other: Any) -> Sql:
        return self._op("+", other)

    def __radd__(self, other: Any) -> Sql:
        return self._op("+", other, reflected=True)

    def __sub__(self, other: Any) -> Sql:
        return self._op("-", other)

    def __rsub__(self, other: Any) -> Sql:
        return self._op("-", other, reflected=True)

    def __lt__(self, other: Any) -> Sql:
        return self._op("<", other)

    def __le__(self, other: Any) -> Sql:
        return self._op("<=", other)

    def __gt__(self, other: Any) -> Sql:
        return self._op(">", other)

    def __ge__(self, other: Any) -> Sql:
        return self._op(">=", other)

    # (comparisons build expressions, as PySpark's Column's do: not the bool object's methods return)
    def __eq__(self, other: Any) -> Sql:  # type: ignore[override]
        return self._op("=", other)

    def __ne__(self, other: Any) -> Sql:  # type: ignore[override]
        return self._op("<>", other)

    def __and__(self, other: Any) -> Sql:
        return self._op("AND", other)

    def __rand__(self, other: Any) -> Sql:
        return self._op("AND", other, reflected=True)

    def __or__(self, other: Any) -> Sql:
        return self._op("OR", other)

    def __ror__(self, other: Any) -> Sql:
        return self._op("OR", other, reflected=True)

    def __invert__(self) -> Sql:
        return Sql(f"(NOT {self.text})")

    __hash__ = None  # type: ignore[assignment]  # (unhashable, as == builds an expression; typeshed wants a method)


def sql(value: Any) -> str:
    """The SQL of a value: an ``Sql`` expression's text, or a literal."""
    if isinstance(value, Sql):
        return value.text
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):  # (SQL types an integer literal beyond INT's range as BIGINT)
        return str(value)
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    raise TypeError(f"no SQL literal for {value!r}")


class SqlOps:
    """Rules over SQL text (``Sql``)."""

    @staticmethod
    def where(cond: Any, yes: Any, no: Any) -> Sql:
        return Sql(f"CASE WHEN {sql(cond)} THEN {sql(yes)} ELSE {sql(no)} END")

    @staticmethod
    def greatest(a: Any, b: Any) -> Sql:
        return Sql(f"greatest({sql(a)}, {sql(b)})")

    @staticmethod
    def least(a: Any, b: Any) -> Sql:
        return Sql(f"least({sql(a)}, {sql(b)})")


COLUMN: Ops = ColumnOps()
SQL: Ops = SqlOps()
