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

from . import rules
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
        checked = check_record(pipeline, rec, ingestion_time, gap_col)
        if checked.reason is not None:
            dead.append(DeadLetter(checked.reason, rec, detail=checked.detail))
            continue
        originals.append(rec)
        kept.append({**rec, gap_col: checked.gap} if gap_col is not None else rec)
        times.append(checked.time)
    cols = {TS: np.array(times, dtype=np.int64)}
    for c in frame_columns(pipeline, kept, gap_col):
        cols[c] = _column([r.get(c) for r in kept])
    return ParsedBatch(pd.DataFrame(cols), originals, dead, punct)


def frame_columns(pipeline: Pipeline, kept: list[dict], gap_col: str | None) -> list[str]:
    """The columns of a batch: the key, the aggregates' inputs and the session gap; every column of
    the records (in the order they first appear) when the windows keep their rows."""
    if pipeline.keeps_rows:
        return list(dict.fromkeys(c for r in kept for c in r if isinstance(c, str) and not c.startswith("__")))
    return list(dict.fromkeys(list(pipeline.key) + list(pipeline.value_columns) + ([gap_col] if gap_col else [])))


@dataclass
class CheckedRecord:
    """A data record's checks: the reason and detail of the first it fails (``rules.first_failure``
    in ``rules.VALIDATION_ORDER``), else its event time and session gap."""

    reason: Reason | None
    detail: str | None
    time: int
    gap: int | None


def check_record(pipeline: Pipeline, rec: dict, ingestion_time: int, gap_col: str | None) -> CheckedRecord:
    checks: list[tuple[Reason, bool, str]] = []  # (reason, passed, detail)
    t = ingestion_time
    if pipeline.event_time:
        raw = rec.get(pipeline.event_time)
        checks.append((Reason.MISSING_EVENT_TIME, raw is not None, f"no {pipeline.event_time!r}"))
        if raw is not None:
            try:
                t = parse_instant(raw)
            except ValueError as e:
                checks.append((Reason.INVALID_EVENT_TIME, False, str(e)))
    missing = [k for k in pipeline.key if rec.get(k) is None]
    checks.append((Reason.MISSING_KEY, not missing, f"no value for key column(s) {missing}"))
    numeric = {a.fn.column for a in pipeline.aggregates if a.fn.numeric and a.fn.column is not None}
    bad = [c for c in numeric if rec.get(c) is not None
           and (isinstance(rec[c], bool) or not isinstance(rec[c], numbers.Real))]
    checks.append((Reason.INVALID_VALUE, not bad, f"not a number: {sorted(bad)}"))
    gap = None
    if gap_col is not None:
        try:
            gap = parse_duration(rec.get(gap_col))
            if gap <= 0:
                raise ValueError("a session gap must be positive")
        except ValueError as e:
            checks.append((Reason.INVALID_VALUE, False, f"{gap_col}: {e}"))
    checks.sort(key=lambda c: rules.validation_rank(c[0]))
    reason = rules.first_failure([(ok, r) for r, ok, _ in checks])
    detail = rules.first_failure([(ok, d) for _, ok, d in checks])
    return CheckedRecord(reason, detail, t, gap)
