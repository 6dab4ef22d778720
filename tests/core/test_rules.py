"""The shared rules (panes.core.rules) mean the same on Python ints (``SCALAR``, the engine) and on
numpy arrays (``ARRAY``): each rule is evaluated over a grid of values both ways and the answers
compared one by one; a few points are checked against their exact values. The Spark plans evaluate
the same rules on Columns."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from panes.core import rules
from panes.core.aggregates import Aggregate, Sum
from panes.core.pipeline import Pipeline, WatermarkStrategy
from panes.core.records import parse_records
from panes.core.rules import ARRAY, SCALAR, VALIDATION_ORDER, Reason, Timing
from panes.core.time import END_OF_INPUT, MAX_TIME, MIN_TIME
from panes.core.windows import Sessions

ENDS = [MIN_TIME, -10, 0, 9, 10, 11, 1_000, MAX_TIME]
WATERMARKS = [MIN_TIME, -10, 0, 9, 10, 11, 15, 1_005, MAX_TIME - 1, MAX_TIME, END_OF_INPUT]
LATENESS = [0, 5]
BOOLS = [False, True]
TIMINGS = [t.value for t in Timing]


def agree(rule, *axes):
    """Evaluate ``rule(*args, ops)`` at every point of the grid of ``axes`` with SCALAR, and once
    over the whole grid as arrays with ARRAY; assert they agree. Returns {point: scalar answer}."""
    points = list(itertools.product(*axes))
    scalar = [rule(*p, SCALAR) for p in points]
    columns = [
        np.array([p[i] for p in points], dtype=object if isinstance(axes[i][0], str) else None)
        for i in range(len(axes))
    ]
    array = rule(*columns, ARRAY)
    array = np.broadcast_to(array, (len(points),))
    for p, s, a in zip(points, scalar, array.tolist()):
        assert s == a, (rule.__name__, p, s, a)
        assert type(s) in (int, bool, str, type(None)), (rule.__name__, p, type(s))
    return dict(zip(points, scalar))


def test_expiry():
    got = agree(lambda end, lateness, ops: rules.expiry(end, lateness, ops), ENDS, LATENESS)
    assert got[(10, 5)] == 15
    assert got[(10, 0)] == 10
    assert got[(MAX_TIME, 5)] == END_OF_INPUT  # the global window expires at the end of input only


def test_is_expired():
    got = agree(lambda end, lateness, wm, ops: rules.is_expired(end, lateness, wm, ops), ENDS, LATENESS, WATERMARKS)
    assert got[(10, 5, 15)] is True and got[(10, 5, 11)] is False
    assert got[(MAX_TIME, 0, MAX_TIME)] is False and got[(MAX_TIME, 0, END_OF_INPUT)] is True


def test_end_passed_on_time_reached():
    passed = agree(lambda end, wm, ops: rules.end_passed(end, wm), ENDS, WATERMARKS)
    reached = agree(lambda end, wm, ops: rules.on_time_reached(end, wm), ENDS, WATERMARKS)
    assert passed[(10, 10)] is True and passed[(10, 9)] is False
    assert passed[(MAX_TIME, END_OF_INPUT)] is False  # the global window's end is never passed
    assert reached[(MAX_TIME, END_OF_INPUT)] is True and reached[(MAX_TIME, MAX_TIME)] is False
    assert all(reached[p] == (passed[p] or p[1] >= END_OF_INPUT) for p in reached)


def test_timers_and_holds():
    eow = agree(lambda end, ops: rules.end_of_window_timer(end), ENDS)
    gc = agree(lambda end, lateness, ops: rules.gc_timer(end, lateness, ops), ENDS, LATENESS)
    hold = agree(lambda end, lateness, wm, ops: rules.element_hold(end, lateness, wm, ops), ENDS, LATENESS, WATERMARKS)
    assert eow[(10,)] == 9  # the window's max timestamp: fires once the watermark is after it, at 10
    assert gc[(10, 5)] == 14 and gc[(10, 0)] == 9  # max timestamp + allowed lateness
    assert gc[(MAX_TIME, 5)] == END_OF_INPUT - 1  # the global window: at the end of input
    # a record before the watermark passed the end holds at the max timestamp, a later one at GC time
    assert hold[(10, 5, 9)] == 9 and hold[(10, 5, 10)] == 14 and hold[(10, 5, 11)] == 14
    assert hold[(MAX_TIME, 5, MAX_TIME - 1)] == MAX_TIME - 1
    # a timer or hold never lets the window expire unseen: each is before the expiry
    assert all(h < rules.expiry(p[0], p[1]) for p, h in hold.items() if p[0] > MIN_TIME)


def test_processing_timers_fire_strictly_after_their_instant():
    fires = agree(lambda t, pt, ops: rules.processing_timer_fires(t, pt), [0, 5, 10], [4, 5, 6])
    assert fires[(5, 5)] is False and fires[(5, 6)] is True and fires[(5, 4)] is False


def test_output_watermark():
    got = agree(lambda wm, hold, ops: rules.output_watermark(wm, hold, ops), WATERMARKS, [9, 14, END_OF_INPUT])
    assert got[(15, 9)] == 9 and got[(15, 14)] == 14 and got[(15, END_OF_INPUT)] == 15
    assert got[(END_OF_INPUT, END_OF_INPUT)] == END_OF_INPUT


def test_pane_timing_and_emission():
    timing = agree(lambda late, reached, ops: rules.pane_timing(late, reached, ops), BOOLS, BOOLS)
    assert timing == {(False, False): "EARLY", (False, True): "ON_TIME", (True, False): "LATE", (True, True): "LATE"}
    emitted = agree(lambda n, t, ops: rules.pane_is_emitted(n, t), [0, 1, 3], TIMINGS)
    assert emitted[(0, "ON_TIME")] is True and emitted[(0, "EARLY")] is False and emitted[(0, "LATE")] is False
    assert all(emitted[(n, t)] for n in (1, 3) for t in TIMINGS)


def test_ingestion_stamp():
    got = agree(lambda stamp, latest, ops: rules.ingestion_stamp(stamp, latest, ops), [0, 5, 10], [0, 7])
    assert got[(5, 7)] == 7 and got[(10, 7)] == 10


@pytest.mark.parametrize("punctuation", [False, True])
@pytest.mark.parametrize("max_delay", [0, 5])
def test_watermark_after(punctuation, max_delay):
    def rule(wm, max_event_time, explicit, ended, ops):
        return rules.watermark_after(wm, max_event_time, max_delay, punctuation, explicit, ended, ops)

    got = agree(rule, [MIN_TIME, 0, 20], [MIN_TIME, 10, 30], [MIN_TIME, 12, 40], BOOLS)
    for (wm, _met, _explicit, ended), after in got.items():
        assert after >= wm  # never back
        if ended:
            assert after == END_OF_INPUT
    assert got[(0, 30, MIN_TIME, False)] == (0 if punctuation else 30 - max_delay)
    assert got[(0, 30, 40, False)] == 40
    assert got[(20, 10, MIN_TIME, False)] == 20
    assert got[(MIN_TIME, MIN_TIME, MIN_TIME, False)] == MIN_TIME  # nothing seen yet


def test_first_failure_follows_the_checks_in_order():
    reasons = [Reason.MISSING_EVENT_TIME.value, Reason.MISSING_KEY.value, Reason.INVALID_VALUE.value]

    def rule(a, b, c, ops):
        return rules.first_failure(list(zip((a, b, c), reasons)), ops)

    got = agree(rule, BOOLS, BOOLS, BOOLS)
    for passed, reason in got.items():
        failed = [r for ok, r in zip(passed, reasons) if not ok]
        assert reason == (failed[0] if failed else None)


def test_validation_order():
    assert [rules.validation_rank(r) for r in VALIDATION_ORDER] == list(range(len(VALIDATION_ORDER)))
    # late and window_closed are decided by the windows, later; window_pipeline_failed when a
    # window's pane is extracted
    assert set(VALIDATION_ORDER) == set(Reason) - {Reason.LATE, Reason.WINDOW_CLOSED, Reason.WINDOW_PIPELINE_FAILED}


@pytest.mark.parametrize(
    "faults",
    [
        f
        for n in range(1, 6)
        for f in itertools.combinations(["no_time", "bad_time", "no_key", "not_a_number", "bad_gap"], n)
        if not {"no_time", "bad_time"} <= set(f)
    ],
)
def test_core_records_report_the_first_check_they_fail(faults):
    p = Pipeline(
        window=Sessions(gap_column="g"),
        aggregates=(Aggregate("s", Sum("v")),),
        key=("k",),
        event_time="t",
        watermark=WatermarkStrategy(),
    )
    rec = {"t": 1000, "k": "a", "v": 1, "g": 10}
    fault_reason = {
        "no_time": Reason.MISSING_EVENT_TIME,
        "bad_time": Reason.INVALID_EVENT_TIME,
        "no_key": Reason.MISSING_KEY,
        "not_a_number": Reason.INVALID_VALUE,
        "bad_gap": Reason.INVALID_VALUE,
    }
    change = {
        "no_time": ("t", None),
        "bad_time": ("t", "noon"),
        "no_key": ("k", None),
        "not_a_number": ("v", "x"),
        "bad_gap": ("g", -1),
    }
    for f in faults:
        rec[change[f][0]] = change[f][1]
    parsed = parse_records(p, [rec], ingestion_time=0)
    assert len(parsed.frame) == 0
    (dead,) = parsed.dead_letters
    assert dead.reason == min((fault_reason[f] for f in faults), key=rules.validation_rank)
