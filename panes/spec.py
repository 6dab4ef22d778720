"""The pipeline spec (YAML or JSON), validated before anything runs.

Every field maps onto a core object (``panes.core``): the spec and the Python API are two faces of
the same objects. A wrong field fails with its path and the reason (``SpecError``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from .core.aggregates import Aggregate, make_aggregate
from .core.pipeline import MAX_WINDOWS_PER_RECORD, Pipeline, WatermarkStrategy, window_limit_exceeded
from .core.time import TIME_UNITS, parse_duration
from .core.triggers import parse_trigger
from .core.window_pipeline import parse_window_pipeline
from .core.windows import Sessions, parse_window


@dataclass(frozen=True)
class FieldError:
    """One thing wrong with a spec: the dotted path of the field (empty for the whole document) and
    the reason."""

    field: str
    reason: str

    def __str__(self) -> str:
        return f"{self.field}: {self.reason}" if self.field else self.reason


class SpecError(ValueError):
    """An invalid spec: ``errors`` lists every field error found; ``field`` (the dotted path of the
    offending field) and ``reason`` are the first's."""

    def __init__(self, field: str, reason: str, errors: Sequence[FieldError] = ()):
        self.errors = list(errors) or [FieldError(field, reason)]
        self.field = self.errors[0].field
        self.reason = self.errors[0].reason
        super().__init__("\n".join(str(e) for e in self.errors))

    @classmethod
    def of(cls, errors: Sequence[FieldError]) -> SpecError:
        return cls(errors[0].field, errors[0].reason, errors)


def _dur(v: Any) -> int:
    try:
        return parse_duration(v)
    except ValueError as e:
        raise ValueError(str(e)) from None


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


# -- the spec ------------------------------------------------------------------------------------


def _aggregate(v: Any) -> Any:
    """One aggregate's spec ``{function: argument}``, checked by its class's ``from_spec``."""
    if not isinstance(v, dict) or len(v) != 1:
        raise ValueError("an aggregate is {function: column}, e.g. {sum: amount}")
    ((fn, arg),) = v.items()
    make_aggregate("", fn, arg)
    return v


#: an aggregate's spec (errors name its output column: see ``_field_errors``)
AggregateSpec = Annotated[Any, BeforeValidator(_aggregate)]


def _window_pipeline(v: Any) -> Any:
    """``{sql: ...}`` or ``{fn: ...}``, checked (the SQL against the supported subset, the function
    imported)."""
    parse_window_pipeline(v)
    return v


#: a window pipeline's spec (errors name its form: ``window_pipeline.sql: ...``)
WindowPipelineSpec = Annotated[Any, BeforeValidator(_window_pipeline)]

#: the most hash buckets a stateful plan may have (``spark.bucket_layout`` labels them within a Spark int)
MAX_BUCKETS = 1024


def buckets_for(partitions: int) -> int:
    """The hash buckets of a stateful plan when none are given: one per shuffle partition (a task
    runs its buckets one after another, each with a fixed cost; labelled, they fall one to a
    partition)."""
    return max(1, min(partitions, MAX_BUCKETS))


#: the pane columns besides the key and the aggregates
PANE_COLUMNS = ("window_start", "window_end", "timing", "pane_index", "is_last", "retraction")


class WatermarkSpec(_Model):
    max_delay: int = 0
    punctuation: bool = False
    punctuation_column: str = "watermark"
    idle_timeout: int | None = None

    @field_validator("max_delay", "idle_timeout", mode="before")
    @classmethod
    def _d(cls, v):
        return None if v is None else _dur(v)


class EventTimeSpec(_Model):
    """``event_time: {column: COL, unit: s|ms|us|ns}``: the unit of numeric event times
    (``event_time: COL`` reads them as milliseconds)."""

    column: str
    unit: str = "ms"

    @field_validator("unit")
    @classmethod
    def _unit(cls, v):
        if v not in TIME_UNITS:
            raise ValueError(f"the unit of numeric event times is one of {', '.join(TIME_UNITS)}, not {v!r}")
        return v


class LimitsSpec(_Model):
    """Guards a spec must raise explicitly to go past."""

    windows_per_record: int = Field(default=MAX_WINDOWS_PER_RECORD, gt=0)


class SourceSpec(_Model):
    format: Literal["json", "csv", "parquet", "kafka", "rate", "memory"] = "json"
    path: str | None = None
    schema_: str | None = Field(default=None, alias="schema")
    options: dict[str, Any] = Field(default_factory=dict)
    max_files_per_trigger: int | None = None

    @model_validator(mode="after")
    def _need_path(self):
        if self.format in ("json", "csv", "parquet") and not self.path:
            raise ValueError(f"a {self.format} source needs a path")
        if self.format == "kafka":
            _kafka_options(self.options, ("subscribe", "subscribePattern", "assign"), "source")
            if not self.schema_:
                raise ValueError("a kafka source needs a schema: each Kafka value is one JSON record of it")
        return self


class SinkSpec(_Model):
    format: Literal["json", "parquet", "csv", "console", "memory", "kafka", "callback", "noop", "stdout"] = "console"
    path: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    callback: str | None = None  # 'module:function' called as f(batch_df, batch_id)

    @model_validator(mode="after")
    def _need_path(self):
        if self.format in ("json", "parquet", "csv") and not self.path:
            raise ValueError(f"a {self.format} sink needs a path")
        if self.format == "callback" and not self.callback:
            raise ValueError("a callback sink needs callback: 'module:function'")
        if self.format == "kafka":
            _kafka_options(self.options, ("topic",), "sink")
        if self.format == "console" and self.options.get("to", "stdout") not in ("stdout", "stderr"):
            raise ValueError(f"a console sink's options.to is stdout or stderr, not {self.options['to']!r}")
        return self


def dead_letter_sink(sink: SinkSpec, dead_letter: SinkSpec | None) -> SinkSpec:
    """The dead-letter sink of a run whose panes go to ``sink``: ``dead_letter``, else the console.
    When the panes go to stdout as JSON lines, a console's tables go to stderr (in stdout they
    would break the lines)."""
    dead = dead_letter or SinkSpec(format="console")
    if sink.format == "stdout" and dead.format == "console":
        return SinkSpec(format="console", options={**dead.options, "to": "stderr"})
    return dead


def apply_run_options(spec, mode: str | None, to_stdout: bool, end_input: bool) -> None:
    """``panes run``'s options on a run spec, single- or multi-stage (``--mode``, ``--stdout``,
    ``--end-input``)."""
    if mode:
        spec.mode = "batch" if mode == "batch" else "stream"
    if to_stdout:
        spec.sink = SinkSpec(format="stdout")
    if end_input:
        spec.spark.end_input = True


def _kafka_options(options: dict, one_of: tuple[str, ...], what: str) -> None:
    """Spark's Kafka source and sink options that cannot be left out."""
    if "kafka.bootstrap.servers" not in options:
        raise ValueError(f"a kafka {what} needs options: {{kafka.bootstrap.servers: HOST:PORT}}")
    if not any(k in options for k in one_of):
        raise ValueError(f"a kafka {what} needs options.{' or options.'.join(one_of)}")


class SparkSpec(_Model):
    master: str | None = None
    #: a Spark Connect server, ``sc://HOST:PORT`` (instead of a master: panes' Python runs here,
    #: Spark there)
    remote: str | None = None
    shuffle_partitions: int = 2
    #: hash buckets of the key on the stateful plan (``spark.bucket_layout``: how they are labelled);
    #: None: one per shuffle partition (``bucket_count``)
    buckets: int | None = Field(default=None, ge=1, le=MAX_BUCKETS)
    trigger_interval: int | None = None  # micro-batch interval (ms); None = as fast as possible
    #: process what is there now and stop; open windows stay in the checkpoint for the next run
    available_now: bool = False
    #: after what is there now, end the input for good: every window closes; the checkpoint then
    #: takes no more data (``panes run --end-input``)
    end_input: bool = False
    #: auto: native Spark when the pipeline allows it, else stateful; or force one (native fails
    #: before the query starts when the pipeline needs the engine; arrow, the native plan's sink
    #: form, when it cannot run it either)
    plan: Literal["auto", "native", "arrow", "stateful"] = "auto"
    conf: dict[str, str] = Field(default_factory=dict)

    @field_validator("trigger_interval", mode="before")
    @classmethod
    def _d(cls, v):
        return None if v is None else _dur(v)

    @field_validator("remote")
    @classmethod
    def _remote(cls, v, info: ValidationInfo):
        if v is not None and not v.startswith("sc://"):
            raise ValueError(f"a Spark Connect URL is sc://HOST:PORT, not {v!r}")
        if v is not None and info.data.get("master"):
            raise ValueError("a spec names a master or a Spark Connect server (remote), not both")
        return v

    @property
    def bucket_count(self) -> int:
        """``buckets``, or one per shuffle partition of the session the spec configures."""
        if self.buckets is not None:
            return self.buckets
        partitions = self.conf.get("spark.sql.shuffle.partitions", self.shuffle_partitions)
        try:
            return buckets_for(int(partitions))
        except ValueError:  # (Spark refuses such a setting itself)
            return buckets_for(self.shuffle_partitions)


class PipelineSpec(_Model):
    """The windowing part of a spec (what a replay scenario's ``pipeline`` holds)."""

    name: str | None = None
    event_time: str | EventTimeSpec | None = None
    key: list[str] = Field(default_factory=list)
    window: Any
    watermark: WatermarkSpec = Field(default_factory=WatermarkSpec)
    allowed_lateness: int = 0
    trigger: Any = None
    accumulation: Literal["discarding", "accumulating", "retracting"] = "accumulating"
    only_updated_panes: bool = False
    aggregates: dict[str, AggregateSpec] | None = None
    #: the alternative to ``aggregates``: a pipeline over each window's rows, whose rows are the panes
    window_pipeline: WindowPipelineSpec | None = None
    limits: LimitsSpec = Field(default_factory=LimitsSpec)

    @field_validator("key", mode="before")
    @classmethod
    def _key(cls, v):
        if v is None:
            return []
        return [v] if isinstance(v, str) else v

    @field_validator("event_time", mode="before")
    @classmethod
    def _event_time(cls, v):
        if v is None or isinstance(v, (str, EventTimeSpec)):
            return v
        if not isinstance(v, dict):
            raise ValueError("event_time is a column name or {column: COL, unit: s|ms|us|ns}")
        try:
            return EventTimeSpec.model_validate(v)
        except ValidationError as e:
            raise ValueError("; ".join(str(f) for err in e.errors() for f in _field_errors(err))) from None

    @field_validator("allowed_lateness", mode="before")
    @classmethod
    def _lateness(cls, v):
        return _dur(v)

    @field_validator("window", mode="before")
    @classmethod
    def _window(cls, v):
        parse_window(v)
        return v

    @field_validator("trigger", mode="before")
    @classmethod
    def _trigger(cls, v):
        parse_trigger(v)
        return v

    @field_validator("aggregates", mode="before")
    @classmethod
    def _aggs(cls, v):
        if v is None:
            return v
        if not isinstance(v, dict) or not v:
            raise ValueError("aggregates is a non-empty mapping {output_column: {function: column}}")
        return v

    @model_validator(mode="after")
    def _cross(self):
        """Checks across fields, every failure one ``field: reason`` line."""
        errors = []
        w = parse_window(self.window)
        aggregates = self.aggregates or {}
        if self.aggregates is None and self.window_pipeline is None:
            errors.append("aggregates: required field is missing (or a window_pipeline)")
        if self.aggregates is not None and self.window_pipeline is not None:
            errors.append("window_pipeline: aggregates and window_pipeline are alternatives: give one of them")
        if self.only_updated_panes and isinstance(self.window_pipeline, dict) and "sql" in self.window_pipeline:
            # Spark runs the query after the engine chose the panes: it cannot skip by the query's output
            errors.append("only_updated_panes: not with a window_pipeline sql (a function's panes can be skipped)")
        clash = (set(aggregates) | set(self.key)) & set(PANE_COLUMNS)
        if clash:
            where = "aggregates" if clash & set(aggregates) else "key"
            errors.append(f"{where}: column names {sorted(clash)} are reserved for pane metadata")
        if set(aggregates) & set(self.key):
            errors.append(f"aggregates: outputs {sorted(set(aggregates) & set(self.key))} clash with key columns")
        if isinstance(w, Sessions) and w.gap_column and w.gap_column in self.key:
            errors.append("window.session.gap_column: cannot be a key column")
        too_many = window_limit_exceeded(w, self.limits.windows_per_record)
        if too_many:
            errors.append(f"window: {too_many}")
        if errors:
            raise ValueError("\n".join(errors))
        return self

    @property
    def event_time_column(self) -> str | None:
        return self.event_time.column if isinstance(self.event_time, EventTimeSpec) else self.event_time

    @property
    def time_unit(self) -> str:
        return self.event_time.unit if isinstance(self.event_time, EventTimeSpec) else "ms"

    def to_pipeline(self) -> Pipeline:
        aggs = tuple(self.aggregate(out) for out in self.aggregates or {})
        return Pipeline(
            window=parse_window(self.window),
            aggregates=aggs,
            key=tuple(self.key),
            event_time=self.event_time_column,
            time_unit=self.time_unit,
            max_windows_per_record=self.limits.windows_per_record,
            watermark=WatermarkStrategy(
                self.watermark.max_delay,
                self.watermark.punctuation,
                self.watermark.punctuation_column,
                self.watermark.idle_timeout,
            ),
            allowed_lateness=self.allowed_lateness,
            trigger=parse_trigger(self.trigger),
            accumulation=self.accumulation,
            only_updated_panes=self.only_updated_panes,
            window_pipeline=None if self.window_pipeline is None else parse_window_pipeline(self.window_pipeline),
        )

    def aggregate(self, output: str) -> Aggregate:
        ((fn, arg),) = (self.aggregates or {})[output].items()
        return make_aggregate(output, fn, arg)


class RunSpec(PipelineSpec):
    """A whole job: source -> windowing -> sink, dead letters, checkpoint."""

    mode: Literal["stream", "batch"] = "stream"
    source: SourceSpec
    sink: SinkSpec = Field(default_factory=SinkSpec)
    dead_letter: SinkSpec | None = None
    checkpoint: str | None = None
    spark: SparkSpec = Field(default_factory=SparkSpec)
    timeout: int | None = None  # stop a stream after this long (ms); None = run until stopped

    @field_validator("timeout", mode="before")
    @classmethod
    def _t(cls, v):
        return None if v is None else _dur(v)


#: the fields of a run spec that are not its pipeline's
RUN_FIELDS = tuple(f for f in RunSpec.model_fields if f not in PipelineSpec.model_fields)


def _format_error(e: ValidationError) -> SpecError:
    return SpecError.of([f for err in e.errors() for f in _field_errors(err)])


#: the base of spec models, a duration field's parser and a validation error as a ``SpecError``,
#: for the specs built on this one (the multi-stage spec, ``panes.stage_spec``)
SpecModel = _Model
duration = _dur
spec_error = _format_error


def _field_errors(err: Any) -> list[FieldError]:
    """A pydantic error as field errors: a check across fields (no location) gives one per
    ``field: reason`` line; an aggregate's names its output column in the reason."""
    loc = [str(p) for p in err["loc"]]
    msg = err["msg"]
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    if err["type"] == "extra_forbidden":
        msg = "unknown field"
    if err["type"] == "missing":
        msg = "required field is missing"
    if len(loc) == 2 and loc[0] == "aggregates":
        return [FieldError("aggregates", f"{loc[1]}: {msg}")]
    form = re.match(r"^(sql|fn): (.*)$", msg, re.S)
    if loc == ["window_pipeline"] and form:
        return [FieldError(f"window_pipeline.{form.group(1)}", form.group(2))]
    if loc:
        return [FieldError(".".join(loc), msg)]
    out = []
    for line in msg.split("\n"):
        m = re.match(r"^([A-Za-z_][\w.\[\]]*): (.*)$", line, re.S)
        out.append(FieldError(m.group(1), m.group(2)) if m else FieldError("", line))
    return out


def load_document(path: str | Path) -> dict:
    """Read a YAML or JSON file into a mapping."""
    p = Path(path)
    if not p.exists():
        raise SpecError("", f"no such file: {p}")
    text = p.read_text()
    try:
        doc = json.loads(text) if p.suffix == ".json" else yaml.safe_load(text)
    except (yaml.YAMLError, json.JSONDecodeError) as e:
        raise SpecError("", f"{p} is not valid YAML/JSON: {e}") from None
    if not isinstance(doc, dict):
        raise SpecError("", f"{p} must hold a mapping")
    return doc


def parse_pipeline_spec(doc: dict) -> PipelineSpec:
    try:
        return PipelineSpec.model_validate(doc)
    except ValidationError as e:
        raise _format_error(e) from None


def parse_run_spec(doc: dict, base_dir: str | Path | None = None) -> RunSpec:
    try:
        spec = RunSpec.model_validate(doc)
    except ValidationError as e:
        raise _format_error(e) from None
    if base_dir is not None:
        base = Path(base_dir)
        for part in (spec.source, spec.sink, spec.dead_letter):
            if part is not None and part.path and not Path(part.path).is_absolute() and "://" not in part.path:
                part.path = str(base / part.path)
        if spec.checkpoint and not Path(spec.checkpoint).is_absolute() and "://" not in spec.checkpoint:
            spec.checkpoint = str(base / spec.checkpoint)
    return spec


def load_run_spec(path: str | Path) -> RunSpec:
    doc = load_document(path)
    return parse_run_spec(doc, base_dir=Path(path).resolve().parent)
