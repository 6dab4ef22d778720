"""Units of the core: time parsing and formatting (panes.core.time), window assigners
(panes.core.windows) and aggregate functions (panes.core.aggregates)."""

from __future__ import annotations

import datetime as dt
import math

import numpy as np
import pytest

from panes.core import aggregates as A
from panes.core.time import MAX_TIME, MIN_TIME, format_instant, parse_duration, parse_instant
from panes.core.windows import GLOBAL_WINDOW, GlobalWindows, Hopping, Sessions, Sliding, Tumbling

SEC, MIN, HOUR = 1000, 60_000, 3_600_000
NOON = 1_704_110_400_000  # 2024-01-01T12:00:00Z

# ------------------------------------------------------------------------------------------------
# durations


@pytest.mark.parametrize(
    "text, ms",
    [
        ("2 minutes", 2 * MIN),
        ("1 minute", MIN),
        ("30 seconds", 30 * SEC),
        ("30s", 30 * SEC),
        ("30 sec", 30 * SEC),
        ("1500ms", 1500),
        ("1500 milliseconds", 1500),
        ("1h30m", HOUR + 30 * MIN),
        ("1 hour 30 minutes", HOUR + 30 * MIN),
        ("1h 30m 15s", HOUR + 30 * MIN + 15 * SEC),
        ("2 MINUTES", 2 * MIN),
        ("  5 m  ", 5 * MIN),
        ("interval 2 minutes", 2 * MIN),
        ("1.5s", 1500),
        ("1d", 24 * HOUR),
        ("2 days", 48 * HOUR),
        ("1w", 7 * 24 * HOUR),
        ("1500", 1500),
        ("0", 0),
        (1500, 1500),
        (0, 0),
        (1500.0, 1500),
        (dt.timedelta(minutes=2, milliseconds=5), 2 * MIN + 5),
    ],
)
def test_parse_duration(text, ms):
    assert parse_duration(text) == ms


@pytest.mark.parametrize(
    "bad, reason",
    [
        ("", "not a duration"),
        ("abc", "not a duration"),
        ("2 fortnights", "not a duration"),
        ("m", "not a duration"),
        ("1h 30", "not a duration"),
        ("-5s", "not a duration"),
        ("1.5ms", "whole number of milliseconds"),
        (-1, "negative"),
        (True, "not a duration"),
        (False, "not a duration"),
        (1.5, "not a duration"),
        (None, "not a duration"),
        ([1], "not a duration"),
    ],
)
def test_parse_duration_errors(bad, reason):
    with pytest.raises(ValueError, match=reason):
        parse_duration(bad)


# ------------------------------------------------------------------------------------------------
# instants


@pytest.mark.parametrize(
    "value, ms",
    [
        ("2024-01-01T12:00:00Z", NOON),
        ("2024-01-01T12:00:00z", NOON),
        ("2024-01-01T12:00:00+00:00", NOON),
        ("2024-01-01T14:00:00+02:00", NOON),
        ("2024-01-01T07:00:00-05:00", NOON),
        ("2024-01-01T12:00:00", NOON),  # no offset: UTC
        ("2024-01-01 12:00:00", NOON),
        ("2024-01-01T12:00:00.123Z", NOON + 123),
        ("2024-01-01T12:00:00.123999Z", NOON + 123),  # truncated to milliseconds
        ("2024-01-01", NOON - 12 * HOUR),
        ("1970-01-01T00:00:00Z", 0),
        ("1969-12-31T23:59:59.999Z", -1),
        (str(NOON), NOON),
        ("-5", -5),
        (NOON, NOON),
        (-1, -1),
        (float(NOON), NOON),
        (dt.datetime(2024, 1, 1, 12), NOON),  # naive: UTC
        (dt.datetime(2024, 1, 1, 13, tzinfo=dt.timezone(dt.timedelta(hours=1))), NOON),
        (dt.datetime(1969, 12, 31, 23, 59, 59, 999_500, tzinfo=dt.UTC), -1),  # floor
    ],
)
def test_parse_instant(value, ms):
    assert parse_instant(value) == ms


def test_parse_instant_pandas_timestamp():
    import pandas as pd

    assert parse_instant(pd.Timestamp("2024-01-01T12:00:00.250Z")) == NOON + 250


@pytest.mark.parametrize(
    "bad", [None, True, float("nan"), float("inf"), "yesterday", "2024-13-01T00:00:00Z", "12:00", [NOON], {"t": NOON}]
)
def test_parse_instant_errors(bad):
    with pytest.raises(ValueError, match="timestamp"):
        parse_instant(bad)


@pytest.mark.parametrize(
    "ms, text",
    [
        (0, "1970-01-01T00:00:00.000Z"),
        (-1, "1969-12-31T23:59:59.999Z"),
        (NOON, "2024-01-01T12:00:00.000Z"),
        (NOON + 7, "2024-01-01T12:00:00.007Z"),
        (NOON + 123, "2024-01-01T12:00:00.123Z"),
        (None, None),
        (MIN_TIME, None),
        (MAX_TIME, None),
    ],
)
def test_format_instant(ms, text):
    assert format_instant(ms) == text


@pytest.mark.parametrize("ms", [0, -1, 1, NOON, NOON + 999, -86_400_001, 253_402_300_799_999])
def test_format_then_parse_round_trips(ms):
    assert parse_instant(format_instant(ms)) == ms


# ------------------------------------------------------------------------------------------------
# window assigners


def windows_of(fn, ts: list[int]) -> list[list[tuple[int, int]]]:
    """For each timestamp, its windows (start, end) in the order the assigner gives them."""
    rows, starts, ends = fn.assign(np.array(ts, dtype=np.int64))
    out: list[list[tuple[int, int]]] = [[] for _ in ts]
    for r, s, e in zip(rows.tolist(), starts.tolist(), ends.tolist()):
        out[r].append((s, e))
    return out


def test_tumbling_aligned_to_epoch():
    assert windows_of(Tumbling(10), [0, 1, 9, 10, 19, 20]) == [
        [(0, 10)],
        [(0, 10)],
        [(0, 10)],
        [(10, 20)],
        [(10, 20)],
        [(20, 30)],
    ]


def test_tumbling_boundaries_are_start_inclusive_end_exclusive():
    size = 5 * MIN
    got = windows_of(Tumbling(size), [NOON - 1, NOON, NOON + size - 1, NOON + size])
    assert got == [
        [(NOON - size, NOON)],
        [(NOON, NOON + size)],
        [(NOON, NOON + size)],
        [(NOON + size, NOON + 2 * size)],
    ]


def test_tumbling_negative_times():
    assert windows_of(Tumbling(10), [-1, -10, -11, -20]) == [[(-10, 0)], [(-10, 0)], [(-20, -10)], [(-20, -10)]]


def test_tumbling_with_offset():
    fn = Tumbling(10, 3)
    assert windows_of(fn, [2, 3, 12, 13, -1, -7, -8]) == [
        [(-7, 3)],
        [(3, 13)],
        [(3, 13)],
        [(13, 23)],
        [(-7, 3)],
        [(-7, 3)],
        [(-17, -7)],
    ]


def test_tumbling_hour_with_offset_15_minutes():
    fn = Tumbling(HOUR, 15 * MIN)
    assert windows_of(fn, [NOON, NOON + 15 * MIN]) == [
        [(NOON - 45 * MIN, NOON + 15 * MIN)],
        [(NOON + 15 * MIN, NOON + 75 * MIN)],
    ]


def test_tumbling_rejects_non_positive_size():
    with pytest.raises(ValueError):
        Tumbling(0)


def test_hopping_overlap_every_instant_in_size_over_hop_windows():
    fn = Hopping(20, 5)
    assert fn.windows_per_record == 4
    assert windows_of(fn, [2, 5, 19, 20]) == [
        [(-15, 5), (-10, 10), (-5, 15), (0, 20)],
        [(-10, 10), (-5, 15), (0, 20), (5, 25)],
        [(0, 20), (5, 25), (10, 30), (15, 35)],
        [(5, 25), (10, 30), (15, 35), (20, 40)],
    ]


def test_hopping_size_not_a_multiple_of_hop():
    fn = Hopping(7, 5)
    assert windows_of(fn, [4, 6, 7, 10]) == [
        [(0, 7)],  # (-5, 2) does not reach 4
        [(0, 7), (5, 12)],
        [(5, 12)],  # 7 is the end of (0, 7): excluded
        [(5, 12), (10, 17)],
    ]


def test_hopping_gaps_when_hop_exceeds_size():
    fn = Hopping(3, 5)
    got = windows_of(fn, [0, 2, 3, 4, 5, 7, 8, 9, 10, -1, -3])
    assert got == [[(0, 3)], [(0, 3)], [], [], [(5, 8)], [(5, 8)], [], [], [(10, 13)], [], [(-5, -2)]]
    rows, _, _ = fn.assign(np.array([3, 4, 8, 9], dtype=np.int64))
    assert len(rows) == 0


def test_hopping_with_offset():
    fn = Hopping(10, 5, 2)
    assert windows_of(fn, [1, 2, 7]) == [[(-8, 2), (-3, 7)], [(-3, 7), (2, 12)], [(2, 12), (7, 17)]]


def test_hopping_with_equal_hop_and_size_is_tumbling():
    ts = [-11, -1, 0, 4, 5, 9, 10, 23]
    assert windows_of(Hopping(5, 5), ts) == windows_of(Tumbling(5), ts)


def test_hopping_rejects_non_positive():
    with pytest.raises(ValueError):
        Hopping(0, 5)
    with pytest.raises(ValueError):
        Hopping(5, 0)


def test_global_window():
    assert windows_of(GlobalWindows(), [MIN_TIME + 1, 0, NOON]) == [[GLOBAL_WINDOW]] * 3
    assert GLOBAL_WINDOW == (MIN_TIME, MAX_TIME)


def test_session_proto_windows():
    fn = Sessions(gap=10)
    assert fn.merging and fn.record_defined
    assert windows_of(fn, [0, 5, 100]) == [[(0, 10)], [(5, 15)], [(100, 110)]]
    with pytest.raises(ValueError):
        Sessions()
    with pytest.raises(ValueError):
        Sessions(gap=10, gap_column="g")
    with pytest.raises(ValueError):
        Sessions(gap=0)


def test_sliding_left_window_inclusive_both_ends():
    fn = Sliding(10)
    assert windows_of(fn, [100]) == [[(90, 101)]]  # [90, 100] held as [90, 101)
    assert fn.report_end(101) == 100
    with pytest.raises(ValueError):
        Sliding(0)


# ------------------------------------------------------------------------------------------------
# aggregates


def run(fn: A.AggregateFn, values, ts=None, seq=None, groups=None):
    """Add values to a fresh accumulator, in groups (list of index lists) or all at once."""
    n = len(values)
    vals = values if isinstance(values, np.ndarray) else _arr(values)
    ts = np.array(ts if ts is not None else range(n), dtype=np.int64)
    seq = np.array(seq if seq is not None else range(n), dtype=np.int64)
    acc = fn.create()
    for g in groups or [list(range(n))]:
        idx = np.array(g, dtype=np.int64)
        acc = fn.add_group(acc, vals[idx], ts[idx], seq[idx])
    return fn.extract(acc)


def _arr(values):
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values) and values:
        return np.array(values, dtype=np.int64)
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values) and values:
        return np.array(values, dtype=np.float64)
    a = np.empty(len(values), dtype=object)
    a[:] = values
    return a


def test_count_star_counts_rows_and_count_column_skips_nulls():
    assert run(A.Count("*"), [1, None, 3]) == 3
    assert run(A.Count(None), [None, None]) == 2
    assert run(A.Count("v"), [1, None, 3]) == 2
    assert run(A.Count("v"), [1.0, math.nan, 2.0]) == 2
    assert run(A.Count("v"), []) == 0


def test_sum():
    assert run(A.Sum("v"), [1, 2, 3]) == 6
    assert isinstance(run(A.Sum("v"), [1, 2, 3]), int)
    assert run(A.Sum("v"), [1.5, 2.25]) == 3.75
    assert run(A.Sum("v"), [1, None, 4]) == 5
    assert run(A.Sum("v"), [1.0, math.nan, 4.0]) == 5.0
    assert run(A.Sum("v"), []) is None
    assert run(A.Sum("v"), [None]) is None
    assert run(A.Sum("v"), [-5, 5]) == 0


def test_min_max():
    assert run(A.Min("v"), [3, 1, 2]) == 1
    assert run(A.Max("v"), [3, 1, 2]) == 3
    assert run(A.Min("v"), [3.0, math.nan, 2.5]) == 2.5
    assert run(A.Max("v"), ["pear", None, "apple"]) == "pear"
    assert run(A.Min("v"), ["pear", None, "apple"]) == "apple"
    assert run(A.Min("v"), []) is None
    assert run(A.Max("v"), [None]) is None


def test_avg():
    assert run(A.Avg("v"), [1, 2]) == 1.5
    assert run(A.Avg("v"), [1, None, 2, 6]) == 3.0
    assert run(A.Avg("v"), [1.0, math.nan]) == 1.0
    assert run(A.Avg("v"), []) is None


def test_median():
    assert run(A.Median("v"), [4, 1, 3, 2]) == 2.5
    assert run(A.Median("v"), [5, 1, 3]) == 3.0
    assert run(A.Median("v"), [7]) == 7.0
    assert run(A.Median("v"), [1, None, 3]) == 2.0
    assert run(A.Median("v"), []) is None


@pytest.mark.parametrize(
    "p, want",
    [
        (0.0, 10.0),
        (0.25, 17.5),  # rank 0.75 between 10 and 20
        (0.5, 25.0),
        (0.9, 37.0),  # rank 2.7 between 30 and 40
        (1.0, 40.0),
        (1 / 3, 20.0),  # rank 1 exactly
    ],
)
def test_percentile_linear_interpolation_between_closest_ranks(p, want):
    assert run(A.Percentile("v", p), [40, 10, 30, 20]) == pytest.approx(want)


def test_percentile_bounds():
    with pytest.raises(ValueError, match="p"):
        A.Percentile("v", 1.5)
    with pytest.raises(ValueError, match="p"):
        A.Percentile("v", -0.1)


def test_first_last_by_event_time_ties_by_arrival():
    vals = ["b", "a", "c", "d"]
    ts = [5, 5, 9, 9]
    seq = [0, 1, 2, 3]
    assert run(A.First("v"), vals, ts, seq) == "b"  # ts 5, first to arrive
    assert run(A.Last("v"), vals, ts, seq) == "d"  # ts 9, last to arrive
    # event time wins over arrival
    assert run(A.First("v"), ["late", "early"], [10, 1], [0, 1]) == "early"
    assert run(A.Last("v"), ["late", "early"], [10, 1], [0, 1]) == "late"
    # nulls are skipped
    assert run(A.First("v"), [None, "x"], [0, 1]) == "x"
    assert run(A.Last("v"), ["x", None], [0, 1]) == "x"
    assert run(A.First("v"), [None]) is None


def test_first_last_ties_across_groups_and_merges():
    vals, ts, seq = ["p", "q", "r", "s"], [5, 5, 5, 5], [0, 1, 2, 3]
    for groups in ([[0, 1, 2, 3]], [[2, 3], [0, 1]], [[3], [1], [2], [0]]):
        assert run(A.First("v"), vals, ts, seq, groups) == "p"
        assert run(A.Last("v"), vals, ts, seq, groups) == "s"


def test_collect_list_event_time_order_ties_by_arrival():
    vals = ["c", "a", "b", "d", "e"]
    ts = [30, 10, 20, 10, 30]
    seq = [0, 1, 2, 3, 4]
    want = ["a", "d", "b", "c", "e"]
    assert run(A.CollectList("v"), vals, ts, seq) == want
    # the same in any grouping of the adds
    assert run(A.CollectList("v"), vals, ts, seq, [[4, 3], [2], [1, 0]]) == want
    assert run(A.CollectList("v"), ["x", None, "y"]) == ["x", "y"]
    assert run(A.CollectList("v"), []) == []


def test_count_distinct():
    assert run(A.CountDistinct("v"), ["AB1C", "XY9Z", "AB1C", None]) == 2
    assert run(A.CountDistinct("v"), [1, 1, 2, 3, 3, 3]) == 3
    assert run(A.CountDistinct("v"), []) == 0


def test_top_k():
    assert run(A.TopK("v", 3), [5, 1, 9, 7, 9, 2]) == [9, 9, 7]  # duplicates kept
    assert run(A.TopK("v", 3), [4, None]) == [4]
    assert run(A.TopK("v", 2), [1, 8, 3], groups=[[0], [1], [2]]) == [8, 3]
    with pytest.raises(ValueError):
        A.TopK("v", 0)


class Spread(A.CombineFn):
    """max - min of the inputs, ignoring None; accumulator (lo, hi)."""

    def create_accumulator(self):
        return (None, None)

    def add_input(self, acc, value):
        if value is None:
            return acc
        lo, hi = acc
        return (value if lo is None else min(lo, value), value if hi is None else max(hi, value))

    def merge_accumulators(self, accumulators):
        out = self.create_accumulator()
        for lo, hi in accumulators:
            for v in (lo, hi):
                out = self.add_input(out, v)
        return out

    def extract_output(self, acc):
        lo, hi = acc
        return None if lo is None else hi - lo


def test_user_combine_fn_instance():
    fn = A.UserCombine("v", Spread())
    assert run(fn, [5, 1, 9, None, 3]) == 8
    assert run(fn, [5, 1, 9, 3], groups=[[0], [1, 2], [3]]) == 8
    assert run(fn, []) is None
    assert fn.fn_ref == f"{Spread.__module__}:Spread"


def test_user_combine_fn_by_name():
    fn = A.UserCombine("v", f"{__name__}:Spread")
    assert isinstance(fn.fn, Spread)
    assert run(fn, [2, 10, 4]) == 8
    agg = A.make_aggregate("spread", "combine", {"column": "v", "fn": f"{__name__}:Spread"})
    assert agg.output == "spread" and run(agg.fn, [2, 10, 4]) == 8


@pytest.mark.parametrize(
    "ref, reason",
    [
        ("no_such_module_xyz:Fn", "cannot import"),
        (f"{__name__}:NoSuchFn", "has no"),
        ("Spread", "module:ClassName"),
    ],
)
def test_user_combine_fn_bad_reference(ref, reason):
    with pytest.raises(ValueError, match=reason):
        A.load_combine_fn(ref)


VALUES = [4, None, 7, 1, 7, 3, None, 9, 2, 5]
TS = [3, 1, 3, 0, 8, 3, 2, 5, 5, 1]

MERGEABLE = [
    A.Count("*"),
    A.Count("v"),
    A.Sum("v"),
    A.Min("v"),
    A.Max("v"),
    A.Avg("v"),
    A.Median("v"),
    A.Percentile("v", 0.9),
    A.First("v"),
    A.Last("v"),
    A.CollectList("v"),
    A.CountDistinct("v"),
    A.TopK("v", 3),
    A.UserCombine("v", Spread()),
]


@pytest.mark.parametrize("fn", MERGEABLE, ids=lambda f: f"{f.name}")
@pytest.mark.parametrize("cut", [0, 1, 3, 5, 9, 10])
def test_merge_equals_add_all(fn, cut):
    vals = _arr(VALUES)
    ts = np.array(TS, dtype=np.int64)
    seq = np.arange(len(VALUES), dtype=np.int64)
    whole = fn.extract(fn.add_group(fn.create(), vals, ts, seq))
    # split in two (by a permutation, so each part holds records from anywhere), add, merge
    order = np.array([7, 2, 9, 0, 4, 1, 8, 3, 6, 5])
    a_idx, b_idx = order[:cut], order[cut:]
    a = fn.add_group(fn.create(), vals[a_idx], ts[a_idx], seq[a_idx])
    b = fn.add_group(fn.create(), vals[b_idx], ts[b_idx], seq[b_idx])
    assert fn.extract(fn.merge(a, b)) == whole
    assert fn.extract(fn.merge(b, a)) == whole
    assert fn.extract(fn.merge(fn.create(), fn.merge(a, b))) == whole


def test_merge_expected_values():
    """The whole-data values behind test_merge_equals_add_all, written out."""
    vals = _arr(VALUES)
    ts = np.array(TS, dtype=np.int64)
    seq = np.arange(len(VALUES), dtype=np.int64)
    got = {
        f"{f.name}:{getattr(f, 'p', '')}{f.column}": f.extract(f.add_group(f.create(), vals, ts, seq))
        for f in MERGEABLE
    }
    assert got == {
        "count:*": 10,
        "count:v": 8,
        "sum:v": 38,
        "min:v": 1,
        "max:v": 9,
        "avg:v": 4.75,
        "median:0.5v": 4.5,
        "percentile:0.9v": pytest.approx(7.6),
        # ts 0 -> 1; latest ts 8 -> 7
        "first:v": 1,
        "last:v": 7,
        # by (ts, seq): 1@0, 5@1 (None@1 skipped), 4@3 7@3 3@3, 9@5 2@5, 7@8
        "collect_list:v": [1, 5, 4, 7, 3, 9, 2, 7],
        "count_distinct:v": 7,
        "top_k:v": [9, 7, 7],
        "combine:v": 8,
    }
