"""The stateful streaming plan: ``transformWithStateInPandas`` driving the core engine.

Rows are grouped by a hash bucket of the key (not by key), so one Python call handles all the
keys of a bucket that have data or due timers in a micro-batch; the bucket's engine state (all its
keys' windows) is one value in the RocksDB state store, its windows' fields as columns, and each
bucket keeps one event-time timer, at the earliest watermark at which one of its windows can fire
or expire (``stateful_store``).

Per micro-batch and bucket the processor does what the core's ``step`` does, in the same order:
``advance`` to Spark's current watermark (which Spark computed from the earlier batches, exactly
the watermark the core checks lateness against), then ``ingest`` the batch's rows. Spark's
watermark tracks a projected column, and the processor sees every row, so late rows are
dead-lettered by the engine, never dropped by Spark.

A pane's timing hangs on the stage's output watermark, the earliest hold of any window of any key
(``core.engine.holds``); a bucket sees its own. With allowed lateness (else no timing hangs on
it), each bucket runs a partial engine, whose panes that other buckets' holds may keep ON_TIME are
provisional, and reports its windows' earliest hold as each phase began (a row of kind "H"); the
driver, which sees every micro-batch, combines the reports into the stage's output watermark of
each phase and decides those panes (``stateful_timing.OutputWatermarks``, in ``write_stream``; the
replay does the same). A micro-batch is one bundle of Beam's: the decision needs no other micro-batch.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator

import numpy as np
import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as ST
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle

from ..core import rules
from ..core.engine import TS as CORE_TS
from ..core.engine import DeadLetter, Engine, EngineState, Pane
from ..core.engine.parts import PHASES
from ..core.output import pane_columns
from ..core.pipeline import Pipeline
from ..core.time import END_OF_INPUT, MAX_TIME, MIN_TIME
from ..core.windows import GlobalWindows
from .columns import (
    ACTIVE,
    CLOCK,
    DETAIL,
    EMISSION_ORDER,
    EMISSION_PHASE,
    INVALID,
    NUM,
    PUNCT,
    RAW,
    SPARK_END_MS,
    TS,
    pane_schema,
)
from .deferred_processor import engine_state
from .stateful_counts import COUNTS, as_json, emitted_counts, read_counts
from .stateful_input import TimestampsAsMicros
from .stateful_store import BucketState, cyclic_gc_paused, freeze_once
from .window_pipeline import PANE_ID, guarded_sql_panes, table_fields, table_panes, table_rows

#: what an output row of the processor is: "P", a pane, "D", a dead letter, or "H", a bucket's report
#: of its holds (``core.engine.parts.PartReport``)
KIND = "__panes_kind"
PROVISIONAL = "__panes_provisional"  # a pane's ``Pane.provisional``
#: a report's bucket, the micro-batch's watermark, and the bucket's earliest hold as each phase began
#: and after the last
PART, PART_WATERMARK, PART_HOLDS = "__panes_part", "__panes_part_watermark", "__panes_part_holds"
PHASE, ORDER = EMISSION_PHASE, EMISSION_ORDER
#: a dead letter's columns in the processor's output (its watermark in ms, its record and
#: windows as JSON)
DEAD_LETTER_COLUMNS = ("dl_reason", "dl_record", "dl_watermark", "dl_windows", "dl_detail")
_WINDOWS_JSON = "array<struct<start:long,end:long>>"


def _clean(v):
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, float) and v != v:
        return None
    if isinstance(v, pd.Timestamp):
        return v.isoformat()
    if isinstance(v, np.ndarray):
        return [_clean(x) for x in v.tolist()]
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    return v


def restore_integers(frame: pd.DataFrame, columns) -> None:
    """Integer columns with nulls arrive from Arrow as float64 with NaN: give them back as Python
    ints and None, so aggregates and user functions see the values the records hold."""
    for c in columns:
        if c in frame.columns and frame[c].dtype.kind == "f":
            arr = frame[c].to_numpy()
            ok = ~np.isnan(arr)
            obj = np.empty(len(arr), dtype=object)
            obj[ok] = arr[ok].astype(np.int64).tolist()
            frame[c] = obj


class BucketProcessor(StatefulProcessor):
    """``pipeline``: the engine's (``window_pipeline.engine_pipeline``: a SQL window pipeline's
    windows hand their rows on; Spark runs the query)."""

    def __init__(
        self,
        pipeline: Pipeline,
        record_columns: list[str],
        output_columns: list[str],
        scripted_clock: bool = False,
        input_names: list[str] | None = None,
        integral_columns: tuple = (),
        integral_outputs: tuple = (),
        counts_read: tuple[str | None, str | None] = (None, None),
        micros: TimestampsAsMicros | None = None,
    ):
        self.pipeline = pipeline
        self.record_columns = record_columns
        self.output_columns = output_columns
        self.scripted_clock = scripted_clock
        self.input_names = input_names
        self.integral = set(integral_columns)
        self.integral_outputs = set(integral_outputs)
        #: the column of panes' control rows (not records), and of the event times as numbers
        #: (``stateful_counts.read_counts``)
        self.control, self.event_time_number = counts_read
        #: with allowed lateness a pane's timing may hang on other buckets' holds (see the module)
        self.partial = pipeline.allowed_lateness > 0
        self.engine = Engine(pipeline, partial=self.partial)
        self.is_global = isinstance(pipeline.window, GlobalWindows)
        #: ids of table-valued panes: the bucket's, then a count (unique within a micro-batch)
        self.pane_ids = itertools.count()
        self.bucket = 0
        #: the record's timestamp columns that reach the processor as microseconds
        self.micros = micros or TimestampsAsMicros()

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.bind(handle, engine_state(handle))

    def bind(self, handle: StatefulProcessorHandle, value) -> None:
        """The processor on ``handle``, its bucket's state in ``value`` (``engine_state``; Spark
        runs it wrapped in a ``DeferredProcessor``, which declares it)."""
        freeze_once()
        self.state = BucketState(handle, self.engine, value)

    def _watermark(self, st: EngineState, spark_wm: int) -> int | None:
        if spark_wm >= SPARK_END_MS:
            return END_OF_INPUT
        if spark_wm <= 0 and st.watermark == MIN_TIME:
            return None  # Spark's watermark before any data
        return spark_wm

    def _clock(self, timer_values) -> int | None:
        if self.scripted_clock:
            return None
        return timer_values.getCurrentProcessingTimeInMs()

    # -- callbacks ------------------------------------------------------------------------------
    def handleInputRows(self, key, rows: Iterator[pd.DataFrame], timerValues) -> Iterator[pd.DataFrame]:
        with cyclic_gc_paused():
            frame = self._input_rows(key, rows, timerValues)
        yield frame

    def _input_rows(self, key, rows: Iterator[pd.DataFrame], timerValues) -> pd.DataFrame:
        """The micro-batch's rows through the engine: the output rows."""
        st = self.state.load()
        out: list[dict] = []
        holds = self._holds(st, [])
        self.bucket = int(key[0])
        wm = self._watermark(st, timerValues.getCurrentWatermarkInMs())
        pdf, clock, active = self._clock_rows(pd.concat(list(rows), ignore_index=True))
        read = read_counts(pdf, self.control, self.event_time_number)
        if PUNCT in pdf.columns:  # (punctuation and control rows only move Spark's watermark)
            pdf = pdf[pdf[PUNCT].isna()]
        active = active or len(pdf) > 0
        # phase 0: what the watermark (and the clock as it stood) made due: the end of the last step
        res = self.engine.advance(st, wm, self._clock(timerValues), idle=self.scripted_clock or not active)
        self._panes(res.panes, 0, out)
        self._letters(res.dead_letters, 0, out)
        self._holds(st, holds)
        # phase 1: the clock moves (scripted, or heartbeat rows): processing-time triggers fire
        if clock is not None and clock > st.processing_time:
            res = self.engine.advance(st, None, clock, idle=not active)
            self._panes(res.panes, 1, out)
            self._letters(res.dead_letters, 1, out)
            self._holds(st, holds)
        elif self.partial:
            holds.append(holds[-1])  # (no phase 1: the windows are as phase 1 began)
        # phase 2: the batch's rows
        batch = self._valid_rows(pdf, st, out)
        counts = (0, 0)
        if batch is not None:
            res = self.engine.ingest(st, batch, record_of=lambda i: self._record(batch, i))
            self._panes(res.panes, 2, out)
            self._letters(res.dead_letters, 2, out)
            counts = (res.counted, res.in_no_window)
        self._report(key, st, self._holds(st, holds), out)
        self._summary(read, counts, out)
        self.state.save(st)
        return self._frame(out)

    def _clock_rows(self, pdf: pd.DataFrame) -> tuple[pd.DataFrame, int | None, bool]:
        """The micro-batch's rows without its clock rows, the clock they carry, and whether a
        scripted clock row says the source is active at this instant (for the idleness timeout:
        else records arriving do; a bucket only sees its own keys' records)."""
        if self.input_names is not None:
            pdf.columns = [
                self.input_names[int(c[1:])] if c.startswith("c") and c[1:].isdigit() else c for c in pdf.columns
            ]
        clock = None
        active = False
        if CLOCK in pdf.columns:
            ticks = pdf[CLOCK]
            if ticks.notna().any():
                clock = int(ticks.max())
                if ACTIVE in pdf.columns:
                    active = bool(pdf.loc[ticks.notna(), ACTIVE].notna().any())
            pdf = pdf[ticks.isna()]
        return pdf, clock, active

    def _valid_rows(self, pdf: pd.DataFrame, st: EngineState, out: list) -> pd.DataFrame | None:
        """The rows as the engine's batch (None: none); the invalid ones' dead letters go to ``out``."""
        if len(pdf):
            invalid = pdf[INVALID].notna()
            if invalid.any():
                bad = pdf[invalid].reset_index(drop=True)
                for i, (reason, detail) in enumerate(zip(bad[INVALID], bad[DETAIL])):
                    letter = DeadLetter(reason, self._record(bad, i), detail=detail)
                    out.append(self._letter_row(2, letter, -len(bad) + i))
                pdf = pdf[~invalid]
        if not len(pdf):
            return None
        batch = pdf.rename(columns={TS: CORE_TS}).reset_index(drop=True)
        for c in self.pipeline.value_columns:
            if NUM + c in batch.columns:  # a string column read as numbers
                batch[c] = batch[NUM + c]
        restore_integers(batch, [c for c in self.pipeline.input_columns(batch.columns) if c in self.integral])
        batch[CORE_TS] = batch[CORE_TS].astype(np.int64)
        if self.pipeline.event_time is None:
            # ingestion time never goes back (Spark's micro-batch time does when the system
            # clock is set back): a stamp before the latest one this bucket saw counts as
            # that one, as on the native plan (``NativeStep.on_time``: the stream's latest)
            # and in the core's replay (its clock)
            batch[CORE_TS] = rules.ingestion_stamp(batch[CORE_TS], st.max_event_time, rules.ARRAY)
        return batch

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo) -> Iterator[pd.DataFrame]:
        with cyclic_gc_paused():
            frame = self._expired_timer(key, timerValues)
        yield frame

    def _expired_timer(self, key, timerValues) -> pd.DataFrame:
        """The bucket's timer fired: what the watermark (and the clock) made due."""
        st = self.state.load()
        out: list[dict] = []
        holds = self._holds(st, [])
        self.bucket = int(key[0])
        res = self.engine.advance(
            st, self._watermark(st, timerValues.getCurrentWatermarkInMs()), self._clock(timerValues)
        )
        self._panes(res.panes, 0, out)
        self._letters(res.dead_letters, 0, out)
        self._report(key, st, self._holds(st, holds), out)
        self._summary({}, (0, 0), out)
        self.state.save(st)
        return self._frame(out)

    # -- the bucket's holds (with allowed lateness: see the module) ----------------------------------
    def _holds(self, st: EngineState, holds: list[int]) -> list[int]:
        """``holds`` with the bucket's earliest hold now (as a phase begins, or after the last)."""
        if self.partial:
            holds.append(self.engine.earliest_hold(st))
        return holds

    def _report(self, key: tuple, st: EngineState, holds: list[int], out: list) -> None:
        """The bucket's report (``PartReport``): the holds as each phase began, and after the last
        (a phase the bucket did not run: what the one before left)."""
        if not self.partial:
            return
        holds = holds + [holds[-1]] * (PHASES + 1 - len(holds))
        out.append(
            {
                KIND: ["H"],
                PHASE: [PHASES],
                ORDER: [0],
                PART: [int(key[0])],
                PART_WATERMARK: [st.watermark],
                PART_HOLDS: [holds],
            }
        )

    def _summary(self, read: dict, counts: tuple[int, int], out: list) -> None:
        """The call's count row (kind "C"): what it read (``read``), the rows the engine counted in
        windows and in no window (``counts``), and what it emitted, as one JSON object
        (``stateful_counts``: the driver sums them, and calls a callback only when there is
        something for it)."""
        emitted = emitted_counts(out, KIND, DEAD_LETTER_COLUMNS[0])
        counted = {"counted": counts[0], "in_no_window": counts[1]}
        out.append({KIND: ["C"], PHASE: [PHASES], ORDER: [1], COUNTS: [as_json({**read, **counted, **emitted})]})

    def close(self) -> None:
        pass

    # -- output ------------------------------------------------------------------------------------
    def _record(self, frame: pd.DataFrame, i: int) -> dict | str:
        """The original record of row i (column by column: a row Series would upcast ints); the
        line as read when the reader could not read it whole (RAW)."""
        if RAW in frame.columns and isinstance(frame[RAW].iat[i], str):
            return frame[RAW].iat[i]
        out = {}
        for c in self.record_columns:
            if c in frame.columns:
                v = _clean(frame[c].iat[i])
                if (c in self.integral or c in self.micros.columns) and isinstance(v, float) and v.is_integer():
                    v = int(v)  # an integer column with nulls arrives as float64
                if c in self.micros.columns and v is not None:
                    v = _clean(self.micros.value(v))
                out[c] = v
        return out

    def _panes(self, panes: list[Pane], phase: int, out: list) -> None:
        """Pane rows, built column by column (one frame per call, no dict per row)."""
        if not panes:
            return
        n = len(panes)
        if self.pipeline.window_pipeline is not None:
            self._table_panes(panes, phase, out)
            return
        cols: dict = {
            KIND: ["P"] * n,
            PHASE: [phase] * n,
            ORDER: list(range(n)),
            **pane_columns(panes, self.pipeline),
            PROVISIONAL: [p.provisional for p in panes],
        }
        for a in self.pipeline.aggregates:
            if a.output in self.integral_outputs:  # integer input with nulls arrives as float64
                cols[a.output] = [int(v) if isinstance(v, float) and v.is_integer() else v for v in cols[a.output]]
        out.append(cols)

    def _table_panes(self, panes: list[Pane], phase: int, out: list) -> None:
        """The rows of table-valued panes, each with its pane's emission order."""
        first = (self.bucket << 32) + next(self.pane_ids) % (1 << 32)  # (a bucket's label is a Spark int)
        for _ in range(len(panes) - 1):
            next(self.pane_ids)
        columns = [c for c in self.output_columns if c not in (KIND, PHASE, ORDER)]
        cols = table_rows(panes, self.pipeline, columns, first, self.is_global)
        if cols:
            n = len(cols[PANE_ID])
            cols[PROVISIONAL] = [panes[i - first].provisional for i in cols[PANE_ID]]
            out.append({KIND: ["P"] * n, PHASE: [phase] * n, ORDER: [i - first for i in cols[PANE_ID]], **cols})

    def output_frame(self, bucket: int, panes: list[Pane], letters: list[DeadLetter], phase: int) -> pd.DataFrame:
        """Panes and dead letters as the processor's output rows (for a plan that runs the engine
        over a bucket by itself: bounded input)."""
        self.bucket = bucket
        out: list[dict] = []
        self._panes(panes, phase, out)
        self._letters(letters, phase, out)
        return self._frame(out) if out else pd.DataFrame({c: pd.Series([], dtype=object) for c in self.output_columns})

    def _letters(self, letters: list[DeadLetter], phase: int, out: list) -> None:
        for i, d in enumerate(letters):
            out.append(self._letter_row(phase, d, i))

    def _letter_row(self, phase: int, d: DeadLetter, order: int = 0) -> dict:
        """A one-row block of columns for a dead letter."""
        finite = d.watermark is not None and MIN_TIME < d.watermark < MAX_TIME
        windows = [{"start": s, "end": e} for s, e in d.windows] if d.windows else None
        record = d.record if isinstance(d.record, str) else json.dumps(d.record, default=str, sort_keys=False)
        values = (
            str(d.reason),
            record,
            d.watermark if finite else None,
            json.dumps(windows) if windows else None,
            d.detail,
        )
        return {KIND: ["D"], PHASE: [phase], ORDER: [order], **{c: [v] for c, v in zip(DEAD_LETTER_COLUMNS, values)}}

    def _frame(self, blocks: list[dict]) -> pd.DataFrame:
        """Blocks of columns (panes, dead letters) to one frame with every output column; the
        order within a phase is kept in ORDER for the replay's ordering."""
        columns: dict = {c: [] for c in self.output_columns}
        for b in blocks:
            n = len(b[KIND])
            for c in self.output_columns:
                v = b.get(c)
                columns[c].extend(v if v is not None else [None] * n)
        # (object columns, as PySpark's conversion wants them; built by fromiter, which stores each
        # value as it is, several times faster than a Series from a list)
        return pd.DataFrame({c: np.fromiter(v, dtype=object, count=len(v)) for c, v in columns.items()}, copy=False)


# -- the processor's output as DataFrames -----------------------------------------------------------------


def output_schema(p: Pipeline, schema: ST.StructType) -> ST.StructType:
    """The processor's output rows: kind, emission order, the pane columns (window bounds in ms),
    a window pipeline's row columns (``window_pipeline.table_fields``), the dead-letter columns."""
    fields = [
        ST.StructField(KIND, ST.StringType()),
        ST.StructField(PHASE, ST.IntegerType()),
        ST.StructField(ORDER, ST.LongType()),
    ]
    for f in pane_schema(p, schema).fields:
        bounds = f.name in ("window_start", "window_end")
        fields.append(ST.StructField(f.name, ST.LongType() if bounds else f.dataType, True))
    if p.window_pipeline is not None:
        fields += table_fields(p, schema)
    types = (ST.StringType(), ST.StringType(), ST.LongType(), ST.StringType(), ST.StringType())
    fields += [ST.StructField(c, t) for c, t in zip(DEAD_LETTER_COLUMNS, types)]
    fields.append(ST.StructField(COUNTS, ST.StringType()))
    fields += [
        ST.StructField(PROVISIONAL, ST.IntegerType()),
        ST.StructField(PART, ST.LongType()),
        ST.StructField(PART_WATERMARK, ST.LongType()),
        ST.StructField(PART_HOLDS, ST.ArrayType(ST.LongType())),
    ]
    return ST.StructType(fields)


def panes_of(
    combined: DataFrame, p: Pipeline, schema: ST.StructType, view: str = "__panes_rows", ordered: bool = False
) -> DataFrame:
    """The panes of the processor's output. A window pipeline's: its SQL run as Spark SQL over the
    rows of the panes (a micro-batch's: ``view`` names them), or its function's rows; ``ordered``
    (replays): with the emission order, the bounds in ms."""
    if p.window_pipeline is not None:
        return table_panes(combined.filter(F.col(KIND) == "P"), p, schema, view, [PHASE, ORDER], ordered)
    return selected(combined, pane_selection(p, schema))


#: which rows of the processor's output to keep, and their columns
Selection = tuple[Column, list[Column]]


def selected(combined: DataFrame, selection: Selection) -> DataFrame:
    keep, columns = selection
    return combined.filter(keep).select(*columns)


def pane_selection(p: Pipeline, schema: ST.StructType) -> Selection:
    """The pane rows of the processor's output, their window bounds as timestamps (not a window
    pipeline's: ``panes_of``)."""
    cols = []
    for f in pane_schema(p, schema).fields:
        if f.name in ("window_start", "window_end"):
            cols.append(F.timestamp_millis(F.col(f.name)).alias(f.name))
        else:
            cols.append(F.col(f.name))
    return F.col(KIND) == "P", cols


def sql_panes_of(
    combined: DataFrame, p: Pipeline, schema: ST.StructType, view: str, ordered: bool = False
) -> tuple[DataFrame, DataFrame | None]:
    """A SQL window pipeline's panes of a micro-batch, computed now, and the dead letters of the
    panes its query failed on (``window_pipeline.guarded_sql_panes``)."""
    return guarded_sql_panes(combined.filter(F.col(KIND) == "P"), p, schema, view, [PHASE, ORDER], ordered)


def dead_letters_of(combined: DataFrame) -> DataFrame:
    """The dead letters of the processor's output."""
    return selected(combined, dead_letter_selection())


def dead_letter_selection() -> Selection:
    wins = F.from_json(F.col("dl_windows"), _WINDOWS_JSON)
    return F.col(KIND) == "D", [
        F.col("dl_reason").alias("reason"),
        F.col("dl_record").alias("record"),
        F.timestamp_millis(F.col("dl_watermark")).alias("watermark"),
        F.transform(
            wins,
            lambda w: F.struct(
                F.timestamp_millis(w["start"]).alias("start"), F.timestamp_millis(w["end"]).alias("end")
            ),
        ).alias("windows"),
        F.col("dl_detail").alias("detail"),
    ]
