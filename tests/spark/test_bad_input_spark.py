"""Bad input on Spark (issue 26), through panes run's source and runner: each case of the issue that
reaches Spark gives its dead letter with the reason, and every record is accounted for."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from panes import cli
from panes.runner import run_spec
from panes.spec import parse_run_spec

pytestmark = pytest.mark.spark
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "traffic"


def _spec(tmp_path: Path, lines: list[str], schema: str | None, **changes):
    data = tmp_path / "data"
    data.mkdir()
    (data / "part-0.json").write_text("\n".join(lines) + "\n")
    source = {"format": "json", "path": str(data), **({"schema": schema} if schema else {})}
    doc = {
        "source": source,
        "event_time": "t",
        "key": "k",
        "window": {"tumbling": {"size": "1 hour"}},
        "aggregates": {"n": {"count": "*"}, "total": {"sum": "v"}},
        "sink": {"format": "json", "path": str(tmp_path / "panes")},
        "dead_letter": {"format": "json", "path": str(tmp_path / "dead")},
        "checkpoint": str(tmp_path / "checkpoint"),
        "spark": {"available_now": True},
        **changes,
    }
    return parse_run_spec(doc)


def _rows(directory: Path) -> list[dict]:
    return [
        json.loads(line) for part in sorted(directory.glob("batch=*/part-*")) for line in part.read_text().splitlines()
    ]


GOOD = '{"k": "a", "t": "2021-08-07T10:15:00Z", "v": 1}'


@pytest.mark.parametrize("plan", ["native", "stateful"])
def test_bad_values_are_dead_letters_with_their_reason_and_text(spark, tmp_path, plan):
    lines = [
        GOOD,
        "not json {",
        '{"k": "a", "t": "2021-08-07T10:16:00Z", "v": "four"}',
        "[]",
        '{"k": "a", "t": "9999-12-31T23:59:59Z", "v": 1}',
        '{"k": "a", "t": 1000000000000000000, "v": 1}',
        '{"k": "a", "t": NaN, "v": 1}',
        '{"k": "a", "t": "2021-08-07T10:17:00Z", "v": 2}',
    ]
    spec = _spec(tmp_path, lines, "k STRING, t STRING, v LONG", spark={"available_now": True, "plan": plan})
    counts = run_spec(spec, spark=spark, progress=False, end_input=True)
    # (a line the reader could not read whole keeps its text, compared as is; a record read whole
    # is its JSON, compared parsed: the plans write it with different spacing)
    dead = sorted(
        (
            (d["reason"], d["record"] if d["reason"] in ("malformed", "invalid_value") else json.loads(d["record"]))
            for d in _rows(tmp_path / "dead")
        ),
        key=str,
    )
    assert dead == sorted(
        [
            ("malformed", "not json {"),
            ("invalid_value", '{"k": "a", "t": "2021-08-07T10:16:00Z", "v": "four"}'),
            ("malformed", "[]"),
            ("invalid_event_time", {"k": "a", "t": "9999-12-31T23:59:59Z", "v": 1}),
            ("invalid_event_time", {"k": "a", "t": "1000000000000000000", "v": 1}),
            ("invalid_event_time", {"k": "a", "t": '"NaN"', "v": 1}),  # (Spark's text of a NaN in a STRING column)
        ],
        key=str,
    )
    four = next(d for d in _rows(tmp_path / "dead") if d["reason"] == "invalid_value")
    assert four["detail"] == "does not fit its column's type: v"
    assert [(p["window_start"], p["n"], p["total"]) for p in _rows(tmp_path / "panes")] == [
        ("2021-08-07T10:00:00.000Z", 2, 3)
    ]
    assert (counts["records_in"], counts["counted"], counts["dead_letters"]) == (8, 2, 6)


def test_epoch_seconds_in_their_declared_unit_and_a_warning_for_the_default(spark, tmp_path):
    lines = ['{"k": "a", "t": 1628327063, "v": 1}', '{"k": "a", "t": 1628327100, "v": 2}']
    spec = _spec(tmp_path, lines, "k STRING, t LONG, v LONG", event_time={"column": "t", "unit": "s"})
    run_spec(spec, spark=spark, progress=False, end_input=True)
    assert [(p["window_start"], p["n"]) for p in _rows(tmp_path / "panes")] == [("2021-08-07T09:00:00.000Z", 2)]


@pytest.mark.parametrize("plan", ["native", "stateful"])
def test_the_cli_warns_once_when_numbers_look_like_another_unit(spark, tmp_path, plan):
    # (the native plan's bounds are Spark's observed metrics, the stateful plan's its processor's)
    lines = [f'{{"k": "a", "t": {1628327063 + i}, "v": 1}}' for i in range(3)]
    spec = _spec(tmp_path, lines, "k STRING, t LONG, v LONG", spark={"available_now": True, "plan": plan})
    import yaml

    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec.model_dump(by_alias=True, exclude_none=True)))
    result = CliRunner().invoke(cli.main, ["run", str(path), "--end-input"])
    assert result.exit_code == 0, result.output
    assert [ln for ln in result.stderr.splitlines() if ln.startswith("warning:")] == [
        "warning: event_time: numbers such as 1628327063 look like seconds, not milliseconds "
        "(declare event_time: {column: t, unit: s})"
    ]


def test_records_in_hopping_gaps_are_counted_in_the_final_line(spark, tmp_path):
    lines = [f'{{"k": "a", "t": {1628326800000 + i * 60_000}, "v": 1}}' for i in range(10)]
    spec = _spec(
        tmp_path, lines, "k STRING, t LONG, v LONG", window={"hopping": {"size": "2 minutes", "hop": "5 minutes"}}
    )
    counts = run_spec(spec, spark=spark, progress=False, end_input=True)
    assert (counts["records_in"], counts["counted"], counts["in_no_window"]) == (10, 4, 6)


def test_progress_counts_each_record_in_once_and_the_final_line_adds_up(spark, tmp_path, capsys):
    lines = (EXAMPLE / "data" / "part-1.json").read_text().splitlines()
    assert len(lines) == 37
    spec = _spec(
        tmp_path,
        lines,
        EXAMPLE_SCHEMA,
        event_time="created_at",
        key="traffic_light",
        aggregates={"cars": {"count": "*"}, "passengers": {"sum": "passengers"}},
    )
    counts = run_spec(spec, spark=spark, progress=True, end_input=True)
    err = capsys.readouterr().err
    batch = next(ln for ln in err.splitlines() if ln.startswith("batch    0:"))
    assert batch.startswith("batch    0: records in 37 = ")
    final = next(ln for ln in err.splitlines() if ln.startswith("done:"))
    assert counts["records_in"] == 37 and "records in 37 = " in final and "does not add up" not in final


EXAMPLE_SCHEMA = "traffic_light STRING, created_at STRING, registration_plate STRING, passengers LONG"


def test_run_writes_panes_as_json_lines_to_stdout(spark, tmp_path):
    lines = [
        GOOD,
        '{"k": "a", "t": "2021-08-07T10:20:00Z", "v": 1, "x": NaN}',
        '{"k": "b", "t": "2021-08-07T10:21:00Z", "v": 2, "x": Infinity}',
        "not json {",
    ]
    spec = _spec(
        tmp_path,
        lines,
        "k STRING, t STRING, v LONG, x DOUBLE",
        aggregates={"n": {"count": "*"}, "top": {"max": "x"}},
        dead_letter=None,  # (the console: its table goes to stderr, apart from the panes' lines)
    )
    import yaml

    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec.model_dump(by_alias=True, exclude_none=True)))
    result = CliRunner().invoke(cli.main, ["run", str(path), "--stdout", "--end-input", "--quiet"])
    assert result.exit_code == 0, result.output
    panes = sorted((json.loads(line) for line in result.stdout.splitlines()), key=lambda p: p["k"])
    assert [(p["k"], p["window_start"], p["window_end"], p["n"], p["top"]) for p in panes] == [
        ("a", "2021-08-07T10:00:00.000Z", "2021-08-07T11:00:00.000Z", 2, None),  # max of 1 record's NaN
        ("b", "2021-08-07T10:00:00.000Z", "2021-08-07T11:00:00.000Z", 1, None),  # Infinity
    ]
    assert "not json {" in result.stderr and "malformed" in result.stderr


def _totals(progress: list, name: str = "panes") -> dict:
    """A query's observed metrics ``name`` summed over its micro-batches (the event-time bounds: the
    least and the greatest)."""
    rows = [p["observedMetrics"][name].asDict() for p in progress if p.get("observedMetrics")]
    out = {k: sum(r[k] or 0 for r in rows) for k in rows[0] if not k.startswith("event_time_")}
    bounds = {b: [r[b] for r in rows if r[b] is not None] for b in ("event_time_min", "event_time_max")}
    return {**out, "event_time_min": min(bounds["event_time_min"]), "event_time_max": max(bounds["event_time_max"])}


@pytest.mark.parametrize("plan", ["native", "stateful"])
def test_counts_reach_a_spark_user(spark, tmp_path, plan):
    """The native plan's counts are Spark's observed metrics; the stateful plan hands them to
    ``on_counts``, and observes them on the streaming DataFrames a user writes."""
    import panes
    from panes.spark.stateful_counts import add

    lines = [
        GOOD,
        "not json {",
        '{"k": "a", "t": "2021-08-07T10:16:00Z", "v": "four"}',
        '{"k": "a", "v": 3}',
        '{"k": "a", "t": "1628331420", "v": 2}',  # 2021-08-07T10:17:00Z in seconds, as digits
    ]
    spec = _spec(tmp_path, lines, "k STRING, t STRING, v LONG")
    from panes.io import read_stream

    doc = spec.model_dump(by_alias=True, exclude_none=True)
    doc["event_time"] = {"column": "t", "unit": "s"}
    result = panes.window(read_stream(spark, spec.source), doc, plan=plan)
    counted: dict = {}
    on_counts = {"on_counts": lambda c, i: add(counted, c)} if plan == "stateful" else {}
    query = result.write_stream(
        lambda d, i: d.count(), lambda d, i: d.count(), str(tmp_path / "ck"), availableNow=True, **on_counts
    )
    query.awaitTermination()
    # (summed over the micro-batches: the stateful plan runs one more, without data, for its timers)
    given = _totals(query.recentProgress) if plan == "native" else counted
    assert (given["records_in"], given["malformed"], given["invalid_value"], given["missing_event_time"]) == (
        5,
        1,
        1,
        1,
    )
    assert given.get("watermark_records", 0) == 0
    assert given["event_time_min"] == 1628331420  # (the digits' number: an ISO instant is none)
    if plan == "native":
        assert (given["in_window"], given["in_no_window"]) == (2, 0)
        return
    assert (given["counted"], given.get("in_no_window", 0), given.get("late", 0)) == (2, 0, 0)
    assert (given["pane_rows"], given["dead_letter_rows"]) == (0, 3)  # (the watermark is before the window's end)
    # a query of the streaming panes a user writes shows the same counts in Spark's progress
    query = result.panes.writeStream.format("noop").option("checkpointLocation", str(tmp_path / "ck2"))
    query = query.trigger(availableNow=True).start()
    query.awaitTermination()
    observed = _totals(query.recentProgress)
    assert {k: observed[k] for k in given} == given
    assert observed["late"] == observed["window_closed"] == 0


ENGINE_CASES = {
    # a once-trigger fired on the window's first record: the second, a micro-batch later, finds it closed
    "window_closed": ({"trigger": {"after_count": 1}}, "2021-08-07T10:20:00Z"),
    # a window of one row, on which the window pipeline fails once the watermark passed its end
    "window_pipeline_failed": (
        {"window_pipeline": {"fn": "window_functions:rows_unless_odd", "schema": "n LONG"}},
        "2021-08-07T12:30:00Z",
    ),
}


@pytest.mark.parametrize("case", list(ENGINE_CASES))
def test_the_engines_reasons_are_counted_on_the_stateful_plan(spark, tmp_path, case):
    import panes
    from panes.io import read_stream

    changes, later = ENGINE_CASES[case]
    doc = _spec(tmp_path, [GOOD], "k STRING, t STRING, v LONG").model_dump(by_alias=True, exclude_none=True)
    if "window_pipeline" in changes:
        del doc["aggregates"]
    doc.update(changes)
    doc["source"]["max_files_per_trigger"] = 1
    (tmp_path / "data" / "part-1.json").write_text(json.dumps({"k": "a", "t": later, "v": 2}) + "\n")
    for i in range(2):  # (a file source reads files in modification-time order)
        os.utime(tmp_path / "data" / f"part-{i}.json", (1_600_000_000 + i,) * 2)
    from panes.spark.stateful_counts import add

    result = panes.window(read_stream(spark, parse_run_spec(doc).source), doc, plan="stateful")
    dead: list = []
    engine: dict = {}
    query = result.write_stream(
        lambda d, i: d.count(),
        lambda d, i: dead.extend(d.collect()),
        str(tmp_path / "ck"),
        availableNow=True,
        on_counts=lambda c, i: add(engine, c),
    )
    query.awaitTermination()
    reasons = ("late", "window_closed", "window_pipeline_failed")
    assert {r: engine.get(r, 0) for r in reasons} == {r: int(r == case) for r in reasons}
    assert engine["counted"] == (1 if case == "window_closed" else 2)
    assert [d["reason"] for d in dead] == [case]


def test_text_outputs_hold_iso_instants_and_no_nan_or_infinity_at_any_depth(spark):
    from panes.io import for_output

    df = spark.sql(
        "SELECT timestamp_millis(1628330400123L) AS at, double('NaN') AS x, "
        "array(1.5D, double('Infinity')) AS xs, map('a', double('-Infinity'), 'b', 2.0D) AS m, "
        "named_struct('at', timestamp_millis(0L), 'y', double('NaN')) AS s"
    )
    row = for_output(df).first().asDict(recursive=True)
    assert row == {
        "at": "2021-08-07T10:00:00.123Z",
        "x": None,
        "xs": [1.5, None],
        "m": {"a": None, "b": 2.0},
        "s": {"at": "1970-01-01T00:00:00.000Z", "y": None},
    }


def test_spark_before_4_3_counts_observed_metrics_once_per_read_of_a_micro_batch():
    from panes.spark.metrics import counted_per_read

    assert [counted_per_read(v) for v in ("4.0.1", "4.1.4", "4.2.1", "4.3.0", "4.10.0", "5.0.0.dev0")] == [
        True,
        True,
        True,
        False,
        False,
        False,
    ]
