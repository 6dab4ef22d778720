"""One home for each semantic rule that the core engine and the Spark SQL plans both apply.

A rule is written once, over an ``Ops`` that supplies the few operations Python's operators do not
cover (a conditional, greatest, least). The core evaluates it on Python ints (``SCALAR``) or numpy
arrays (``ARRAY``); the Spark adapter passes its own ``Ops`` over Columns. Comparisons and
arithmetic are written with Python's operators, which ints, arrays and Columns all overload; a
conjunction is ``&`` between parenthesised comparisons (also right for Python bools).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Any, Protocol

import numpy as np

from .time import EARLIEST_EVENT_TIME, END_OF_INPUT, LATEST_EVENT_TIME, MAX_TIME, MIN_TIME


class Ops(Protocol):
    def where(self, cond: Any, yes: Any, no: Any) -> Any: ...

    def greatest(self, a: Any, b: Any) -> Any: ...

    def least(self, a: Any, b: Any) -> Any: ...


class ScalarOps:
    """Rules over Python ints and bools."""

    @staticmethod
    def where(cond: Any, yes: Any, no: Any) -> Any:
        return yes if cond else no

    @staticmethod
    def greatest(a: Any, b: Any) -> Any:
        return a if a >= b else b

    @staticmethod
    def least(a: Any, b: Any) -> Any:
        return a if a <= b else b


class ArrayOps:
    """Rules over numpy arrays (element-wise)."""

    @staticmethod
    def where(cond: Any, yes: Any, no: Any) -> Any:
        return np.where(cond, yes, no)

    @staticmethod
    def greatest(a: Any, b: Any) -> Any:
        return np.maximum(a, b)

    @staticmethod
    def least(a: Any, b: Any) -> Any:
        return np.minimum(a, b)


SCALAR: Ops = ScalarOps()
ARRAY: Ops = ArrayOps()


class Reason(StrEnum):
    """Why a record is a dead letter."""

    LATE = "late"  # a window it belongs to had expired (it counts in its others)
    MISSING_EVENT_TIME = "missing_event_time"
    INVALID_EVENT_TIME = "invalid_event_time"  # not a time, or out of the event-time range
    MISSING_KEY = "missing_key"
    INVALID_VALUE = "invalid_value"  # a value that does not fit its column or aggregate
    MALFORMED = "malformed"  # not a record at all (not a JSON object): its raw text is kept
    INVALID_WATERMARK = "invalid_watermark"  # a punctuation record whose watermark is not a time
    WINDOW_CLOSED = "window_closed"  # its window's trigger had finished (Beam's droppedDueToClosedWindow)
    WINDOW_PIPELINE_FAILED = "window_pipeline_failed"  # the window's pipeline failed on the rows it held


#: The checks a record goes through, in this order: the first it fails gives its dead letter's reason
#: (a record that is not a mapping is malformed; a punctuation record carries a watermark, not data).
VALIDATION_ORDER: tuple[Reason, ...] = (
    Reason.MALFORMED,
    Reason.INVALID_WATERMARK,
    Reason.MISSING_EVENT_TIME,
    Reason.INVALID_EVENT_TIME,
    Reason.MISSING_KEY,
    Reason.INVALID_VALUE,
)


class Timing(StrEnum):
    """A pane's timing relative to the watermark."""

    EARLY = "EARLY"
    ON_TIME = "ON_TIME"
    LATE = "LATE"


#: the timings as plain strings, for the engine's per-pane path (a member's ``.value`` is a
#: descriptor call)
EARLY, ON_TIME, LATE = Timing.EARLY.value, Timing.ON_TIME.value, Timing.LATE.value


def event_time_in_range(t: Any) -> Any:
    """Whether an event time (ms) is one panes can window: from ``EARLIEST_EVENT_TIME`` up to
    ``LATEST_EVENT_TIME`` (see ``panes.core.time``); others are ``invalid_event_time``."""
    return (t >= EARLIEST_EVENT_TIME) & (t < LATEST_EVENT_TIME)


def expiry(end: Any, allowed_lateness: int, ops: Ops = SCALAR) -> Any:
    """The watermark at which a window ending at ``end`` expires: its state is purged and a
    record for it is late. The global window (end ``MAX_TIME``) expires only at the end of input."""
    return ops.where(end >= MAX_TIME, END_OF_INPUT, end + allowed_lateness)


def is_expired(end: Any, allowed_lateness: int, watermark: Any, ops: Ops = SCALAR) -> Any:
    """Whether the watermark has reached the window's expiry."""
    return watermark >= expiry(end, allowed_lateness, ops)


def end_passed(end: Any, watermark: Any) -> Any:
    """Whether the watermark has passed a (finite) window's end: what ``after_watermark`` waits
    for. The global window's end is never passed."""
    return (end < MAX_TIME) & (watermark >= end)


def on_time_reached(end: Any, watermark: Any) -> Any:
    """Whether a watermark has passed a window: its end, or the input ended (the global window's
    end is passed only then). On the input watermark: a pane fired now is not EARLY. On the output
    watermark: the pane is LATE (Beam's ``PaneInfoTracker.describePane``)."""
    return end_passed(end, watermark) | (watermark >= END_OF_INPUT)


def pane_timing(late: Any, reached: Any, ops: Ops = SCALAR) -> Any:
    """A pane's timing, as Beam Java's ``PaneInfoTracker.describePane``: LATE when an earlier
    emitted pane was not EARLY or the *output* watermark has passed the window (``late``); else
    ON_TIME once the *input* watermark has passed it (``reached``); else EARLY."""
    return ops.where(late, LATE, ops.where(reached, ON_TIME, EARLY))


def pane_is_emitted(new_elements: Any, timing: Any) -> Any:
    """A firing emits its pane when elements arrived since the last one, or when it is the
    ON_TIME pane (emitted even when empty, as Beam's FIRE_ALWAYS on-time behaviour); an empty
    EARLY or LATE pane is not emitted and takes no index (FIRE_IF_NON_EMPTY)."""
    return (new_elements > 0) | (timing == ON_TIME)


def end_of_window_timer(end: Any) -> Any:
    """The instant of the end-of-window timer ``after_watermark`` sets: the window's last
    millisecond (Beam's ``maxTimestamp``). An event-time timer at t fires once the watermark is
    after t."""
    return end - 1


def gc_timer(end: Any, allowed_lateness: int, ops: Ops = SCALAR) -> Any:
    """The instant of a window's garbage-collection timer (max timestamp + allowed lateness): it
    fires when the window expires."""
    return expiry(end, allowed_lateness, ops) - 1


def element_hold(end: Any, allowed_lateness: int, watermark: Any, ops: Ops = SCALAR) -> Any:
    """Where a record holds the output watermark until its window fires (Beam's
    ``WatermarkHold.addHolds``): at the window's max timestamp when it came before the input
    ``watermark`` passed the window's end; at the garbage-collection time when it came later."""
    return ops.where(watermark < end, end - 1, gc_timer(end, allowed_lateness, ops))


def processing_timer_fires(deadline: Any, processing_time: Any) -> Any:
    """A processing-time deadline is reached when the clock is strictly after it (Beam's
    ``AfterDelayFromFirstElementStateMachine.shouldFire``: ``currentTime.isAfter(delayedUntil)``)."""
    return processing_time > deadline


def output_watermark(input_watermark: Any, earliest_hold: Any, ops: Ops = SCALAR) -> Any:
    """A stage's output watermark: the input watermark held back by the earliest hold or pending
    event-time timer of any window of any key (Beam's ``WatermarkManager``: min(input watermark,
    holds, earliest pending timer))."""
    return ops.least(input_watermark, earliest_hold)


def ingestion_stamp(stamp: Any, latest: Any, ops: Ops = SCALAR) -> Any:
    """Ingestion-time stamps never go back (as Flink's): a stamp before the latest one seen
    counts as that one."""
    return ops.greatest(stamp, latest)


def watermark_after(
    watermark: Any, max_event_time: Any, max_delay: int, punctuation: bool, explicit: Any, ended: Any, ops: Ops = SCALAR
) -> Any:
    """The watermark after a step. It never goes back. It follows the largest event time seen minus
    ``max_delay``, unless the pipeline's watermark comes from ``punctuation`` only; an ``explicit``
    value (a punctuation record's, a control step's; ``MIN_TIME`` for none) moves it too; once the
    input ``ended`` it is ``END_OF_INPUT``."""
    moved = watermark if punctuation else ops.greatest(watermark, max_event_time - max_delay)
    return ops.where(ended, END_OF_INPUT, ops.greatest(moved, explicit))


def watermark_after_values(watermark: int, seen: int | None, max_delay: int) -> int:
    """``watermark_after`` of a step that knows only the greatest watermark value its rows carried
    (``seen``: an event time, a punctuation record's value less nothing, a control value; None:
    none), as the native plans keep it: a value at or past ``LATEST_EVENT_TIME`` (the control row
    that ends the input) ends it. ``max_delay``: 0 when the watermark comes from punctuation."""
    if seen is None:
        return watermark
    return int(watermark_after(watermark, seen, max_delay, False, MIN_TIME, seen >= LATEST_EVENT_TIME))


def validation_rank(reason: Reason | str) -> int:
    """A reason's place in ``VALIDATION_ORDER`` (checks sort by it)."""
    return VALIDATION_ORDER.index(Reason(reason))


def first_failure(checks: Sequence[tuple[Any, Any]], ops: Ops = SCALAR) -> Any:
    """The value (a reason, a detail) of the first of ``checks`` — (passed, value) pairs in
    ``VALIDATION_ORDER`` — that a record fails; None when it passes them all."""
    out = None
    for passed, value in reversed(checks):
        out = ops.where(passed, out, value)
    return out
