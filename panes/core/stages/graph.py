"""The stage graph: named inputs (each with its event time and watermark) and stages, each reading
one input or stage (an aggregating stage) or two (a merge stage, Apex's WindowedMergeOperator).

A stage without a window inherits the windows of the stages it reads (Apex's window propagation);
a stage that reads an input needs a window of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..aggregates import Aggregate
from ..pipeline import ACCUMULATION_MODES, WatermarkStrategy
from ..triggers import Never, Trigger
from ..windows import Inherited, WindowFn
from .accumulators import SignedAggregate
from .merges import MERGES, MergeSides, load_merge

#: the pane columns besides the key and the values (reserved in every stage's output)
PANE_COLUMNS = ("window_start", "window_end", "timing", "pane_index", "is_last", "retraction")


@dataclass(frozen=True)
class Input:
    """A named input: what a single-stage spec says about time. ``columns``: the columns of its
    records (what a merge's rows hold), in order; None until known."""

    name: str
    event_time: str | None = None
    watermark: WatermarkStrategy = field(default_factory=WatermarkStrategy)
    columns: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Stage:
    """A stage: ``sources`` (one or two input or stage names), the key columns on each source,
    its window (None: inherited), and either aggregates or a merge (``join``: ``inner``, ``left``,
    ``cogroup``, or a merge accumulation object or ``"module:Class"``)."""

    name: str
    sources: tuple[str, ...]
    keys: tuple[tuple[str, ...], ...]
    window: WindowFn | None = None
    aggregates: tuple[Aggregate, ...] = ()
    join: Any = None
    allowed_lateness: int = 0
    trigger: Trigger = field(default_factory=Never)
    accumulation: str = "accumulating"
    only_updated_panes: bool = False

    def __post_init__(self):
        if len(self.sources) not in (1, 2) or len(self.keys) != len(self.sources):
            raise ValueError(f"stage {self.name}: one or two sources, with a key for each")
        if self.accumulation not in ACCUMULATION_MODES:
            raise ValueError(f"stage {self.name}: accumulation must be one of {ACCUMULATION_MODES}")
        if self.is_merge and self.aggregates:
            raise ValueError(f"stage {self.name}: a merge stage has a join, not aggregates")
        if not self.is_merge and (self.join is not None or not self.aggregates):
            raise ValueError(f"stage {self.name}: a stage reading one source has aggregates, and no join")
        if self.is_merge and self.join is None:
            raise ValueError(f"stage {self.name}: a stage reading two sources needs a join")
        if self.is_merge and len(set(map(len, self.keys))) != 1:
            raise ValueError(f"stage {self.name}: both sides need as many key columns")

    @property
    def is_merge(self) -> bool:
        return len(self.sources) == 2

    @property
    def key(self) -> tuple[str, ...]:
        """The stage's key columns in its output (a merge's: its left side's)."""
        return self.keys[0]


@dataclass(frozen=True)
class StageGraph:
    inputs: tuple[Input, ...]
    stages: tuple[Stage, ...]
    output: str | None = None

    def __post_init__(self):
        names = [i.name for i in self.inputs] + [s.name for s in self.stages]
        if len(set(names)) != len(names):
            raise ValueError("input and stage names must be unique")
        if not self.stages:
            raise ValueError("a stage graph needs at least one stage")
        seen = {i.name for i in self.inputs}
        for s in self.stages:
            for src in s.sources:
                if src not in seen:
                    raise ValueError(f"stage {s.name}: reads {src!r}, which is no input or earlier stage")
            if s.window is None and any(src in self.input_names for src in s.sources):
                raise ValueError(f"stage {s.name}: needs a window (an input has no windows to inherit)")
            why = self.unsigned(s)
            if why:
                raise ValueError(f"stage {s.name}: {why}")
            seen.add(s.name)
        if self.output is not None and self.output not in {s.name for s in self.stages}:
            raise ValueError(f"output: no stage {self.output!r}")

    def unsigned(self, s: Stage) -> str | None:
        """Why a discarding stage cannot take in restating panes (its panes are changes: a
        retraction must subtract), or None."""
        if s.is_merge or s.accumulation != "discarding" or not self.emits_contributions(s.sources[0]):
            return None
        other = [a.output for a in s.aggregates if a.fn.name not in SignedAggregate.INVERTIBLE]
        if other:
            return (
                f"a discarding stage over {s.sources[0]}'s restating panes can sum or count (a retraction "
                f"subtracts), not {other}"
            )
        return None

    @property
    def input_names(self) -> tuple[str, ...]:
        return tuple(i.name for i in self.inputs)

    @property
    def output_stage(self) -> Stage:
        return self.stage(self.output) if self.output else self.stages[-1]

    def stage(self, name: str) -> Stage:
        for s in self.stages:
            if s.name == name:
                return s
        raise KeyError(name)

    def input(self, name: str) -> Input:
        for i in self.inputs:
            if i.name == name:
                return i
        raise KeyError(name)

    def is_input(self, name: str) -> bool:
        return name in self.input_names

    def readers(self, name: str) -> tuple[Stage, ...]:
        """The stages that read an input or stage."""
        return tuple(s for s in self.stages if name in s.sources)

    def feeds_stages(self, name: str) -> bool:
        return bool(self.readers(name))

    def emits_contributions(self, name: str) -> bool:
        """Whether a source's rows restate earlier ones (an accumulating or retracting stage)."""
        return not self.is_input(name) and self.stage(name).accumulation != "discarding"

    def windows(self, stage: Stage) -> WindowFn:
        """The stage's windows: its own, or those it inherits (the same on both sides of a merge)."""
        if stage.window is not None:
            return stage.window
        roots = {self.root_window(src).describe().__repr__(): self.root_window(src) for src in stage.sources}
        if len(roots) != 1:
            raise ValueError(f"stage {stage.name}: its sources have different windows; give it a window of its own")
        return Inherited(next(iter(roots.values())))

    def root_window(self, source: str) -> WindowFn:
        """The window kind that assigned a stage's windows (through any inherited ones)."""
        w = self.windows(self.stage(source))
        return w.source if isinstance(w, Inherited) else w

    def columns(self, source: str) -> tuple[str, ...] | None:
        """The columns of a source's rows: an input's record columns; a stage's key and values."""
        if self.is_input(source):
            return self.input(source).columns
        s = self.stage(source)
        if not s.is_merge:
            return (*s.key, *(a.output for a in s.aggregates))
        if any(self.columns(src) is None for src in s.sources):
            return None
        merge = self.merge(s)
        out = getattr(merge, "output_columns", None)
        return None if out is None else (*s.key, *[c for c in out() if c not in s.key])

    def sides(self, stage: Stage) -> MergeSides:
        left, right = stage.sources
        cols = [self.columns(src) for src in stage.sources]
        missing = [src for src, c in zip(stage.sources, cols) if c is None]
        if missing:
            raise ValueError(f"stage {stage.name}: the columns of {missing} are not known")
        return MergeSides(left, right, stage.keys[0], stage.keys[1], tuple(cols[0] or ()), tuple(cols[1] or ()))

    def merge(self, stage: Stage) -> Any:
        """A merge stage's merge accumulation."""
        if isinstance(stage.join, str) and stage.join in MERGES:
            return MERGES[stage.join](self.sides(stage))
        if isinstance(stage.join, str):
            return load_merge(stage.join)
        return stage.join
