"""The stateful plan's counts (``panes.spark.stateful_counts``): what a call of its processor read and
emitted, and their sums on the driver, without Spark."""

from __future__ import annotations

import json

import pandas as pd

from panes.spark.columns import PUNCT
from panes.spark.stateful_counts import add, as_json, emitted_counts, read_counts

CONTROL = "__panes_control"


def test_a_call_counts_records_not_control_rows_and_punctuation_records_apart():
    rows = pd.DataFrame(
        {
            "t": [5.0, None, 7.0, -3.0, None],
            PUNCT: [None, 9_000, 4_000, None, None],
            CONTROL: [None, 9_000, None, None, None],  # (the second row is panes' control row)
        }
    )
    assert read_counts(rows, CONTROL, "t") == {
        "records_in": 4,
        "watermark_records": 1,
        "event_time_min": -3.0,
        "event_time_max": 7.0,
    }
    # no control column, no punctuation column, no number: every row a record, no bounds
    assert read_counts(pd.DataFrame({"t": ["x", None]}), None, "t") == {"records_in": 2}
    assert read_counts(pd.DataFrame({"t": []}), CONTROL, "t") == {}


def test_a_call_counts_its_pane_rows_and_dead_letters_by_reason():
    blocks = [
        {"kind": ["P", "P"], "reason": [None, None]},
        {"kind": ["D"], "reason": ["late"]},
        {"kind": ["D"], "reason": ["malformed"]},
        {"kind": ["D"], "reason": ["late"]},
        {"kind": ["H"], "reason": [None]},
        {"kind": [], "reason": []},
    ]
    assert emitted_counts(blocks, "kind", "reason") == {
        "pane_rows": 2,
        "dead_letter_rows": 3,
        "late": 2,
        "malformed": 1,
    }


def test_the_driver_sums_counts_and_keeps_the_event_time_bounds():
    calls = [
        as_json({"records_in": 3, "counted": 2, "late": 1, "event_time_min": 0.0, "event_time_max": 4.0}),
        as_json({"records_in": 0, "counted": 0, "pane_rows": 2}),
        as_json({"records_in": 2, "counted": 2, "event_time_min": 5.0, "event_time_max": 9.0}),
        None,
    ]
    # (zero counts are left out of a row; an event time of 0 is kept)
    assert json.loads(calls[1]) == {"pane_rows": 2}
    total: dict = {}
    for c in calls:
        add(total, c)
    assert total == {
        "records_in": 5,
        "counted": 4,
        "late": 1,
        "pane_rows": 2,
        "event_time_min": 0.0,
        "event_time_max": 9.0,
    }
