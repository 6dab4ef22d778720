"""One stage's step over a hash bucket of its key: the core's ``StageRunner`` inside
``cogroup(...).applyInPandas``, the bucket's rows of the micro-batch on one side and its state
(one pickled ``EngineState``, read from the checkpoint's last version) on the other.

A bucket's output rows (``OUTPUT``): its panes (``P``: the printed record as JSON with the pane's
window, contributor, the phase of the step that emitted it and its place in the bucket's output),
its dead letters (``D``), its new state (``S``), its output watermark (``H``: its watermark held
by its windows' holds; the stage's is the least over the buckets) and the input records it put in
no window (``N``: their arrival number and input, for the account of every record).

With allowed lateness a pane's timing hangs on the holds of every bucket: each bucket runs a partial
runner, marks the panes it cannot decide (``PROV``) and reports its earliest hold as each phase of
the step began (``HOLDS``); the driver decides those panes (``timing.StageTimings``), as the
single-stage stateful plan does.
"""

from __future__ import annotations

import json
import pickle
from typing import Any

import numpy as np
import pandas as pd
from pyspark.sql import types as ST

from ...core.engine import TS as CORE_TS
from ...core.engine import EngineState, sort_key
from ...core.rules import Reason
from ...core.stages import StageGraph, StageRunner, letter_record
from ...core.stages.rows import CONTRIBUTOR, PHASE, PROVISIONAL, RECORD, SEQ, frame_of
from ...core.windows import WINDOW_END, WINDOW_START
from ..columns import BUCKET, TS
from ..stateful import restore_integers
from .transport import SEQ as SPARK_SEQ

KIND, SIDE, SUB, ROW, WS, WE, CONTRIB, HIDDEN = (
    "__panes_kind",
    "__panes_side",
    "__panes_sub",
    "__panes_row",
    "__panes_ws",
    "__panes_we",
    "__panes_contributor",
    "__panes_hidden",
)
#: a dead letter's stage (its index in the graph; -1: an input's own checks)
STAGE_INDEX = "__panes_stage_index"
STEP_PHASE, LETTER_INPUT, LATE, BLOB, HOLD, PROV, HOLDS, PART_WATERMARK = (
    "__panes_phase",
    "__panes_letter_input",
    "__panes_late",
    "__panes_blob",
    "__panes_hold",
    "__panes_provisional",
    "__panes_holds",
    "__panes_part_watermark",
)

OUTPUT = ST.StructType(
    [
        ST.StructField(KIND, ST.StringType()),
        ST.StructField(BUCKET, ST.IntegerType()),
        ST.StructField(STEP_PHASE, ST.IntegerType()),
        ST.StructField(SUB, ST.LongType()),
        ST.StructField(ROW, ST.StringType()),
        ST.StructField(TS, ST.LongType()),
        ST.StructField(WS, ST.LongType()),
        ST.StructField(WE, ST.LongType()),
        ST.StructField(CONTRIB, ST.StringType()),
        ST.StructField(HIDDEN, ST.BooleanType()),
        ST.StructField(SPARK_SEQ, ST.LongType()),
        ST.StructField(LETTER_INPUT, ST.StringType()),
        ST.StructField(LATE, ST.BooleanType()),
        ST.StructField(BLOB, ST.BinaryType()),
        ST.StructField(HOLD, ST.LongType()),
        ST.StructField(PROV, ST.IntegerType()),
        ST.StructField(HOLDS, ST.ArrayType(ST.LongType())),
        ST.StructField(PART_WATERMARK, ST.LongType()),
    ]
)
STATE = ST.StructType([ST.StructField(BUCKET, ST.IntegerType()), ST.StructField(BLOB, ST.BinaryType())])

_RUNNERS: dict = {}


def dumps(record: dict) -> str:
    return json.dumps(record, separators=(", ", ": "), default=str)


def decides_on_driver(stage) -> bool:
    """Whether the stage's pane timing can hang on other buckets' holds (with allowed lateness;
    without it no window holds the output watermark past another's end)."""
    return stage.allowed_lateness > 0


def stage_order(record: dict, key: tuple[str, ...], phase: int, end: int, start: int, sub: int) -> tuple:
    """Where a stage's row stands in the stage's emission order (as the core emits it: by phase,
    then window end, start and key, then its place in its pane)."""
    return (phase, end, start, tuple(sort_key(record.get(k)) for k in key), sub)


class BucketStep:
    """The function of one stage's step in one micro-batch (``watermark``: the stage's after it;
    ``before``: before it, what a bucket without state starts from; ``clock``: processing time)."""

    def __init__(
        self,
        graph: StageGraph,
        stage: str,
        watermark: int,
        before: int,
        clock: int | None,
        raw: dict[int, tuple[list[str], list[str]]],
    ):
        self.graph, self.stage = graph, stage
        self.watermark, self.before, self.clock = watermark, before, clock
        self.raw = raw  # side -> (typed record columns, integral ones) of an aggregating stage's input side

    def runner(self) -> StageRunner:
        key = (id(self.graph), self.stage)
        if key not in _RUNNERS:
            _RUNNERS.clear()
            stage = self.graph.stage(self.stage)
            _RUNNERS[key] = StageRunner(self.graph, stage, partial=decides_on_driver(stage))
        return _RUNNERS[key]

    def __call__(self, key: Any, rows: pd.DataFrame, state: pd.DataFrame) -> pd.DataFrame:
        runner = self.runner()
        bucket = int(key[0])
        st = pickle.loads(state[BLOB].iloc[0]) if len(state) else self.new_state(runner)
        sides = [
            self.side(runner, j, rows[rows[SIDE] == j]) if len(rows) else None for j in range(len(runner.stage.sources))
        ]
        res = runner.step(st, sides, self.watermark, self.clock)
        out = self.panes(runner, res.rows, res.records) + self.letters(res.letters)
        out += [{KIND: "N", SPARK_SEQ: q, LETTER_INPUT: src} for src, seqs in res.unwindowed.items() for q in seqs]
        if st.keys or st.records:
            out.append({KIND: "S", BLOB: pickle.dumps(st, protocol=pickle.HIGHEST_PROTOCOL)})
        out.append(
            {KIND: "H", HOLD: res.output_watermark, HOLDS: list(res.holds) or None, PART_WATERMARK: st.watermark}
        )
        for r in out:
            r[BUCKET] = bucket
        return output_frame(out)

    def new_state(self, runner: StageRunner) -> EngineState:
        st = runner.new_state()
        st.watermark = self.before
        if self.clock is not None:
            st.processing_time = self.clock
        return st

    def side(self, runner: StageRunner, j: int, rows: pd.DataFrame) -> pd.DataFrame | None:
        if not len(rows):
            return None
        source = runner.stage.sources[j]
        if self.graph.is_input(source) and j in self.raw:
            columns, integral = self.raw[j]
            frame = rows.sort_values(SPARK_SEQ, kind="stable").reset_index(drop=True)
            restore_integers(frame, integral)
            out = frame[columns].copy()
            out[CORE_TS] = frame[TS].to_numpy(dtype=np.int64)
            out[SEQ] = frame[SPARK_SEQ].to_numpy(dtype=np.int64)
            return out
        if self.graph.is_input(source):
            frame = rows.sort_values(SPARK_SEQ, kind="stable")
            records = [json.loads(r) for r in frame[ROW].tolist()]
            out = frame_of(records, list(self.graph.columns(source) or ()))
            out[CORE_TS] = frame[TS].to_numpy(dtype=np.int64)
            out[SEQ] = frame[SPARK_SEQ].to_numpy(dtype=np.int64)
            out[RECORD] = objects(records)
            return out
        return self.stage_side(source, rows)

    def stage_side(self, source: str, rows: pd.DataFrame) -> pd.DataFrame:
        """A stage's rows, in the order the stage emitted them."""
        key = self.graph.stage(source).key
        records = [json.loads(r) for r in rows[ROW].tolist()]
        phase, we, ws, sub = (rows[c].tolist() for c in (STEP_PHASE, WE, WS, SUB))
        order = sorted(range(len(records)), key=lambda i: stage_order(records[i], key, phase[i], we[i], ws[i], sub[i]))
        records = [records[i] for i in order]
        names = list(dict.fromkeys(c for r in records for c in r))
        out = frame_of(records, names)
        for col, spark_col in ((CORE_TS, TS), (WINDOW_START, WS), (WINDOW_END, WE)):
            out[col] = rows[spark_col].to_numpy(dtype=np.int64)[order]
        contributors = rows[CONTRIB].tolist()
        out[CONTRIBUTOR] = objects([contributors[i] for i in order])
        return out

    def panes(self, runner: StageRunner, rows: pd.DataFrame, records: list[dict]) -> list[dict]:
        hidden = runner.hides_retractions
        out = []
        for i, r in enumerate(records):
            out.append(
                {
                    KIND: "P",
                    STEP_PHASE: int(rows[PHASE].iat[i]),
                    SUB: i,
                    ROW: dumps(r),
                    TS: int(rows[CORE_TS].iat[i]),
                    WS: int(rows[WINDOW_START].iat[i]),
                    WE: int(rows[WINDOW_END].iat[i]),
                    CONTRIB: rows[CONTRIBUTOR].iat[i],
                    HIDDEN: bool(hidden and r["retraction"]),
                    PROV: int(rows[PROVISIONAL].iat[i]),
                }
            )
        return out

    def letters(self, letters) -> list[dict]:
        return [
            {
                KIND: "D",
                SUB: i,
                ROW: dumps(letter_record(d)),
                SPARK_SEQ: d.seq,
                LETTER_INPUT: d.input,
                LATE: d.letter.reason == Reason.LATE,
            }
            for i, d in enumerate(letters)
        ]


#: the pandas dtype of each kind of output column (nullable, so Arrow gets typed columns)
DTYPES = {
    ST.StringType: object,
    ST.IntegerType: "Int32",
    ST.LongType: "Int64",
    ST.BooleanType: "boolean",
    ST.BinaryType: object,
    ST.ArrayType: object,
}


def output_frame(rows: list[dict]) -> pd.DataFrame:
    """Output rows as a frame of ``OUTPUT``'s columns, each typed."""
    return pd.DataFrame(
        {f.name: pd.Series([r.get(f.name) for r in rows], dtype=DTYPES[type(f.dataType)]) for f in OUTPUT.fields}
    )


def objects(values: list) -> np.ndarray:
    arr = np.empty(len(values), dtype=object)
    arr[:] = values
    return arr
