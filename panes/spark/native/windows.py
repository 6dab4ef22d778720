"""Window assignment on the native plans: each window kind's ``WindowPlan`` (``fixed``,
``sessions``, ``sliding``; registered in ``capability.NATIVE_WINDOWS``) says where a row's windows
are, how windows group, and how a step merges its rows with the kept windows."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ...core.windows import WindowFn
from ..columns import TS, Check
from ..registry import registered
from .capability import NATIVE_WINDOWS, spark_form
from .names import WINDOW_END, WINDOW_START

if TYPE_CHECKING:
    from .step import NativeStep


class WindowPlan:
    """How the native plans treat one window kind. Bounds are ms, half-open [start, end)."""

    #: a row can be in several windows (exploded into a row per window)
    several_per_row = False
    #: a row can be in no window (the bounds of its one window null)
    has_gaps = False

    def __init__(self, window: WindowFn):
        self.window = window

    def row_window(self, ts: Column) -> dict[str, Column]:
        """The bounds (WINDOW_START, WINDOW_END) of the one window of a row at ``ts`` (null in a
        gap). Not for ``several_per_row``: ``starts``."""
        raise NotImplementedError

    def starts(self, ts: Column) -> Column:
        """``several_per_row``: the starts of the windows of a row at ``ts``, ascending."""
        raise NotImplementedError

    def end_of(self, start: Column) -> Column:
        """``several_per_row``: the end of a window from its start."""
        raise NotImplementedError

    def window_array(self, ts: Column) -> Column:
        """The windows of a row as an array of struct(s, e); empty in a gap."""
        if self.several_per_row:
            return F.transform(self.starts(ts), lambda s: F.struct(s.alias("s"), self.end_of(s).alias("e")))
        one = self.row_window(ts)
        win = F.array(F.struct(one[WINDOW_START].alias("s"), one[WINDOW_END].alias("e")))
        return F.filter(win, lambda x: x["s"].isNotNull()) if self.has_gaps else win

    def assign(
        self,
        df: DataFrame,
        keep_all: bool = False,
        extra: dict | None = None,
        ts: Column | None = None,
        starts: Column | None = None,
    ) -> DataFrame:
        """Rows with their windows, a row per (row, window), bounds in WINDOW_START / WINDOW_END.
        A row in a gap has no window: dropped, or kept with null bounds (``keep_all``).
        ``extra``: more columns added in the same step (each DataFrame step costs an analysis);
        ``ts``: the event time's expression (default: the ``TS`` column); ``starts``: its
        ``starts``, when already built."""
        ts = F.col(TS) if ts is None else ts
        extra = extra or {}
        if self.several_per_row:
            # the starts of the row's windows, exploded: measured faster than Spark's own sliding
            # window() (an Expand) on Nexmark q5. Every row has one at least (the last start).
            starts = self.starts(ts) if starts is None else starts
            return df.withColumn(WINDOW_START, F.explode(starts)).withColumns(
                {WINDOW_END: self.end_of(F.col(WINDOW_START)), **extra}
            )
        out = df.withColumns({**self.row_window(ts), **extra})
        if self.has_gaps and not keep_all:
            return out.filter(F.col(WINDOW_END).isNotNull())
        return out

    def grouping(self, constant_bounds: bool, keyed: bool) -> tuple[list[str], dict[str, Column]]:
        """The window columns to group by, and the bounds that follow from them (computed after
        the grouping, not shuffled). ``constant_bounds``: no group of rows in no window;
        ``keyed``: the pipeline has a key."""
        return [WINDOW_START, WINDOW_END], {}

    def reported_bounds(self) -> list[Column]:
        """A pane row's window_start and window_end (timestamps)."""
        return [
            F.timestamp_millis(F.col(WINDOW_START)).alias("window_start"),
            F.timestamp_millis(self.window.report_end(F.col(WINDOW_END))).alias("window_end"),
        ]

    def read_columns(self) -> list[str]:
        """The input columns the windows read (besides the event time)."""
        return []

    def checks(self) -> list[Check]:
        """The checks of a record for the columns the windows read (``read_columns``), on every
        plan (``columns.validation``)."""
        return []

    def combine(
        self, step: NativeStep, rows: DataFrame, state: DataFrame | None, wm: int, metrics: list[str]
    ) -> DataFrame:
        """The windows after a step: the kept ones (``state``) merged with the step's on-time
        ``rows`` (``NativeStep.combine``)."""
        raise NotImplementedError


def window_reads(window: WindowFn) -> tuple[list[str], list[Check]]:
    """The input columns a window kind reads besides the event time, and their checks (none for
    a kind without a native plan)."""
    if registered(NATIVE_WINDOWS, window) is None:
        return [], []
    plan = window_plan(window)
    return plan.read_columns(), plan.checks()


def window_plan(window: WindowFn) -> WindowPlan:
    """The native plan of a window kind (``capability.NATIVE_WINDOWS``)."""
    native = registered(NATIVE_WINDOWS, window)
    if native is None:
        raise TypeError(f"{window.kind} windows have no native plan")
    plan: Any = spark_form(native.plan)
    return plan(window)
