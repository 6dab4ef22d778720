"""The multi-stage spec: named inputs and a list of stages (``panes.core.stages``).

```yaml
inputs:                                  # each: what a single-stage spec says about time
  bids: {event_time: ts, watermark: {max_delay: 0}}
stages:                                  # each reads inputs or earlier stages
  - name: per_auction
    from: bids
    key: auction
    window: {hopping: {size: 10 s, hop: 2 s}}
    aggregates: {num: {count: "*"}}
  - name: hottest                        # no window: it inherits per_auction's windows
    from: per_auction
    aggregates: {maxnum: {max: num}}
output: hottest                          # the stage printed and written (default: the last)
```

A merge stage reads two: ``from: [a, b]``, ``key: {a: col, b: col}``, ``join: inner | left |
cogroup | {merge: "module:Class"}``. A run spec gives each input a ``source``. Every mistake is a
``FieldError`` naming the field (``stages[1].window``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator

from .core.aggregates import make_aggregate
from .core.pipeline import WatermarkStrategy
from .core.stages import MERGES, PANE_COLUMNS, Input, Stage, StageGraph, load_merge
from .core.triggers import parse_trigger
from .core.windows import parse_window
from .spec import (
    AggregateSpec,
    FieldError,
    SinkSpec,
    SourceSpec,
    SparkSpec,
    SpecError,
    SpecModel,
    WatermarkSpec,
    duration,
    load_document,
    spec_error,
)

JOINS = tuple(MERGES)


class InputSpec(SpecModel):
    event_time: str | None = None
    watermark: WatermarkSpec = Field(default_factory=WatermarkSpec)
    #: the columns of its records, in order (what a merge's rows hold); default: as they come
    columns: list[str] | None = None

    def to_input(self, name: str) -> Input:
        w = self.watermark
        return Input(
            name,
            self.event_time,
            WatermarkStrategy(w.max_delay, w.punctuation, w.punctuation_column),
            None if self.columns is None else tuple(self.columns),
        )


class RunInputSpec(InputSpec):
    source: SourceSpec


class StageSpec(SpecModel):
    name: str
    from_: str | list[str] = Field(alias="from")
    key: str | list[str] | dict[str, str | list[str]] | None = None
    window: Any = None
    trigger: Any = None
    accumulation: Literal["discarding", "accumulating", "retracting"] = "accumulating"
    allowed_lateness: int = 0
    only_updated_panes: bool = False
    aggregates: dict[str, AggregateSpec] | None = None
    join: Any = None

    @field_validator("allowed_lateness", mode="before")
    @classmethod
    def _lateness(cls, v):
        return duration(v)

    @field_validator("window", mode="before")
    @classmethod
    def _window(cls, v):
        if v is not None:
            parse_window(v)
        return v

    @field_validator("trigger", mode="before")
    @classmethod
    def _trigger(cls, v):
        parse_trigger(v)
        return v

    @field_validator("join", mode="before")
    @classmethod
    def _join(cls, v):
        if v is None or v in JOINS:
            return v
        if isinstance(v, dict) and set(v) == {"merge"} and isinstance(v["merge"], str):
            load_merge(v["merge"])
            return v
        raise ValueError(f"join is one of {', '.join(JOINS)} or {{merge: 'module:Class'}}")

    @property
    def sources(self) -> list[str]:
        return [self.from_] if isinstance(self.from_, str) else list(self.from_)


class StagesSpec(SpecModel):
    """The windowing part of a multi-stage spec (what a replay scenario's ``pipeline`` holds)."""

    name: str | None = None
    inputs: dict[str, InputSpec]
    stages: list[StageSpec]
    output: str | None = None

    def to_graph(self) -> StageGraph:
        errors = graph_errors(self)
        if errors:
            raise SpecError.of(errors)
        return StageGraph(
            tuple(spec.to_input(name) for name, spec in self.inputs.items()),
            tuple(to_stage(s) for s in self.stages),
            self.output,
        )


class StagesRunSpec(StagesSpec):
    """A whole multi-stage job: each input's source, the output stage's sink, dead letters."""

    # (pydantic validates the narrower field; mypy sees dict, invariant, as another type)
    inputs: dict[str, RunInputSpec]  # type: ignore[assignment]
    mode: Literal["stream", "batch"] = "stream"
    sink: SinkSpec = Field(default_factory=SinkSpec)
    dead_letter: SinkSpec | None = None
    checkpoint: str | None = None
    spark: SparkSpec = Field(default_factory=SparkSpec)
    timeout: int | None = None

    @field_validator("timeout", mode="before")
    @classmethod
    def _t(cls, v):
        return None if v is None else duration(v)


#: the fields of a multi-stage run spec that are not its pipeline's
RUN_ONLY = tuple(f for f in StagesRunSpec.model_fields if f not in StagesSpec.model_fields)


def keys_of(s: StageSpec) -> tuple[tuple[str, ...], ...]:
    """The key columns on each source."""

    def cols(v: Any) -> tuple[str, ...]:
        return () if v is None else (v,) if isinstance(v, str) else tuple(v)

    if isinstance(s.key, dict):
        return tuple(cols(s.key.get(src)) for src in s.sources)
    return tuple(cols(s.key) for _ in s.sources)


def to_stage(s: StageSpec) -> Stage:
    join = s.join["merge"] if isinstance(s.join, dict) else s.join
    aggs = tuple(make_aggregate(out, *next(iter(a.items()))) for out, a in (s.aggregates or {}).items())
    return Stage(
        s.name,
        tuple(s.sources),
        keys_of(s),
        None if s.window is None else parse_window(s.window),
        aggs,
        join,
        s.allowed_lateness,
        parse_trigger(s.trigger),
        s.accumulation,
        s.only_updated_panes,
    )


def graph_errors(spec: StagesSpec) -> list[FieldError]:
    """What is wrong across fields: names, sources, keys, windows, aggregates and joins."""
    errors: list[FieldError] = []
    if not spec.inputs:
        errors.append(FieldError("inputs", "at least one input is needed"))
    if not spec.stages:
        errors.append(FieldError("stages", "at least one stage is needed"))
    known = set(spec.inputs)
    for i, s in enumerate(spec.stages):
        errors += stage_errors(spec, i, s, known)
        known.add(s.name)
    names = [s.name for s in spec.stages]
    if spec.output is not None and spec.output not in names:
        errors.append(FieldError("output", f"no stage {spec.output!r}; the stages are {names}"))
    if not errors:
        errors += columns_errors(spec)
    return errors


def stage_errors(spec: StagesSpec, i: int, s: StageSpec, known: set[str]) -> list[FieldError]:
    at = f"stages[{i}]"
    errors = []
    if s.name in known:
        errors.append(FieldError(f"{at}.name", f"{s.name!r} is already an input or a stage"))
    srcs = s.sources
    if len(srcs) not in (1, 2) or len(set(srcs)) != len(srcs):
        errors.append(FieldError(f"{at}.from", "one input or stage, or a list of two"))
    for src in srcs:
        if src not in known:
            errors.append(FieldError(f"{at}.from", f"{src!r} is no input or earlier stage"))
    if s.window is None and any(src in spec.inputs for src in srcs):
        errors.append(FieldError(f"{at}.window", "required: an input has no windows to inherit"))
    merge = len(srcs) == 2
    if isinstance(s.key, dict) and (not merge or set(s.key) != set(srcs)):
        errors.append(FieldError(f"{at}.key", f"a mapping names the key column(s) of each of {srcs}"))
    if merge and not isinstance(s.key, dict) and s.key is not None:
        form = f"{{{srcs[0]}: ..., {srcs[-1]}: ...}}"
        errors.append(FieldError(f"{at}.key", f"a merge stage names each side's key: {form}"))
    if merge and isinstance(s.key, dict) and len(set(map(len, keys_of(s)))) != 1:
        errors.append(FieldError(f"{at}.key", "both sides need as many key columns"))
    if merge and (s.aggregates or s.join is None):
        errors.append(
            FieldError(
                f"{at}.join",
                f"a stage reading two has a join ({', '.join(JOINS)} or {{merge: 'module:Class'}}), not aggregates",
            )
        )
    if not merge and (s.join is not None or not s.aggregates):
        errors.append(FieldError(f"{at}.aggregates", "a stage reading one has aggregates, and no join"))
    upstream = {u.name: u for u in spec.stages}.get(srcs[0])
    if not merge and s.accumulation == "discarding" and upstream is not None and upstream.accumulation != "discarding":
        other = sorted(out for out, a in (s.aggregates or {}).items() if next(iter(a)) not in ("sum", "count"))
        if other:
            errors.append(
                FieldError(
                    f"{at}.aggregates",
                    f"a discarding stage over {srcs[0]}'s restating panes "
                    f"can sum or count (a retraction subtracts), not {other}",
                )
            )
    clash = (set(s.aggregates or ()) | set(keys_of(s)[0])) & set(PANE_COLUMNS)
    if clash:
        errors.append(FieldError(f"{at}.aggregates", f"column names {sorted(clash)} are reserved for pane metadata"))
    return errors


def columns_errors(spec: StagesSpec) -> list[FieldError]:
    """Key and aggregate columns that a stage's source does not have (a stage's columns are
    known: its key and values); merges whose windows differ."""
    errors = []
    graph = StageGraph(tuple(v.to_input(k) for k, v in spec.inputs.items()), tuple(map(to_stage, spec.stages)))
    for i, s in enumerate(graph.stages):
        for src, key in zip(s.sources, s.keys):
            cols = graph.columns(src) if not graph.is_input(src) else None
            missing = [k for k in key if cols is not None and k not in cols]
            has = f"it has {list(cols or ())}"
            if missing:
                errors.append(FieldError(f"stages[{i}].key", f"{src} has no column {missing}; {has}"))
            reads = [a.fn.column for a in s.aggregates if a.fn.column not in (None, "*")]
            absent = [c for c in reads if cols is not None and c not in cols]
            if absent:
                errors.append(FieldError(f"stages[{i}].aggregates", f"{src} has no column {absent}; {has}"))
        try:
            graph.windows(s)
        except ValueError as e:
            errors.append(FieldError(f"stages[{i}].window", str(e)))
        if s.is_merge and not any(graph.is_input(src) for src in s.sources):
            try:
                graph.merge(s)
            except ValueError as e:
                errors.append(FieldError(f"stages[{i}].from", str(e)))
    return errors


def is_stages_document(doc: Any) -> bool:
    """A multi-stage spec (or scenario pipeline): it names ``stages``."""
    return isinstance(doc, dict) and "stages" in doc


def indexed(e: ValidationError) -> SpecError:
    """A validation error's fields with list positions as indices (``stages[1].window``)."""
    errors = spec_error(e).errors
    return SpecError.of([FieldError(re.sub(r"\.(\d+)(?=\.|$)", r"[\1]", f.field), f.reason) for f in errors])


def parse_stages_spec(doc: dict) -> StagesSpec:
    try:
        spec = StagesSpec.model_validate(doc)
    except ValidationError as e:
        raise indexed(e) from None
    spec.to_graph()
    return spec


def parse_stages_run_spec(doc: dict, base_dir: str | Path | None = None) -> StagesRunSpec:
    """A multi-stage run spec; relative paths of sources, sinks and the checkpoint are taken
    from ``base_dir`` (the spec file's directory)."""
    try:
        spec = StagesRunSpec.model_validate(doc)
    except ValidationError as e:
        raise indexed(e) from None
    spec.to_graph()
    if base_dir is not None:
        for part in [i.source for i in spec.inputs.values()] + [spec.sink, spec.dead_letter]:
            if part is not None and part.path:
                part.path = resolved(part.path, base_dir)
        if spec.checkpoint:
            spec.checkpoint = resolved(spec.checkpoint, base_dir)
    return spec


def load_stages_run_spec(path: str | Path) -> StagesRunSpec:
    return parse_stages_run_spec(load_document(path), base_dir=Path(path).resolve().parent)


def resolved(path: str, base_dir: str | Path) -> str:
    return path if Path(path).is_absolute() or "://" in path else str(Path(base_dir) / path)
