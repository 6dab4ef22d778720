"""A stage graph's run: its inputs' records and watermarks in, every stage stepped in order.

Each step goes to one input (its records, or a watermark) or to all (the end, the clock). An
input's watermark moves as a single-stage pipeline's does (its strategy; explicit values); records
whose event time is missing or bad, malformed records and bad punctuation are dead-lettered once,
at the input. Then each stage, in order, takes the step's rows of what it reads (an input's records,
an earlier stage's panes of this step) and the watermark of its sources (an input's; a stage's
output watermark; the earlier of the two for a merge), and steps. A record late at several stages
that read its input is dead-lettered once, at the first of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from .. import rules
from ..aggregates import Aggregate, Count
from ..engine import DeadLetter, EngineState
from ..output import dead_letter_record
from ..pipeline import Pipeline
from ..records import parse_records
from ..time import END_OF_INPUT, MIN_TIME
from ..windows import GlobalWindows
from .accounts import GraphAccounting, InputStep, input_account
from .graph import Input, StageGraph
from .rows import input_frame
from .step import StageLetter, StageRunner


@dataclass
class InputState:
    watermark: int = MIN_TIME
    max_event_time: int = MIN_TIME
    seq: int = 0  # records seen


@dataclass
class GraphState:
    inputs: dict[str, InputState]
    stages: dict[str, EngineState]
    #: each stage's output watermark after the last step
    watermarks: dict[str, int]
    processing_time: int = 0


@dataclass
class InputLetter:
    """A dead letter of an input's own checks (malformed, event time, punctuation)."""

    letter: DeadLetter
    input: str


@dataclass
class GraphStep:
    """A step's output: each stage's records as printed (in emission order) and the dead letters."""

    records: dict[str, list[dict]] = field(default_factory=dict)
    letters: list[StageLetter | InputLetter] = field(default_factory=list)
    #: where the step's input records went (``accounts``)
    accounting: GraphAccounting = field(default_factory=GraphAccounting)


def letter_record(d: StageLetter | InputLetter) -> dict:
    """A dead letter as a record: the single-stage form, naming its input (and stage)."""
    out = dead_letter_record(d.letter)
    out["input"] = d.input
    if isinstance(d, StageLetter):
        out["stage"] = d.stage
    return out


def input_pipeline(i: Input) -> Pipeline:
    """What the checks of an input's records need: its event time and watermark strategy."""
    return Pipeline(
        window=GlobalWindows(),
        aggregates=(Aggregate("rows", Count("*")),),
        event_time=i.event_time,
        watermark=i.watermark,
    )


class GraphRunner:
    def __init__(self, graph: StageGraph):
        for i in graph.inputs:
            if i.watermark.idle_timeout is not None:
                raise ValueError(f"input {i.name}: idle_timeout is for single-stage pipelines")
        self.graph = graph
        self.runners = {s.name: StageRunner(graph, s) for s in graph.stages}
        self.checks = {i.name: input_pipeline(i) for i in graph.inputs}

    def new_state(self) -> GraphState:
        return GraphState(
            {i.name: InputState() for i in self.graph.inputs},
            {name: r.new_state() for name, r in self.runners.items()},
            {name: MIN_TIME for name in self.runners},
        )

    def source_watermark(self, state: GraphState, source: str) -> int:
        if self.graph.is_input(source):
            return state.inputs[source].watermark
        return state.watermarks[source]

    def step(
        self,
        state: GraphState,
        input: str | None = None,
        records: list | None = None,
        watermark: int | None = None,
        end: bool = False,
        processing_time: int | None = None,
    ) -> GraphStep:
        """One step: ``records`` and/or a ``watermark`` for ``input``; ``end`` ends ``input`` (every
        input when None); the clock moves to ``processing_time`` first."""
        if processing_time is not None:
            state.processing_time = max(state.processing_time, processing_time)
        out = GraphStep()
        frames: dict[str, pd.DataFrame] = {}
        arrived: dict[str, InputStep] = {}
        if input is not None and (records is not None or watermark is not None):
            frames[input], arrived[input] = self.ingest(state, input, records or [], watermark, out)
        if end:
            for name in [input] if input is not None else self.graph.input_names:
                state.inputs[name].watermark = END_OF_INPUT
        stage_letters: list[StageLetter] = []
        unwindowed: dict[str, list[set[int]]] = {}
        for stage in self.graph.stages:
            runner = self.runners[stage.name]
            wm = min(self.source_watermark(state, src) for src in stage.sources)
            res = runner.step(state.stages[stage.name], [frames.get(src) for src in stage.sources], wm, processing_time)
            frames[stage.name] = res.rows
            state.watermarks[stage.name] = res.output_watermark
            out.records[stage.name] = runner.visible(res.records)
            stage_letters += res.letters
            for src, seqs in res.unwindowed.items():
                unwindowed.setdefault(src, []).append(seqs)
        letters = once(stage_letters)
        out.letters += letters
        self.account(out.accounting, arrived, letters, unwindowed)
        return out

    def account(
        self,
        out: GraphAccounting,
        arrived: dict[str, InputStep],
        letters: list[StageLetter],
        unwindowed: dict[str, list[set[int]]],
    ) -> None:
        """Where the step's input records went; the stages' dead letters of panes beside."""
        for name, step in arrived.items():
            mine = [(d.seq, str(d.letter.reason)) for d in letters if d.input == name and d.seq is not None]
            readers = len(self.graph.readers(name))
            out.add_input(name, input_account(step, mine, unwindowed.get(name, []), readers))
        out.pane_letters.update(str(d.letter.reason) for d in letters if d.seq is None)

    def ingest(
        self, state: GraphState, name: str, records: list, watermark: int | None, out: GraphStep
    ) -> tuple[pd.DataFrame, InputStep]:
        """An input's records: checked, stamped, numbered (and what came); its watermark moved."""
        inp, st = self.graph.input(name), state.inputs[name]
        parsed = parse_records(self.checks[name], records, ingestion_time=state.processing_time)
        out.letters += [InputLetter(d, name) for d in parsed.dead_letters]
        ts = parsed.frame["__ts"].astype("int64").tolist()
        if ts:
            st.max_event_time = max(st.max_event_time, max(ts))
        explicit = max(v for v in (watermark, parsed.punctuation, MIN_TIME) if v is not None)
        strategy = inp.watermark
        st.watermark = rules.watermark_after(
            st.watermark, st.max_event_time, strategy.max_delay, strategy.punctuation, explicit, False
        )
        columns = list(inp.columns) if inp.columns is not None else record_columns(parsed.records, strategy)
        frame = input_frame(parsed.records, ts, st.seq, columns)
        st.seq += len(parsed.records)
        arrived = InputStep(
            len(records),
            parsed.watermark_records,
            [str(d.reason) for d in parsed.dead_letters],
            list(range(st.seq - len(parsed.records), st.seq)),
        )
        return frame, arrived


def record_columns(records: list[dict], strategy) -> list[str]:
    """The columns of records, in the order they first appear (not the punctuation column)."""
    cols = dict.fromkeys(c for r in records for c in r)
    cols.pop(strategy.punctuation_column, None) if strategy.punctuation else None
    return list(cols)


def once(letters: list[StageLetter]) -> list[StageLetter]:
    """A record dead-lettered at several stages that read its input (late, a missing key...): its
    first dead letter only, the one its input's account counts (``accounts.input_account``)."""
    seen: set = set()
    out = []
    for d in letters:
        if d.seq is not None:
            if (d.input, d.seq) in seen:
                continue
            seen.add((d.input, d.seq))
        out.append(d)
    return out
