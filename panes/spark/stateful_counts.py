"""panes' counts on the stateful plan: each call of the processor counts what it read and what it
emitted, into its count row (kind "C": ``COUNTS``, one JSON object, one column, as each output
column costs the conversion to Arrow per call). The driver sums a micro-batch's count rows, which
it collects anyway (``stateful_batch``), and hands them to ``write_stream``'s ``on_counts``; the
streaming DataFrames ``panes`` and ``dead_letters`` observe the same sums (``observed``), so that
a query the user writes from them shows them in Spark's progress (``observedMetrics["panes"]``).

A Spark observation in the stateful plan costs more than it counts (its nodes cost each
micro-batch, in planning and in the JIT, whatever they compute): ``write_stream`` has none.

The counts (``panes.core.accounting`` says what they add up to): ``records_in`` (the records read,
not panes' control or clock rows), ``watermark_records`` (punctuation records), ``counted`` and
``in_no_window`` (as the engine counted them), ``pane_rows`` and ``dead_letter_rows`` (the rows
emitted; a SQL window pipeline's panes are its query's, run by the driver: no ``pane_rows``), one
count per dead letter's reason (``malformed``, ``late``...), and the least and greatest numeric
event time (``event_time_min``/``_max``: a run warns when they look like another unit)."""

from __future__ import annotations

import json
from collections.abc import Iterable

import pandas as pd
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as ST

from ..core.rules import Reason
from .columns import EVENT_TIME_NUMBER, PUNCT
from .metrics import numeric_event_time

#: the count row's column: the call's counts as a JSON object
COUNTS = "__panes_counts"
#: the counts the driver sums (a reason's count is added only where there is one)
SUMMED = ("records_in", "watermark_records", "counted", "in_no_window", "pane_rows", "dead_letter_rows")
#: the event-time bounds: the least and the greatest
BOUNDS = {"event_time_min": min, "event_time_max": max}
#: every count's name (``observed``'s metrics)
NAMES = (*SUMMED, *(r.value for r in Reason), *BOUNDS)


def event_time_numbers(schema: ST.StructType, column: str | None) -> tuple[str | None, Column | None]:
    """The column of the event times as numbers the processor reads for their bounds (None: none),
    and the Column to add as it when it is not the record's own (a string of digits)."""
    numbers = numeric_event_time(schema, column)
    if numbers is None or column is None:
        return None, None
    if isinstance(schema[column].dataType, ST.NumericType):
        return column, None
    return EVENT_TIME_NUMBER, numbers


def read_counts(rows: pd.DataFrame, control: str | None, event_time_number: str | None) -> dict:
    """What a call read (``rows``: the micro-batch's rows of its bucket, clock rows taken out):
    the records (not ``control`` rows), the punctuation records, the event-time bounds
    (``event_time_number``: the column of the event times as numbers, if any)."""
    out: dict = {}
    if not len(rows):
        return out
    is_record = rows[control].isna() if control is not None and control in rows.columns else None
    out["records_in"] = int(is_record.sum()) if is_record is not None else len(rows)
    if PUNCT in rows.columns:
        punct = rows[PUNCT].notna()
        out["watermark_records"] = int((punct & is_record).sum() if is_record is not None else punct.sum())
    if event_time_number is not None and event_time_number in rows.columns:
        numbers = pd.to_numeric(rows[event_time_number], errors="coerce")
        if numbers.notna().any():
            out["event_time_min"], out["event_time_max"] = float(numbers.min()), float(numbers.max())
    return out


def emitted_counts(blocks: Iterable[dict], kind: str, reason: str) -> dict:
    """The pane rows and dead-letter rows of a call's output blocks, and its dead letters per reason."""
    out: dict = {"pane_rows": 0, "dead_letter_rows": 0}
    for b in blocks:
        kinds = b[kind]
        if not kinds:
            continue
        if kinds[0] == "P":
            out["pane_rows"] += len(kinds)
        elif kinds[0] == "D":
            out["dead_letter_rows"] += len(kinds)
            for r in b[reason]:
                out[r] = out.get(r, 0) + 1
    return out


def as_json(counts: dict) -> str:
    """A count row's ``COUNTS`` (zero counts left out; an event-time bound of 0 is one)."""
    kept = {k: v for k, v in counts.items() if v or (k in BOUNDS and v is not None)}
    return json.dumps(kept, separators=(",", ":"))


def add(total: dict, counts: dict | str | None) -> dict:
    """``total`` with a count row's counts (its ``COUNTS``) added."""
    for name, v in (json.loads(counts) if isinstance(counts, str) else counts or {}).items():
        if v is None:
            continue
        bound = BOUNDS.get(name)
        if bound is not None:
            total[name] = v if total.get(name) is None else bound(total[name], v)
        else:
            total[name] = total.get(name, 0) + v
    return total


def observed(counts: Column) -> list[Column]:
    """The sums of a micro-batch's count rows (``counts``: their ``COUNTS``; other rows null) as
    Spark observed metrics: the names as ``add`` gives them, every reason's count."""

    def field(name: str) -> Column:
        return F.get_json_object(counts, f"$.{name}")

    sums = [F.coalesce(F.sum(field(n).cast("long")), F.lit(0)).alias(n) for n in NAMES if n not in BOUNDS]
    least, greatest = (field(n).cast("double") for n in BOUNDS)
    return [*sums, F.min(least).alias("event_time_min"), F.max(greatest).alias("event_time_max")]
