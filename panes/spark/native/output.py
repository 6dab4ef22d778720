"""What a step's windows give: the panes of those that close (or fire), and the state of those
that stay open."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ...core import rules
from ...core.time import END_OF_INPUT
from ..columns import EMISSION_ORDER, EMISSION_PHASE, cast_to, output_type
from ..ops import COLUMN, SQL, Sql
from .expressions import constants, step_value, where
from .fixed import FixedPlan
from .names import (
    CLOSING_HOLD,
    CREATED_LATE,
    IS_DEAD_LETTER,
    ROW_WATERMARK,
    WATERMARK_AFTER,
    WATERMARK_BEFORE,
    WINDOW_END,
)

if TYPE_CHECKING:
    from .step import NativeStep


class Output:
    """The panes and open windows of a step (``NativeStep.closed``, ``due``, ``open``)."""

    def __init__(self, step: NativeStep):
        self.step = step

    def window_columns(self) -> list[Column]:
        """The key and the reported window bounds of a pane row."""
        return [*[F.col(k) for k in self.step.p.key], *self.step.windows.reported_bounds()]

    def holds_matter(self, stream: bool) -> bool:
        """Whether a closing pane's timing may hang on other windows' holds: the default trigger
        on a stream with allowed lateness (else every window holds the output watermark before its
        own end: its records came on time, or it expired with them)."""
        s = self.step
        return stream and s.firing is None and s.p.allowed_lateness > 0

    def closing_hold(self, closing: DataFrame) -> DataFrame:
        """``closing`` (the windows a step closes) with CLOSING_HOLD, their earliest hold:
        ``rules.element_hold`` of their records (the end - 1 when one came on time, else the
        garbage-collection time). When the output watermark has passed the end of a window that
        closes, no window but those that close with it can hold it before that end: a hold before
        it is on time for an end no later, or at a garbage-collection time that comes first."""
        end, lateness = F.col(WINDOW_END), self.step.p.allowed_lateness
        hold = F.when(F.col(CREATED_LATE), rules.gc_timer(end, lateness, COLUMN)).otherwise(
            rules.end_of_window_timer(end)
        )
        return closing.crossJoin(closing.agg(F.min(hold).alias(CLOSING_HOLD)))

    def closing_pane_columns(self, ordered: bool, holds: bool = False) -> list[Column]:
        """The pane rows of the default trigger's closed windows (WINDOW_START, WINDOW_END,
        CREATED_LATE, the partials; ``holds``: and CLOSING_HOLD): one pane per window, ON_TIME
        unless its records came late and the stage's output watermark had passed its end: no
        other closing window held it (``rules.pane_timing``: a window that closes has passed its
        end). ``ordered``: with the engine's emission order."""
        s = self.step
        late = (
            F.col(CREATED_LATE) & rules.on_time_reached(F.col(WINDOW_END), F.col(CLOSING_HOLD))
            if holds
            else F.col(CREATED_LATE)
        )
        cols = [
            *self.window_columns(),
            rules.pane_timing(late, True, COLUMN).alias("timing"),
            F.lit(0).cast("long").alias("pane_index"),
            F.lit(True).alias("is_last"),
            F.lit(False).alias("retraction"),
            *[cast_to(pt.final, output_type(a.fn, s.schema)).alias(a.output) for a, pt in zip(s.p.aggregates, s.parts)],
        ]
        return cols + [F.lit(3).alias(EMISSION_PHASE), F.lit(0).alias(EMISSION_ORDER)] if ordered else cols

    def _expiry(self, end: Sql) -> Sql:
        return rules.expiry(end, self.step.p.allowed_lateness, SQL)

    def closed(self, windows: DataFrame, wm: int, ordered: bool = False, table: bool = False) -> DataFrame:
        """The panes of the step: for the default trigger, of the windows the watermark ``wm``
        closed; for after_watermark, what fired (``ordered``: with the engine's emission order).
        ``table``: ``windows`` is a stream step's table, with its group of rows in no window
        (null bounds, see ``LateSplit.on_time``), left out here."""
        s = self.step
        if s.firing is not None:
            if table:
                windows = windows.filter(F.col(WINDOW_END).isNotNull())
            return s.firing.fired_panes(windows, wm, ordered)
        holds = self.holds_matter(table)
        panes = s.memo(("panes", ordered, holds), lambda: self.closing_pane_columns(ordered, holds))
        # (at the end of the input every window is due: no filter to evaluate per row but
        # the one of the null bounds; the expiry test is null for them, so false)
        if wm >= END_OF_INPUT:
            closing = windows.filter(F.col(WINDOW_END).isNotNull()) if table else windows
            return (self.closing_hold(closing) if holds else closing).select(*panes)
        # (the watermark not a literal: see ``expressions.where``)
        closes = rules.is_expired(Sql(WINDOW_END), s.p.allowed_lateness, step_value(WATERMARK_AFTER), SQL)
        if holds:
            closing = windows.select(F.col("*"), where(closes, {WATERMARK_AFTER: wm}))
            return self.closing_hold(closing).select(*panes)
        return windows.select(*panes, where(closes, {WATERMARK_AFTER: wm}))

    def due(self, windows: DataFrame, wm_before: int, wm: int, ordered: bool = False) -> DataFrame:
        """The panes of a step whose kept windows are in several tables (``capability.appends``):
        ``windows``, their union, holds a window's partials in as many rows as tables. The
        windows that expire in this step (the watermark went from ``wm_before`` to ``wm``; the
        earlier ones gave their pane before) with their partials merged."""
        s = self.step
        assert isinstance(s.windows, FixedPlan)
        expiry = s.memo("expiry", lambda: s.expiry(F.col(WINDOW_END)))
        due = constants(windows, {WATERMARK_BEFORE: wm_before, WATERMARK_AFTER: wm})  # (see ``expressions``)
        expiring = (expiry > F.col(WATERMARK_BEFORE)) & (expiry <= F.col(WATERMARK_AFTER))
        merged = s.windows.merged(s, due.filter(expiring))
        holds = self.holds_matter(True)
        panes = s.memo(("panes", ordered, holds), lambda: self.closing_pane_columns(ordered, holds))
        return (self.closing_hold(merged) if holds else merged).select(*panes)

    def open(self, windows: DataFrame, wm: int, metrics: bool = False) -> DataFrame:
        """The windows a step leaves open, read back from its table with the watermark after it,
        ``wm`` (the group of rows in no window left out: its expiry test is null; ``metrics``:
        with null ROW_WATERMARK and IS_DEAD_LETTER, to merge with ``LateSplit.on_time``)."""
        s = self.step
        if s.firing is not None:
            windows = s.firing.watermark_moved(windows.filter(F.col(WINDOW_END).isNotNull()), wm)
        # (built once, ``NativeStep.memo``: each Column costs JVM round trips)
        kept = s.memo(("open", metrics), lambda: self._open_columns(metrics))
        # (the watermark not a literal: see ``expressions.where``)
        stays = self._expiry(Sql(WINDOW_END)) > step_value(WATERMARK_AFTER)
        return windows.select(*kept, where(stays, {WATERMARK_AFTER: wm}))

    def _open_columns(self, metrics: bool) -> list[Column]:
        """The columns of ``open``'s windows (the state's, and with ``metrics`` null ROW_WATERMARK
        and IS_DEAD_LETTER)."""
        extra = (
            [F.lit(None).cast("long").alias(ROW_WATERMARK), F.lit(None).cast("int").alias(IS_DEAD_LETTER)]
            if metrics
            else []
        )
        return [*[F.col(c) for c in self.step.state_columns], *extra]
