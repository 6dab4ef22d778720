"""The ingest protocol: how a window family's strategy adds a batch's rows to a key's windows.

The engine hands a strategy the batch as arrays (``BatchRows``) and collects what it did
(``Ingested``): the rows that missed closed windows (they become dead letters) and the windows
that got rows (their triggers are evaluated after the whole batch). A strategy changes windows
only through ``WindowOps``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import numpy as np
import pandas as pd

from ..rules import Reason
from ..windows import Window
from .state import DeadLetter, EngineState

if TYPE_CHECKING:
    from ..windows import WindowFn
    from .window_ops import WindowOps


@dataclass
class BatchRows:
    """A batch's valid rows as arrays, and the watermark and clock it is ingested at."""

    frame: pd.DataFrame
    ts: np.ndarray  # event time (int64 ms)
    seq: np.ndarray  # arrival order across the engine's life
    values: dict[str, np.ndarray]  # the aggregates' input columns
    codes: np.ndarray  # each row's key, as an index into ``keys``
    keys: list[tuple]
    watermark: int
    processing_time: int


@dataclass
class Ingested:
    """What a strategy did with a batch: rows that missed windows (row -> the windows), the rows
    among them that missed an expired window (``late``; the others missed only windows whose
    trigger had finished), the (key, window) pairs that got rows, in order, the rows added to a
    window, and how many rows are in no window (a hopping gap)."""

    missed: dict[int, list[Window]] = field(default_factory=dict)
    late: set[int] = field(default_factory=set)
    touched: list[tuple[tuple, Window]] = field(default_factory=list)
    added: list[np.ndarray] = field(default_factory=list)
    in_no_window: int = 0

    def miss(self, row: int, *windows: Window, closed: bool = False) -> None:
        """The row missed these windows: expired ones, or (``closed``) ones whose trigger had
        finished (Beam drops those too: ``droppedDueToClosedWindow``)."""
        self.missed.setdefault(row, []).extend(windows)
        if not closed:
            self.late.add(row)

    def touch(self, key: tuple, window: Window, rows: np.ndarray) -> None:
        """``rows`` (batch row indices) were added to ``window`` of ``key``."""
        self.touched.append((key, window))
        self.added.append(rows)

    def counted(self, n: int) -> int:
        """How many of the batch's ``n`` rows count in a window and missed none (a row late for
        some of its windows is a dead letter, counted in the others: the accounting counts it
        among the dead letters)."""
        mask = np.zeros(n, dtype=bool)
        for rows in self.added:
            mask[rows] = True
        if self.missed:
            mask[np.fromiter(self.missed, dtype=np.int64, count=len(self.missed))] = False
        return int(mask.sum())


class IngestStrategy(Protocol):
    """Adds a batch's rows to the windows of one window family (``WindowFn.family``)."""

    def __init__(self, window: WindowFn, ops: WindowOps) -> None: ...

    def ingest(self, state: EngineState, rows: BatchRows, out: Ingested) -> None:
        """Add the rows to their keys' windows in ``state.keys`` (lateness against
        ``rows.watermark``), recording in ``out`` what missed and what got rows."""

    def purge(self, state: EngineState) -> None:
        """Drop what the family keeps beside the windows once the watermark made it useless."""


def key_codes(batch: pd.DataFrame, key_columns: Sequence[str]) -> tuple[np.ndarray, list[tuple]]:
    """Each row's key as a code, and the key tuple of each code (plain Python values)."""
    cols = list(key_columns)
    if not cols:
        return np.zeros(len(batch), dtype=np.int64), [()]
    if len(cols) > 1:
        codes, uniques = pd.factorize(pd.MultiIndex.from_frame(batch[cols]))
        keys = [tuple(u) for u in uniques]
    else:
        codes, uniques = pd.factorize(batch[cols[0]])
        keys = [(u,) for u in uniques]
    return codes, [tuple(v.item() if isinstance(v, np.generic) else v for v in k) for k in keys]


def late_letters(
    ingested: Ingested,
    batch: pd.DataFrame,
    watermark: int,
    record_of: Callable[[int], dict | str] | None,
    report_end: Callable[[int], int],
) -> list[DeadLetter]:
    """The dead letters of rows that missed windows, in row order, naming the windows: ``late``
    when one of them had expired, else ``window_closed``."""
    out = []
    for i in sorted(ingested.missed):
        record = record_of(i) if record_of else row_record(batch, i)
        ws = tuple(sorted(set(ingested.missed[i])))
        reason = Reason.LATE if i in ingested.late else Reason.WINDOW_CLOSED
        out.append(DeadLetter(reason, record, watermark, tuple((s, report_end(e)) for s, e in ws)))
    return out


def row_record(batch: pd.DataFrame, i: int) -> dict:
    """Row i of a batch as a record (without the engine's own columns)."""
    row = batch.iloc[i]
    out = {}
    for c, v in row.items():
        if isinstance(c, str) and c.startswith("__"):
            continue
        if isinstance(v, np.generic):
            v = v.item()
        elif isinstance(v, pd.Timestamp):
            v = v.isoformat()
        elif v is not None and isinstance(v, float) and math.isnan(v):
            v = None
        out[c] = v
    return out
