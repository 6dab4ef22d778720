"""The windowing pipeline as the core sees it: what, where, when and how, with no I/O."""

from __future__ import annotations

from dataclasses import dataclass, field

from .aggregates import Aggregate
from .time import TIME_UNITS, UNIT_NAMES
from .triggers import Never, Trigger
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
    window: WindowFn
    aggregates: tuple[Aggregate, ...]
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

    def __post_init__(self):
        if self.accumulation not in ACCUMULATION_MODES:
            raise ValueError(f"accumulation must be one of {ACCUMULATION_MODES}")
        if self.time_unit not in TIME_UNITS:
            raise ValueError(f"the event time's unit is one of {list(TIME_UNITS)}, not {self.time_unit!r}")
        problem = window_limit_exceeded(self.window, self.max_windows_per_record)
        if problem:
            raise ValueError(problem)
        if not self.aggregates:
            raise ValueError("at least one aggregate is needed")
        names = [a.output for a in self.aggregates]
        if len(set(names)) != len(names):
            raise ValueError("aggregate output names must be unique")

    @property
    def time_unit_name(self) -> str:
        return UNIT_NAMES[self.time_unit]

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
    return (f"{window.kind} windows put each record in {n:,} windows, more than the limit of {limit:,} "
            f"(raise limits.windows_per_record to allow it)")
