"""Fuzzed input lines for the conservation properties (core and Spark): JSON records with random
types in every field, lines that are not JSON or not objects, huge, negative and NaN numbers,
unicode and empty keys, nulls, duplicate fields, punctuation records (column ``wm``). Deterministic for a seed."""

from __future__ import annotations

import json
import random

BASE_MS = 1_628_326_800_000  # 2021-08-07T09:00:00Z
KEYS = ["a", "b", "", " ", "ключ", "🔑", "a\u0301", "x" * 40, "null", "0"]


SPAN_MS = 4 * 3_600_000  # the event times of a run move through four hours, out of order by minutes


def _event_time_ms(r: random.Random, at: float) -> int:
    """An event time at fraction ``at`` of the run, up to 15 minutes early or 5 late."""
    return BASE_MS + int(at * SPAN_MS) + r.randrange(-15 * 60_000, 5 * 60_000)


def _event_time(r: random.Random, at: float):
    roll = r.random()
    if roll < 0.55:
        return _event_time_ms(r, at)
    if roll < 0.70:
        ms = _event_time_ms(r, at) - BASE_MS
        h, m, sec = 9 + ms // 3_600_000, ms // 60_000 % 60, ms // 1000 % 60
        return f"2021-08-07T{h:02d}:{m:02d}:{sec:02d}.{ms % 1000:03d}Z"
    return r.choice(
        [
            None,
            10**20,
            -(10**20),
            1e18,
            -1,
            0,
            float("nan"),
            1.5e12,
            "yesterday",
            "",
            True,
            "9999-12-31T23:59:59Z",
            "0001-01-01T00:00:00Z",
            [1],
            {"t": 1},
            "1628327063000",
            -1e300,
        ]
    )


def _key(r: random.Random):
    roll = r.random()
    if roll < 0.85:
        return r.choice(KEYS)
    return r.choice([None, 1, 2.5, True, "", [1, 2], {"a": 1}, -0.0])


def _value(r: random.Random):
    roll = r.random()
    if roll < 0.6:
        return r.randrange(-1000, 1000)
    if roll < 0.75:
        return r.uniform(-1e6, 1e6)
    return r.choice(
        [
            None,
            1e308,
            -1e308,
            float("nan"),
            float("inf"),
            "four",
            "",
            True,
            False,
            [1, 2],
            {"v": 1},
            10**30,
            -(10**19),
            2**63 - 1,
            "12",
        ]
    )


def record(r: random.Random, at: float) -> dict:
    rec = {"k": _key(r), "t": _event_time(r, at), "v": _value(r)}
    for name in list(rec):
        if r.random() < 0.05:
            del rec[name]  # a missing field
    if r.random() < 0.1:
        rec[r.choice(["extra", "ü", "", "k2"])] = _value(r)
    return rec


def line(r: random.Random, at: float) -> str:
    """One line of input at fraction ``at`` of the run: mostly records, some not (each kind named
    in the module's docstring)."""
    roll = r.random()
    if roll < 0.85:
        return json.dumps(record(r, at))  # (NaN and infinities as JSON's NaN / Infinity, read by both)
    if roll < 0.89:
        return r.choice(["not json {", '{"k": "a", "t": ', "{'k': 'a'}", "\u00ff\u00fe garbage", "}{", '{"k": "a",}'])
    if roll < 0.93:
        return json.dumps(r.choice([[1, 2], "text", 42, None, True, []]))
    if roll < 0.94:  # a punctuation record (for a pipeline whose watermark comes from column wm)
        return json.dumps({"wm": r.choice([_event_time_ms(r, at) - 20 * 60_000, "soon", 10**20])})
    # duplicate fields: the last one counts in both engines' JSON readers
    first = json.dumps(_key(r))
    last = json.dumps(r.choice(KEYS))
    return f'{{"k": {first}, "t": {_event_time_ms(r, at)}, "v": {r.randrange(100)}, "k": {last}}}'


def lines(n: int, seed: int) -> list[str]:
    r = random.Random(seed)
    return [line(r, i / n) for i in range(n)]
