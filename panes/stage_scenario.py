"""Replay scenarios of multi-stage pipelines, and their run through the core.

``{"pipeline": {"inputs": ..., "stages": ..., "output": ...}, "timeline": [step, ...]}``. A step
is a single-stage scenario's step with the input it goes to: ``{"add": [...], "input": "bids"}``,
``{"watermark": T, "input": "auctions"}`` (without ``input``, a step goes to the only input);
``{"end": true}`` ends every input (with ``input``, that one); ``{"processing_time": T}`` moves
the clock of every stage. The output stage's panes are printed one JSON object per line, as a
single-stage replay prints them (a merge's pane: one line per row); a dead letter names the
``input`` its record came from, and the ``stage`` that dead-lettered it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .core.stages import GraphRunner, StageGraph, letter_record
from .core.stages.accounts import GraphAccounting
from .scenario import DOCUMENT_KEYS, ReplayResult, parse_step
from .spec import FieldError, SpecError, load_document
from .stage_spec import StagesSpec, parse_stages_spec


@dataclass
class StageScenario:
    spec: StagesSpec
    graph: StageGraph
    timeline: list[dict]
    raw: dict = field(default_factory=dict)


def is_stage_scenario(doc: Any) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("pipeline"), dict) and "stages" in doc["pipeline"]


def load_stage_scenario(source: str | Path | dict) -> StageScenario:
    """A multi-stage scenario; ``SpecError`` lists everything wrong with it."""
    doc = source if isinstance(source, dict) else load_document(source)
    errors: list[FieldError] = [FieldError(f, "unknown field") for f in sorted(set(doc) - DOCUMENT_KEYS)]
    timeline = doc.get("timeline")
    if not isinstance(timeline, list):
        errors.append(FieldError("timeline", "required: a list of steps"))
        timeline = []
    spec = None
    try:
        spec = parse_stages_spec(doc["pipeline"])
    except SpecError as e:
        errors += e.errors
    inputs = list(spec.inputs) if spec is not None else []
    steps = []
    for i, step in enumerate(timeline):
        try:
            steps.append(parse_stage_step(step, f"timeline[{i}]", inputs))
        except SpecError as e:
            errors += e.errors
    if errors or spec is None:
        raise SpecError.of(errors)
    graph = spec.to_graph()
    graph = replace(
        graph,
        inputs=tuple(
            i if i.columns is not None else replace(i, columns=timeline_columns(steps, i)) for i in graph.inputs
        ),
    )
    return StageScenario(spec, graph, steps, doc)


def parse_stage_step(step: Any, where: str, inputs: list[str]) -> dict[str, Any]:
    """A step with its input (the only input when it names none and needs one)."""
    if not isinstance(step, dict):
        raise SpecError(where, "a step is a mapping")
    rest = {k: v for k, v in step.items() if k != "input"}
    s = parse_step(rest, where)
    name = step.get("input")
    if name is not None and name not in inputs:
        raise SpecError(f"{where}.input", f"no input {name!r}; the inputs are {inputs}")
    if name is None and ("add" in s or "watermark" in s):
        if len(inputs) != 1:
            raise SpecError(f"{where}.input", f"required: the pipeline has inputs {inputs}")
        name = inputs[0]
    if name is not None:
        s["input"] = name
    return s


def timeline_columns(steps: list[dict], inp) -> tuple[str, ...]:
    """An input's columns: those of its records in the timeline, in the order they first appear."""
    cols: dict[str, None] = {}
    for s in steps:
        if s.get("input") == inp.name:
            for r in s.get("add", []):
                if isinstance(r, dict):
                    cols.update(dict.fromkeys(r))
    if inp.watermark.punctuation:
        cols.pop(inp.watermark.punctuation_column, None)
    return tuple(cols)


@dataclass
class StageReplayResult(ReplayResult):
    #: every stage's printed panes
    stages: dict[str, list[dict]] = field(default_factory=dict)


def replay_stages_core(scenario: StageScenario) -> StageReplayResult:
    """Run the timeline through the core, in-process."""
    graph = scenario.graph
    runner = GraphRunner(graph)
    state = runner.new_state()
    stages: dict[str, list[dict]] = {s.name: [] for s in graph.stages}
    dead: list[dict] = []
    accounting = GraphAccounting()
    for step in scenario.timeline:
        res = runner.step(
            state,
            step.get("input"),
            step.get("add"),
            step.get("watermark"),
            step.get("end", False),
            step.get("processing_time"),
        )
        for name, records in res.records.items():
            stages[name].extend(records)
        dead.extend(letter_record(d) for d in res.letters)
        accounting.add_graph(res.accounting)
    output = graph.output_stage.name
    metrics = {"watermarks": dict(state.watermarks)}
    return StageReplayResult(stages[output], dead, metrics, accounting, stages=stages)
