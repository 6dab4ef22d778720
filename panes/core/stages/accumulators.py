"""How a stage's aggregates and merges take in the panes of the stage upstream.

A pane of a discarding stage adds to what came before. A pane of an accumulating or retracting
stage restates its window: it replaces that (key, window)'s earlier contribution, and a retraction
withdraws it. Such panes reach the next stage as *contributions*: each row names its contributor
(the upstream key and window), the index of its pane and whether it is a retraction; a window keeps
each contributor's latest rows and aggregates them when it fires. (An accumulating stage that feeds
another runs retracting inside, and its own printed panes leave the retractions out, so that a
contribution that moves to another key downstream is withdrawn from the old one.)
"""

from __future__ import annotations

import numbers
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from ..aggregates import AggregateFn
from .merges import output_rows

#: the batch column of a merge stage's rows (``SideRow`` objects)
MERGE_ROW = "__merge_row"


def contribution_column(column: str | None) -> str:
    """The batch column that carries an aggregate's input column as contributions."""
    return f"__contribution:{column}"


class Contribution(NamedTuple):
    """One row of an upstream pane: its contributor, pane index, retraction flag and value."""

    contributor: str
    pane: int
    retraction: bool
    value: Any


class SideRow(NamedTuple):
    """One row of a merge stage's input: its side (0 left, 1 right), the contribution it is part
    of (None: a plain row that adds), and the row."""

    side: int
    contribution: Contribution | None
    row: dict


def contribute(table: dict, c: Contribution, item: Any) -> None:
    """Apply one contribution to ``table`` (contributor -> (pane index, items))."""
    current = table.get(c.contributor)
    if c.retraction:
        if current is not None and current[0] == c.pane:
            del table[c.contributor]
    elif current is None or current[0] < c.pane:
        table[c.contributor] = (c.pane, [item])
    elif current[0] == c.pane:
        current[1].append(item)


def merged_tables(a: dict, b: dict) -> dict:
    """Two windows' contributions as one (sessions merging): the later pane of a contributor."""
    out = {k: (p, list(items)) for k, (p, items) in a.items()}
    for k, (p, items) in b.items():
        cur = out.get(k)
        if cur is None or cur[0] < p:
            out[k] = (p, list(items))
        elif cur[0] == p:
            cur[1].extend(items)
    return out


def value_array(values: list) -> np.ndarray:
    """Plain values as the array the aggregates expect (ints and floats typed, else objects)."""
    present = [v for v in values if v is not None]
    if present and len(present) == len(values) and all(isinstance(v, numbers.Real) for v in present):
        if all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in present):
            return np.array(values, dtype=np.int64)
        if not any(isinstance(v, bool) for v in present):
            return np.array(values, dtype=np.float64)
    arr = np.empty(len(values), dtype=object)
    arr[:] = values
    return arr


class ContributionAggregate(AggregateFn):
    """An aggregate over the latest contribution of each upstream (key, window)."""

    name = "contributions"

    def __init__(self, inner: AggregateFn):
        super().__init__(contribution_column(inner.column))
        self.inner = inner
        self.numeric = inner.numeric

    def create(self) -> Any:
        return {}

    def add_group(self, acc: Any, values: Any, ts: np.ndarray, seq: np.ndarray) -> Any:
        for c, t, s in zip(values, ts.tolist(), seq.tolist()):
            contribute(acc, c, (t, s, c.value))
        return acc

    def merge(self, a: Any, b: Any) -> Any:
        return merged_tables(a, b)

    def extract(self, acc: Any) -> Any:
        items = sorted((item for _, rows in acc.values() for item in rows), key=lambda i: (i[0], i[1]))
        ts = np.array([i[0] for i in items], dtype=np.int64)
        seq = np.array([i[1] for i in items], dtype=np.int64)
        values = None if self.inner.column in (None, "*") else value_array([i[2] for i in items])
        return self.inner.extract(self.inner.add_group(self.inner.create(), values, ts, seq))

    def describe(self) -> dict:
        return self.inner.describe()

    def __hash__(self) -> int:
        return hash(("contributions", hash(self.inner)))


class SignedAggregate(AggregateFn):
    """A sum or count in a discarding stage over restating panes: each pane's rows add, its
    retractions subtract, so the panes are the changes since the last pane (Streaming 102's
    retractions in a chained pipeline)."""

    name = "signed"
    #: the aggregates a retraction can subtract from
    INVERTIBLE = ("sum", "count")

    def __init__(self, inner: AggregateFn):
        if inner.name not in self.INVERTIBLE:
            raise ValueError(f"a discarding stage over restating panes sums or counts, not {inner.name}")
        super().__init__(contribution_column(inner.column))
        self.inner = inner
        self.numeric = inner.numeric

    def create(self) -> Any:
        return self.inner.create()

    def add_group(self, acc: Any, values: Any, ts: np.ndarray, seq: np.ndarray) -> Any:
        sign = [-1 if c.retraction else 1 for c in values]
        if self.inner.name == "count":
            counted = [g for g, c in zip(sign, values) if self.inner.column in (None, "*") or c.value is not None]
            return acc + sum(counted)
        signed = [None if c.value is None else g * c.value for g, c in zip(sign, values)]
        return self.inner.add_group(acc, value_array(signed), ts, seq)

    def merge(self, a: Any, b: Any) -> Any:
        return self.inner.merge(a, b)

    def extract(self, acc: Any) -> Any:
        return self.inner.extract(acc)

    def describe(self) -> dict:
        return self.inner.describe()

    def __hash__(self) -> int:
        return hash(("signed", hash(self.inner)))


class MergeState:
    """A merge stage's window: the merge's accumulator of plain rows, and each side's
    contributions (contributor -> (pane index, rows))."""

    __slots__ = ("plain", "contributions")

    def __init__(self, plain: Any, contributions: tuple[dict, dict]):
        self.plain = plain
        self.contributions = contributions

    def __getstate__(self):
        return (self.plain, self.contributions)

    def __setstate__(self, st):
        self.plain, self.contributions = st


class MergeAggregate(AggregateFn):
    """A merge accumulation as the engine's one aggregate of a merge stage: its value is the list
    of the pane's rows."""

    name = "merge"

    def __init__(self, merge: Any):
        super().__init__(MERGE_ROW)
        self.merge_fn = merge

    def create(self) -> Any:
        return MergeState(self.merge_fn.create_accumulator(), ({}, {}))

    def add_group(self, acc: Any, values: Any, ts: np.ndarray, seq: np.ndarray) -> Any:
        plain: tuple[list, list] = ([], [])
        for r in values:
            if r.contribution is None:
                plain[r.side].append(r.row)
            else:
                contribute(acc.contributions[r.side], r.contribution, r.row)
        acc.plain = self.add_rows(acc.plain, *plain)
        return acc

    def add_rows(self, acc: Any, left: list, right: list) -> Any:
        """Add rows to a merge's accumulator, through its vectorised forms where it has them."""
        fn = self.merge_fn
        for rows, one, many in ((left, "add_left", "add_lefts"), (right, "add_right", "add_rights")):
            if not rows:
                continue
            if hasattr(fn, many):
                acc = getattr(fn, many)(acc, pd.DataFrame(rows))
            else:
                for row in rows:
                    acc = getattr(fn, one)(acc, row)
        return acc

    def merge(self, a: Any, b: Any) -> Any:
        return MergeState(
            self.merge_fn.merge_accumulators([a.plain, b.plain]),
            (
                merged_tables(a.contributions[0], b.contributions[0]),
                merged_tables(a.contributions[1], b.contributions[1]),
            ),
        )

    def extract(self, acc: Any) -> Any:
        left, right = ([row for _, rows in table.values() for row in rows] for table in acc.contributions)
        full = acc.plain
        if left or right:
            # a fresh accumulator of the contributions first: a merge may change the first it merges
            fresh = self.add_rows(self.merge_fn.create_accumulator(), left, right)
            full = self.merge_fn.merge_accumulators([fresh, acc.plain])
        return output_rows(self.merge_fn.extract_output(full))

    def describe(self) -> dict:
        return {"merge": type(self.merge_fn).__name__}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MergeAggregate) and self.merge_fn is other.merge_fn

    def __hash__(self) -> int:
        return hash(("merge", id(self.merge_fn)))
