"""Bad input, each case of issue 26 that needs no Spark: a clear one-line error (exit code 2, before
Spark starts) or a dead letter with its reason, and every record accounted for. (The Spark side of
the same cases: tests/spark/test_bad_input_spark.py.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from panes import cli
from panes.core.records import RawLine, read_json_lines
from panes.replay import replay
from panes.spec import SpecError, parse_pipeline_spec

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "tests" / "scenarios"
TUMBLING = {
    "event_time": "t",
    "key": "k",
    "window": {"tumbling": {"size": "1 hour"}},
    "aggregates": {"n": {"count": "*"}, "total": {"sum": "v"}},
}


def _scenario(records, pipeline=TUMBLING):
    return {"pipeline": pipeline, "timeline": [{"add": records}, {"end": True}]}


def _write(tmp_path: Path, doc: dict, name: str = "spec.yaml") -> str:
    p = tmp_path / name
    p.write_text(yaml.safe_dump(doc))
    return str(p)


def _invoke(*args):
    return CliRunner().invoke(cli.main, [str(a) for a in args])


# -- event times -------------------------------------------------------------------------------------


def test_out_of_range_event_times_are_dead_letters_and_the_run_goes_on():
    records = [
        {"k": "a", "v": 1, "t": "9999-12-31T23:59:59Z"},
        {"k": "a", "v": 2, "t": 1e18},
        {"k": "a", "v": 3, "t": 10**30},
        {"k": "a", "v": 4, "t": "0001-01-01T00:00:00Z"},
        {"k": "a", "v": 5, "t": "2021-08-07T10:15:00Z"},
    ]
    r = replay(_scenario(records))
    assert [(d["reason"], d["record"]["v"]) for d in r.dead_letters] == [
        ("invalid_event_time", 1),
        ("invalid_event_time", 2),
        ("invalid_event_time", 3),
        ("invalid_event_time", 4),
    ]
    assert r.dead_letters[0]["detail"] == (
        "'9999-12-31T23:59:59Z' is out of the event-time range (0201-01-01T00:00:00Z up to 9000-01-01T00:00:00Z)"
    )
    assert [(p["window_start"], p["n"], p["total"]) for p in r.panes] == [("2021-08-07T10:00:00.000Z", 1, 5)]
    assert r.accounting.as_dict() == {
        "records_in": 5,
        "counted": 1,
        "dead_letters": 4,
        "in_no_window": 0,
        "watermark_records": 0,
        "reasons": {"invalid_event_time": 4},
    }


def test_epoch_seconds_with_their_declared_unit_are_windowed_in_their_year():
    pipeline = {**TUMBLING, "event_time": {"column": "t", "unit": "s"}}
    r = replay(_scenario([{"k": "a", "v": 1, "t": 1628327063}, {"k": "a", "v": 2, "t": 1628327063.5}], pipeline))
    assert [(p["window_start"], p["n"]) for p in r.panes] == [("2021-08-07T09:00:00.000Z", 2)]
    assert r.warnings == []


@pytest.mark.parametrize(
    "unit, value, ms",
    [
        ("ms", 1628327063123, 1628327063123),
        ("us", 1628327063123456, 1628327063123),
        ("ns", 1628327063123456789, 1628327063123),
        ("s", "1628327063", 1628327063000),
        ("us", -1500, -1),
    ],
)
def test_each_unit_reads_its_numbers(unit, value, ms):
    from panes.core.time import parse_instant

    assert parse_instant(value, unit) == ms


def test_numbers_that_look_like_another_unit_are_said_once():
    seconds = [{"k": "a", "v": i, "t": 1628327063 + i} for i in range(3)]
    assert replay(_scenario(seconds)).warnings == [
        "event_time: numbers such as 1628327063 look like seconds, not milliseconds "
        "(declare event_time: {column: t, unit: s})"
    ]
    millis = [{"k": "a", "v": 1, "t": 1628327063123}]
    as_seconds = {**TUMBLING, "event_time": {"column": "t", "unit": "s"}}
    assert replay(_scenario(millis, as_seconds)).warnings == [
        "event_time: numbers such as 1628327063123 look like milliseconds, not seconds "
        "(declare event_time: {column: t, unit: ms})"
    ]
    # numbers of no likely unit (a scenario's small instants), and ISO strings: nothing to say
    assert (
        replay(_scenario([{"k": "a", "v": 1, "t": 5000}, {"k": "a", "v": 1, "t": "2021-08-07T10:00:00Z"}])).warnings
        == []
    )


def test_the_cli_prints_the_unit_warning_once(tmp_path):
    records = [{"k": "a", "v": i, "t": 1628327063 + i} for i in range(3)]
    result = _invoke("replay", _write(tmp_path, _scenario(records)))
    assert result.exit_code == 0
    warnings = [ln for ln in result.stderr.splitlines() if ln.startswith("warning:")]
    assert warnings == [
        "warning: event_time: numbers such as 1628327063 look like seconds, not milliseconds "
        "(declare event_time: {column: t, unit: s})"
    ]


# -- guards --------------------------------------------------------------------------------------------


def test_a_window_giving_a_record_too_many_windows_is_refused_unless_the_limit_is_raised():
    doc = {**TUMBLING, "window": {"hopping": {"size": "1 day", "hop": "1 ms"}}}
    with pytest.raises(SpecError) as ei:
        parse_pipeline_spec(doc)
    assert [(e.field, e.reason) for e in ei.value.errors] == [
        (
            "window",
            "hopping windows put each record in 86,400,000 windows, more than the limit of 1,000 "
            "(raise limits.windows_per_record to allow it)",
        )
    ]
    raised = parse_pipeline_spec({**doc, "limits": {"windows_per_record": 86_400_000}}).to_pipeline()
    assert raised.window.windows_per_record == 86_400_000
    # at the limit: allowed
    assert parse_pipeline_spec({**TUMBLING, "window": {"hopping": {"size": "1000s", "hop": "1s"}}})


@pytest.mark.parametrize(
    "doc, field",
    [
        ({**TUMBLING, "window": {"tumbling": {"size": "40000 days"}}}, "window"),
        ({**TUMBLING, "allowed_lateness": 10**17}, "allowed_lateness"),
        ({**TUMBLING, "watermark": {"max_delay": "36501 days"}}, "watermark.max_delay"),
    ],
)
def test_durations_out_of_range_are_refused(doc, field):
    with pytest.raises(SpecError) as ei:
        parse_pipeline_spec(doc)
    assert ei.value.field == field and "a duration is at most 100 years" in ei.value.reason


def test_times_out_of_range_in_a_scenario_are_refused():
    doc = {"pipeline": TUMBLING, "timeline": [{"watermark": "9999-12-31T00:00:00Z"}, {"processing_time": 10**18}]}
    with pytest.raises(SpecError) as ei:
        replay(doc)
    assert [e.field for e in ei.value.errors] == ["timeline[0].watermark", "timeline[1].processing_time"]


# -- malformed lines, gaps ------------------------------------------------------------------------------


def test_malformed_lines_keep_their_raw_text():
    lines = ['{"k": "a", "v": 1, "t": "2021-08-07T10:00:00Z"}', "not json {", "[1, 2]", "", '"text"']
    records = read_json_lines(lines)
    assert records[1:] == [
        RawLine("not json {", "not JSON: Expecting value: line 1 column 1 (char 0)"),
        RawLine("[1, 2]", "a record must be a JSON object"),
        RawLine('"text"', "a record must be a JSON object"),
    ]
    from panes.core.engine import Engine
    from panes.core.records import parse_records

    parsed = parse_records(parse_pipeline_spec(TUMBLING).to_pipeline(), records, 0)
    assert [(d.reason, d.record) for d in parsed.dead_letters] == [
        ("malformed", "not json {"),
        ("malformed", "[1, 2]"),
        ("malformed", '"text"'),
    ]
    assert len(parsed.frame) == 1 and Engine  # the good record goes on


def test_records_in_hopping_gaps_are_counted_in_the_replay_summary():
    result = _invoke("replay", SCENARIOS / "atlas_hopping_gaps.yaml")
    assert result.exit_code == 0
    assert result.stderr.splitlines()[-1] == (
        "done: 3 panes, 0 dead letters; records in 8 = 4 counted + 0 dead letters + 4 in no window"
    )


def test_json_output_never_holds_nan_or_infinity():
    from panes.core.json_lines import dumps

    assert (
        dumps({"a": float("nan"), "b": [1.5, float("inf")], "c": {"d": float("-inf")}})
        == '{"a": null, "b": [1.5, null], "c": {"d": null}}'
    )
    r = replay(
        _scenario(
            [{"k": "a", "v": float("nan"), "t": 1}, {"k": "a", "v": float("inf"), "t": 2}],
            {**TUMBLING, "aggregates": {"m": {"max": "v"}}},
        )
    )
    from panes.scenario import dumps as replay_dumps

    assert [json.loads(replay_dumps(p))["m"] for p in r.panes] == [None]


# -- the replay command -------------------------------------------------------------------------------


def test_replay_counts_the_dead_letters_it_does_not_keep():
    result = _invoke("replay", SCENARIOS / "malformed_records.yaml")
    assert result.exit_code == 0
    assert result.stderr.splitlines() == [
        "done: 2 panes, 8 dead letters (not kept: pass --dead-letter FILE); records in 11 = 3 counted + 8 dead "
        "letters (invalid_event_time 1, invalid_value 2, malformed 1, missing_event_time 2, missing_key 2) + 0 in "
        "no window"
    ]


def test_replay_refuses_an_unwritable_dead_letter_path_before_printing_a_pane(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    for path in ("/nonexistent/x", blocker / "x"):
        result = _invoke("replay", SCENARIOS / "malformed_records.yaml", "--dead-letter", path)
        assert result.exit_code == 2
        assert result.stdout == ""
        assert len(result.stderr.splitlines()) == 1
        assert result.stderr.startswith(f"error: --dead-letter: cannot write {path}: ")


def test_replay_into_head_exits_quietly():
    # many panes, so that the pipe closes while the replay still prints
    records = [{"k": f"k{i}", "v": i, "t": i * 1000} for i in range(3000)]
    doc = json.dumps(_scenario(records))
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        f.write(doc)
    proc = subprocess.run(
        f"{sys.executable} -m panes.cli replay {f.name} | head -1",
        shell=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    Path(f.name).unlink()
    assert proc.returncode == 0
    assert proc.stderr == ""
    assert json.loads(proc.stdout)["k"] == "k0"


# -- panes run: mistakes caught before Spark starts ------------------------------------------------------

SCHEMA = "k STRING, t STRING, v LONG"


def _run_doc(tmp_path: Path, **changes) -> dict:
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    (data / "part-0.json").write_text('{"k": "a", "t": "2021-08-07T10:00:00Z", "v": 1}\n')
    doc = {
        **TUMBLING,
        "source": {"format": "json", "path": str(data), "schema": SCHEMA},
        "sink": {"format": "json", "path": str(tmp_path / "out" / "panes")},
        "dead_letter": {"format": "json", "path": str(tmp_path / "out" / "dead")},
        "checkpoint": str(tmp_path / "checkpoint"),
    }
    doc.update(changes)
    return doc


@pytest.fixture
def no_spark(monkeypatch):
    """Fails a test that reaches the runner (where Spark starts)."""
    import panes.runner

    def run_spec(*args, **kwargs):  # pragma: no cover - reaching it fails the test
        raise AssertionError("run_spec was called")

    monkeypatch.setattr(panes.runner, "run_spec", run_spec)


def _one_error(tmp_path: Path, doc: dict) -> str:
    result = _invoke("run", _write(tmp_path, doc))
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_run_refuses_a_missing_source_path(tmp_path, no_spark):
    doc = _run_doc(tmp_path, source={"format": "json", "path": str(tmp_path / "nowhere"), "schema": SCHEMA})
    assert _one_error(tmp_path, doc) == f"error: source.path: no such file or directory: {tmp_path / 'nowhere'}"


def test_run_refuses_an_empty_source_directory_without_a_schema(tmp_path, no_spark):
    empty = tmp_path / "empty"
    (empty / "_spark_metadata").mkdir(parents=True)
    (empty / ".hidden").write_text("x")
    doc = _run_doc(tmp_path, source={"format": "json", "path": str(empty)})
    assert _one_error(tmp_path, doc) == (
        f"error: source.path: {empty} holds no files, and without source.schema panes cannot know the columns "
        f"(declare source.schema to start on an empty directory)"
    )


def test_run_refuses_an_aggregate_over_a_column_the_declared_schema_lacks(tmp_path, no_spark):
    doc = _run_doc(tmp_path, aggregates={"n": {"count": "*"}, "total": {"sum": "amount"}})
    assert _one_error(tmp_path, doc) == "error: aggregates: total: no column 'amount' in source.schema (k, t, v)"


def test_run_refuses_a_sink_path_it_cannot_write(tmp_path, no_spark):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    doc = _run_doc(tmp_path, sink={"format": "json", "path": str(blocker / "panes")})
    assert (
        _one_error(tmp_path, doc)
        == f"error: sink.path: cannot write to {blocker / 'panes'}: {blocker} is a file, not a directory"
    )


def test_run_refuses_a_function_that_is_no_combine_fn(tmp_path, no_spark):
    doc = _run_doc(tmp_path, aggregates={"x": {"combine": {"fn": "json:dumps", "column": "v"}}})
    assert _one_error(tmp_path, doc) == (
        "error: aggregates: x: combine function 'json:dumps' is not a CombineFn class or a factory of one: "
        "json:dumps() failed: dumps() missing 1 required positional argument: 'obj'"
    )


@pytest.mark.parametrize(
    "ref, reason",
    [
        ("json:nothing_here", "module 'json' has no 'nothing_here' (callback 'json:nothing_here')"),
        (
            "no_such_module_x:f",
            "cannot import module 'no_such_module_x' for callback 'no_such_module_x:f': "
            "No module named 'no_such_module_x'",
        ),
        ("os:sep", "os:sep is not callable"),
    ],
)
def test_run_refuses_a_callback_it_cannot_call(tmp_path, no_spark, ref, reason):
    doc = _run_doc(tmp_path, sink={"format": "callback", "callback": ref})
    assert _one_error(tmp_path, doc) == f"error: sink.callback: {reason}"


def test_run_reports_every_problem_of_a_spec_at_once(tmp_path, no_spark):
    doc = _run_doc(
        tmp_path, source={"format": "json", "path": str(tmp_path / "nowhere"), "schema": SCHEMA}, key="colour"
    )
    result = _invoke("run", _write(tmp_path, doc))
    assert result.exit_code == 2
    assert [ln.split(":")[1].strip() for ln in result.stderr.splitlines()] == ["source.path", "key"]


def test_any_other_failure_is_one_line_naming_its_cause_and_the_traceback(tmp_path, monkeypatch):
    import panes.runner

    def run_spec(*args, **kwargs):
        raise RuntimeError("[DATETIME_OVERFLOW] something deep in Spark\n\tat org.apache.spark.Foo(Foo.scala:1)")

    monkeypatch.setattr(panes.runner, "run_spec", run_spec)
    monkeypatch.setenv("PANES_ERROR_DIR", str(tmp_path / "errors"))
    result = _invoke("run", _write(tmp_path, _run_doc(tmp_path)))
    assert result.exit_code == 1
    (line,) = result.stderr.splitlines()
    (written,) = (tmp_path / "errors").iterdir()
    assert line == (
        f"error: RuntimeError: [DATETIME_OVERFLOW] something deep in Spark (full traceback in {written}; "
        f"--debug prints it)"
    )
    assert "Traceback (most recent call last)" in written.read_text() and "in run_spec" in written.read_text()
    # --debug: the traceback on stderr, then the line
    result = _invoke("run", _write(tmp_path, _run_doc(tmp_path)), "--debug")
    assert result.exit_code == 1
    assert result.stderr.startswith("Traceback (most recent call last)")
    assert result.stderr.splitlines()[-1] == "error: RuntimeError: [DATETIME_OVERFLOW] something deep in Spark"


def test_help_and_log_level(tmp_path):
    assert _invoke("-h").exit_code == 0 and "Usage: main [OPTIONS] COMMAND" in _invoke("-h").stdout
    assert "--log-level" in _invoke("run", "-h").stdout
    result = _invoke("validate", _write(tmp_path, _run_doc(tmp_path)), "--log-level", "info")
    assert result.exit_code == 0, result.output
    import logging

    assert logging.getLogger("panes").level == logging.INFO
    import os

    assert os.environ.pop("PANES_SPARK_LOG_LEVEL") == "INFO"


def test_a_key_that_is_no_string_number_or_boolean_is_an_invalid_value():
    records = [
        {"k": {"a": 1}, "v": 1, "t": 1},
        {"k": [1], "v": 1, "t": 1},
        {"k": float("nan"), "v": 1, "t": 1},
        {"k": 1.5, "v": 1, "t": 1},
        {"k": True, "v": 1, "t": 1},
    ]
    r = replay(_scenario(records))
    assert [(d["reason"], d["detail"]) for d in r.dead_letters] == [
        ("invalid_value", "key column(s) ['k']: not a string, number or boolean")
    ] * 3
    assert sorted(p["k"] for p in r.panes) == [True, 1.5]


# -- every reason, documented and observed ------------------------------------------------------------


def test_every_reason_is_in_the_readme_table_and_in_the_spark_metrics():
    from panes.core.rules import VALIDATION_ORDER, Reason
    from panes.spark import metrics, stateful_counts

    readme = (ROOT / "README.md").read_text().splitlines()
    documented = [line.split("`")[1] for line in readme if line.startswith("| `") and line.count("|") == 3]
    reasons = [r.value for r in Reason]
    assert set(reasons) <= set(documented)
    # in the order a record's checks run
    assert [r for r in documented if r in reasons][:6] == [r.value for r in VALIDATION_ORDER]
    # each reason is a count: the records' own checks among the native plan's observed metrics (it
    # decides lateness later), every reason among the stateful plan's counts
    assert sorted((*metrics.RECORD_REASONS, "late", "window_closed", "window_pipeline_failed")) == sorted(reasons)
    assert set(reasons) <= set(stateful_counts.NAMES)
