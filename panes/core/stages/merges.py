"""Merge accumulations (Apex's MergeAccumulation): how a merge stage combines the rows of its two
inputs that share a key and a window. A merge is a class with ``create_accumulator``,
``add_left(acc, row)``, ``add_right(acc, row)``, ``merge_accumulators(accs)`` and
``extract_output(acc)``, which returns the pane's rows (a list of mappings; one mapping is one row).
``add_lefts(acc, frame)`` / ``add_rights(acc, frame)`` (a pandas DataFrame of rows) are optional
vectorised forms. A row is a mapping of its input's columns; the pane's key columns come first in
the output, so an output row need not repeat them.

The built-ins (``MERGES``): ``inner`` (one row per matching pair), ``left`` (every left row, with
the matching right rows or with nulls) and ``cogroup`` (one row with a list of rows per input).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ..refs import import_ref


@dataclass(frozen=True)
class MergeSides:
    """What a merge knows of its two inputs: their names, key columns and row columns."""

    left: str
    right: str
    left_key: tuple[str, ...]
    right_key: tuple[str, ...]
    left_columns: tuple[str, ...]
    right_columns: tuple[str, ...]

    @property
    def key(self) -> tuple[str, ...]:
        """The output's key columns: the left input's."""
        return self.left_key

    def joined_names(self) -> tuple[dict[str, str], dict[str, str]]:
        """Each side's other (non-key) columns -> their output names: a name that the other side
        also has, or that is an output key column, gets its input's name and an underscore."""
        left = [c for c in self.left_columns if c not in self.left_key]
        right = [c for c in self.right_columns if c not in self.right_key]
        taken = set(self.key)

        def named(cols: list[str], side: str, other: tuple[str, ...]) -> dict[str, str]:
            return {c: f"{side}_{c}" if c in other or c in taken else c for c in cols}

        return named(left, self.left, self.right_columns), named(right, self.right, self.left_columns)


class MergeAccumulation:
    """Base of merge accumulations (subclass it, or write a class with the same methods)."""

    def create_accumulator(self) -> Any:
        raise NotImplementedError

    def add_left(self, accumulator: Any, row: Mapping) -> Any:
        raise NotImplementedError

    def add_right(self, accumulator: Any, row: Mapping) -> Any:
        raise NotImplementedError

    def merge_accumulators(self, accumulators: list) -> Any:
        raise NotImplementedError

    def extract_output(self, accumulator: Any) -> Any:
        raise NotImplementedError


class BothSides(MergeAccumulation):
    """An accumulator that keeps every row of each side (joins, cogroup)."""

    def __init__(self, sides: MergeSides):
        self.sides = sides
        self.left_names, self.right_names = sides.joined_names()

    def create_accumulator(self) -> Any:
        return ([], [])

    def add_left(self, accumulator: Any, row: Mapping) -> Any:
        accumulator[0].append(dict(row))
        return accumulator

    def add_right(self, accumulator: Any, row: Mapping) -> Any:
        accumulator[1].append(dict(row))
        return accumulator

    # (no vectorised forms: the engine holds a merge's rows as mappings already, and a frame of a
    # window's few rows costs far more to build than copying them)

    def merge_accumulators(self, accumulators: list) -> Any:
        return ([r for a in accumulators for r in a[0]], [r for a in accumulators for r in a[1]])

    def pair(self, left: Mapping, right: Mapping | None) -> dict:
        """One output row of a left row and a right row (None: nulls)."""
        out = {name: left.get(c) for c, name in self.left_names.items()}
        out.update({name: None if right is None else right.get(c) for c, name in self.right_names.items()})
        return out


class InnerJoin(BothSides):
    """One row per pair of a left and a right row."""

    def extract_output(self, accumulator: Any) -> Any:
        return [self.pair(a, b) for a in accumulator[0] for b in accumulator[1]]

    def output_columns(self) -> tuple[str, ...]:
        return (*self.left_names.values(), *self.right_names.values())


class LeftJoin(InnerJoin):
    """Every left row: with each right row, or once with nulls when there is none."""

    def extract_output(self, accumulator: Any) -> Any:
        rights = accumulator[1] or [None]
        return [self.pair(a, b) for a in accumulator[0] for b in rights]


class Cogroup(BothSides):
    """One row per key and window: a list of the rows of each input, named after the input."""

    def extract_output(self, accumulator: Any) -> Any:
        return [{self.sides.left: list(accumulator[0]), self.sides.right: list(accumulator[1])}]

    def output_columns(self) -> tuple[str, ...]:
        return (self.sides.left, self.sides.right)


MERGES: dict[str, type[BothSides]] = {"inner": InnerJoin, "left": LeftJoin, "cogroup": Cogroup}
METHODS = ("create_accumulator", "add_left", "add_right", "merge_accumulators", "extract_output")


def load_merge(ref: str) -> Any:
    """A user merge: an instance of the class (or the object) named 'package.module:Name'."""
    obj = import_ref(ref, "merge", "module:ClassName")
    merge = obj() if isinstance(obj, type) else obj
    missing = [m for m in METHODS if not callable(getattr(merge, m, None))]
    if missing:
        raise ValueError(f"merge {ref!r} has no {', '.join(m + '()' for m in missing)}")
    return merge


def output_rows(value: Any) -> list[dict]:
    """What ``extract_output`` returned, as a list of rows."""
    if value is None:
        return []
    if isinstance(value, Mapping):
        return [dict(value)]
    if isinstance(value, pd.DataFrame):
        return value.to_dict("records")
    rows = list(value)
    for r in rows:
        if not isinstance(r, Mapping):
            raise TypeError(f"a merge's extract_output returns rows (mappings), got {type(r).__name__}")
    return [dict(r) for r in rows]
