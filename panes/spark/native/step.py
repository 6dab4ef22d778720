"""One step of the native plan on DataFrames, as the core's ``Engine.step`` does it, composed of its
strategies: the window kind's plan (``windows``), the late split (``late``), the firing of
after_watermark with counts (``firing``), the panes and open windows (``output``)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import types as ST

from ...core import rules
from ...core.pipeline import Pipeline
from ...core.triggers import AfterWatermark
from ..columns import numeric_string_columns
from ..ops import COLUMN
from ..record_files import RecordFiles
from .capability import appends
from .firing import Firing
from .late import LateSplit
from .names import (
    CREATED_LATE,
    IS_DEAD_LETTER,
    LAST_PANE_TIMING,
    LAST_PANE_VALUES,
    ROW_WATERMARK,
    TRIGGER_STATE,
    WINDOW_END,
    WINDOW_START,
)
from .output import Output
from .partials import partial
from .windows import window_plan


class NativeStep:
    """The native plan of one pipeline: ``combine(on_time(rows), state, watermark)``, then
    ``closed`` and ``open``, on DataFrames."""

    def __init__(
        self,
        p: Pipeline,
        schema: ST.StructType,
        record_columns: list[str],
        never_late: bool = False,
        records: RecordFiles | None = None,
    ):
        """``never_late``: the stream is ``capability.never_late(p)`` and nothing else moves its
        watermark (no control column): stamps are clamped to the latest one
        (``LateSplit.on_time``), and the stream carries only the columns the windows read, with
        each malformed row's record (``RECORD_JSON``: the only dead letters; ``stream_columns``).
        ``records``: the stream's rows carry their references in a file source that
        ``record_files`` reads the dead letters' records back from, and only the columns the
        windows read."""
        self.p = p
        self.records = records
        self.schema = schema
        self.record_columns = record_columns
        self.never_late = never_late
        self.parts = [partial(i, a, schema) for i, a in enumerate(p.aggregates)]
        self.delay = 0 if p.watermark.punctuation else p.watermark.max_delay
        #: an aggregate breaks event-time ties by arrival order
        self.ordered = any(pt.ordered for pt in self.parts)
        self.numeric_strings = numeric_string_columns(schema, p)
        self.float_values = [
            c
            for c in dict.fromkeys(p.value_columns)
            if c in schema.fieldNames() and isinstance(schema[c].dataType, (ST.DoubleType, ST.FloatType))
        ]
        self.read_values = [*self.numeric_strings, *self.float_values]  # (see LateSplit.values)
        # the last pane is kept only to retract it
        self.trigger_state = (
            TRIGGER_STATE
            if p.accumulation == "retracting"
            else tuple(c for c in TRIGGER_STATE if c not in (LAST_PANE_VALUES, LAST_PANE_TIMING))
        )
        self._memos: dict = {}
        self.windows = window_plan(p.window)
        # else the default trigger: one pane per window, when it expires
        self.firing = Firing(self) if isinstance(p.trigger, AfterWatermark) else None
        self.late = LateSplit(self)
        self.output = Output(self)

    def memo(self, key: Hashable, build: Callable[[], Any]) -> Any:
        """Columns that no watermark changes, built once per step and reused by every micro-batch
        (each Column costs JVM round trips: the firing plans made ~2,000 per micro-batch; and the
        names Spark gives the variables of lambda functions are new each time, and are in the
        code it generates)."""
        if key not in self._memos:
            self._memos[key] = build()
        return self._memos[key]

    @property
    def fires(self) -> bool:
        """The trigger fires before windows expire (after_watermark)."""
        return self.firing is not None

    @property
    def appends(self) -> bool:
        return appends(self.p)

    @property
    def partial_columns(self) -> list[str]:
        return [n for pt in self.parts for n in pt.names]

    @property
    def state_columns(self) -> list[str]:
        """The columns of a windows table."""
        extra = list(self.trigger_state) if self.fires else []
        return [*self.p.key, WINDOW_START, WINDOW_END, CREATED_LATE, *self.partial_columns, *extra]

    def expiry(self, end: Column) -> Column:
        """``rules.expiry`` of a window end column."""
        return rules.expiry(end, self.p.allowed_lateness, COLUMN)

    def expires_at(self, end: int) -> int:
        """``rules.expiry`` of one window end (ms)."""
        return rules.expiry(end, self.p.allowed_lateness)

    def watermark_after(self, seen: int | None, wm: int) -> int:
        """The watermark after a step whose rows carried ``seen`` at most (ROW_WATERMARK). It never
        goes back: event time - max_delay, punctuation and explicit control values, +infinity at
        the end of the input."""
        return rules.watermark_after_values(wm, seen, self.delay)

    # -- the step's parts --------------------------------------------------------------------------

    def row_columns(self) -> dict[str, Column]:
        return self.late.row_columns()

    def stream_columns(self, names: list[str]) -> list[str]:
        return self.late.stream_columns(names)

    def on_time(self, rows: DataFrame, wm: int, step_number: int = 0) -> DataFrame:
        return self.late.on_time(rows, wm, step_number)

    def on_time_bounded(self, rows: DataFrame, cols: dict[str, Column], counts: Column) -> DataFrame:
        return self.late.on_time_bounded(rows, cols, counts)

    def dead_letters(self, rows: DataFrame, wm: int, stream: bool = False) -> DataFrame:
        return self.late.dead_letters(rows, wm, stream)

    def combine(self, good: DataFrame, state: DataFrame | None, wm: int, metrics: bool = False) -> DataFrame:
        """The windows after the step: the state's open windows merged with the on-time rows
        (for after_watermark, with what the rows fired: ``firing``). ``metrics``: ``good`` is a
        stream step's ``on_time``; each window also has ROW_WATERMARK and IS_DEAD_LETTER of its
        rows, and one more group (null bounds) those of the rows in no window. When ``wm`` is
        past MIN_TIME, ``good`` carries it as WATERMARK_BEFORE (``on_time``)."""
        # (each path names the columns it reads: no select of them first, which would cost an
        # analysis of the plan; Spark prunes the others)
        return self.windows.combine(self, good, state, wm, [ROW_WATERMARK, IS_DEAD_LETTER] if metrics else [])

    def closed(self, windows: DataFrame, wm: int, ordered: bool = False, table: bool = False) -> DataFrame:
        return self.output.closed(windows, wm, ordered, table)

    def due(self, windows: DataFrame, wm_before: int, wm: int, ordered: bool = False) -> DataFrame:
        return self.output.due(windows, wm_before, wm, ordered)

    def open(self, windows: DataFrame, wm: int, metrics: bool = False) -> DataFrame:
        return self.output.open(windows, wm, metrics)


def batch_step(p: Pipeline, schema: ST.StructType, record_columns: list[str]) -> NativeStep:
    """The native step of bounded input, one per pipeline and input schema: every run of them reuses
    its Columns (``NativeStep.memo``: each Column costs JVM round trips, which otherwise decide the
    time to plan a short batch query)."""
    try:
        return _batch_step(p, schema, tuple(record_columns))
    except TypeError:  # (a pipeline that cannot be hashed: built anew)
        return NativeStep(p, schema, record_columns)


@functools.lru_cache(maxsize=32)
def _batch_step(p: Pipeline, schema: ST.StructType, record_columns: tuple[str, ...]) -> NativeStep:
    return NativeStep(p, schema, list(record_columns))
