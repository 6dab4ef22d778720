"""after_watermark with early / late firings by count, in the three accumulation modes, as the engine
runs it: each window keeps its trigger state (``names.TRIGGER_STATE``) in the windows table, and a
step fires twice: once the rows are added (the watermark before the step), once the watermark
moves (known when the windows are read back). Fired panes (retractions first) collect in
FIRED_PANES, in emission order."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType

from ...core import rules
from ...core.aggregates import Aggregate
from ...core.triggers import AfterWatermark
from ..columns import EMISSION_ORDER, EMISSION_PHASE, cast_to, output_type
from ..ops import COLUMN
from .capability import count_of
from .expressions import constants, timing_code, timing_of
from .names import (
    CREATED_LATE,
    FIRED_PANES,
    IN_LATE_PHASE,
    LAST_PANE_TIMING,
    LAST_PANE_TIMING_CODE,
    LAST_PANE_VALUE,
    LAST_PANE_VALUES,
    NEW_ELEMENTS,
    NEXT_PANE_INDEX,
    NON_EARLY_EMITTED,
    PHASE_COUNT,
    ROWS_ADDED,
    WATERMARK_AFTER,
    WATERMARK_BEFORE,
    WINDOW_END,
    WINDOW_START,
)
from .partials import Partial

if TYPE_CHECKING:
    from .step import NativeStep

EXPIRES = "__panes_expires"  # the watermark's move expires the window: its last pane
FIRES_ON_TIME = "__panes_fires_on_time"  # the watermark's move passed the window's end: its ON_TIME pane
FIRED, FIRED_POSITION = "__panes_fired", "__panes_fired_position"  # a fired pane, exploded, and its position


@dataclass(frozen=True)
class FiringPhase:
    """One of a step's two firings and its columns: the rows' (after they are added; never the
    last pane) and the watermark's (when it moves; the last pane when the window expires)."""

    name: str
    emission_phase: int  # the engine's phase of its panes (replay order)

    def column(self, what: str) -> str:
        return f"__panes_{self.name}_{what}"


ROWS, WATERMARK = FiringPhase("rows", 2), FiringPhase("watermark", 3)


class KeptPane(NamedTuple):
    """A window's trigger state as the rows' columns (``Firing._kept_pane``): the last pane apart."""

    counters: list[str]  # the trigger state's columns other than the last pane
    last: list[tuple[str, str, DataType]]  # (column, aggregate's output, Spark type) per value of the last pane
    code: list[str]  # LAST_PANE_TIMING_CODE when the last pane is kept


class Firing:
    """The firing plan of a step (``NativeStep.firing``)."""

    def __init__(self, step: NativeStep):
        self.step = step
        t = step.p.trigger
        assert isinstance(t, AfterWatermark)
        self.early_n, self.late_n = count_of(t.early) or 0, count_of(t.late) or 0

    def combine(self, rows: DataFrame, state: DataFrame | None, wm: int, metrics: list[str]) -> DataFrame:
        """The first half of a step: the rows are added and the triggers of the windows that got
        some are evaluated (watermark before the step); their panes go to FIRED_PANES. The second
        half, what the watermark's move fires, is ``watermark_moved``: it needs the watermark
        after the step, which the step's job itself collects (ROW_WATERMARK), so it runs when the
        windows are read back (for the step's panes, and as the next step's state)."""
        c = self.step.memo(("firing", tuple(metrics)), lambda: self._columns(metrics))
        # (the watermark as a column: see ``expressions``; the rows carry it from ``on_time``)
        merged = rows.select(*c["rows_head"], c["created_late"].alias(CREATED_LATE), *c["rows_tail"])
        if state is not None:
            merged = state.select(*c["kept"]).unionByName(merged)
        w = constants(merged.groupBy(*c["group"]).agg(*c["agg"]), {WATERMARK_BEFORE: wm}, *c["fresh"])
        w = w.withColumns(c["counted"])
        w = w.withColumn(ROWS.column("fires"), c["fires"])
        w = self._emit(w, ROWS)
        return w.select(*c["final"])

    def _columns(self, metrics: list[str]) -> dict:
        """The columns of ``combine`` that no watermark changes (``NativeStep.memo``)."""
        s = self.step
        key = list(s.p.key)
        kept = self._kept_pane()
        group, bounds = s.windows.grouping(False, bool(key))
        reached = rules.end_passed(F.col(WINDOW_END), F.col(WATERMARK_BEFORE))
        return {
            # a row's window is created late when the watermark already passed its end: it fires at
            # once, LATE (no window of the stage holds the output watermark before a passed end:
            # after_watermark fired each at its end-of-window timer, releasing its holds)
            "created_late": rules.end_passed(F.col(WINDOW_END), F.col(WATERMARK_BEFORE)),
            # one grouping for the kept windows and the rows (each row its own partial): one shuffle
            **self._row_columns(key, kept, metrics),
            "kept": self._kept_columns(key, kept, metrics),
            "group": [*key, *group],
            "agg": self._merge_columns(bounds, kept, metrics),
            "fresh": self._fresh(metrics, kept.last),
            **self._trigger_columns(reached),
            "final": [*self._after_rows(reached), *metrics],
        }

    def _kept_pane(self) -> KeptPane:
        """The last pane (kept to retract it) in columns of its own, its timing as a number: an
        aggregate of a struct or a string would make Spark sort the rows before the shuffle
        instead of hashing them. (A window has one kept row at most: first() takes its values, of
        whatever type, max() would need an order.)"""
        s = self.step
        counters = [c for c in s.trigger_state if c not in (LAST_PANE_VALUES, LAST_PANE_TIMING)]
        last = (
            [(f"{LAST_PANE_VALUE}{i}", a.output, output_type(a.fn, s.schema)) for i, a in enumerate(s.p.aggregates)]
            if LAST_PANE_VALUES in s.trigger_state
            else []
        )
        code = [LAST_PANE_TIMING_CODE] if last else []
        return KeptPane(counters, last, code)

    def _row_columns(self, key: list[str], kept: KeptPane, metrics: list[str]) -> dict[str, list]:
        """A row as a window of its own: its partials, one row added, no trigger state
        (``rows_head`` before CREATED_LATE, ``rows_tail`` after it)."""
        return {
            "rows_head": [
                *key,
                WINDOW_START,
                WINDOW_END,
                *[c for pt in self.step.parts for c in pt.one_row],
                F.lit(1).cast("long").alias(ROWS_ADDED),
            ],
            "rows_tail": [
                *[F.lit(None).alias(c) for c in kept.counters],
                *[F.lit(None).cast(t).alias(n) for n, _, t in kept.last],
                *[F.lit(None).cast("int").alias(c) for c in kept.code],
                *metrics,
            ],
        }

    def _kept_columns(self, key: list[str], kept: KeptPane, metrics: list[str]) -> list:
        """A kept window in the rows' columns: its partials and trigger state, no row added."""
        return [
            *key,
            WINDOW_START,
            WINDOW_END,
            CREATED_LATE,
            *self.step.partial_columns,
            *kept.counters,
            *[F.col(LAST_PANE_VALUES)[o].alias(n) for n, o, _ in kept.last],
            *[timing_code(F.col(LAST_PANE_TIMING)).alias(c) for c in kept.code],
            F.lit(0).cast("long").alias(ROWS_ADDED),
            *metrics,
        ]

    def _merge_columns(self, bounds: dict[str, Column], kept: KeptPane, metrics: list[str]) -> list[Column]:
        """The aggregation of a window's kept row and its new rows into one."""
        return [
            *[bounds[c].alias(c) for c in (WINDOW_START, WINDOW_END) if c in bounds],
            F.bool_and(CREATED_LATE).alias(CREATED_LATE),
            F.sum(ROWS_ADDED).alias(ROWS_ADDED),
            *[c for pt in self.step.parts for c in pt.merge],
            *[F.max(c).alias(c) for c in [*kept.counters, *kept.code, *metrics]],
            *[F.first(n, ignorenulls=True).alias(n) for n, _, _ in kept.last],
        ]

    def _fresh(self, metrics: list[str], last: list[tuple]) -> list[Column | str]:
        """The grouped windows with their trigger state (a new window's initial state)."""
        s = self.step
        if last:
            values = F.when(
                F.col(LAST_PANE_TIMING_CODE).isNotNull(), F.struct(*[F.col(n).alias(o) for n, o, _ in last])
            )
            timing = timing_of(F.col(LAST_PANE_TIMING_CODE))
        else:
            values, timing = F.lit(None), F.lit(None).cast("string")
        return [
            *s.p.key,
            WINDOW_START,
            WINDOW_END,
            CREATED_LATE,
            ROWS_ADDED,
            *s.partial_columns,
            *metrics,
            F.coalesce(F.col(PHASE_COUNT), F.lit(0)).cast("long").alias(PHASE_COUNT),
            F.coalesce(F.col(IN_LATE_PHASE), F.lit(False)).alias(IN_LATE_PHASE),
            F.coalesce(F.col(NEW_ELEMENTS), F.lit(0)).cast("long").alias(NEW_ELEMENTS),
            F.coalesce(F.col(NEXT_PANE_INDEX), F.lit(0)).cast("long").alias(NEXT_PANE_INDEX),
            values.alias(LAST_PANE_VALUES),
            timing.alias(LAST_PANE_TIMING),
            F.coalesce(F.col(NON_EARLY_EMITTED), F.lit(False)).alias(NON_EARLY_EMITTED),
        ]

    def _trigger_columns(self, reached: Column) -> dict:
        """The rows' counts and the test of a window the rows fire: elements count for the
        trigger of the window's phase (early before the ON_TIME pane, late after)."""
        early_n, late_n = self.early_n, self.late_n
        touched = F.col(ROWS_ADDED) > 0
        late_phase = F.col(IN_LATE_PHASE)
        counts = (~late_phase & F.lit(early_n > 0)) | (late_phase & F.lit(late_n > 0))
        early = F.lit(early_n > 0) & (F.col(PHASE_COUNT) >= F.lit(max(early_n, 1)))
        late = late_phase & F.lit(late_n > 0) & (F.col(PHASE_COUNT) >= F.lit(max(late_n, 1)))
        # (withColumns per stage: each DataFrame call analyses the plan so far, and a chain of
        # one call per column made planning dominate the micro-batch)
        return {
            "counted": {
                PHASE_COUNT: F.when(touched & counts, F.col(PHASE_COUNT) + F.col(ROWS_ADDED)).otherwise(
                    F.col(PHASE_COUNT)
                ),
                NEW_ELEMENTS: F.col(NEW_ELEMENTS) + F.col(ROWS_ADDED),
            },
            "fires": touched & ((~late_phase & (reached | early)) | late),
        }

    def _after_rows(self, reached: Column) -> list[Column]:
        """The state columns after the rows' firing, and FIRED_PANES: the count restarts; the
        on-time firing ends the early phase."""
        s = self.step
        fired = F.col(ROWS.column("fires"))
        after = {
            IN_LATE_PHASE: F.col(IN_LATE_PHASE) | (fired & reached),
            PHASE_COUNT: F.when(fired, F.lit(0)).otherwise(F.col(PHASE_COUNT)).cast("long"),
            FIRED_PANES: F.filter(
                F.array(F.col(ROWS.column("retraction")), F.col(ROWS.column("pane"))), lambda x: x.isNotNull()
            ),
        }
        return [*[after.get(c, F.col(c)).alias(c) for c in s.state_columns], after[FIRED_PANES].alias(FIRED_PANES)]

    def watermark_moved(self, windows: DataFrame, wm_after: int) -> DataFrame:
        """The second half of a step (``combine``): the watermark moves to ``wm_after``; windows
        expire (their last pane) or fire ON_TIME. Their panes follow the step's others in
        FIRED_PANES."""
        c = self.step.memo("moved", self._moved_columns)
        windows = constants(windows, {WATERMARK_AFTER: wm_after})  # (see ``expressions``)
        w = windows.withColumns(c["fired"])
        w = self._emit(w, WATERMARK)
        return w.select(*c["final"])

    def _moved_columns(self) -> dict:
        """The columns of ``watermark_moved`` that no watermark changes (``NativeStep.memo``)."""
        s = self.step
        wm, end = F.col(WATERMARK_AFTER), F.col(WINDOW_END)
        expired = rules.is_expired(end, s.p.allowed_lateness, wm, COLUMN)
        on_time = ~expired & ~F.col(IN_LATE_PHASE) & rules.end_passed(end, wm)
        # (the last pane is kept only to retract it)
        last = (
            {}
            if LAST_PANE_VALUES in s.trigger_state
            else {LAST_PANE_VALUES: F.lit(None), LAST_PANE_TIMING: F.lit(None).cast("string")}
        )
        fires_on_time = F.col(FIRES_ON_TIME)
        after = {
            IN_LATE_PHASE: F.col(IN_LATE_PHASE) | fires_on_time,
            PHASE_COUNT: F.when(fires_on_time, F.lit(0)).otherwise(F.col(PHASE_COUNT)).cast("long"),
            FIRED_PANES: F.concat(
                F.col(FIRED_PANES),
                F.filter(
                    F.array(F.col(WATERMARK.column("retraction")), F.col(WATERMARK.column("pane"))),
                    lambda x: x.isNotNull(),
                ),
            ),
        }
        return {
            "fired": {EXPIRES: expired, WATERMARK.column("fires"): expired | on_time, FIRES_ON_TIME: on_time, **last},
            "final": [
                *[after.get(c, F.col(c)).alias(c) for c in s.state_columns],
                after[FIRED_PANES].alias(FIRED_PANES),
            ],
        }

    def _emit(self, w: DataFrame, phase: FiringPhase) -> DataFrame:
        """A firing (``_emit`` of the engine) of the windows whose ``phase``'s "fires" column is
        set: the pane unless ``rules.pane_is_emitted`` says no, the retraction of the previous
        pane first (retracting mode), then the bookkeeping."""
        c = self.step.memo(("emit", phase), lambda: self._emit_columns(phase))
        w = w.withColumns({phase.column("timing"): c["timing"], phase.column("values"): c["values"]})
        w = w.withColumns({phase.column("emits"): c["emits"]})
        return w.withColumns(c["after"])

    def _emit_columns(self, phase: FiringPhase) -> dict:
        """The columns of ``_emit`` (``NativeStep.memo``)."""
        s = self.step
        late = F.col(CREATED_LATE) | F.col(NON_EARLY_EMITTED)
        end = F.col(WINDOW_END)
        # (the rows' firing: the watermark before the step; the watermark's: after it, or the end of input)
        reached = (
            rules.end_passed(end, F.col(WATERMARK_BEFORE))
            if phase is ROWS
            else rules.on_time_reached(end, F.col(WATERMARK_AFTER))
        )
        timing, emits = F.col(phase.column("timing")), F.col(phase.column("emits"))
        values = F.struct(*[self._value(a, pt).alias(a.output) for a, pt in zip(s.p.aggregates, s.parts)])
        return {
            "timing": rules.pane_timing(late, reached, COLUMN),
            "values": values,
            "emits": F.col(phase.column("fires")) & rules.pane_is_emitted(F.col(NEW_ELEMENTS), timing),
            "after": {**self._emitted(phase, timing, emits), **self._discarded(emits)},
        }

    def _value(self, a: Aggregate, pt: Partial) -> Column:
        """An aggregate's value in a pane: with no element since the last one in discarding mode
        (an empty ON_TIME pane), its value for no input (``AggregateFn.empty_value``: Sum's 0)."""
        t = output_type(a.fn, self.step.schema)
        value = cast_to(pt.final, t)
        empty = a.fn.empty_value()
        if self.step.p.accumulation != "discarding" or empty is None:
            return value
        nothing = F.array().cast(t) if isinstance(empty, list) else F.lit(empty).cast(t)
        return F.when(F.col(NEW_ELEMENTS) == 0, nothing).otherwise(value)

    def _emitted(self, phase: FiringPhase, timing: Column, emits: Column) -> dict[str, Column]:
        """The emitted retraction and pane, and the trigger state after them."""
        retracting = self.step.p.accumulation == "retracting"
        final = F.lit(False) if phase is ROWS else F.col(EXPIRES)
        values = F.col(phase.column("values"))

        def pane(vals: Column, tm: Column, idx: Column, last: Column, retraction: bool) -> Column:
            return F.struct(
                vals.alias("v"),
                tm.alias("timing"),
                idx.alias("pane_index"),
                last.alias("is_last"),
                F.lit(retraction).alias("retraction"),
                F.lit(phase.emission_phase).alias("phase"),
            )

        index = F.col(NEXT_PANE_INDEX)
        retraction = pane(F.col(LAST_PANE_VALUES), F.col(LAST_PANE_TIMING), index - 1, F.lit(False), True)
        return {
            phase.column("retraction"): F.when(
                emits & F.lit(retracting) & F.col(LAST_PANE_VALUES).isNotNull(), retraction
            ),
            phase.column("pane"): F.when(emits, pane(values, timing, index, final, False)),
            NEXT_PANE_INDEX: index + F.when(emits, 1).otherwise(0),
            LAST_PANE_VALUES: F.when(emits, values).otherwise(F.col(LAST_PANE_VALUES)),
            LAST_PANE_TIMING: F.when(emits, timing).otherwise(F.col(LAST_PANE_TIMING)),
            NON_EARLY_EMITTED: F.col(NON_EARLY_EMITTED) | (emits & (timing != rules.EARLY)),
            NEW_ELEMENTS: F.when(emits, F.lit(0)).otherwise(F.col(NEW_ELEMENTS)).cast("long"),
        }

    def _discarded(self, emits: Column) -> dict[str, Column]:
        """Discarding mode: an emitted pane resets the partials to those of no rows."""
        if self.step.p.accumulation != "discarding":
            return {}
        out = {}
        for pt in self.step.parts:
            for name, empty in zip(pt.names, pt.empty):
                c = F.col(name)
                if empty is None:
                    out[name] = F.when(~emits, c)
                elif isinstance(empty, str):  # "array"
                    out[name] = F.when(emits, F.filter(c, lambda x: F.lit(False))).otherwise(c)
                else:
                    out[name] = F.when(emits, empty).otherwise(c)
        return out

    def fired_panes(self, windows: DataFrame, wm: int, ordered: bool) -> DataFrame:
        """The pane rows of what fired in a step (its windows read back, ``windows``, and the
        watermark after it, ``wm``). ``ordered``: with the engine's emission order."""
        c = self.step.memo(("fired", ordered), lambda: self._fired_columns(ordered))
        return self.watermark_moved(windows, wm).filter(c["any"]).select(*c["exploded"]).select(*c["panes"])

    def _fired_columns(self, ordered: bool) -> dict:
        """The pane rows of FIRED_PANES (``NativeStep.memo``)."""
        s = self.step
        fired = [F.col(f"{FIRED}.{f}").alias(f) for f in ("timing", "pane_index", "is_last", "retraction")]
        values = [F.col(f"{FIRED}.v.{a.output}").alias(a.output) for a in s.p.aggregates]
        cols = [*s.output.window_columns(), *fired, *values]
        if ordered:
            cols += [F.col(f"{FIRED}.phase").alias(EMISSION_PHASE), F.col(FIRED_POSITION).alias(EMISSION_ORDER)]
        exploded = [*s.p.key, WINDOW_START, WINDOW_END, F.posexplode(FIRED_PANES).alias(FIRED_POSITION, FIRED)]
        return {"any": F.size(FIRED_PANES) > 0, "exploded": exploded, "panes": cols}
