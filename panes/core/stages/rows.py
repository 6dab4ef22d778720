"""The rows that flow between stages, as pandas frames.

An input's rows: its records' columns, ``TS`` (event time, ms), ``SEQ`` (arrival number within the
input) and, in the core, ``RECORD`` (the original record, for its dead letter). A stage's rows: one
per pane (a merge's pane: one per row of its table) with the pane's printed columns (key, window
bounds, timing, pane index, is_last, retraction, values) and ``TS`` (the pane's event time: its
window's end minus 1 ms), its window's internal bounds (``WINDOW_START``, ``WINDOW_END``) and its
``CONTRIBUTOR`` (the pane's key and window, the identity its restatements share).
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pandas as pd

from ..engine import TS, Pane
from ..output import pane_record
from ..pipeline import Pipeline
from ..records import column_array
from ..windows import WINDOW_END, WINDOW_START

SEQ = "__seq"
RECORD = "__record"
CONTRIBUTOR = "__contributor"
#: a stage's row: the phase of the engine's step that emitted it (0 clock, 1 records, 2 watermark)
PHASE = "__phase"
#: a stage's row: its pane's ``Pane.provisional`` (a part of the stage, a Spark bucket, could not
#: decide its timing)
PROVISIONAL = "__provisional"


def contributor_id(key: tuple, start: int, end: int) -> str:
    """The identity of a (key, window): what restatements of its pane share."""
    return json.dumps([list(key), start, end], default=str)


def frame_of(records: list[dict], columns: list[str]) -> pd.DataFrame:
    """Records as a frame with these columns (a missing value is None)."""
    return pd.DataFrame({c: column_array([r.get(c) for r in records]) for c in columns}, index=range(len(records)))


def input_frame(records: list[dict], ts: list[int], first_seq: int, columns: list[str]) -> pd.DataFrame:
    """An input's valid records as rows."""
    frame = frame_of(records, columns)
    frame[TS] = np.array(ts, dtype=np.int64)
    frame[SEQ] = np.arange(first_seq, first_seq + len(records), dtype=np.int64)
    rec = np.empty(len(records), dtype=object)
    rec[:] = records
    frame[RECORD] = rec
    return frame


def pane_rows(pane: Pane, pipeline: Pipeline, table: bool) -> list[dict]:
    """A pane as printed records: one, or one per row of a merge's table (``table``)."""
    base = pane_record(pane, pipeline)
    if not table:
        return [base]
    (column,) = [a.output for a in pipeline.aggregates]
    rows = base.pop(column)
    key = set(pipeline.key)
    return [{**base, **{c: v for c, v in row.items() if c not in key}} for row in rows]


def stage_frame(
    panes: list[tuple[int, Pane]], pipeline: Pipeline, table: bool, columns: list[str]
) -> tuple[pd.DataFrame, list[dict]]:
    """A stage's panes (each with the phase that emitted it) as rows (see the module's
    docstring), in emission order, and as the records it prints."""
    records: list[dict] = []
    internal: dict[str, list] = {TS: [], WINDOW_START: [], WINDOW_END: [], CONTRIBUTOR: [], PHASE: [], PROVISIONAL: []}
    for phase, p in panes:
        rows = pane_rows(p, pipeline, table)
        end = pipeline.window.internal_end(p.window_end)
        contributor = contributor_id(p.key, p.window_start, end)
        for r in rows:
            records.append(r)
            internal[TS].append(end - 1)
            internal[WINDOW_START].append(p.window_start)
            internal[WINDOW_END].append(end)
            internal[CONTRIBUTOR].append(contributor)
            internal[PHASE].append(phase)
            internal[PROVISIONAL].append(p.provisional)
    names = list(dict.fromkeys([*columns, *(c for r in records for c in r)]))
    frame = frame_of(records, names)
    for c, values in internal.items():
        frame[c] = np.array(values, dtype=np.int64) if c != CONTRIBUTOR else column_array(values)
    return frame, records


def user_columns(frame: pd.DataFrame) -> list[str]:
    return [c for c in frame.columns if not (isinstance(c, str) and c.startswith("__"))]


def record_at(frame: pd.DataFrame, i: int) -> dict:
    """Row i as a record: the original record where the frame keeps it, else its user columns."""
    if RECORD in frame.columns:
        return frame[RECORD].iat[i]
    return {c: plain_value(frame[c].iat[i]) for c in user_columns(frame)}


def plain_value(v: Any) -> Any:
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and math.isnan(v):
        return None
    if isinstance(v, np.ndarray):
        return [plain_value(x) for x in v.tolist()]
    return v
