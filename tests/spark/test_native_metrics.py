"""The native streaming step's watermark and dead-letter flag, read from the windows table it
wrote: from the Parquet footers' statistics, or with a Spark aggregate when a file has none."""

import pyarrow as pa
import pyarrow.parquet as pq

from panes.spark.native import DEAD, GOT, NativeStream


def _table(got, dead):
    return pa.table({"k": pa.array(["a"] * len(got)), GOT: pa.array(got, pa.int64()), DEAD: pa.array(dead, pa.int32())})


def test_metrics_from_footer_statistics(spark, tmp_path):
    pq.write_table(_table([5, None, 17], [0, 0, 0]), tmp_path / "part-0.parquet")
    pq.write_table(_table([None, 3], [None, 1]), tmp_path / "part-1.parquet")
    assert NativeStream._metrics(spark, tmp_path) == (17, 1)


def test_metrics_without_statistics_fall_back_to_spark(spark, tmp_path):
    pq.write_table(_table([5, 42], [0, 0]), tmp_path / "part-0.parquet", write_statistics=False)
    pq.write_table(_table([None], [None]), tmp_path / "part-1.parquet")
    assert NativeStream._metrics(spark, tmp_path) == (42, 0)


def test_metrics_of_rows_that_carry_no_watermark(spark, tmp_path):
    # an empty micro-batch (or one of malformed rows only): no watermark value, the flag as written
    pq.write_table(_table([], []), tmp_path / "part-0.parquet")
    pq.write_table(_table([None], [1]), tmp_path / "part-1.parquet")
    assert NativeStream._metrics(spark, tmp_path) == (None, 1)


def test_spark_writes_the_statistics_the_fast_path_reads(spark, tmp_path):
    df = spark.createDataFrame([(1, 0), (9, 1), (None, 0)], f"{GOT} long, {DEAD} int").coalesce(1)
    df.write.parquet(str(tmp_path / "t"))
    files = list((tmp_path / "t").glob("*.parquet"))
    md = pq.read_metadata(files[0])
    st = md.row_group(0).column(md.schema.names.index(GOT)).statistics
    assert st is not None and st.has_min_max and st.max == 9 and st.null_count == 1
    assert NativeStream._metrics(spark, tmp_path / "t") == (9, 1)


def _rows(spark, rows):
    return spark.createDataFrame(rows, "k string, ts timestamp, v long")


def _stepper(spark, tmp_path, spec: dict, batches: list):
    """``run(i)``: the native stream's step over ``batches[i]`` (micro-batch i), its panes (key,
    window start second, n, total) and dead letters, sorted."""
    from panes import pipeline
    from panes.spark.native import NativeStep
    from panes.spark.planner import _prepare

    p = pipeline(spec)
    step = NativeStep(p, _rows(spark, batches[0]).schema, ["k", "ts", "v"])
    stream = NativeStream(step, str(tmp_path))

    def run(i):
        got: list = []
        stream.run(_prepare(_rows(spark, batches[i]), p, 0).withColumns(step.row_columns()), i,
                   lambda df, b: got.extend((r.k, r.window_start.second, r.n, r.total) for r in df.collect()),
                   lambda df, b: got.extend(("dead", r.reason) for r in df.collect()))
        return sorted(got, key=str)
    return run


def test_a_micro_batch_run_again_rewrites_its_state_and_the_next_one_reads_it(spark, tmp_path):
    """Spark may run a micro-batch again after a failure: the step writes its windows table anew
    (new files), gives the same panes, and the next step reads that table, not the first one."""
    import datetime as dt

    t = lambda s: dt.datetime(2024, 1, 1) + dt.timedelta(seconds=s)  # noqa: E731
    batches = [[("a", t(1), 1), ("a", t(2), 2), ("b", t(3), 4)],
               [("a", t(5), 8), ("a", t(12), 16)],
               [("b", t(25), 32), ("a", t(1), 64)]]
    run = _stepper(spark, tmp_path, {"event_time": "ts", "key": ["k"], "window": {"tumbling": {"size": "10 seconds"}},
                                     "aggregates": {"n": {"count": "*"}, "total": {"sum": "v"}}}, batches)
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

    from panes.spark import native

    monkeypatch.setattr(native, "SMALL_STATE_ROWS", 0)
    t = lambda s: dt.datetime(2024, 1, 1) + dt.timedelta(seconds=s)  # noqa: E731
    batches = [[("a", t(1), 1), ("b", t(3), 2), ("c", t(15), 8)], [("a", t(4), 4)], [("b", t(5), 16)],
               [("a", t(9), 32), ("b", t(41), 64), ("d", t(42), 128)], [("c", t(75), 256)]]
    run = _stepper(spark, tmp_path, {"event_time": "ts", "key": ["k"], "window": {"tumbling": {"size": "10 seconds"}},
                                     "watermark": {"max_delay": "30 seconds"},
                                     "aggregates": {"n": {"count": "*"}, "total": {"sum": "v"}}}, batches)
    root = tmp_path / "panes_native"

    def tables(v):
        return [x["path"] for x in json.loads((root / f"v{v}" / "meta.json").read_text())["tables"]]

    assert run(0) == [] and tables(0) == ["v0/windows"]
    assert run(1) == [] and tables(1) == ["v0/windows", "v1/windows"]
    assert run(2) == [] and tables(2) == ["v0/windows", "v1/windows", "v2/windows"]
    # 42 s: the watermark 12 s closes [0 s, 10 s), whose partials are in all four tables
    assert run(3) == [("a", 0, 3, 37), ("b", 0, 2, 18)]
    assert tables(3) == ["v0/windows", "v3/windows"]  # v1 and v2 held only [0 s, 10 s)
    assert sorted(d.name for d in root.iterdir()) == ["v0", "v1", "v2", "v3"]  # (v2's meta lists v1)
    assert run(3) == [("a", 0, 3, 37), ("b", 0, 2, 18)]  # run again: same panes, same tables
    assert tables(3) == ["v0/windows", "v3/windows"]
    # the table added since v0 holds as many rows as it: a rewrite. 75 s: the watermark 45 s
    # closes [10 s, 20 s)
    assert run(4) == [("c", 10, 1, 8)]
    assert tables(4) == ["v4/windows"]
    assert sorted(d.name for d in root.iterdir()) == ["v0", "v3", "v4"]


def test_when_a_step_rewrites_the_open_windows_into_one_table(spark, tmp_path):
    from panes import pipeline
    from panes.spark.native import NativeStep

    def stream(spec):
        return NativeStream(NativeStep(pipeline(spec), _rows(spark, [("a", None, 1)]).schema, ["k", "ts", "v"]), str(tmp_path))

    base = {"event_time": "ts", "key": ["k"], "aggregates": {"n": {"count": "*"}}}
    s = stream({**base, "window": {"tumbling": {"size": "10 seconds"}}, "allowed_lateness": "5 seconds"})

    def t(lo, hi, rows):
        return {"path": "v0/windows", "rows": rows, "ends": (lo, hi)}

    # 30k rows whose windows end at 60 s or later; the watermark at 20 s, 5 s on in the step before
    assert s._rewrites([t(60_000, 90_000, 30_000)], 20_000, 5_000) is False
    assert s._rewrites([t(60_000, 90_000, 30_000), t(60_000, 70_000, 29_999)], 20_000, 5_000) is False
    # a window that expires (end + 5 s lateness) by 30 s, two such moves on; one already expired
    assert s._rewrites([t(25_000, 90_000, 30_000)], 20_000, 5_000) is True
    assert s._rewrites([t(26_000, 90_000, 30_000)], 20_000, 5_000) is False
    assert s._rewrites([t(60_000, 90_000, 30_000), t(10_000, 70_000, 10)], 20_000, 5_000) is True
    # the tables added hold as many rows as the oldest; few rows; 8 tables; unknown statistics
    assert s._rewrites([t(60_000, 90_000, 30_000), t(60_000, 70_000, 30_000)], 20_000, 5_000) is True
    assert s._rewrites([t(60_000, 90_000, 20_000)], 20_000, 5_000) is True
    assert s._rewrites([t(60_000, 90_000, 30_000)] + [t(60_000, 90_000, 10)] * 7, 20_000, 5_000) is True
    assert s._rewrites([t(60_000, 90_000, 30_000) | {"rows": None}], 20_000, 5_000) is True
    assert s._rewrites([t(60_000, 90_000, 30_000) | {"ends": None}], 20_000, 5_000) is True
    # sessions, and triggers that fire, always rewrite
    assert stream({**base, "window": {"session": {"gap": "10 seconds"}}})._rewrites([t(60_000, 90_000, 30_000)], 20_000, 5_000) is True
    early = {**base, "window": {"tumbling": {"size": "10 seconds"}},
             "trigger": {"after_watermark": {"early": {"after_count": 2}}}}
    assert stream(early)._rewrites([t(60_000, 90_000, 30_000)], 20_000, 5_000) is True
