"""One stage's step: its sources' rows of a step in, its panes (as rows), dead letters and output
watermark out. The core's run and the Spark plan (per hash bucket of the key) both call it."""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..aggregates import Aggregate
from ..engine import TS, DeadLetter, Engine, EngineState, Pane
from ..pipeline import Pipeline, WatermarkStrategy
from ..rules import Reason
from ..windows import WINDOW_END, WINDOW_START, Inherited
from .accumulators import (
    MERGE_ROW,
    Contribution,
    ContributionAggregate,
    MergeAggregate,
    SideRow,
    SignedAggregate,
    contribution_column,
)
from .graph import PANE_COLUMNS, Stage, StageGraph
from .rows import CONTRIBUTOR, SEQ, plain_value, record_at, stage_frame

#: the one value column of a merge stage's engine (its rows)
ROWS = "__rows"


@dataclass(frozen=True)
class StageLetter:
    """A dead letter of a stage, naming the input (or stage) the record came from; ``seq``: the
    record's arrival number in its input (None for a stage's rows)."""

    letter: DeadLetter
    input: str
    stage: str
    seq: int | None = None


@dataclass
class StageStep:
    """What a stage's step emitted: its rows (what the next stages read), the same as printed
    records, its dead letters, and its output watermark after the step."""

    rows: pd.DataFrame
    records: list[dict]
    letters: list[StageLetter] = field(default_factory=list)
    output_watermark: int = 0
    #: per input the stage reads: the arrival numbers of its valid records in no window (a gap)
    unwindowed: dict[str, set[int]] = field(default_factory=dict)
    #: a partial runner's (a part of the stage): its windows' earliest hold as each phase of the
    #: step began and after the last (``core.engine.parts.PartReport``)
    holds: tuple[int, ...] = ()


class StageRunner:
    """Runs one stage of a graph: its engine (over its own pipeline), the rows it reads and emits."""

    def __init__(self, graph: StageGraph, stage: Stage, partial: bool = False):
        self.graph, self.stage = graph, stage
        self.window = graph.windows(stage)
        self.contributions = tuple(graph.emits_contributions(s) for s in stage.sources)
        # an accumulating stage that feeds another runs retracting inside (see accumulators)
        self.hides_retractions = stage.accumulation == "accumulating" and graph.feeds_stages(stage.name)
        self.merge_fn = graph.merge(stage) if stage.is_merge else None
        self.side_columns = [graph.columns(s) for s in stage.sources]
        self.pipeline = self._pipeline()
        # (partial: one part of the stage, whose panes' timing may hang on the others' holds)
        self.partial = partial
        self.engine = Engine(self.pipeline, partial=partial)
        self.columns = self._columns()

    def _pipeline(self) -> Pipeline:
        s = self.stage
        if self.merge_fn is not None:
            aggs: tuple[Aggregate, ...] = (Aggregate(ROWS, MergeAggregate(self.merge_fn)),)
        elif self.contributions[0] and s.accumulation == "discarding":
            aggs = tuple(Aggregate(a.output, SignedAggregate(a.fn)) for a in s.aggregates)
        elif self.contributions[0]:
            aggs = tuple(Aggregate(a.output, ContributionAggregate(a.fn)) for a in s.aggregates)
        else:
            aggs = s.aggregates
        mode = "retracting" if self.hides_retractions else s.accumulation
        return Pipeline(
            window=self.window,
            aggregates=aggs,
            key=s.key,
            event_time=None,
            watermark=WatermarkStrategy(punctuation=True),
            allowed_lateness=s.allowed_lateness,
            trigger=s.trigger,
            accumulation=mode,
            only_updated_panes=s.only_updated_panes,
        )

    def _columns(self) -> list[str]:
        """The printed columns of the stage's rows, in order."""
        values = [a.output for a in self.stage.aggregates]
        if self.merge_fn is not None:
            out = getattr(self.merge_fn, "output_columns", None)
            values = [c for c in out() if c not in self.stage.key] if out is not None else []
        return [*self.stage.key, *PANE_COLUMNS, *values]

    def new_state(self) -> EngineState:
        return self.engine.new_state()

    def step(
        self, state: EngineState, sides: list[pd.DataFrame | None], watermark: int, processing_time: int | None = None
    ) -> StageStep:
        """Ingest the sources' rows (lateness against the stage's watermark from before the step),
        move the watermark, fire what is due."""
        letters: list[StageLetter] = []
        parts, origins = [], []
        unwindowed: dict[str, set[int]] = {}
        for j, side in enumerate(sides):
            if side is None or not len(side):
                continue
            side, bad = self.checked(j, side)
            letters += bad
            if len(side):
                parts.append(self.batch(j, side))
                origins.append((j, side))
                if SEQ in side.columns:
                    unwindowed[self.stage.sources[j]] = self.in_no_window(side)
        batch = pd.concat(parts, ignore_index=True) if parts else None
        origin: dict[int, tuple[str, int | None]] = {}
        holds: list[int] = []
        record_of = self.record_finder(origins, origin)
        panes, dead = self.engine_step(state, batch, watermark, processing_time, record_of, holds)
        for d in dead:
            src, seq = origin.get(id(d.record), (self.stage.sources[0], None))
            letters.append(StageLetter(d, src, self.stage.name, seq))
        rows, records = stage_frame(panes, self.pipeline, self.merge_fn is not None, self.columns)
        return StageStep(rows, records, letters, self.engine.output_watermark(state), unwindowed, tuple(holds))

    def in_no_window(self, side: pd.DataFrame) -> set[int]:
        """The arrival numbers of an input's rows that the stage's windows leave out (a hopping
        gap: only windows whose rows follow from their event time alone have gaps)."""
        if self.window.family != "fixed":
            return set()
        ts = side[TS].to_numpy(dtype=np.int64)
        inside = np.zeros(len(ts), dtype=bool)
        inside[self.window.assign(ts)[0]] = True
        return set(side[SEQ].to_numpy(dtype=np.int64)[~inside].tolist())

    def engine_step(
        self,
        state: EngineState,
        batch: pd.DataFrame | None,
        watermark: int,
        processing_time: int | None,
        record_of,
        holds: list[int],
    ) -> tuple[list[tuple[int, Pane]], list[DeadLetter]]:
        """The engine's step in its three phases (the clock moves, the batch, the watermark moves),
        each pane with its phase: panes of different keys interleave by phase (a plan that runs
        the keys apart orders them by it). A partial runner appends to ``holds`` its earliest hold
        as each phase begins and after the last."""
        panes: list[tuple[int, Pane]] = []
        dead: list[DeadLetter] = []
        self.hold(state, holds)
        if processing_time is not None and processing_time > state.processing_time:
            panes += [(0, p) for p in self.engine.advance(state, None, processing_time).panes]
        self.hold(state, holds)
        if batch is not None and len(batch):
            res = self.engine.ingest(state, batch, record_of=record_of)
            panes += [(1, p) for p in res.panes]
            dead = res.dead_letters
        self.hold(state, holds)
        panes += [(2, p) for p in self.engine.advance(state, watermark).panes]
        self.hold(state, holds)
        return panes, dead

    def hold(self, state: EngineState, holds: list[int]) -> None:
        if self.partial:
            holds.append(self.engine.earliest_hold(state))

    def record_finder(self, origins: list, origin: dict):
        """``record_of`` for the engine: batch row -> the record, noting where it came from."""
        offsets = np.cumsum([0] + [len(side) for _, side in origins])

        def record_of(i: int) -> dict:
            k = int(np.searchsorted(offsets, i, side="right")) - 1
            j, side = origins[k]
            rec = record_at(side, i - int(offsets[k]))
            seq = int(side[SEQ].iat[i - int(offsets[k])]) if SEQ in side.columns else None
            origin[id(rec)] = (self.stage.sources[j], seq)
            return rec

        return record_of

    def visible(self, records: list[dict]) -> list[dict]:
        """The records the stage prints (an accumulating stage's, without its inner retractions)."""
        if self.hides_retractions:
            return [r for r in records if not r["retraction"]]
        return records

    def checked(self, j: int, side: pd.DataFrame) -> tuple[pd.DataFrame, list[StageLetter]]:
        """A side's rows that have their key and numbers where the aggregates need them; the
        others as dead letters (the first failed check's reason, as ``rules.VALIDATION_ORDER``)."""
        keys = list(self.stage.keys[j])
        numeric: list[str] = (
            []
            if self.stage.is_merge
            else [str(a.fn.column) for a in self.stage.aggregates if a.fn.numeric and a.fn.column in side.columns]
        )
        missing = side[keys].isna().to_numpy() if keys else np.zeros((len(side), 0), dtype=bool)
        not_number = np.zeros((len(side), len(numeric)), dtype=bool)
        for n, c in enumerate(numeric):
            col = side[c]
            if col.dtype.kind not in "iuf":
                not_number[:, n] = [v is not None and not is_number(v) for v in col.tolist()]
        bad = missing.any(axis=1) | not_number.any(axis=1)
        if not bad.any():
            return side, []
        letters = []
        source = self.stage.sources[j]
        for i in np.flatnonzero(bad).tolist():
            if missing[i].any():
                absent = [k for k, m in zip(keys, missing[i]) if m]
                reason, detail = Reason.MISSING_KEY, f"no value for key column(s) {absent}"
            else:
                wrong = sorted(c for c, m in zip(numeric, not_number[i]) if m)
                reason, detail = Reason.INVALID_VALUE, f"not a number: {wrong}"
            seq = int(side[SEQ].iat[i]) if SEQ in side.columns else None
            letter = DeadLetter(reason, record_at(side, i), detail=detail)
            letters.append(StageLetter(letter, source, self.stage.name, seq))
        return side[~bad].reset_index(drop=True), letters

    def batch(self, j: int, side: pd.DataFrame) -> pd.DataFrame:
        """A side's rows as the engine's batch: event time, key, window bounds, values."""
        out = pd.DataFrame({TS: side[TS].to_numpy(dtype=np.int64)})
        for k, own in zip(self.stage.key, self.stage.keys[j]):
            out[k] = side[own].to_numpy()
        if isinstance(self.window, Inherited):
            out[WINDOW_START] = side[WINDOW_START].to_numpy(dtype=np.int64)
            out[WINDOW_END] = side[WINDOW_END].to_numpy(dtype=np.int64)
        contributions = self.contribution_list(j, side)
        if self.merge_fn is not None:
            cols = list(self.side_columns[j] or ())
            out[MERGE_ROW] = objects([SideRow(j, c, r) for c, r in zip(contributions, records_of(side, cols))])
            return out
        for a in self.stage.aggregates:
            col = a.fn.column
            if self.contributions[j]:
                values = side[col].tolist() if col in side.columns else [None] * len(side)
                out[contribution_column(col)] = objects(
                    [c._replace(value=plain_value(v)) for c, v in zip(contributions, values) if c is not None]
                )
            elif col not in (None, "*") and col not in out.columns:
                out[col] = side[col].to_numpy()
        return out

    def contribution_list(self, j: int, side: pd.DataFrame) -> list[Contribution | None]:
        """Each row's contribution (None: a plain row, from an input or a discarding stage)."""
        if not self.contributions[j]:
            return [None] * len(side)
        return [
            Contribution(c, int(p), bool(r), None)
            for c, p, r in zip(side[CONTRIBUTOR].tolist(), side["pane_index"].tolist(), side["retraction"].tolist())
        ]


def is_number(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def objects(values: list) -> np.ndarray:
    arr = np.empty(len(values), dtype=object)
    arr[:] = values
    return arr


def records_of(frame: pd.DataFrame, columns: list[str]) -> list[dict]:
    """The rows as plain mappings of these columns (a column the frame lacks is None)."""
    cols = {
        c: [plain_value(v) for v in frame[c].tolist()] if c in frame.columns else [None] * len(frame) for c in columns
    }
    return [dict(zip(columns, vals)) for vals in zip(*cols.values())] if columns else [{} for _ in range(len(frame))]
