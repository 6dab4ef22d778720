"""The converters appended to panes.core.output for columnar sinks and for plans that collect panes
out of order (the Spark adapter): panes as columns, the order of one firing's panes."""

from panes import pipeline
from panes.core.engine import Pane
from panes.core.output import PANE_FIELDS, emission_order, pane_columns, pane_record, sort_key
from panes.core.time import MAX_TIME, MIN_TIME

SPEC = {
    "event_time": "t",
    "key": ["k", "j"],
    "window": {"tumbling": {"size": 10}},
    "aggregates": {"n": {"count": "*"}, "vals": {"collect_list": "v"}},
}


def _pane(key, start, end, timing="ON_TIME", index=0, values=(1, [2])):
    return Pane(key, start, end, timing, index, True, False, values)


def test_panes_as_columns_hold_the_record_fields_in_order():
    p = pipeline(SPEC)
    panes = [_pane(("a", 1), 0, 10), _pane(("b", None), 10, 20, "LATE", 2, (3, [4, 5]))]
    cols = pane_columns(panes, p)
    assert list(cols) == list(pane_record(panes[0], p))
    assert cols == {
        "k": ["a", "b"],
        "j": [1, None],
        "window_start": [0, 10],
        "window_end": [10, 20],
        "timing": ["ON_TIME", "LATE"],
        "pane_index": [0, 2],
        "is_last": [True, True],
        "retraction": [False, False],
        "n": [1, 3],
        "vals": [[2], [4, 5]],
    }
    assert PANE_FIELDS == ("timing", "pane_index", "is_last", "retraction")
    assert pane_columns([], p) == {name: [] for name in cols}


def test_the_global_window_has_no_bounds_as_columns():
    p = pipeline({**SPEC, "window": "global"})
    cols = pane_columns([_pane(("a", 1), MIN_TIME, MAX_TIME)], p)
    assert (cols["window_start"], cols["window_end"]) == ([None], [None])


def test_one_firing_emits_its_panes_by_window_end_start_and_key():
    panes = [
        _pane(("b", 1), 0, 10),
        _pane((None, 2), 0, 10),
        _pane(("a", 3), 5, 10),
        _pane(("a", 1), 0, 20),
        _pane((1, 1), 0, 10),
        _pane(("a", 1), 0, 10),
    ]
    ordered = sorted(panes, key=emission_order)
    assert [(p.window_start, p.window_end, p.key) for p in ordered] == [
        (0, 10, (None, 2)),
        (0, 10, (1, 1)),
        (0, 10, ("a", 1)),
        (0, 10, ("b", 1)),
        (5, 10, ("a", 3)),
        (0, 20, ("a", 1)),
    ]
    assert sorted([None, "x", 3, 2.5, "a"], key=sort_key) == [None, 2.5, 3, "a", "x"]
