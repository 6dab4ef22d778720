"""A window pipeline: the stage's "what" when its pane is a table. Each window keeps its rows as
columns (a ``RowBuffer``, its accumulator); a pane hands them to a transform (SQL, a pandas
function), whose output table is the pane's value.

The rows a transform gets are the window's records in event-time, then arrival order: every record
column, plus ``window_start`` and ``window_end`` (instants; null for the global window). A pane over
no rows (a discarding pane with nothing new since the last) runs no transform: its table is empty.
A transform that fails raises ``WindowPipelineFailed`` with the error and the rows' records.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pandas as pd

from ..aggregates import AggregateFn
from ..table import Columns, RowBuffer, Table, object_array
from .sql_rewrite import ROW_SEQ, ROW_TS

#: the window bounds as columns of the rows a transform reads
WINDOW_COLUMNS = ("window_start", "window_end")


@dataclass(frozen=True)
class PaneWindow:
    """The window (and key) a pane is of: bounds as reported (``window_end`` of a KIP-450 window is
    its last instant); None for the global window."""

    key: tuple
    start: int | None
    end: int | None


class WindowPipelineFailed(Exception):
    """A transform failed on a window: ``detail`` says how, ``records`` are the rows it ran over."""

    def __init__(self, detail: str, records: list[dict]):
        super().__init__(detail)
        self.detail = detail
        self.records = records


@dataclass
class WindowRows:
    """A window's rows as a transform gets them."""

    window: PaneWindow
    ts: np.ndarray
    seq: np.ndarray
    columns: Columns

    def __len__(self) -> int:
        return len(self.ts)

    @property
    def names(self) -> list[str]:
        """What ``rows`` shows: the record columns, then the window bounds."""
        return [c for c in self.columns if c not in WINDOW_COLUMNS] + list(WINDOW_COLUMNS)

    def bound(self, ms: int | None) -> np.ndarray:
        n = len(self.ts)
        if ms is None:
            return object_array([None] * n)
        return np.full(n, np.datetime64(ms, "ms"))

    def table_columns(self) -> Columns:
        """The columns of ``rows``: the bounds as instants (datetime64[ms], UTC)."""
        cols = {c: v for c, v in self.columns.items() if c not in WINDOW_COLUMNS}
        cols["window_start"] = self.bound(self.window.start)
        cols["window_end"] = self.bound(self.window.end)
        return cols

    def frame(self) -> pd.DataFrame:
        """The rows as a pandas DataFrame (a copy: the function may change it); the window bounds
        are UTC timestamps."""
        frame = pd.DataFrame({c: v.copy() for c, v in self.table_columns().items()})
        for c in WINDOW_COLUMNS:
            if frame[c].dtype.kind == "M":
                frame[c] = frame[c].dt.tz_localize("UTC")
        return frame

    def records(self) -> list[dict]:
        """The rows as records (record columns only, without nulls, as a dead letter holds them)."""
        table = Table({c: v for c, v in self.columns.items()}, len(self.ts))
        return [{c: v for c, v in r.items() if v is not None} for r in table.records()]


class Transform(Protocol):
    """What a window pipeline does with a window's rows (one registry entry per spec form)."""

    #: the spec key (``window_pipeline: {kind: argument}``)
    kind: str

    def run(self, rows: WindowRows) -> Table: ...

    def describe(self) -> Any:
        """The spec argument (``window_pipeline: {kind: describe()}``)."""


class KeepRows:
    """The window's rows as they are, with their event time and arrival order (``ROW_TS``,
    ``ROW_SEQ``): the transform of an engine that runs the pipeline itself over the rows of many
    panes at once (Spark runs a window pipeline's SQL natively over the rows its stateful plan's
    windows keep)."""

    kind = "rows"

    def run(self, rows: WindowRows) -> Table:
        return Table({**rows.columns, ROW_TS: rows.ts, ROW_SEQ: rows.seq}, len(rows))

    def describe(self) -> None:
        return None


def one_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text}"[:500] if text else type(error).__name__


class WindowPipeline(AggregateFn):
    """The accumulator of a table-valued stage: the window's rows (``RowBuffer``), extracted through
    a transform. It reads every record column."""

    name = "window_pipeline"

    def __init__(self, transform: Transform):
        super().__init__(None)
        self.transform = transform

    def input(self, values: dict, rows: np.ndarray) -> Any:
        return {c: v[rows] for c, v in values.items()}

    def create(self) -> RowBuffer:
        return RowBuffer()

    def add_group(self, acc: Any, values: Any, ts: np.ndarray, seq: np.ndarray) -> Any:
        return acc.append(ts, seq, values)

    def merge(self, a: Any, b: Any) -> Any:
        return a.merged(b)

    def extract(self, acc: Any) -> Any:
        raise TypeError("a window pipeline's pane needs its window: extract_window")

    def extract_window(self, acc: Any, window: PaneWindow) -> Table:
        """The pane's table: the transform over the window's rows (none: an empty table)."""
        ts, seq, cols = acc.rows()
        if not len(ts):
            return Table.empty()
        rows = WindowRows(window, ts, seq, cols)
        try:
            return self.transform.run(rows)
        except Exception as e:  # the user's SQL or function: the window's rows go to the dead letters
            raise WindowPipelineFailed(one_line(e), rows.records()) from None

    def core_refusal(self) -> str | None:
        """Why the core engine cannot run this pipeline (Spark can), or None."""
        refusal = getattr(self.transform, "core_refusal", None)
        return refusal() if refusal is not None else None

    def describe(self) -> dict:
        options = getattr(self.transform, "describe_options", None)
        return {self.transform.kind: self.transform.describe(), **(options() if options is not None else {})}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, WindowPipeline) and self.describe() == other.describe()

    def __hash__(self) -> int:
        return hash(repr(self.describe()))
