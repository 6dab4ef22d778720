"""Table-valued panes: a stage whose pane is a table (a window pipeline's output over the window's
rows). The rows are kept as columns per batch; a pane's table expands into one record per row; the
accumulation modes, empty tables, failures, merging windows and only_updated_panes."""

import pickle

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from panes.core.engine import Engine, Pane
from panes.core.output import dead_letter_record, pane_records
from panes.core.pipeline import Pipeline, WatermarkStrategy
from panes.core.table import RowBuffer, Table, plain_value
from panes.core.triggers import AfterCount, AfterWatermark, Repeatedly
from panes.core.window_pipeline import FunctionTransform, PaneWindow, WindowPipeline
from panes.core.windows import GlobalWindows, Sessions, Sliding, Tumbling
from panes.scenario import Scenario, replay_core


def fn_pipeline(name, window=None, **kw):
    return Pipeline(
        window=window or Tumbling(10_000),
        key=("k",),
        event_time="t",
        window_pipeline=WindowPipeline(FunctionTransform(f"window_functions:{name}")),
        **kw,
    )


def rows_of(panes, *fields):
    return [tuple(p[f] for f in fields) for p in panes]


# -- the buffer and the table ------------------------------------------------------------------------------


def test_row_buffer_keeps_each_batch_as_columns_and_gives_rows_in_event_time_then_arrival_order():
    buf = RowBuffer()
    buf.append(np.array([5, 1]), np.array([0, 1]), {"v": np.array([50, 10]), "s": np.array(["e", "a"], dtype=object)})
    buf.append(np.array([1, 3]), np.array([2, 3]), {"v": np.array([11.5, 30.0])})
    assert [type(c[2]["v"]) for c in buf.chunks] == [np.ndarray, np.ndarray]
    ts, seq, cols = buf.rows()
    assert ts.tolist() == [1, 1, 3, 5] and seq.tolist() == [1, 2, 3, 0]
    assert cols["v"].tolist() == [10.0, 11.5, 30.0, 50.0]  # int and float columns widen to float
    assert cols["s"].tolist() == ["a", None, None, "e"]  # a batch without the column gives nulls
    assert len(buf.chunks) == 1 and len(buf) == 4  # consolidated once read
    again = pickle.loads(pickle.dumps(buf))
    assert again.rows()[2]["v"].tolist() == [10.0, 11.5, 30.0, 50.0]


def test_table_from_a_frame_keeps_types_and_gives_plain_records():
    frame = pd.DataFrame(
        {
            "n": pd.array([1, None], dtype="Int64"),
            "x": [1.5, float("nan")],
            "at": pd.to_datetime([0, 3_600_000], unit="ms", utc=True),
            "l": [[1, 2], []],
        }
    )
    t = Table.from_frame(frame)
    assert t.without(["x"]).records() == [
        {"n": 1, "at": "1970-01-01T00:00:00.000Z", "l": [1, 2]},
        {"n": None, "at": "1970-01-01T01:00:00.000Z", "l": []},
    ]
    assert t.columns["x"].dtype == np.float64 and [r["x"] for r in t.records()][0] == 1.5
    assert np.isnan(t.records()[1]["x"])  # a NaN the frame holds stays a NaN
    assert t == Table.from_frame(frame) and t != Table.from_frame(frame.head(1))


def test_table_from_arrow_an_integer_sum_as_decimal_is_an_int_and_nulls_are_none():
    t = Table.from_arrow(
        pa.table(
            {
                "s": pa.array([3, None], pa.decimal128(38, 0)),
                "c": pa.array([1, 2], pa.int64()),
                "v": pa.array([None, "b"]),
            }
        )
    )
    assert t.records() == [{"s": 3, "c": 1, "v": None}, {"s": None, "c": 2, "v": "b"}]
    assert t.columns["c"].dtype == np.int64


def test_plain_values_of_instants_are_iso_text():
    assert plain_value(np.datetime64(1500, "ms")) == "1970-01-01T00:00:01.500Z"
    assert plain_value(pd.Timestamp(0, unit="ms", tz="UTC")) == "1970-01-01T00:00:00.000Z"
    assert plain_value(np.int64(3)) == 3 and type(plain_value(np.int64(3))) is int


def test_a_table_valued_pane_is_one_record_per_row_after_the_pane_columns():
    p = Pipeline(
        window=Tumbling(10), key=("k",), window_pipeline=WindowPipeline(FunctionTransform("window_functions:nothing"))
    )
    table = Table(
        {
            "k": np.array(["x", "x"], dtype=object),
            "window_end": np.array([1, 2]),
            "v": np.array([7, 8]),
            "w": np.array(["a", "b"], dtype=object),
        }
    )
    pane = Pane(("x",), 0, 10, "EARLY", 2, False, True, (table,))
    head = {
        "k": "x",
        "window_start": "1970-01-01T00:00:00.000Z",
        "window_end": "1970-01-01T00:00:00.010Z",
        "timing": "EARLY",
        "pane_index": 2,
        "is_last": False,
        "retraction": True,
    }
    # the key and window bounds the table repeats are the pane's own
    assert pane_records(pane, p) == [{**head, "v": 7, "w": "a"}, {**head, "v": 8, "w": "b"}]
    assert pane_records(Pane(("x",), 0, 10, "EARLY", 2, False, False, (Table.empty(["v"]),)), p) == []


def test_the_window_pipeline_gets_the_window_rows_with_the_window_bounds():
    seen = []

    class Spy:
        kind = "fn"

        def run(self, rows):
            seen.append(rows.frame())
            return Table.empty()

        def describe(self):
            return "spy"

    acc = RowBuffer().append(
        np.array([7, 3]), np.array([0, 1]), {"k": np.array(["a", "a"], dtype=object), "v": np.array([1, 2])}
    )
    WindowPipeline(Spy()).extract_window(acc, PaneWindow(("a",), 0, 10))
    frame = seen[0]
    assert list(frame.columns) == ["k", "v", "window_start", "window_end"]
    assert frame["v"].tolist() == [2, 1]
    assert frame["window_end"].tolist() == [pd.Timestamp(10, unit="ms", tz="UTC")] * 2
    WindowPipeline(Spy()).extract_window(acc, PaneWindow((), None, None))
    assert seen[1]["window_start"].tolist() == [None, None]


# -- the engine: accumulation modes -------------------------------------------------------------------------

STEPS = [
    {"add": [{"k": "a", "t": 1000, "v": 5}, {"k": "a", "t": 2000, "v": 9}]},
    {"add": [{"k": "a", "t": 3000, "v": 7}]},
    {"add": [{"k": "a", "t": 4000, "v": 9}]},
    {"watermark": 10_000},
]


def replay(pipeline, steps=STEPS):
    return replay_core(Scenario(pipeline, steps))


@pytest.mark.parametrize(
    "mode, expected",
    [
        (
            "accumulating",
            [
                ("EARLY", 0, False, 9, 2000),
                ("EARLY", 0, False, 5, 1000),
                ("EARLY", 1, False, 9, 2000),
                ("EARLY", 1, False, 7, 3000),
                ("EARLY", 2, False, 9, 2000),
                ("EARLY", 2, False, 9, 4000),
                ("ON_TIME", 3, False, 9, 2000),
                ("ON_TIME", 3, False, 9, 4000),
            ],
        ),
        (
            "discarding",
            [
                ("EARLY", 0, False, 9, 2000),
                ("EARLY", 0, False, 5, 1000),
                ("EARLY", 1, False, 7, 3000),
                ("EARLY", 2, False, 9, 4000),
                # the on-time pane has no rows since the last: no transform, no records
            ],
        ),
        (
            "retracting",
            [
                ("EARLY", 0, False, 9, 2000),
                ("EARLY", 0, False, 5, 1000),
                ("EARLY", 0, True, 9, 2000),
                ("EARLY", 0, True, 5, 1000),
                ("EARLY", 1, False, 9, 2000),
                ("EARLY", 1, False, 7, 3000),
                ("EARLY", 1, True, 9, 2000),
                ("EARLY", 1, True, 7, 3000),
                ("EARLY", 2, False, 9, 2000),
                ("EARLY", 2, False, 9, 4000),
                ("EARLY", 2, True, 9, 2000),
                ("EARLY", 2, True, 9, 4000),
                ("ON_TIME", 3, False, 9, 2000),
                ("ON_TIME", 3, False, 9, 4000),
            ],
        ),
    ],
)
def test_early_panes_in_each_accumulation_mode(mode, expected):
    p = fn_pipeline("largest", trigger=AfterWatermark(early=AfterCount(1)), accumulation=mode)
    res = replay(p)
    got = rows_of(res.panes, "timing", "pane_index", "retraction", "v", "t")
    assert [(tm, i, r, v, t) for tm, i, r, v, t in got] == [(tm, i, r, v, t) for tm, i, r, v, t in expected]
    assert all(p["is_last"] == (p["timing"] == "ON_TIME") for p in res.panes)
    assert {p["ends"] for p in res.panes} == {"00:00:10"}
    assert res.dead_letters == []


def test_a_pipeline_with_no_rows_emits_no_records_but_its_pane_counts_and_retracts_the_last():
    p = Pipeline(
        window=Tumbling(10_000),
        key=("k",),
        event_time="t",
        trigger=AfterWatermark(early=AfterCount(1)),
        accumulation="retracting",
        window_pipeline=WindowPipeline(FunctionTransform("window_functions:largest")),
    )
    res = replay(p, STEPS[:1] + [{"watermark": 10_000}])
    assert rows_of(res.panes, "pane_index", "retraction", "v") == [
        (0, False, 9),
        (0, False, 5),
        (0, True, 9),
        (0, True, 5),
        (1, False, 9),
        (1, False, 5),
    ]
    empty = replay(fn_pipeline("nothing", trigger=AfterWatermark(early=AfterCount(1))))
    assert empty.panes == [] and empty.dead_letters == []


# -- failures --------------------------------------------------------------------------------------------------


def test_a_window_whose_pipeline_fails_sends_its_rows_to_the_dead_letters_and_the_query_goes_on():
    p = Pipeline(
        window=Tumbling(10_000),
        key=("k",),
        event_time="t",
        window_pipeline=WindowPipeline(FunctionTransform("window_functions:occupancy")),
    )
    steps = [
        {
            "add": [
                {"k": "a", "t": 1000, "passengers": 2},
                {"k": "b", "t": 1500, "passengers": 0},
                {"k": "b", "t": 1200, "passengers": 3},
                {"k": "a", "t": 12_000, "passengers": 4},
            ]
        },
        {"watermark": 20_000},
    ]
    res = replay(p, steps)
    assert rows_of(res.panes, "k", "window_start", "cars", "per_car") == [
        ("a", "1970-01-01T00:00:00.000Z", 1, 2.0),
        ("a", "1970-01-01T00:00:10.000Z", 1, 4.0),
    ]
    window = {"start": "1970-01-01T00:00:00.000Z", "end": "1970-01-01T00:00:10.000Z"}
    assert res.dead_letters == [
        {
            "reason": "window_pipeline_failed",
            "record": {"k": "b", "t": 1200, "passengers": 3},
            "window": window,
            "windows": [window],
            "detail": "ValueError: a car without passengers",
        },
        {
            "reason": "window_pipeline_failed",
            "record": {"k": "b", "t": 1500, "passengers": 0},
            "window": window,
            "windows": [window],
            "detail": "ValueError: a car without passengers",
        },
    ]


def test_after_a_failure_the_failed_rows_have_left_the_window():
    p = Pipeline(
        window=Tumbling(10_000),
        key=("k",),
        event_time="t",
        trigger=Repeatedly(AfterCount(1)),
        window_pipeline=WindowPipeline(FunctionTransform("window_functions:occupancy")),
    )
    steps = [
        {"add": [{"k": "a", "t": 1000, "passengers": 0}]},
        {"add": [{"k": "a", "t": 2000, "passengers": 3}]},
        {"watermark": 10_000},
    ]
    res = replay(p, steps)
    assert rows_of(res.panes, "timing", "pane_index", "cars", "per_car") == [
        ("EARLY", 0, 1, 3.0),
        ("ON_TIME", 1, 1, 3.0),
    ]
    assert [d["record"]["passengers"] for d in res.dead_letters] == [0]


def test_a_function_that_returns_no_frame_fails_its_window():
    p = Pipeline(
        window=Tumbling(10_000),
        event_time="t",
        window_pipeline=WindowPipeline(FunctionTransform("window_functions:not_a_frame")),
    )
    res = replay(p, [{"add": [{"t": 1}]}, {"end": True}])
    assert res.panes == []
    assert (
        res.dead_letters[0]["detail"] == "TypeError: window_functions:not_a_frame returned int, not a pandas DataFrame"
    )


# -- windows that merge, only updated panes, sliding and global windows ----------------------------------------


def test_merged_sessions_retract_the_tables_of_the_windows_they_merge():
    p = fn_pipeline(
        "largest",
        window=Sessions(gap=1000),
        trigger=Repeatedly(AfterCount(1)),
        accumulation="retracting",
        watermark=WatermarkStrategy(max_delay=5000),
    )
    steps = [
        {"add": [{"k": "a", "t": 1000, "v": 1}]},
        {"add": [{"k": "a", "t": 2500, "v": 2}]},
        {"add": [{"k": "a", "t": 1800, "v": 3}]},
        {"watermark": 10_000},
    ]
    got = rows_of(replay(p, steps).panes, "window_start", "window_end", "pane_index", "retraction", "v")
    s = "1970-01-01T00:00:0"
    assert got == [
        (s + "1.000Z", s + "2.000Z", 0, False, 1),
        (s + "2.500Z", s + "3.500Z", 0, False, 2),
        (s + "1.000Z", s + "2.000Z", 0, True, 1),
        (s + "2.500Z", s + "3.500Z", 0, True, 2),  # the two merged away
        (s + "1.000Z", s + "3.500Z", 0, False, 3),
        (s + "1.000Z", s + "3.500Z", 0, False, 2),
        (s + "1.000Z", s + "3.500Z", 0, True, 3),
        (s + "1.000Z", s + "3.500Z", 0, True, 2),
        (s + "1.000Z", s + "3.500Z", 1, False, 3),
        (s + "1.000Z", s + "3.500Z", 1, False, 2),
    ]


def test_only_updated_panes_skips_a_table_equal_to_the_last():
    p = fn_pipeline("largest", trigger=Repeatedly(AfterCount(1)), only_updated_panes=True)
    steps = [
        {"add": [{"k": "a", "t": 1000, "v": 5}, {"k": "a", "t": 2000, "v": 9}]},
        {"add": [{"k": "a", "t": 3000, "v": 1}]},  # the top two do not change
        {"add": [{"k": "a", "t": 4000, "v": 6}]},
        {"watermark": 10_000},
    ]
    assert rows_of(replay(p, steps).panes, "pane_index", "v") == [(0, 9), (0, 5), (1, 9), (1, 6)]


def test_sliding_and_global_windows_keep_their_rows():
    sliding = fn_pipeline("largest", window=Sliding(1000))
    got = rows_of(
        replay(sliding, [{"add": [{"k": "a", "t": 1000, "v": 1}, {"k": "a", "t": 1500, "v": 2}]}, {"end": True}]).panes,
        "window_start",
        "v",
        "ends",
    )
    assert got == [
        ("1970-01-01T00:00:00.000Z", 1, "00:00:01"),
        ("1970-01-01T00:00:00.500Z", 2, "00:00:01"),
        ("1970-01-01T00:00:00.500Z", 1, "00:00:01"),
        ("1970-01-01T00:00:01.001Z", 2, "00:00:02"),
    ]
    glob = Pipeline(
        window=GlobalWindows(),
        event_time="t",
        window_pipeline=WindowPipeline(FunctionTransform("window_functions:occupancy")),
    )
    res = replay(glob, [{"add": [{"t": 5, "passengers": 1}, {"t": 9, "passengers": 2}]}, {"end": True}])
    assert res.panes == [
        {
            "window_start": None,
            "window_end": None,
            "timing": "ON_TIME",
            "pane_index": 0,
            "is_last": True,
            "retraction": False,
            "cars": 2,
            "per_car": 1.5,
        }
    ]


def test_the_engine_state_keeps_rows_as_arrays():
    p = fn_pipeline("largest")
    engine = Engine(p)
    from panes.core.records import parse_records

    state = engine.new_state()
    parsed = parse_records(p, [{"k": "a", "t": 1, "v": 2, "extra": "x"}], 0)
    engine.step(state, parsed.frame, record_of=parsed.records.__getitem__)
    (ws,) = state.keys[("a",)].values()
    ((ts, seq, cols),) = ws.acc[0].chunks
    assert sorted(cols) == ["extra", "k", "t", "v"] and all(isinstance(v, np.ndarray) for v in cols.values())


def test_dead_letter_record_of_a_failed_window():
    from panes.core.engine import DeadLetter

    d = DeadLetter("window_pipeline_failed", {"v": 1}, None, ((0, 10),), "ValueError: x")
    assert dead_letter_record(d)["reason"] == "window_pipeline_failed"
