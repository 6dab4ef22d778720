"""KIP-450 record-defined sliding windows on the native plan, for bounded input: each key's records in
event-time order, framed with window functions."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.window import Window

from ...core.windows import Sliding
from ..columns import TS
from .names import CREATED_LATE, WINDOW_END, WINDOW_START
from .windows import WindowPlan

if TYPE_CHECKING:
    from .step import NativeStep

FIRST_OF_TIME = "__panes_first_of_time"  # the first row of its event time (one window per distinct time)
ROWS_RIGHT = "__panes_rows_right"  # rows in the right window of a time
ROWS_AT_RIGHT_END = "__panes_rows_at_right_end"  # rows at its end: it is their left window


class SlidingPlan(WindowPlan):
    window: Sliding

    def row_window(self, ts: Column) -> dict[str, Column]:
        """The window the record defines that holds it: [t - D, t]."""
        return {WINDOW_START: ts - F.lit(self.window.time_difference), WINDOW_END: ts + F.lit(1)}

    def combine(
        self, step: NativeStep, rows: DataFrame, state: DataFrame | None, wm: int, metrics: list[str]
    ) -> DataFrame:
        """The windows of bounded input: left(r) = [r - D, r] is the RANGE frame (-D, 0) of r;
        right(r) = [r + 1, r + 1 + D] the frame (1, D + 1), a window when it holds records.
        Windows are identified by their bounds: one row per distinct time, and a right window
        that is some record's left window (a record at r + 1 + D) is left to that one."""
        if state is not None or metrics:
            raise ValueError("sliding windows run natively on bounded input only")
        key = step.p.key
        d = self.window.time_difference
        order = Window.partitionBy(*key).orderBy(TS)
        frames = {"left": order.rangeBetween(-d, 0), "right": order.rangeBetween(1, d + 1)}
        cols = {
            side: [e.over(f).alias(f"{n}_{side}") for pt in step.parts for n, e in zip(pt.names, pt.of_rows)]
            for side, f in frames.items()
        }
        first_of_time = F.lag(TS).over(order).isNull() | (F.lag(TS).over(order) != F.col(TS))
        framed = rows.select(
            *key,
            TS,
            first_of_time.alias(FIRST_OF_TIME),
            *cols["left"],
            *cols["right"],
            F.count(F.lit(1)).over(frames["right"]).alias(ROWS_RIGHT),
            F.count(F.lit(1)).over(order.rangeBetween(d + 1, d + 1)).alias(ROWS_AT_RIGHT_END),
        ).filter(F.col(FIRST_OF_TIME))
        names = step.partial_columns
        left = framed.select(
            *key,
            (F.col(TS) - d).alias(WINDOW_START),
            (F.col(TS) + 1).alias(WINDOW_END),
            *[F.col(f"{n}_left").alias(n) for n in names],
        )
        right = framed.filter((F.col(ROWS_RIGHT) > 0) & (F.col(ROWS_AT_RIGHT_END) == 0)).select(
            *key,
            (F.col(TS) + 1).alias(WINDOW_START),
            (F.col(TS) + d + 2).alias(WINDOW_END),
            *[F.col(f"{n}_right").alias(n) for n in names],
        )
        return left.unionByName(right).withColumn(CREATED_LATE, F.lit(False)).select(*step.state_columns)
