"""Plain records (mappings, as in a replay timeline) to an engine batch, with validation.

A record whose event time is missing or cannot be parsed, that lacks a key column, or whose value
for a numeric aggregate is not a number, becomes a dead letter with the reason; punctuation records
(watermark mode ``punctuation``) carry the watermark instead of data.
"""

from __future__ import annotations

import json
import numbers
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from . import rules
from .engine import TS, DeadLetter
from .pipeline import Pipeline
from .rules import Reason
from .time import EVENT_TIME_RANGE, UNIT_NAMES, parse_duration, parse_instant, unit_hint
from .windows import Sessions


@dataclass
class ParsedBatch:
    frame: pd.DataFrame
    records: list[dict]  # the original record of each frame row
    dead_letters: list[DeadLetter] = field(default_factory=list)
    punctuation: int | None = None
    #: the first numeric event time that looks like another unit than the declared one: (value, unit)
    unit_hint: tuple | None = None
    #: punctuation records (they carry the watermark, no data)
    watermark_records: int = 0


def _column(values: list) -> np.ndarray:
    return column_array(values, booleans=True)


def column_array(values: list, booleans: bool = False) -> np.ndarray:
    """A column of plain values: ints or floats typed when every value is one (``booleans``: bools
    too), else objects."""
    non_null = [v for v in values if v is not None]
    if non_null and len(non_null) == len(values):
        if booleans and all(isinstance(v, bool) for v in non_null):
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
    hint = None
    n_punct = 0
    for rec in records:
        if isinstance(rec, RawLine):
            dead.append(DeadLetter(Reason.MALFORMED, rec.text, detail=rec.problem))
            continue
        if not isinstance(rec, dict):
            dead.append(DeadLetter(Reason.MALFORMED, {"value": rec}, detail="a record must be a JSON object"))
            continue
        if hint is None and pipeline.event_time:
            raw = rec.get(pipeline.event_time)
            unit = unit_hint(raw, pipeline.time_unit)
            hint = (raw, unit) if unit else None
        if wm.punctuation and rec.get(wm.punctuation_column) is not None:
            try:
                t = event_time(rec[wm.punctuation_column], pipeline.time_unit)
            except ValueError as e:
                dead.append(DeadLetter(Reason.INVALID_WATERMARK, rec, detail=str(e)))
                continue
            punct = t if punct is None else max(punct, t)
            n_punct += 1
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
    return ParsedBatch(pd.DataFrame(cols), originals, dead, punct, hint, n_punct)


@dataclass(frozen=True)
class RawLine:
    """A line of input that is not a record (not JSON, or not a JSON object): it becomes a
    ``malformed`` dead letter that keeps its text."""

    text: str
    problem: str


def read_json_lines(lines) -> list:
    """Lines of JSON (a file's, or strings) as records: each a mapping, or a ``RawLine`` when it
    is not a JSON object. Blank lines are skipped, as Spark's JSON reader does."""
    out: list = []
    for line in lines:
        text = line.rstrip("\r\n")
        if not text.strip():
            continue
        try:
            value = json.loads(text)
        except ValueError as e:
            out.append(RawLine(text, f"not JSON: {e}"))
            continue
        out.append(value if isinstance(value, dict) else RawLine(text, "a record must be a JSON object"))
    return out


def is_key_value(v: object) -> bool:
    """Whether a key column's value can be a key: a string, a number (not NaN) or a boolean
    (None is a missing key, checked before)."""
    if v is None or isinstance(v, (str, bool, int)):
        return True
    return isinstance(v, float) and v == v


def unit_warning(pipeline: Pipeline, value: object, unit: str) -> str:
    """The one-time warning of a run whose event times look like ``unit``, not the declared one."""
    return (
        f"event_time: numbers such as {value!r} look like {UNIT_NAMES[unit]}, not {pipeline.time_unit_name} "
        f"(declare event_time: {{column: {pipeline.event_time}, unit: {unit}}})"
    )


def event_time(value: object, unit: str) -> int:
    """An event time (ms) from a record's value, numbers in ``unit``; ValueError with the reason
    when it is not a time or out of the event-time range."""
    t = parse_instant(value, unit)
    if not rules.event_time_in_range(t):
        raise ValueError(f"{value!r} is out of the event-time range ({EVENT_TIME_RANGE})")
    return t


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
                t = event_time(raw, pipeline.time_unit)
            except ValueError as e:
                checks.append((Reason.INVALID_EVENT_TIME, False, str(e)))
    missing = [k for k in pipeline.key if rec.get(k) is None]
    checks.append((Reason.MISSING_KEY, not missing, f"no value for key column(s) {missing}"))
    odd = [k for k in pipeline.key if not is_key_value(rec.get(k))]
    checks.append((Reason.INVALID_VALUE, not odd, f"key column(s) {odd}: not a string, number or boolean"))
    numeric = {a.fn.column for a in pipeline.aggregates if a.fn.numeric and a.fn.column is not None}
    bad = [
        c
        for c in numeric
        if rec.get(c) is not None and (isinstance(rec[c], bool) or not isinstance(rec[c], numbers.Real))
    ]
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
