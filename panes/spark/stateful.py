"""The stateful streaming plan: ``transformWithStateInPandas`` driving the core engine.

Rows are grouped by a hash bucket of the key (not by key), so one Python call handles all the
keys of a bucket that have data or due timers in a micro-batch; the bucket's engine state (all its
keys' windows) is one pickled value in the RocksDB state store. Each bucket keeps one event-time
timer, at the earliest watermark at which one of its windows can fire or expire.

Per micro-batch and bucket the processor does what the core's ``step`` does, in the same order:
``advance`` to Spark's current watermark (which Spark computed from the earlier batches, exactly
the watermark the core checks lateness against), then ``ingest`` the batch's rows. Spark's
watermark tracks a projected column, and the processor sees every row, so late rows are
dead-lettered by the engine, never dropped by Spark.
"""

from __future__ import annotations

import json
import pickle
from typing import Iterator

import numpy as np
import pandas as pd
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle

from ..core.engine import TS as CORE_TS, Engine, EngineState
from ..core.pipeline import Pipeline
from ..core.time import END_OF_INPUT, MAX_TIME, MIN_TIME
from ..core.windows import GlobalWindows
from .columns import ACTIVE, CLOCK, DETAIL, INVALID, NUM, SPARK_END_MS, TS

KIND, PHASE, SUB = "__panes_kind", "__panes_phase", "__panes_sub"


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
    def __init__(self, pipeline: Pipeline, record_columns: list[str], output_columns: list[str],
                 scripted_clock: bool = False, input_names: list[str] | None = None,
                 integral_columns: tuple = (), integral_outputs: tuple = ()):
        self.pipeline = pipeline
        self.record_columns = record_columns
        self.output_columns = output_columns
        self.scripted_clock = scripted_clock
        self.input_names = input_names
        self.integral = set(integral_columns)
        self.integral_outputs = set(integral_outputs)
        self.engine = Engine(pipeline)
        self.is_global = isinstance(pipeline.window, GlobalWindows)

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.store = handle.getValueState("engine", "blob binary")

    # -- state --------------------------------------------------------------------------------
    def _load(self) -> EngineState:
        if self.store.exists():
            return pickle.loads(self.store.get()[0])
        return self.engine.new_state()

    def _save(self, st: EngineState) -> None:
        """Store the bucket's state and keep one event-time timer at its next deadline."""
        self.store.update((pickle.dumps(st, protocol=pickle.HIGHEST_PROTOCOL),))
        # the engine's wake mark is a lower bound of the next deadline, exact after a scan
        d = st.wake_event if st.wake_event > st.watermark else self.engine.next_event_deadline(st)
        want = [max(int(min(d, SPARK_END_MS)), 0)] if d is not None and d < END_OF_INPUT else []
        have = list(self.handle.listTimers())
        if have != want:
            for t in have:
                self.handle.deleteTimer(t)
            for t in want:
                self.handle.registerTimer(t)

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
        st = self._load()
        out: list[dict] = []
        wm = self._watermark(st, timerValues.getCurrentWatermarkInMs())
        pdf = pd.concat(list(rows), ignore_index=True)
        if self.input_names is not None:
            pdf.columns = [self.input_names[int(c[1:])] if c.startswith("c") and c[1:].isdigit() else c
                           for c in pdf.columns]
        clock = None
        active = False
        if CLOCK in pdf.columns:
            ticks = pdf[CLOCK]
            if ticks.notna().any():
                clock = int(ticks.max())
                if ACTIVE in pdf.columns:
                    active = bool(pdf.loc[ticks.notna(), ACTIVE].notna().any())
            pdf = pdf[ticks.isna()]
        # the source is active at this instant if records arrive (for the idleness timeout); a
        # bucket only sees its own keys' records, unless a scripted clock row says so
        active = active or len(pdf) > 0
        # phase 0: what the watermark (and the clock as it stood) made due: the end of the last step
        res = self.engine.advance(st, wm, self._clock(timerValues), idle=self.scripted_clock or not active)
        self._panes(res.panes, 0, out)
        # phase 1: the clock moves (scripted, or heartbeat rows): processing-time triggers fire
        if clock is not None and clock > st.processing_time:
            res = self.engine.advance(st, None, clock, idle=not active)
            self._panes(res.panes, 1, out)
        # phase 2: the batch's rows
        if len(pdf):
            invalid = pdf[INVALID].notna()
            if invalid.any():
                bad = pdf[invalid].reset_index(drop=True)
                for i, (reason, detail) in enumerate(zip(bad[INVALID], bad[DETAIL])):
                    out.append(self._letter_row(2, reason, self._record(bad, i), None, None, detail, -len(bad) + i))
                pdf = pdf[~invalid]
        if len(pdf):
            batch = pdf.rename(columns={TS: CORE_TS}).reset_index(drop=True)
            for c in self.pipeline.value_columns:
                if NUM + c in batch.columns:  # a string column read as numbers
                    batch[c] = batch[NUM + c]
            restore_integers(batch, [c for c in self.pipeline.value_columns if c in self.integral])
            batch[CORE_TS] = batch[CORE_TS].astype(np.int64)
            if self.pipeline.event_time is None:
                # ingestion time never goes back (Spark's micro-batch time does when the system
                # clock is set back): a stamp before the latest one this bucket saw counts as
                # that one, as on the native plan (``NativeStep.on_time``: the stream's latest)
                # and in the core's replay (its clock)
                batch[CORE_TS] = np.maximum(batch[CORE_TS], st.max_event_time)
            res = self.engine.ingest(st, batch, record_of=lambda i: self._record(batch, i))
            self._panes(res.panes, 2, out)
            self._letters(res.dead_letters, 2, out)
        self._save(st)
        if out:
            yield self._frame(out)

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo) -> Iterator[pd.DataFrame]:
        st = self._load()
        out: list[dict] = []
        res = self.engine.advance(st, self._watermark(st, timerValues.getCurrentWatermarkInMs()),
                                  self._clock(timerValues))
        self._panes(res.panes, 0, out)
        self._save(st)
        if out:
            yield self._frame(out)

    def close(self) -> None:
        pass

    # -- output ------------------------------------------------------------------------------------
    def _record(self, frame: pd.DataFrame, i: int) -> dict:
        """The original record of row i (column by column: a row Series would upcast ints)."""
        out = {}
        for c in self.record_columns:
            if c in frame.columns:
                v = _clean(frame[c].iat[i])
                if c in self.integral and isinstance(v, float) and v.is_integer():
                    v = int(v)  # an integer column with nulls arrives as float64
                out[c] = v
        return out

    def _panes(self, panes, phase: int, out: list) -> None:
        """Pane rows, built column by column (one frame per call, no dict per row)."""
        if not panes:
            return
        p = self.pipeline
        n = len(panes)
        cols: dict = {KIND: ["P"] * n, PHASE: [phase] * n, SUB: list(range(n))}
        for j, name in enumerate(p.key):
            cols[name] = [pane.key[j] for pane in panes]
        cols["window_start"] = [None] * n if self.is_global else [pane.window_start for pane in panes]
        cols["window_end"] = [None] * n if self.is_global else [pane.window_end for pane in panes]
        cols["timing"] = [pane.timing for pane in panes]
        cols["pane_index"] = [pane.pane_index for pane in panes]
        cols["is_last"] = [pane.is_last for pane in panes]
        cols["retraction"] = [pane.retraction for pane in panes]
        for j, a in enumerate(p.aggregates):
            vals = [pane.values[j] for pane in panes]
            if a.output in self.integral_outputs:  # integer input with nulls arrives as float64
                vals = [int(v) if isinstance(v, float) and v.is_integer() else v for v in vals]
            cols[a.output] = vals
        out.append(cols)

    def _letters(self, letters, phase: int, out: list) -> None:
        for i, d in enumerate(letters):
            wins = [{"start": s, "end": e} for s, e in d.windows] if d.windows else None
            out.append(self._letter_row(phase, d.reason, d.record, d.watermark, wins, d.detail, i))

    def _letter_row(self, phase, reason, record, watermark, windows, detail, sub=0) -> dict:
        """A one-row block of columns for a dead letter."""
        return {KIND: ["D"], PHASE: [phase], SUB: [sub], "dl_reason": [reason],
                "dl_record": [json.dumps(record, default=str, sort_keys=False)],
                "dl_watermark": [None if watermark is None or watermark <= MIN_TIME or watermark >= MAX_TIME else watermark],
                "dl_windows": [json.dumps(windows) if windows else None], "dl_detail": [detail]}

    def _frame(self, blocks: list[dict]) -> pd.DataFrame:
        """Blocks of columns (panes, dead letters) to one frame with every output column; the
        order within a phase is kept in SUB for the replay's ordering."""
        columns: dict = {c: [] for c in self.output_columns}
        for b in blocks:
            n = len(b[KIND])
            for c in self.output_columns:
                v = b.get(c)
                columns[c].extend(v if v is not None else [None] * n)
        return pd.DataFrame({c: pd.Series(v, dtype=object) for c, v in columns.items()})
