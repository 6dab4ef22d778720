"""Time in panes: every instant is an integer number of epoch milliseconds (UTC).

Durations are Spark-style strings ("2 minutes", "30 seconds", "1 hour 30 minutes"), short forms
("2m", "30s", "1500ms", "1h30m"), or integer milliseconds. Instants are ISO-8601 strings, integer
epoch milliseconds, or datetime objects.
"""

from __future__ import annotations

import datetime as _dt
import re

#: The watermark before anything is known, and the end of the global window.
MIN_TIME = -(2**62)
MAX_TIME = 2**62
#: The watermark at the end of the input: every window expires.
END_OF_INPUT = 2**63 - 1

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
        return value
    if isinstance(value, float) and value.is_integer():
        return parse_duration(int(value))
    if isinstance(value, _dt.timedelta):
        return int(value.total_seconds() * 1000)
    if not isinstance(value, str):
        raise ValueError(f"not a duration: {value!r} (use e.g. '2 minutes', '30s', '1500ms' or milliseconds)")
    text = value.strip().lower()
    if text.startswith("interval "):
        text = text[len("interval ") :]
    if re.fullmatch(r"\d+", text):
        return int(text)
    pos = 0
    total = 0.0
    matched = False
    while pos < len(text):
        m = _PART.match(text, pos)
        if not m or m.group(2) not in _UNITS_MS:
            raise ValueError(
                f"not a duration: {value!r} (use e.g. '2 minutes', '30s', '1500ms' or milliseconds)"
            )
        total += float(m.group(1)) * _UNITS_MS[m.group(2)]
        pos = m.end()
        matched = True
    if not matched:
        raise ValueError(f"not a duration: {value!r}")
    if total != int(total):
        raise ValueError(f"a duration must be a whole number of milliseconds: {value!r}")
    return int(total)


def parse_instant(value: object) -> int:
    """An instant as epoch milliseconds. Strings are ISO-8601 (UTC unless they carry an offset);
    integers are epoch milliseconds. Raises ValueError with the reason when it is not one."""
    if isinstance(value, bool) or value is None:
        raise ValueError(f"not a timestamp: {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(f"not a timestamp: {value!r}")
        return int(value)
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=_dt.timezone.utc)
        return _datetime_ms(value)
    if hasattr(value, "value") and type(value).__name__ == "Timestamp":  # pandas.Timestamp
        return parse_instant(getattr(value, "to_pydatetime")())
    if not isinstance(value, str):
        raise ValueError(f"not a timestamp: {value!r}")
    text = value.strip()
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    try:
        iso = text.replace(" ", "T", 1) if "T" not in text and " " in text else text
        if iso.endswith("Z") or iso.endswith("z"):
            iso = iso[:-1] + "+00:00"
        dt = _dt.datetime.fromisoformat(iso)
    except ValueError:
        raise ValueError(f"not an ISO-8601 timestamp: {value!r}") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=_dt.timezone.utc)
    return _datetime_ms(dt)


_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


def _datetime_ms(dt: _dt.datetime) -> int:
    delta = dt - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def format_instant(ms: int | None) -> str | None:
    """ISO-8601 UTC with milliseconds, e.g. '2021-08-07T10:00:00.000Z'; None for None and for
    the unbounded ends of time."""
    if ms is None or ms <= MIN_TIME or ms >= MAX_TIME:
        return None
    dt = _EPOCH + _dt.timedelta(milliseconds=int(ms))
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"
