"""Time in panes: every instant is an integer number of epoch milliseconds (UTC).

Durations are Spark-style strings ("2 minutes", "30 seconds", "1 hour 30 minutes"), short forms
("2m", "30s", "1500ms", "1h30m"), or integer milliseconds, at most ``MAX_DURATION``. Instants are
ISO-8601 strings, epoch numbers in a declared unit (``TIME_UNITS``: milliseconds by default), or
datetime objects. Event times are those from ``EARLIEST_EVENT_TIME`` up to ``LATEST_EVENT_TIME``:
Python's datetime and Spark's TIMESTAMP hold the years 1 to 9999, and a window's bounds, its expiry
and the watermark lie up to two ``MAX_DURATION`` from its records' times.
"""

from __future__ import annotations

import datetime as _dt
import re

#: The watermark before anything is known, and the end of the global window.
MIN_TIME = -(2**62)
MAX_TIME = 2**62
#: The watermark at the end of the input: every window expires.
END_OF_INPUT = 2**63 - 1

#: The longest duration (window size, gap, lateness, delay): 100 years of 365 days.
MAX_DURATION = 100 * 365 * 86_400_000
#: Event times are in [EARLIEST_EVENT_TIME, LATEST_EVENT_TIME): 0201-01-01 to 9000-01-01 (exclusive) UTC.
EARLIEST_EVENT_TIME = -55_824_249_600_000
LATEST_EVENT_TIME = 221_845_392_000_000
EVENT_TIME_RANGE = "0201-01-01T00:00:00Z up to 9000-01-01T00:00:00Z"

#: The units of numeric instants: a number in the unit is multiplied by the first and divided by
#: the second to give milliseconds (truncated toward zero, as Spark casts to a long).
TIME_UNITS = {"s": (1000, 1), "ms": (1, 1), "us": (1, 1000), "ns": (1, 1_000_000)}
UNIT_NAMES = {"s": "seconds", "ms": "milliseconds", "us": "microseconds", "ns": "nanoseconds"}
#: instants in this range (2000-01-01 to 2100-01-01) look like real event times (``unit_hint``)
_PLAUSIBLE = (946_684_800_000, 4_102_444_800_000)

_UNITS_MS = {
    "ms": 1,
    "milli": 1,
    "millis": 1,
    "millisecond": 1,
    "milliseconds": 1,
    "s": 1000,
    "sec": 1000,
    "secs": 1000,
    "second": 1000,
    "seconds": 1000,
    "m": 60_000,
    "min": 60_000,
    "mins": 60_000,
    "minute": 60_000,
    "minutes": 60_000,
    "h": 3_600_000,
    "hr": 3_600_000,
    "hrs": 3_600_000,
    "hour": 3_600_000,
    "hours": 3_600_000,
    "d": 86_400_000,
    "day": 86_400_000,
    "days": 86_400_000,
    "w": 7 * 86_400_000,
    "week": 7 * 86_400_000,
    "weeks": 7 * 86_400_000,
}

_PART = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]+)\s*")


def parse_duration(value: object) -> int:
    """A duration in milliseconds. Raises ValueError with the reason when it is not one."""
    if isinstance(value, bool):
        raise ValueError(f"not a duration: {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"a duration cannot be negative: {value}")
        if value > MAX_DURATION:
            raise ValueError(f"a duration is at most 100 years ({MAX_DURATION} ms): {value!r}")
        return value
    if isinstance(value, float) and value.is_integer():
        return parse_duration(int(value))
    if isinstance(value, _dt.timedelta):
        return parse_duration(int(value.total_seconds() * 1000))
    if not isinstance(value, str):
        raise ValueError(f"not a duration: {value!r} (use e.g. '2 minutes', '30s', '1500ms' or milliseconds)")
    text = value.strip().lower()
    if text.startswith("interval "):
        text = text[len("interval ") :]
    if re.fullmatch(r"\d+", text):
        return parse_duration(int(text))
    pos = 0
    total = 0.0
    matched = False
    while pos < len(text):
        m = _PART.match(text, pos)
        if not m or m.group(2) not in _UNITS_MS:
            raise ValueError(f"not a duration: {value!r} (use e.g. '2 minutes', '30s', '1500ms' or milliseconds)")
        total += float(m.group(1)) * _UNITS_MS[m.group(2)]
        pos = m.end()
        matched = True
    if not matched:
        raise ValueError(f"not a duration: {value!r}")
    if total != int(total):
        raise ValueError(f"a duration must be a whole number of milliseconds: {value!r}")
    if total > MAX_DURATION:
        raise ValueError(f"a duration is at most 100 years ({MAX_DURATION} ms): {value!r}")
    return int(total)


def parse_instant(value: object, unit: str = "ms") -> int:
    """An instant as epoch milliseconds. Strings are ISO-8601 (UTC unless they carry an offset);
    numbers (and strings of digits) are epoch numbers in ``unit`` (``TIME_UNITS``). Raises
    ValueError with the reason when it is not one."""
    if isinstance(value, bool) or value is None:
        raise ValueError(f"not a timestamp: {value!r}")
    if isinstance(value, (int, float)):
        return epoch_ms(value, unit)
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=_dt.UTC)
        return _datetime_ms(value)
    if not isinstance(value, str):
        raise ValueError(f"not a timestamp: {value!r}")
    text = value.strip()
    if re.fullmatch(r"-?\d+", text):
        return epoch_ms(int(text), unit)
    try:
        iso = text.replace(" ", "T", 1) if "T" not in text and " " in text else text
        if iso.endswith("Z") or iso.endswith("z"):
            iso = iso[:-1] + "+00:00"
        dt = _dt.datetime.fromisoformat(iso)
    except ValueError:
        raise ValueError(f"not an ISO-8601 timestamp: {value!r}") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=_dt.UTC)
    return _datetime_ms(dt)


def epoch_ms(number: int | float, unit: str = "ms") -> int:
    """An epoch number in ``unit`` as milliseconds, truncated toward zero (as Spark's cast to a
    long): integers exactly, floating-point numbers by one multiplication or division."""
    mul, div = TIME_UNITS[unit]
    if isinstance(number, float):
        if number != number or number in (float("inf"), float("-inf")):
            raise ValueError(f"not a timestamp: {number!r}")
        scaled = number * mul if div == 1 else number / div
        if scaled in (float("inf"), float("-inf")):
            raise ValueError(f"not a timestamp: {number!r} {UNIT_NAMES[unit]} is out of range")
        return int(scaled)
    n = number * mul
    return n // div if n >= 0 else -(-n // div)


def in_event_time_range(ms: int) -> bool:
    """Whether an instant can be an event time (see the module's docstring)."""
    return EARLIEST_EVENT_TIME <= ms < LATEST_EVENT_TIME


def unit_hint(number: object, unit: str) -> str | None:
    """The unit an epoch ``number`` looks like when read in ``unit`` it is no likely time (before
    2000 or from 2100 on) and in that unit it is one; else None."""
    if isinstance(number, bool) or not isinstance(number, (int, float)) or number != number:
        return None
    if _likely(number, unit):
        return None
    return next((u for u in TIME_UNITS if u != unit and _likely(number, u)), None)


def _likely(number: int | float, unit: str) -> bool:
    try:
        return _PLAUSIBLE[0] <= epoch_ms(number, unit) < _PLAUSIBLE[1]
    except (ValueError, OverflowError):
        return False


_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)


def _datetime_ms(dt: _dt.datetime) -> int:
    delta = dt - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def format_instant(ms: int | None) -> str | None:
    """ISO-8601 UTC with milliseconds, e.g. '2021-08-07T10:00:00.000Z'; None for None and for
    the unbounded ends of time."""
    if ms is None or ms <= MIN_TIME or ms >= MAX_TIME:
        return None
    dt = _EPOCH + _dt.timedelta(milliseconds=int(ms))
    return f"{dt.year:04d}-" + dt.strftime("%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"
