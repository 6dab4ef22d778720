"""Plain records (mappings, as in a replay timeline) to an engine batch, with validation.

A record whose event time is missing or cannot be parsed, that lacks a key column, or whose value
for a numeric aggregate is not a number, becomes a dead letter with the reason; punctuation records
(watermark mode ``punctuation``) carry the watermark instead of data.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .engine import TS, DeadLetter
from .pipeline import Pipeline
from .rules import Reason
from .time import parse_duration, parse_instant
from .windows import Sessions


@dataclass
class ParsedBatch:
    frame: pd.DataFrame
    records: list[dict]  # the original record of each frame row
    dead_letters: list[DeadLetter] = field(default_factory=list)
    punctuation: int | None = None


def _column(values: list) -> np.ndarray:
    non_null = [v for v in values if v is not None]
    if non_null and len(non_null) == len(values):
        if all(isinstance(v, bool) for v in non_null):
            return np.array(values, dtype=bool)
        if all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in non_null):
            return np.array(values, dtype=np.int64)
        if all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in non_null):
            return np.array(values, dtype=np.float64)
    arr = np.empty(len(values), dtype=object)
    arr[:] = values
    return arr


def parse_records(pipeline: Pipeline, records: list[dict], ingestion_time: int) -> ParsedBatch:
    key_cols = pipeline.key
    numeric = {a.fn.column for a in pipeline.aggregates if a.fn.numeric}
    wm = pipeline.watermark
    dead: list[DeadLetter] = []
    kept: list[dict] = []
    originals: list[dict] = []
    times: list[int] = []
    punct: int | None = None
    gap_col = pipeline.window.gap_column if isinstance(pipeline.window, Sessions) else None
    for rec in records:
        if not isinstance(rec, dict):
            dead.append(DeadLetter(Reason.MALFORMED, {"value": rec}, detail="a record must be a JSON object"))
            continue
        if wm.punctuation and rec.get(wm.punctuation_column) is not None:
            try:
                t = parse_instant(rec[wm.punctuation_column])
            except ValueError as e:
                dead.append(DeadLetter(Reason.INVALID_WATERMARK, rec, detail=str(e)))
                continue
            punct = t if punct is None else max(punct, t)
            continue
        if pipeline.event_time:
            raw = rec.get(pipeline.event_time)
            if raw is None:
                dead.append(DeadLetter(Reason.MISSING_EVENT_TIME, rec, detail=f"no {pipeline.event_time!r}"))
                continue
            try:
                t = parse_instant(raw)
            except ValueError as e:
                dead.append(DeadLetter(Reason.INVALID_EVENT_TIME, rec, detail=str(e)))
                continue
        else:
            t = ingestion_time
        missing = [k for k in key_cols if rec.get(k) is None]
        if missing:
            dead.append(DeadLetter(Reason.MISSING_KEY, rec, detail=f"no value for key column(s) {missing}"))
            continue
        bad = [c for c in numeric if rec.get(c) is not None
               and (isinstance(rec[c], bool) or not isinstance(rec[c], numbers.Real))]
        if bad:
            dead.append(DeadLetter(Reason.INVALID_VALUE, rec, detail=f"not a number: {sorted(bad)}"))
            continue
        if gap_col is not None:
            try:
                g = parse_duration(rec.get(gap_col))
                if g <= 0:
                    raise ValueError("a session gap must be positive")
            except ValueError as e:
                dead.append(DeadLetter(Reason.INVALID_VALUE, rec, detail=f"{gap_col}: {e}"))
                continue
            originals.append(rec)
            rec = {**rec, gap_col: g}
        else:
            originals.append(rec)
        kept.append(rec)
        times.append(t)
    cols = {TS: np.array(times, dtype=np.int64)}
    for c in list(key_cols) + list(pipeline.value_columns) + ([gap_col] if gap_col else []):
        cols[c] = _column([r.get(c) for r in kept])
    return ParsedBatch(pd.DataFrame(cols), originals, dead, punct)
