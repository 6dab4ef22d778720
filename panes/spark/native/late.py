"""The late split of a step: its rows checked against the watermark from before the step. The rows
whose windows have all expired are dead letters (once, naming the windows they missed; they count
in their other windows), as are the malformed ones; the others go on to their windows."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ...core import rules
from ...core.rules import Reason
from ...core.time import END_OF_INPUT, MIN_TIME
from ..columns import CLOCK, DETAIL, INVALID, NUM, PUNCT, SEQ, TS, WMARK, record_json
from ..ops import COLUMN
from ..record_files import REFERENCES
from .expressions import constants
from .names import (
    IS_DEAD_LETTER,
    LATEST_STAMP,
    MISSED_WINDOWS,
    RECORD_JSON,
    ROW_COUNTS,
    ROW_IN_WINDOW,
    ROW_MALFORMED,
    ROW_TIME,
    ROW_VALUE,
    ROW_WATERMARK,
    ROW_WINDOW_END,
    ROW_WINDOW_EXPIRY,
    ROW_WINDOW_START,
    STEP_NUMBER,
    WATERMARK_BEFORE,
    WINDOW_END,
    WINDOW_START,
)

if TYPE_CHECKING:
    from .step import NativeStep

_WINDOWS = "array<struct<s:long,e:long>>"


class LateSplit:
    """A step's rows, on time (to their windows) or dead letters."""

    def __init__(self, step: NativeStep):
        self.step = step

    def values(self, cols: dict[str, Column] | None = None) -> dict[str, Column]:
        """The value columns (``read_values``) as the aggregates read them: numbers read from
        strings (``NUM`` columns, or their expressions in ``cols``); NaN counts as no value, as
        null does in the core."""
        s = self.step
        fixed = {c: (cols or {}).get(NUM + c, F.col(NUM + c)) for c in s.numeric_strings}
        fixed.update({c: F.col(c) for c in s.float_values})
        return {c: F.when(~F.isnan(v), v) for c, v in fixed.items()}

    def arrival(self, step_number: Column) -> dict[str, Column]:
        """A row's arrival order (the step's number, then position), for the aggregates that
        break event-time ties by it (first, last, collect_list); none for the others."""
        if not self.step.ordered:
            return {}
        return {SEQ: F.struct(step_number.alias("b"), F.monotonically_increasing_id().alias("i"))}

    def record(self) -> Column:
        """A row's record (its input columns) as JSON, for the dead letters."""
        return record_json(self.step.record_columns, self.step.schema)

    def row_columns(self) -> dict[str, Column]:
        """The columns of a stream's prepared rows that no watermark changes (``names.ROW_*``;
        ROW_WATERMARK), added in the stream's own plan: Spark analyses that once, when the query
        starts, where each micro-batch's plan is analysed anew, at a cost that grows with its
        expressions. ``on_time`` reads them."""
        s = self.step
        data = F.col(PUNCT).isNull() & F.col(CLOCK).isNull()
        # (a row without event time is assigned at 0: Spark's window() drops null times)
        ts = F.coalesce(F.col(TS), F.lit(0).cast("long"))
        ok = data & F.col(INVALID).isNull()
        bad = data & F.col(INVALID).isNotNull()
        cols = {
            ROW_WATERMARK: F.unix_millis(F.col(WMARK)),
            ROW_TIME: ts,
            ROW_COUNTS: ok,
            ROW_MALFORMED: bad,
            **{ROW_VALUE + c: v for c, v in self.values().items()},
        }
        if s.never_late and s.records is None:
            cols[RECORD_JSON] = F.when(bad, self.record())
        if not s.windows.several_per_row:  # (several windows per row: exploded in each micro-batch)
            one = s.windows.row_window(ts)
            cols.update(
                {
                    ROW_WINDOW_START: one[WINDOW_START],
                    ROW_WINDOW_END: one[WINDOW_END],
                    ROW_WINDOW_EXPIRY: s.expiry(one[WINDOW_END]),
                    ROW_IN_WINDOW: ok & one[WINDOW_END].isNotNull(),
                }
            )
        return cols

    def stream_columns(self, names: list[str]) -> list[str]:
        """The columns of the prepared stream (``names``) a step reads: the record's and panes'
        own (for a ``never_late`` stream, with ``RECORD_JSON``, and for one whose records are read
        back from their files, with their references (``record_files``), only those of the record
        the pipeline reads: key, values, what the windows read), but not those that
        ``row_columns()`` stand for (event time, punctuation, clock, Spark's watermark column,
        numbers read from strings). The rows reach ``run`` through foreachBatch as an RDD: every
        column of the stream's plan is computed and copied for every row, whichever the step
        reads. The source's reader still reads what ``RECORD_JSON`` needs."""
        s = self.step
        read = {*s.p.key, *s.p.value_columns, *s.windows.read_columns()}
        whole = not s.never_late and s.records is None
        return [
            c
            for c in names
            if c not in (TS, PUNCT, CLOCK, WMARK)
            and not c.startswith(NUM)
            and (whole or c.startswith("__panes") or c in read)
        ]

    def on_time(self, rows: DataFrame, wm: int, step_number: int = 0) -> DataFrame:
        """A stream step's prepared rows (with ``row_columns()``), a row per (row, window) for
        the windows they count in. ``step_number`` orders arrivals across steps. Every row stays,
        with ROW_WATERMARK and IS_DEAD_LETTER (1: malformed, or late in that window); a row that
        counts in no window has null key and window bounds, so that the grouping collects the
        step's watermark and dead-letter flag in one more group, in the same pass over the rows
        (``NativeStep.combine(..., metrics=True)``); and WATERMARK_BEFORE, the watermark ``wm``.
        (Bounded input: ``on_time_bounded``.)"""
        s = self.step
        # never_late: a stamp before the latest one (the system clock set back) counts as that
        # one (``rules.ingestion_stamp``), as on the stateful plan and in the core's replay;
        # its window then is the latest stamp's
        latest = wm + s.delay if s.never_late and MIN_TIME < wm < END_OF_INPUT else None
        # (the step's values as columns, not literals: see ``expressions``)
        rows = constants(
            rows,
            {
                WATERMARK_BEFORE: wm,
                **({LATEST_STAMP: latest} if latest is not None else {}),
                **({STEP_NUMBER: step_number} if s.ordered else {}),
            },
        )
        moved, clamped = wm > MIN_TIME, latest is not None
        # (the columns depend on no value of the step: built once, ``NativeStep.memo``, as each
        # Column costs JVM round trips)
        marks, window_columns = s.memo(("on_time", moved, clamped), lambda: self._on_time_columns(moved, clamped))
        good = self._windows(rows, marks, clamped)
        return good.withColumns(window_columns)

    def _on_time_columns(self, moved: bool, clamped: bool) -> tuple[dict[str, Column], dict[str, Column]]:
        """``on_time``'s columns: the marks (event time, arrival) that the window assignment of
        several windows per row adds, and those of the step that follows it. ``moved``: the
        watermark before the step has a value (WATERMARK_BEFORE); ``clamped``: see ``_windows``."""
        s = self.step
        ts = F.col(ROW_TIME)
        if clamped:
            ts = rules.ingestion_stamp(ts, F.col(LATEST_STAMP), COLUMN)
        marks = {TS: ts, **self.arrival(F.col(STEP_NUMBER))}
        in_window, start, end, expiry = self._window_of_row(clamped)
        expired = expiry <= F.col(WATERMARK_BEFORE) if moved else F.lit(False)
        late, keep = in_window & expired, in_window & ~expired
        cols = {
            **({} if s.windows.several_per_row else marks),
            **{k: F.when(keep, F.col(k)) for k in s.p.key},
            WINDOW_START: F.when(keep, start),
            WINDOW_END: F.when(keep, end),
        }
        cols.update(
            {c: F.when(keep, F.col(ROW_VALUE + c)) if c in cols else F.col(ROW_VALUE + c) for c in s.read_values}
        )
        cols[IS_DEAD_LETTER] = F.when(F.col(ROW_MALFORMED) | late, 1).otherwise(0)
        return marks, cols

    def _windows(self, rows: DataFrame, marks: dict[str, Column], clamped: bool) -> DataFrame:
        """``on_time``'s rows with their windows: as they are for one window per row (its bounds
        are among ``row_columns()``), else exploded with the ``marks`` added in the same step."""
        s = self.step
        plan = s.windows
        if not plan.several_per_row:  # (no step of its own: each costs an analysis)
            return rows
        # (built once: the names Spark gives the variables of lambda functions are new each
        # time, and are in its generated code)
        ts = marks[TS]
        starts = s.memo(("starts", clamped), lambda: plan.starts(ts))
        return plan.assign(rows, keep_all=True, extra=marks, ts=ts, starts=starts)

    def _window_of_row(self, clamped: bool) -> tuple[Column, ...]:
        """(in a window, start, end, expiry) of each row's window after ``_windows``. ``clamped``:
        ingestion stamps count as LATEST_STAMP at least."""
        s = self.step
        plan = s.windows
        # (the rows carry row_columns(): only what the watermark decides is computed here)
        if plan.several_per_row:
            return (F.col(ROW_COUNTS), F.col(WINDOW_START), F.col(WINDOW_END), s.expiry(F.col(WINDOW_END)))
        window = (F.col(ROW_IN_WINDOW), F.col(ROW_WINDOW_START), F.col(ROW_WINDOW_END), F.col(ROW_WINDOW_EXPIRY))
        if not clamped:
            return window
        # a clamped stamp's window is the latest stamp's
        back, at = F.col(ROW_TIME) < F.col(LATEST_STAMP), plan.row_window(F.col(LATEST_STAMP))
        in_window = F.when(back, F.col(ROW_COUNTS) & at[WINDOW_END].isNotNull()).otherwise(window[0])
        start = F.when(back, at[WINDOW_START]).otherwise(window[1])
        end = F.when(back, at[WINDOW_END]).otherwise(window[2])
        return in_window, start, end, F.when(back, s.expiry(at[WINDOW_END])).otherwise(window[3])

    def on_time_bounded(self, rows: DataFrame, cols: dict[str, Column], counts: Column) -> DataFrame:
        """``on_time`` of bounded input from an empty state, on the input's own rows: ``cols``
        and ``counts`` are the engine's columns as expressions and the test of a row that counts
        (``planner.engine_columns``), written into a filter and one projection (each DataFrame
        step costs an analysis of the plan, which grows with the columns added before it)."""
        plan = self.step.windows
        ts = cols[TS]
        new = {TS: ts, **self.arrival(F.lit(0).cast("long")), **self.values(cols)}
        if plan.several_per_row:  # exploded in a step of their own
            return plan.assign(rows.filter(counts), extra=new, ts=ts)
        one = plan.row_window(ts)
        if plan.has_gaps:
            counts = counts & one[WINDOW_END].isNotNull()  # (a row in a gap has no window)
        return rows.filter(counts).withColumns({**new, **one})

    def dead_letters(self, rows: DataFrame, wm: int, stream: bool = False) -> DataFrame:
        """The dead letters of a step's prepared rows: the malformed ones, and the late ones, each
        once, naming the windows that expired before it came (it counts in its other windows).
        ``stream``: the rows are a stream's (``stream_columns``, with ``row_columns()``)."""
        moved = wm > MIN_TIME
        c = self.step.memo(("dead", moved, stream), lambda: self._dead_letter_columns(moved, stream))
        data = rows.filter(c["data"])
        if moved:  # (not a literal: see ``expressions``)
            data = constants(data, {WATERMARK_BEFORE: wm})
        if c["missed"] is not None:
            dead = data.withColumn(MISSED_WINDOWS, c["missed"]).filter(c["dead"])
        else:
            dead = data.filter(c["dead"]).withColumn(MISSED_WINDOWS, F.lit(None).cast(_WINDOWS))
        out, records = c["out"], self.step.records
        if out["record"] is not None or records is None:
            return dead.select(*[e.alias(n) for n, e in out.items()])
        # (the records read back from their files, in the same place among the columns)
        given = dead.select(*REFERENCES, *[e.alias(n) for n, e in out.items() if e is not None])
        return records.with_records(given, self.record, "record").select(*out)

    def _dead_letter_columns(self, moved: bool, stream: bool) -> dict:
        """The columns of ``dead_letters`` (built once, ``NativeStep.memo``: the names Spark gives
        the variables of their lambda functions are new each time, and are in its generated code).
        ``moved``: the watermark has a value (WATERMARK_BEFORE)."""
        s = self.step
        valid = F.col(INVALID).isNull()
        late = moved and not s.never_late  # (never_late: only malformed rows)
        report = s.p.window.report_end
        # (a valid row has its event time: ROW_TIME is it)
        data, ts = (
            (F.col(ROW_COUNTS) | F.col(ROW_MALFORMED), F.col(ROW_TIME))
            if stream
            else (F.col(PUNCT).isNull() & F.col(CLOCK).isNull(), F.col(TS))
        )
        wm, missed = F.col(WATERMARK_BEFORE), None
        if late:
            al = s.p.allowed_lateness
            expired = F.filter(s.windows.window_array(ts), lambda w: rules.is_expired(w["e"], al, wm, COLUMN))
            missed = F.when(valid, expired)
        watermark = F.when(valid, F.timestamp_millis(wm)) if moved else F.lit(None).cast("timestamp")
        return {
            "data": data,
            "missed": missed,
            "dead": ~valid | (F.size(MISSED_WINDOWS) > 0) if late else ~valid,
            # (a dead letter's columns, in order; a record read back from its file: none here)
            "out": {
                "reason": F.coalesce(F.col(INVALID), F.lit(Reason.LATE.value)),
                "record": None if stream and s.records else F.col(RECORD_JSON) if s.never_late else self.record(),
                "watermark": watermark,
                "windows": F.transform(
                    MISSED_WINDOWS,
                    lambda w: F.struct(
                        F.timestamp_millis(w["s"]).alias("start"), F.timestamp_millis(report(w["e"])).alias("end")
                    ),
                ),
                "detail": F.when(~valid, F.col(DETAIL)),
            },
        }
