"""Replay scenarios: a pipeline and a timeline of micro-batches, watermark and clock steps, and their
run through the core engine.

Scenario: ``{"pipeline": {...spec without source/sink...}, "timeline": [step, ...]}``. Steps:
``{"add": [record, ...]}``, ``{"watermark": T}``, ``{"processing_time": T}``, ``{"end": true}``
(a step may combine ``processing_time`` with ``add`` or ``watermark``: the clock moves first).
Every emitted pane is one JSON object per line, in emission order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .core.accounting import Accounting
from .core.engine import Engine
from .core.json_lines import dumps as json_line
from .core.output import dead_letter_record, pane_records
from .core.pipeline import Pipeline
from .core.records import parse_records, unit_warning
from .core.rules import ingestion_stamp
from .core.time import EVENT_TIME_RANGE, in_event_time_range, parse_instant
from .spec import FieldError, SpecError, load_document, parse_pipeline_spec

DOCUMENT_KEYS = {"pipeline", "timeline", "name", "description"}
STEP_KEYS = {"add", "watermark", "processing_time", "end"}


@dataclass
class Scenario:
    pipeline: Pipeline
    timeline: list[dict]
    raw: dict = field(default_factory=dict)


def load_scenario(source: str | Path | dict) -> Scenario:
    """A scenario from a file or a mapping; ``SpecError`` lists everything wrong with it."""
    doc = source if isinstance(source, dict) else load_document(source)
    errors: list[FieldError] = []
    if "pipeline" not in doc:
        errors.append(FieldError("pipeline", "required field is missing"))
    timeline = doc.get("timeline")
    if not isinstance(timeline, list):
        errors.append(FieldError("timeline", "required: a list of steps"))
    errors += [FieldError(f, "unknown field") for f in sorted(set(doc) - DOCUMENT_KEYS)]
    spec = None
    if "pipeline" in doc:
        try:
            spec = parse_pipeline_spec(doc["pipeline"])
        except SpecError as e:
            errors += e.errors
    steps = []
    for i, step in enumerate(timeline if isinstance(timeline, list) else []):
        try:
            steps.append(parse_step(step, f"timeline[{i}]"))
        except SpecError as e:
            errors += e.errors
    if errors or spec is None:
        raise SpecError.of(errors)
    return Scenario(spec.to_pipeline(), steps, doc)


def parse_step(step: Any, where: str) -> dict[str, Any]:
    """A timeline step with its instants as epoch ms."""
    if not isinstance(step, dict) or not step or set(step) - STEP_KEYS:
        raise SpecError(where, f"a step is one of {sorted(STEP_KEYS)}")
    s: dict[str, Any] = {}
    for name in ("processing_time", "watermark"):
        if name not in step:
            continue
        try:
            s[name] = parse_instant(step[name])
        except ValueError as e:
            raise SpecError(where, str(e)) from None
        if not in_event_time_range(s[name]):
            raise SpecError(f"{where}.{name}", f"{step[name]!r} is out of range ({EVENT_TIME_RANGE})")
    if "add" in step:
        if not isinstance(step["add"], list):
            raise SpecError(f"{where}.add", "a list of records")
        s["add"] = step["add"]
    if step.get("end"):
        s["end"] = True
    return s


@dataclass
class ReplayResult:
    panes: list[dict]
    dead_letters: list[dict]
    metrics: dict
    #: where every record went (None: not counted by this engine)
    accounting: Accounting | None = None
    #: things the run noticed, one line each (e.g. event times that look like another unit)
    warnings: list[str] = field(default_factory=list)


@dataclass
class StepTrace:
    """One timeline step as the core ran it (``replay_core``'s ``on_step``): the step, the processing
    time and the watermark after it, and the panes and dead letters it emitted."""

    index: int
    step: dict
    processing_time: int
    watermark: int
    panes: list[dict]
    dead_letters: list[dict]


def replay_core(scenario: Scenario, on_step: Callable[[StepTrace], None] | None = None) -> ReplayResult:
    """Run the timeline through the pure core, in-process; ``on_step`` sees each step once it ran."""
    pipe = scenario.pipeline
    if pipe.window_pipeline is not None:
        refusal = pipe.window_pipeline.core_refusal()
        if refusal:
            raise SpecError(f"window_pipeline.{pipe.window_pipeline.transform.kind}", refusal)
    engine = Engine(pipe)
    state = engine.new_state()
    panes: list[dict] = []
    dead: list[dict] = []
    counts = Accounting()
    warnings: list[str] = []
    for index, step in enumerate(scenario.timeline):
        emitted = len(panes), len(dead)
        pt = step.get("processing_time")
        batch = None
        record_of = None
        wm = step.get("watermark")
        if "add" in step:
            # ingestion time: the clock as this step leaves it (the clock moves first)
            parsed = parse_records(pipe, step["add"], ingestion_time=ingestion_stamp(pt or 0, state.processing_time))
            dead.extend(dead_letter_record(d) for d in parsed.dead_letters)
            counts.records_in += len(step["add"])
            counts.watermark_records += parsed.watermark_records
            counts.add_dead_letters(d.reason for d in parsed.dead_letters)
            if parsed.unit_hint and not warnings:
                warnings.append(unit_warning(pipe, *parsed.unit_hint))
            batch = parsed.frame
            record_of = parsed.records.__getitem__
            if parsed.punctuation is not None:
                wm = parsed.punctuation if wm is None else max(wm, parsed.punctuation)
        res = engine.step(
            state,
            batch,
            watermark=wm,
            processing_time=pt,
            end=step.get("end", False),
            record_of=record_of,
            active=bool(step.get("add")),
        )
        panes.extend(r for p in res.panes for r in pane_records(p, pipe))
        dead.extend(dead_letter_record(d) for d in res.dead_letters)
        counts.counted += res.counted
        counts.in_no_window += res.in_no_window
        counts.add_dead_letters(d.reason for d in res.dead_letters)
        if on_step is not None:
            on_step(
                StepTrace(index, step, state.processing_time, state.watermark, panes[emitted[0] :], dead[emitted[1] :])
            )
    return ReplayResult(panes, dead, dict(state.metrics), counts, warnings)


def dumps(obj: dict) -> str:
    """A replay's pane or dead letter as a JSON line (strict JSON: ``panes.core.json_lines``)."""
    return json_line(obj)
