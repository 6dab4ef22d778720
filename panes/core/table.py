"""Tables as pane values, and a window's rows kept as columns.

A stage whose pane is a table (a window pipeline, a join) holds its window's rows in a ``RowBuffer``:
one chunk of numpy arrays per batch that added rows, never a Python object per row. Extracting the
pane turns the rows into a ``Table`` (several rows with their own columns), and the output converter
(``panes.core.output``) expands a table-valued pane into one record per row.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from .time import format_instant

Columns = dict[str, np.ndarray]


def object_array(values: Iterable[Any]) -> np.ndarray:
    """A one-dimensional object array of ``values`` (lists stay elements, not a second axis)."""
    values = list(values)
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def null_column(n: int) -> np.ndarray:
    return object_array([None] * n)


def concat_columns(parts: list[Columns], lengths: list[int]) -> Columns:
    """Chunks of columns as one set of columns: every name any chunk has, in first-seen order; a
    chunk without a column contributes nulls. Mixed types widen as numpy does (int and float to
    float, anything and text to object)."""
    names: list[str] = []
    for part in parts:
        names += [c for c in part if c not in names]
    out: Columns = {}
    for c in names:
        arrays = [part[c] if c in part else null_column(n) for part, n in zip(parts, lengths)]
        out[c] = arrays[0] if len(arrays) == 1 else np.concatenate(arrays)
    return out


def plain_value(v: Any) -> Any:
    """A table value as a plain Python value, as records carry them: numpy scalars as Python ones,
    instants as ISO-8601 text (as ``window_start``), arrays as lists, mappings with plain values."""
    if v is None or v is pd.NaT:
        return None
    if isinstance(v, np.datetime64):
        return None if np.isnat(v) else format_instant(int(v.astype("datetime64[ms]").astype(np.int64)))
    if isinstance(v, pd.Timestamp):
        return format_instant(int(v.value // 1_000_000))
    if isinstance(v, _dt.datetime):
        aware = v if v.tzinfo is not None else v.replace(tzinfo=_dt.UTC)
        return format_instant(math.floor(aware.timestamp() * 1000))
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, (np.ndarray, list, tuple)):
        return [plain_value(x) for x in v]
    if isinstance(v, Mapping):
        return {k: plain_value(x) for k, x in v.items()}
    return v


def same_value(a: Any, b: Any) -> bool:
    """Plain values equal, NaN equal to NaN."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    return bool(a == b)


def frame_column(series: pd.Series) -> np.ndarray:
    """A DataFrame column as a numpy array: numeric, boolean and instant columns as they are;
    pandas' nullable and categorical columns as objects with None for missing values."""
    dtype = series.dtype
    if isinstance(dtype, np.dtype) and dtype.kind in "biufM":
        return series.to_numpy()
    if isinstance(dtype, pd.DatetimeTZDtype):
        return series.dt.tz_convert("UTC").dt.tz_localize(None).to_numpy()
    values = series.astype(object).to_numpy()
    return object_array(None if (x is pd.NA or x is pd.NaT) else x for x in values)


def arrow_column(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """An Arrow column as a numpy array: without nulls in numpy's own type; with nulls (or nested
    values) as objects with None. A decimal of scale 0 (an embedded engine's integer sum) is an int."""
    t = column.type
    if pa.types.is_decimal(t) and t.scale == 0:
        return object_array(None if v is None else int(v) for v in column.to_pylist())
    flat = pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t) or pa.types.is_timestamp(t)
    if flat and column.null_count == 0:
        arr = column.to_numpy()
        return arr.astype("datetime64[ms]") if pa.types.is_timestamp(t) else arr
    return object_array(column.to_pylist())


class Table:
    """An immutable table: named columns (numpy arrays of one length) in order."""

    __slots__ = ("columns", "n_rows")

    def __init__(self, columns: Mapping[str, np.ndarray], n_rows: int | None = None):
        self.columns: Columns = {
            str(c): np.asarray(v) if not isinstance(v, np.ndarray) else v for c, v in columns.items()
        }
        lengths = {len(v) for v in self.columns.values()}
        if len(lengths) > 1:
            raise ValueError(f"a table's columns have one length, not {sorted(lengths)}")
        self.n_rows = lengths.pop() if lengths else (n_rows or 0)

    @classmethod
    def empty(cls, names: Iterable[str] = ()) -> Table:
        return cls({c: null_column(0) for c in names})

    @classmethod
    def from_frame(cls, frame: pd.DataFrame) -> Table:
        names = [str(c) for c in frame.columns]
        if len(set(names)) != len(names):
            raise ValueError(f"a table's column names are unique, not {names}")
        return cls({str(c): frame_column(frame[c]) for c in frame.columns}, len(frame))

    @classmethod
    def from_arrow(cls, table: pa.Table) -> Table:
        return cls({name: arrow_column(table.column(name)) for name in table.column_names}, table.num_rows)

    def __len__(self) -> int:
        return self.n_rows

    @property
    def names(self) -> list[str]:
        return list(self.columns)

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame(dict(self.columns), index=pd.RangeIndex(self.n_rows))

    def take(self, rows: np.ndarray) -> Table:
        return Table({c: v[rows] for c, v in self.columns.items()}, len(rows))

    def without(self, names: Iterable[str]) -> Table:
        drop = set(names)
        return Table({c: v for c, v in self.columns.items() if c not in drop}, self.n_rows)

    def records(self) -> list[dict]:
        """One plain mapping per row (for output and dead letters, not for computing)."""
        cols = [(c, [plain_value(x) for x in v]) for c, v in self.columns.items()]
        return [{c: vals[i] for c, vals in cols} for i in range(self.n_rows)]

    def __eq__(self, other: object) -> bool:
        """Same columns, same values (a NaN equal to a NaN: an unchanged pane)."""
        return (
            isinstance(other, Table)
            and self.n_rows == other.n_rows
            and list(self.columns) == list(other.columns)
            and same_value(self.records(), other.records())
        )

    __hash__ = None  # type: ignore[assignment]  # (unhashable: == compares values; typeshed wants a method)

    def __repr__(self) -> str:
        return f"Table({self.n_rows} rows: {', '.join(self.columns)})"


class RowBuffer:
    """A window's rows as columns: each batch's rows are one chunk (event times, arrival order and
    the record columns, numpy arrays), appended as they come."""

    __slots__ = ("chunks",)

    def __init__(self, chunks: list | None = None):
        self.chunks: list[tuple[np.ndarray, np.ndarray, Columns]] = chunks or []

    def __getstate__(self):
        return self.chunks

    def __setstate__(self, chunks):
        self.chunks = chunks

    def append(self, ts: np.ndarray, seq: np.ndarray, columns: Columns) -> RowBuffer:
        if len(ts):
            self.chunks.append((np.asarray(ts, dtype=np.int64), np.asarray(seq, dtype=np.int64), dict(columns)))
        return self

    def merged(self, other: RowBuffer) -> RowBuffer:
        return RowBuffer(self.chunks + other.chunks)

    def __len__(self) -> int:
        return sum(len(ts) for ts, _, _ in self.chunks)

    def rows(self) -> tuple[np.ndarray, np.ndarray, Columns]:
        """(event times, arrival order, columns) of every row, in event-time then arrival order.
        The chunks are consolidated into one, so the next call does not concatenate again."""
        if not self.chunks:
            return np.zeros(0, np.int64), np.zeros(0, np.int64), {}
        ts = np.concatenate([c[0] for c in self.chunks])
        seq = np.concatenate([c[1] for c in self.chunks])
        cols = concat_columns([c[2] for c in self.chunks], [len(c[0]) for c in self.chunks])
        order = np.lexsort((seq, ts))
        if not (order[1:] > order[:-1]).all():
            ts, seq, cols = ts[order], seq[order], {c: v[order] for c, v in cols.items()}
        self.chunks = [(ts, seq, cols)]
        return ts, seq, cols
