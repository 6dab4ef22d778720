"""The engine's values: its output (panes, dead letters) and its state (per key and window)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..time import END_OF_INPUT, MIN_TIME
from ..triggers import TriggerState

TS = "__ts"  # the event-time column of a batch: int64 epoch milliseconds


@dataclass(frozen=True)
class Pane:
    """One output row: a pane of a window, or (``retraction``) the restatement of an earlier one.

    ``provisional`` (an engine that runs one part of a stage, ``Engine(partial=True)``: a Spark
    bucket): 0, the timing is decided; else the pane is ON_TIME unless the stage's output watermark,
    as the phase began, had passed the window, which only the whole stage knows
    (``spark.stateful.OutputWatermarks`` decides it); 2 when the pane is empty (not emitted if LATE);
    3 for a retraction in front of such an empty pane: it goes with that pane, emitted with its own
    timing if the pane is, else not at all (as the whole stage emits neither)."""

    key: tuple
    window_start: int
    window_end: int
    timing: str
    pane_index: int
    is_last: bool
    retraction: bool
    values: tuple
    provisional: int = 0


@dataclass(frozen=True)
class DeadLetter:
    reason: str
    record: dict | str  # the record, or the raw text of a line that is none (malformed)
    watermark: int | None = None
    windows: tuple = ()  # ((start, end), ...) the windows the record missed
    detail: str | None = None


class WindowState:
    """A window of a key: its accumulators, its trigger state (with the trigger's timers), and the
    hold it puts on the output watermark (``hold``: None, or the instant; released at every firing)."""

    __slots__ = (
        "start",
        "end",
        "acc",
        "trig",
        "new_count",
        "next_index",
        "last_values",
        "last_timing",
        "last_provisional",
        "nonearly",
        "closed",
        "hold",
        "pending_retractions",
    )

    def __init__(self, start: int, end: int, acc: list, trig: TriggerState):
        self.start = start
        self.end = end
        self.acc: Any = acc  # None once the window closed
        self.trig = trig
        self.new_count = 0
        self.next_index = 0
        self.last_values: tuple | None = None
        self.last_timing: str | None = None
        self.last_provisional = 0  # the last pane's ``Pane.provisional``
        self.nonearly = False  # a pane that was not EARLY was emitted: the next ones are LATE
        self.closed = False  # the trigger finished: no more data accepted, kept as a tombstone until it expires
        self.hold: int | None = None
        # (start, end, values, index, timing, provisional) of merged-away windows
        self.pending_retractions: list = []

    def __getstate__(self):
        return tuple(getattr(self, s) for s in self.__slots__)

    def __setstate__(self, st):
        for s, v in zip(self.__slots__, st):
            setattr(self, s, v)


@dataclass
class EngineState:
    watermark: int = MIN_TIME
    max_event_time: int = MIN_TIME
    processing_time: int = 0
    #: processing time of the last record seen (idleness)
    last_data_time: int | None = None
    seq: int = 0
    keys: dict = field(default_factory=dict)  # key tuple -> {(start, end): WindowState}
    #: records seen per key for record-defined sliding windows: key -> KeyRecords sorted by (ts, seq)
    records: dict = field(default_factory=dict)
    #: nothing can fire before the watermark reaches wake_event or the clock passes wake_clock
    wake_event: int = MIN_TIME
    wake_clock: int | None = None
    #: the output watermark as the current phase (clock move, records, watermark move) began
    phase: PhaseWatermark | None = None
    #: the event-time timers the engine's host keeps for this state, as it last set them (a Spark
    #: bucket's: ``spark.stateful_store``), stored with it; None: not known
    host_timers: list[int] | None = None
    metrics: dict = field(
        default_factory=lambda: {
            "rows": 0,
            "rows_counted": 0,
            "rows_late": 0,
            "rows_closed": 0,
            "rows_in_gap": 0,
            "panes": 0,
            "retractions": 0,
            "windows_open": 0,
        }
    )


@dataclass
class PhaseWatermark:
    """What the output watermark of one phase is computed from: the phase's input watermark, the
    earliest hold or event-time timer that a window of the phase released or fired before it was
    asked for, and (once asked for) the output watermark itself. Holds and timers added during a
    phase are never before its input watermark, so they cannot lower it."""

    watermark: int
    released: int = END_OF_INPUT
    output: int | None = None


@dataclass
class StepResult:
    panes: list[Pane] = field(default_factory=list)
    dead_letters: list[DeadLetter] = field(default_factory=list)
    #: valid rows ingested that count in a window and missed none; rows in no window
    counted: int = 0
    in_no_window: int = 0
    #: the stage's output watermark once the step (or call) is done: what a downstream stage reads
    output_watermark: int = MIN_TIME

    def extend(self, other: StepResult) -> None:
        self.panes.extend(other.panes)
        self.dead_letters.extend(other.dead_letters)
        self.counted += other.counted
        self.in_no_window += other.in_no_window
