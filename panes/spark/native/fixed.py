"""Fixed windows on the native plans: tumbling, hopping (overlapping or with gaps) and the global
window. Their bounds follow from the row's time alone, so a window's partials merge whichever steps
made them: a step groups its rows with the kept windows, or (``capability.appends``) adds them as a
table of their own."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ...core import rules
from ...core.time import MAX_TIME, MIN_TIME
from ...core.windows import Hopping, Tumbling
from .names import CREATED_LATE, WATERMARK_BEFORE, WINDOW_END, WINDOW_START
from .windows import WindowPlan

if TYPE_CHECKING:
    from .step import NativeStep


def _since_offset(ts: Column, offset: int) -> Column:
    """The time since the windows' alignment (Spark's optimizer keeps a subtraction of 0)."""
    return ts - F.lit(offset) if offset else ts


def _long(value: int) -> Column:
    return F.lit(value).cast("long")


class FixedPlan(WindowPlan):
    """Windows whose bounds follow from a row's time; merged by a grouping."""

    def combine(
        self, step: NativeStep, rows: DataFrame, state: DataFrame | None, wm: int, metrics: list[str]
    ) -> DataFrame:
        """The default trigger (after_watermark with counts: ``firing``): the kept windows and the
        rows in one grouping, each row as its own partial, so one shuffle (Spark combines the
        rows map-side before it); without kept windows, the rows' partials. A window comes into
        being late when the watermark before the step had passed its end."""
        if step.firing is not None:
            return step.firing.combine(rows, state, wm, metrics)
        # (the columns depend on no value of the step: built once, ``NativeStep.memo``, as each
        # Column costs JVM round trips)
        fresh, moved = state is None, wm > MIN_TIME
        c = step.memo(
            ("fixed", fresh, moved, tuple(metrics)), lambda: self._combine_columns(step, fresh, moved, metrics)
        )
        if state is None:  # (the grouping's columns come out in the state's order)
            return rows.groupBy(*c["group"]).agg(*c["agg"])
        return self.merged(step, state.unionByName(rows.select(*c["partials"])), metrics)

    def _combine_columns(self, step: NativeStep, fresh: bool, moved: bool, metrics: list[str]) -> dict[str, list]:
        """``combine``'s columns: without kept windows (``fresh``), the rows' grouping and its
        aggregates; else the rows as partials. ``moved``: the watermark before the step has a
        value (WATERMARK_BEFORE)."""
        key = list(step.p.key)
        if fresh:
            group, bounds = self.grouping(not metrics, bool(key))
            end = bounds[WINDOW_END] if WINDOW_END in bounds else F.col(WINDOW_END)
            created_late = rules.end_passed(end, F.max(WATERMARK_BEFORE)) if moved else F.lit(False)
            return {
                "group": [*key, *group],
                "agg": [
                    *[bounds[c].alias(c) for c in (WINDOW_START, WINDOW_END) if c in bounds],
                    created_late.alias(CREATED_LATE),
                    *[e.alias(n) for pt in step.parts for n, e in zip(pt.names, pt.of_rows)],
                    *[F.max(c).alias(c) for c in metrics],
                ],
            }
        # (the columns in the state's order: each DataFrame step costs an analysis of the plan)
        created_late = rules.end_passed(F.col(WINDOW_END), F.col(WATERMARK_BEFORE)).alias(CREATED_LATE)
        one_row = [c for pt in step.parts for c in pt.one_row]
        return {"partials": [*key, WINDOW_START, WINDOW_END, created_late, *one_row, *metrics]}

    def merged(self, step: NativeStep, partials: DataFrame, metrics: list[str] | None = None) -> DataFrame:
        """Windows whose partials are in several rows (kept windows and rows, or the tables of
        several steps: ``output.Output.due``), merged per (key, window): created late when all
        were. ``metrics``: columns merged by their maximum."""
        names = tuple(metrics or ())
        c = step.memo(("merged", names), lambda: self._merged_columns(step, names))
        return partials.groupBy(*c["group"]).agg(*c["agg"])

    def _merged_columns(self, step: NativeStep, metrics: tuple[str, ...]) -> dict[str, list]:
        group, bounds = self.grouping(False, bool(step.p.key))
        return {
            "group": [*step.p.key, *group],
            "agg": [
                *[bounds[c].alias(c) for c in (WINDOW_START, WINDOW_END) if c in bounds],
                F.bool_and(CREATED_LATE).alias(CREATED_LATE),
                *[c for pt in step.parts for c in pt.merge],
                *[F.max(c).alias(c) for c in metrics],
            ],
        }


class TumblingPlan(FixedPlan):
    window: Tumbling

    def row_window(self, ts: Column) -> dict[str, Column]:
        w = self.window
        start = ts - F.pmod(_since_offset(ts, w.offset), F.lit(w.size))
        return {WINDOW_START: start, WINDOW_END: start + F.lit(w.size)}

    def grouping(self, constant_bounds: bool, keyed: bool) -> tuple[list[str], dict[str, Column]]:
        """A window's end from its start (not shuffled)."""
        return [WINDOW_START], {WINDOW_END: F.col(WINDOW_START) + F.lit(self.window.size)}


class HoppingPlan(FixedPlan):
    window: Hopping

    def __init__(self, window: Hopping):
        super().__init__(window)
        self.several_per_row = window.hop < window.size
        self.has_gaps = window.hop > window.size

    def starts(self, ts: Column) -> Column:
        """The last start at or before ``ts`` and those one hop, two hops... before it (empty in
        a gap)."""
        w = self.window
        last = ts - F.pmod(_since_offset(ts, w.offset), F.lit(w.hop))
        starts = F.array(*[last - F.lit(j * w.hop) for j in reversed(range(w.windows_per_record))])
        # (every start holds the row when the size is a multiple of the hop)
        return F.filter(starts, lambda s: s + F.lit(w.size) > ts) if w.size % w.hop else starts

    def end_of(self, start: Column) -> Column:
        return start + F.lit(self.window.size)

    def row_window(self, ts: Column) -> dict[str, Column]:
        """hop >= size: at most one window per row (null in a gap)."""
        w = self.window
        start = ts - F.pmod(_since_offset(ts, w.offset), F.lit(w.hop))
        end = start + F.lit(w.size)
        if not self.has_gaps:
            return {WINDOW_START: start, WINDOW_END: end}
        inside = ts < end
        return {WINDOW_START: F.when(inside, start), WINDOW_END: F.when(inside, end)}

    def grouping(self, constant_bounds: bool, keyed: bool) -> tuple[list[str], dict[str, Column]]:
        return [WINDOW_START], {WINDOW_END: F.col(WINDOW_START) + F.lit(self.window.size)}


class GlobalPlan(FixedPlan):
    def row_window(self, ts: Column) -> dict[str, Column]:
        return {WINDOW_START: _long(MIN_TIME), WINDOW_END: _long(MAX_TIME)}

    def grouping(self, constant_bounds: bool, keyed: bool) -> tuple[list[str], dict[str, Column]]:
        """The bounds are constants when there is no group of rows in no window and there is a
        key (grouping by nothing would make a group of no rows)."""
        if constant_bounds and keyed:
            return [], {WINDOW_START: _long(MIN_TIME), WINDOW_END: _long(MAX_TIME)}
        return [WINDOW_START], {WINDOW_END: F.when(F.col(WINDOW_START).isNotNull(), _long(MAX_TIME))}

    def reported_bounds(self) -> list[Column]:
        """None: the global window has no bounds to report."""
        none = F.lit(None).cast("timestamp")
        return [none.alias("window_start"), none.alias("window_end")]
