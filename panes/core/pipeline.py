"""The windowing pipeline as the core sees it: what, where, when and how, with no I/O."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from .aggregates import Aggregate, AggregateFn
from .time import TIME_UNITS, UNIT_NAMES
from .triggers import Never, Trigger
from .window_pipeline import WindowPipeline
from .windows import WindowFn

ACCUMULATION_MODES = ("discarding", "accumulating", "retracting")
#: a window assigner giving one record more windows than this is refused unless raised explicitly
#: (``Pipeline.max_windows_per_record``, the spec's ``limits.windows_per_record``)
MAX_WINDOWS_PER_RECORD = 1000


@dataclass(frozen=True)
class WatermarkStrategy:
    """How the watermark advances.

    - ``max_delay``: watermark = max event time seen - max_delay (default 0, as in Atlas).
    - ``punctuation``: the watermark advances only through explicit watermark steps / records;
      ``punctuation_column`` names the record field that carries one (default ``"watermark"``).
    - ``idle_timeout``: when the source is idle and processing time passes the end of an open
      window, after this long the watermark advances to that window's end (Atlas).
    The watermark never goes back.
    """

    max_delay: int = 0
    punctuation: bool = False
    punctuation_column: str = "watermark"
    idle_timeout: int | None = None


@dataclass(frozen=True)
class Pipeline:
    """A windowing stage. Its "what" is either ``aggregates`` (a pane is one row of values per key
    and window) or a ``window_pipeline`` (a pane is a table: the pipeline's output over the
    window's rows)."""

    window: WindowFn
    aggregates: tuple[Aggregate, ...] = ()
    key: tuple[str, ...] = ()
    event_time: str | None = None
    watermark: WatermarkStrategy = field(default_factory=WatermarkStrategy)
    allowed_lateness: int = 0
    trigger: Trigger = field(default_factory=Never)
    accumulation: str = "accumulating"
    only_updated_panes: bool = False
    #: the unit of numeric event times (``panes.core.time.TIME_UNITS``)
    time_unit: str = "ms"
    max_windows_per_record: int = MAX_WINDOWS_PER_RECORD
    window_pipeline: WindowPipeline | None = None

    def __post_init__(self):
        if self.accumulation not in ACCUMULATION_MODES:
            raise ValueError(f"accumulation must be one of {ACCUMULATION_MODES}")
        if self.time_unit not in TIME_UNITS:
            raise ValueError(f"the event time's unit is one of {list(TIME_UNITS)}, not {self.time_unit!r}")
        problem = window_limit_exceeded(self.window, self.max_windows_per_record)
        if problem:
            raise ValueError(problem)
        if self.window_pipeline is not None and self.aggregates:
            raise ValueError("aggregates and window_pipeline are alternatives: a stage has one of them")
        if not self.aggregates and self.window_pipeline is None:
            raise ValueError("at least one aggregate (or a window_pipeline) is needed")
        names = [a.output for a in self.aggregates]
        if len(set(names)) != len(names):
            raise ValueError("aggregate output names must be unique")

    @property
    def time_unit_name(self) -> str:
        return UNIT_NAMES[self.time_unit]

    @property
    def accumulators(self) -> tuple[AggregateFn, ...]:
        """The functions whose accumulators each window keeps: the aggregates', or the window
        pipeline's (the window's rows)."""
        if self.window_pipeline is not None:
            return (self.window_pipeline,)
        return tuple(a.fn for a in self.aggregates)

    @property
    def keeps_rows(self) -> bool:
        """Whether the windows keep their rows (every record column), not only aggregates."""
        return self.window_pipeline is not None

    def input_columns(self, columns: Sequence[str]) -> list[str]:
        """The columns of a batch (``columns``) the windows read: the aggregates' inputs, or,
        when they keep their rows, every record column (not the engine's own, ``__``-prefixed)."""
        if self.keeps_rows:
            return [c for c in columns if isinstance(c, str) and not c.startswith("__")]
        return list(self.value_columns)

    @property
    def value_columns(self) -> tuple[str, ...]:
        cols: list[str] = []
        for a in self.aggregates:
            c = a.fn.column
            if c not in (None, "*") and c not in cols:
                cols.append(c)
        return tuple(cols)


def window_limit_exceeded(window: WindowFn, limit: int) -> str | None:
    """Why ``window`` gives one record too many windows (None: it does not)."""
    n = window.windows_per_record
    if n <= limit:
        return None
    return (
        f"{window.kind} windows put each record in {n:,} windows, more than the limit of {limit:,} "
        f"(raise limits.windows_per_record to allow it)"
    )
