"""One home for each semantic rule that the core engine and the Spark SQL plans both apply.

A rule is written once, over an ``Ops`` that supplies the few operations Python's operators do not
cover (a conditional, greatest, least). The core evaluates it on Python ints (``SCALAR``) or numpy
arrays (``ARRAY``); the Spark adapter passes its own ``Ops`` over Columns. Comparisons and
arithmetic are written with Python's operators, which ints, arrays and Columns all overload; a
conjunction is ``&`` between parenthesised comparisons (also right for Python bools).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Protocol, Sequence

import numpy as np

from .time import END_OF_INPUT, MAX_TIME


class Ops(Protocol):
    def where(self, cond: Any, yes: Any, no: Any) -> Any: ...

    def greatest(self, a: Any, b: Any) -> Any: ...


class ScalarOps:
    """Rules over Python ints and bools."""

    @staticmethod
    def where(cond: Any, yes: Any, no: Any) -> Any:
        return yes if cond else no

    @staticmethod
    def greatest(a: Any, b: Any) -> Any:
        return a if a >= b else b


class ArrayOps:
    """Rules over numpy arrays (element-wise)."""

    @staticmethod
    def where(cond: Any, yes: Any, no: Any) -> Any:
        return np.where(cond, yes, no)

    @staticmethod
    def greatest(a: Any, b: Any) -> Any:
        return np.maximum(a, b)


SCALAR: Ops = ScalarOps()
ARRAY: Ops = ArrayOps()


class Reason(StrEnum):
    """Why a record is a dead letter."""

    LATE = "late"  # every window it belongs to had expired
    MISSING_EVENT_TIME = "missing_event_time"
    INVALID_EVENT_TIME = "invalid_event_time"
    MISSING_KEY = "missing_key"
    INVALID_VALUE = "invalid_value"  # a value that does not fit its column or aggregate
    MALFORMED = "malformed"  # not a record at all (not a JSON object)
    INVALID_WATERMARK = "invalid_watermark"  # a punctuation record whose watermark is not a time
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


def created_late(end: Any, watermark: Any) -> Any:
    """A window that comes into being after the watermark passed its end: its panes are LATE."""
    return end_passed(end, watermark)


def on_time_reached(end: Any, watermark: Any) -> Any:
    """Whether a pane fired now is past the window's end (ON_TIME unless a LATE rule applies):
    its end passed, or the input ended."""
    return end_passed(end, watermark) | (watermark >= END_OF_INPUT)


def pane_timing(late: Any, reached: Any, ops: Ops = SCALAR) -> Any:
    """A pane's timing: LATE after a non-early pane or for a window created late (``late``),
    else ON_TIME once ``on_time_reached``, else EARLY."""
    return ops.where(late, Timing.LATE.value, ops.where(reached, Timing.ON_TIME.value, Timing.EARLY.value))


def pane_is_emitted(new_elements: Any, timing: Any) -> Any:
    """A firing emits its pane when elements arrived since the last one, or when it is the
    ON_TIME pane (emitted even when empty, as Beam's FIRE_ALWAYS on-time behaviour)."""
    return (new_elements > 0) | (timing == Timing.ON_TIME.value)


def ingestion_stamp(stamp: Any, latest: Any, ops: Ops = SCALAR) -> Any:
    """Ingestion-time stamps never go back (as Flink's): a stamp before the latest one seen
    counts as that one."""
    return ops.greatest(stamp, latest)


def watermark_after(watermark: Any, max_event_time: Any, max_delay: int, punctuation: bool, explicit: Any,
                    ended: Any, ops: Ops = SCALAR) -> Any:
    """The watermark after a step. It never goes back. It follows the largest event time seen minus
    ``max_delay``, unless the pipeline's watermark comes from ``punctuation`` only; an ``explicit``
    value (a punctuation record's, a control step's; ``MIN_TIME`` for none) moves it too; once the
    input ``ended`` it is ``END_OF_INPUT``."""
    moved = watermark if punctuation else ops.greatest(watermark, max_event_time - max_delay)
    return ops.where(ended, END_OF_INPUT, ops.greatest(moved, explicit))


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
