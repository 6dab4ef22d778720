"""The native streaming step's watermark and dead-letter flag, read from the windows table it
wrote: from the Parquet footers' statistics, or with a Spark aggregate when a file has none."""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from panes.spark.native import NativeStream
from panes.spark.native.names import IS_DEAD_LETTER, ROW_WATERMARK


def _table(got, dead):
    return pa.table(
        {
            "k": pa.array(["a"] * len(got)),
            ROW_WATERMARK: pa.array(got, pa.int64()),
            IS_DEAD_LETTER: pa.array(dead, pa.int32()),
        }
    )


def test_metrics_from_footer_statistics(spark, tmp_path):
    pq.write_table(_table([5, None, 17], [0, 0, 0]), tmp_path / "part-0.parquet")
    pq.write_table(_table([None, 3], [None, 1]), tmp_path / "part-1.parquet")
    assert NativeStream.metrics(spark, tmp_path) == (17, 1)


def test_metrics_without_statistics_fall_back_to_spark(spark, tmp_path):
    pq.write_table(_table([5, 42], [0, 0]), tmp_path / "part-0.parquet", write_statistics=False)
    pq.write_table(_table([None], [None]), tmp_path / "part-1.parquet")
    assert NativeStream.metrics(spark, tmp_path) == (42, 0)


def test_metrics_of_rows_that_carry_no_watermark(spark, tmp_path):
    # an empty micro-batch (or one of malformed rows only): no watermark value, the flag as written
    pq.write_table(_table([], []), tmp_path / "part-0.parquet")
    pq.write_table(_table([None], [1]), tmp_path / "part-1.parquet")
    assert NativeStream.metrics(spark, tmp_path) == (None, 1)


def test_spark_writes_the_statistics_the_fast_path_reads(spark, tmp_path):
    df = spark.createDataFrame([(1, 0), (9, 1), (None, 0)], f"{ROW_WATERMARK} long, {IS_DEAD_LETTER} int").coalesce(1)
    df.write.parquet(str(tmp_path / "t"))
    files = list((tmp_path / "t").glob("*.parquet"))
    md = pq.read_metadata(files[0])
    st = md.row_group(0).column(md.schema.names.index(ROW_WATERMARK)).statistics
    assert st is not None and st.has_min_max and st.max == 9 and st.null_count == 1
    assert NativeStream.metrics(spark, tmp_path / "t") == (9, 1)


def _rows(spark, rows):
    return spark.createDataFrame(rows, "k string, ts timestamp, v long")


def _stepper(spark, tmp_path, spec: dict, batches: list):
    """``run(i)``: the native stream's step over ``batches[i]`` (micro-batch i), its panes (key,
    window start second, n, total) and dead letters, sorted."""
    from panes import pipeline
    from panes.spark.native import NativeStep
    from panes.spark.planner import prepare

    p = pipeline(spec)
    step = NativeStep(p, _rows(spark, batches[0]).schema, ["k", "ts", "v"])
    stream = NativeStream(step, str(tmp_path))

    def run(i):
        got: list = []
        stream.run(
            prepare(_rows(spark, batches[i]), p, 0).withColumns(step.row_columns()),
            i,
            lambda df, b: got.extend((r.k, r.window_start.second, r.n, r.total) for r in df.collect()),
            lambda df, b: got.extend(("dead", r.reason) for r in df.collect()),
        )
        return sorted(got, key=str)

    return run


def test_a_micro_batch_run_again_rewrites_its_state_and_the_next_one_reads_it(spark, tmp_path):
    """Spark may run a micro-batch again after a failure: the step writes its windows table anew
    (new files), gives the same panes, and the next step reads that table, not the first one."""
    import datetime as dt

    t = lambda s: dt.datetime(2024, 1, 1) + dt.timedelta(seconds=s)  # noqa: E731
    batches = [
        [("a", t(1), 1), ("a", t(2), 2), ("b", t(3), 4)],
        [("a", t(5), 8), ("a", t(12), 16)],
        [("b", t(25), 32), ("a", t(1), 64)],
    ]
    run = _stepper(
        spark,
        tmp_path,
        {
            "event_time": "ts",
            "key": ["k"],
            "window": {"tumbling": {"size": "10 seconds"}},
            "aggregates": {"n": {"count": "*"}, "total": {"sum": "v"}},
        },
        batches,
    )
    out: dict[int, list] = {}

    out[0] = run(0)
    first = run(1)
    files = sorted(f.name for f in (tmp_path / "panes_native" / "v1" / "windows").glob("*.parquet"))
    again = run(1)
    assert again == first == [("a", 0, 3, 11), ("b", 0, 1, 4)]
    assert sorted(f.name for f in (tmp_path / "panes_native" / "v1" / "windows").glob("*.parquet")) != files
    # the late row (1 s, its window closed at 12 s) is a dead letter; 25 s closes [10 s, 20 s)
    assert run(2) == [("a", 10, 1, 16), ("dead", "late")]
    assert out[0] == []


def test_steps_that_add_tables_run_again_and_keep_the_tables_they_need(spark, tmp_path, monkeypatch):
    """A step that adds its rows' partials as a table of its own (the open windows many) lists
    the tables that hold open windows in its meta; a micro-batch run again gives the same panes;
    the cleanup keeps every version whose table a kept meta lists, and a table leaves the list
    once all its windows expired."""
    import datetime as dt
    import json

    from panes.spark.native import store

    monkeypatch.setattr(store, "SMALL_STATE_ROWS", 0)
    t = lambda s: dt.datetime(2024, 1, 1) + dt.timedelta(seconds=s)  # noqa: E731
    batches = [
        [("a", t(1), 1), ("b", t(3), 2), ("c", t(15), 8)],
        [("a", t(4), 4)],
        [("b", t(5), 16)],
        [("a", t(9), 32), ("b", t(41), 64), ("d", t(42), 128)],
        [("c", t(75), 256)],
    ]
    run = _stepper(
        spark,
        tmp_path,
        {
            "event_time": "ts",
            "key": ["k"],
            "window": {"tumbling": {"size": "10 seconds"}},
            "watermark": {"max_delay": "30 seconds"},
            "aggregates": {"n": {"count": "*"}, "total": {"sum": "v"}},
        },
        batches,
    )
    root = tmp_path / "panes_native"

    def tables(v):
        return [x["path"] for x in json.loads((root / f"v{v}" / "meta.json").read_text())["tables"]]

    assert run(0) == [] and tables(0) == ["v0/windows"]
    assert run(1) == [] and tables(1) == ["v0/windows", "v1/windows"]
    assert run(2) == [] and tables(2) == ["v0/windows", "v1/windows", "v2/windows"]
    # 42 s: the watermark 12 s closes [0 s, 10 s), whose partials are in all four tables
    assert run(3) == [("a", 0, 3, 37), ("b", 0, 2, 18)]
    assert tables(3) == ["v0/windows", "v3/windows"]  # v1 and v2 held only [0 s, 10 s)
    assert sorted(d.name for d in root.glob("v*")) == ["v0", "v1", "v2", "v3"]  # (v2's meta lists v1)
    assert run(3) == [("a", 0, 3, 37), ("b", 0, 2, 18)]  # run again: same panes, same tables
    assert tables(3) == ["v0/windows", "v3/windows"]
    # the table added since v0 holds as many rows as it: a rewrite. 75 s: the watermark 45 s
    # closes [10 s, 20 s)
    assert run(4) == [("c", 10, 1, 8)]
    assert tables(4) == ["v4/windows"]
    assert sorted(d.name for d in root.glob("v*")) == ["v0", "v3", "v4"]


def test_when_a_step_rewrites_the_open_windows_into_one_table(spark, tmp_path):
    from panes import pipeline
    from panes.spark.native import NativeStep

    def stream(spec):
        return NativeStream(
            NativeStep(pipeline(spec), _rows(spark, [("a", None, 1)]).schema, ["k", "ts", "v"]), str(tmp_path)
        )

    base = {"event_time": "ts", "key": ["k"], "aggregates": {"n": {"count": "*"}}}
    s = stream({**base, "window": {"tumbling": {"size": "10 seconds"}}, "allowed_lateness": "5 seconds"})

    def t(lo, hi, rows):
        return {"path": "v0/windows", "rows": rows, "ends": (lo, hi)}

    # 30k rows whose windows end at 60 s or later; the watermark at 20 s, 5 s on in the step before
    assert s.rewrites([t(60_000, 90_000, 30_000)], 20_000, 5_000) is False
    assert s.rewrites([t(60_000, 90_000, 30_000), t(60_000, 70_000, 29_999)], 20_000, 5_000) is False
    # a window that expires (end + 5 s lateness) by 30 s, two such moves on; one already expired
    assert s.rewrites([t(25_000, 90_000, 30_000)], 20_000, 5_000) is True
    assert s.rewrites([t(26_000, 90_000, 30_000)], 20_000, 5_000) is False
    assert s.rewrites([t(60_000, 90_000, 30_000), t(10_000, 70_000, 10)], 20_000, 5_000) is True
    # the tables added hold as many rows as the oldest; few rows; 8 tables; unknown statistics
    assert s.rewrites([t(60_000, 90_000, 30_000), t(60_000, 70_000, 30_000)], 20_000, 5_000) is True
    assert s.rewrites([t(60_000, 90_000, 20_000)], 20_000, 5_000) is True
    assert s.rewrites([t(60_000, 90_000, 30_000)] + [t(60_000, 90_000, 10)] * 7, 20_000, 5_000) is True
    assert s.rewrites([t(60_000, 90_000, 30_000) | {"rows": None}], 20_000, 5_000) is True
    assert s.rewrites([t(60_000, 90_000, 30_000) | {"ends": None}], 20_000, 5_000) is True
    # sessions, and triggers that fire, always rewrite
    assert (
        stream({**base, "window": {"session": {"gap": "10 seconds"}}}).rewrites(
            [t(60_000, 90_000, 30_000)], 20_000, 5_000
        )
        is True
    )
    early = {
        **base,
        "window": {"tumbling": {"size": "10 seconds"}},
        "trigger": {"after_watermark": {"early": {"after_count": 2}}},
    }
    assert stream(early).rewrites([t(60_000, 90_000, 30_000)], 20_000, 5_000) is True


_TYPED = "k string, ts timestamp, name string, d date, x double, at timestamp, dec decimal(10,2)"


def _typed_run(spark, tmp_path, aggregates: dict, batches: list):
    """The native stream over ``batches`` (rows of ``_TYPED``), 10 s tumbling windows per ``k``:
    the panes of each micro-batch as dicts."""
    from panes import pipeline
    from panes.spark.native import NativeStep
    from panes.spark.planner import prepare

    p = pipeline(
        {"event_time": "ts", "key": ["k"], "window": {"tumbling": {"size": "10 seconds"}}, "aggregates": aggregates}
    )
    step = NativeStep(p, spark.createDataFrame([], _TYPED).schema, _TYPED.replace(",", "").split()[::2])
    stream = NativeStream(step, str(tmp_path))
    out = []
    for i, b in enumerate(batches):
        got: list = []
        stream.run(
            prepare(spark.createDataFrame(b, _TYPED), p, 0).withColumns(step.row_columns()),
            i,
            lambda df, j, got=got: got.extend(r.asDict() for r in df.collect()),
            lambda df, j: None,
        )
        out.append(sorted(got, key=lambda r: r["k"]))
    return out


def _typed_batches():
    import datetime as dt
    from decimal import Decimal as D

    t = lambda s: dt.datetime(2024, 1, 1) + dt.timedelta(seconds=s)  # noqa: E731
    return [
        [("a", t(1), "x", dt.date(2024, 5, 1), 1.5, t(100), D("1.25")), ("b", t(2), None, None, None, None, None)],
        [
            ("a", t(3), "y", dt.date(2024, 4, 1), float("nan"), t(50), D("2.50")),
            ("a", t(4), "x", dt.date(2024, 6, 1), 7.0, t(70), D("-1.00")),
        ],
        [("a", t(30), "z", dt.date(2023, 1, 1), 2.0, t(1), D("0.01"))],
    ]


def _tables(monkeypatch, how: str) -> None:
    """The steps' tables after the first ``collected`` to the driver or ``written_by_spark``
    (a micro-batch made with createDataFrame has no size estimate: it would be written)."""
    from panes.spark.native import store

    monkeypatch.setattr(store, "COLLECT_INPUT_BYTES", 1 << 100 if how == "collected" else -1)


def test_tables_collected_to_the_driver_read_back_as_spark_wrote_them(spark, tmp_path, monkeypatch):
    """A step whose table is small collects it to the driver and writes it with pyarrow; the next
    steps read it back with the types Spark wrote (timestamps, dates, strings, doubles, the
    structs of first / last, the arrays of the holistic aggregates): the same panes either way."""
    import datetime as dt

    aggregates = {
        "n": {"count": "*"},
        "first_at": {"first": "at"},
        "last_name": {"last": "name"},
        "min_d": {"min": "d"},
        "names": {"collect_list": "name"},
        "top": {"top_k": {"column": "x", "k": 2}},
        "med": {"median": "x"},
        "dn": {"count_distinct": "name"},
        "hi": {"max": "x"},
    }
    expected = [
        [],
        [],
        [
            {
                "k": "a",
                "window_start": dt.datetime(2024, 1, 1),
                "window_end": dt.datetime(2024, 1, 1, 0, 0, 10),
                "timing": "ON_TIME",
                "pane_index": 0,
                "is_last": True,
                "retraction": False,
                "n": 3,
                "first_at": dt.datetime(2024, 1, 1, 0, 1, 40),
                "last_name": "x",
                "min_d": dt.date(2024, 4, 1),
                "names": ["x", "y", "x"],
                "top": [7.0, 1.5],
                "med": 4.25,
                "dn": 2,
                "hi": 7.0,
            },
            {
                "k": "b",
                "window_start": dt.datetime(2024, 1, 1),
                "window_end": dt.datetime(2024, 1, 1, 0, 0, 10),
                "timing": "ON_TIME",
                "pane_index": 0,
                "is_last": True,
                "retraction": False,
                "n": 1,
                "first_at": None,
                "last_name": None,
                "min_d": None,
                "names": [],
                "top": [],
                "med": None,
                "dn": 0,
                "hi": None,
            },
        ],
    ]
    writers = {}
    for how in ("collected", "written_by_spark"):
        _tables(monkeypatch, how)
        root = tmp_path / how
        panes = _typed_run(spark, root, aggregates, _typed_batches())
        assert panes == expected, how
        writers[how] = [
            {
                pq.read_metadata(f).created_by.split()[0]
                for f in (root / "panes_native" / f"v{v}" / "windows").glob("*.parquet")
            }
            for v in (1, 2)
        ]
    assert writers == {"collected": [{"parquet-cpp-arrow"}] * 2, "written_by_spark": [{"parquet-mr"}] * 2}


@pytest.mark.parametrize("how", ["collected", "written_by_spark"])
def test_decimal_averages_keep_their_type_across_micro_batches(spark, tmp_path, monkeypatch, how):
    """Spark sums decimal(10, 2) as decimal(20, 2): the kept total stays at that type when a
    step merges it with the next rows (it widened, and the step after could not read it)."""
    from decimal import Decimal as D

    _tables(monkeypatch, how)
    panes = _typed_run(
        spark, tmp_path, {"a": {"avg": "dec"}, "s": {"sum": "dec"}, "hi": {"max": "dec"}}, _typed_batches()
    )
    assert [[(r["k"], r["a"], r["s"], r["hi"]) for r in ps] for ps in panes] == [
        [],
        [],
        [("a", 2.75 / 3, 2.75, D("2.50")), ("b", None, None, None)],
    ]
    writer = {
        pq.read_metadata(f).created_by.split()[0]
        for f in (tmp_path / "panes_native" / "v2" / "windows").glob("*.parquet")
    }
    assert writer == {"parquet-cpp-arrow" if how == "collected" else "parquet-mr"}


def test_a_step_that_closes_no_window_hands_over_an_empty_relation(spark, tmp_path, monkeypatch):
    """The panes of a step that closes no window (its tables' smallest window end) are an empty
    relation that reads no table, with the columns of any other step's panes, the same plan in
    every such step."""
    import datetime as dt

    t = lambda s: dt.datetime(2024, 1, 1) + dt.timedelta(seconds=s)  # noqa: E731
    batches = [[("a", t(1), 1)], [("a", t(5), 2)], [("b", t(12), 4)]]
    run = _stepper(
        spark,
        tmp_path,
        {
            "event_time": "ts",
            "key": ["k"],
            "window": {"tumbling": {"size": "10 seconds"}},
            "aggregates": {"n": {"count": "*"}, "total": {"sum": "v"}},
        },
        batches,
    )
    from panes.spark import native

    seen = []
    run0 = native.NativeStream.run

    def run_seen(self, batch, batch_id, on_panes, on_dead_letters):
        def panes(df, b):
            seen.append((df.inputFiles(), df.schema, df))
            on_panes(df, b)

        run0(self, batch, batch_id, panes, on_dead_letters)

    monkeypatch.setattr(native.NativeStream, "run", run_seen)
    assert run(0) == [] and run(1) == [] and run(2) == [("a", 0, 2, 3)]
    assert [bool(files) for files, _, _ in seen] == [False, False, True]
    assert seen[0][1] == seen[1][1] == seen[2][1]
    assert seen[0][2] is seen[1][2]  # (one plan, built once)


def test_a_state_written_before_tables_were_listed_is_read_and_rewritten(spark, tmp_path):
    """A meta.json without its list of tables (an older panes): the step reads that version's own
    table, its rows unknown, and rewrites it (written by Spark)."""
    import datetime as dt
    import json

    t = lambda s: dt.datetime(2024, 1, 1) + dt.timedelta(seconds=s)  # noqa: E731
    run = _stepper(
        spark,
        tmp_path,
        {
            "event_time": "ts",
            "key": ["k"],
            "window": {"tumbling": {"size": "10 seconds"}},
            "aggregates": {"n": {"count": "*"}, "total": {"sum": "v"}},
        },
        [[("a", t(1), 1), ("b", t(3), 2)], [("a", t(12), 4)]],
    )
    assert run(0) == []
    meta = tmp_path / "panes_native" / "v0" / "meta.json"
    meta.write_text(json.dumps({k: v for k, v in json.loads(meta.read_text()).items() if k != "tables"}))
    assert run(1) == [("a", 0, 1, 1), ("b", 0, 1, 2)]
    assert json.loads((tmp_path / "panes_native" / "v1" / "meta.json").read_text())["tables"][0]["path"] == "v1/windows"
