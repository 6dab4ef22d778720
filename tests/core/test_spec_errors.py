"""Every error of a spec at once: ``SpecError.errors`` lists them (``field`` / ``reason`` are the
first's), ``panes validate`` prints one ``error: FIELD: reason`` line each with exit code 2; a
stream forced onto the native plan that cannot run it fails in ``validate`` and ``run`` before
Spark starts."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from panes import cli
from panes.scenario import load_scenario
from panes.spec import FieldError, SpecError, parse_pipeline_spec, parse_run_spec

BASE = {"event_time": "t", "window": {"tumbling": {"size": "5 minutes"}}, "aggregates": {"n": {"count": "*"}}}
SOURCE = {"format": "json", "path": "data"}


def errors_of(parse, doc) -> SpecError:
    with pytest.raises(SpecError) as ei:
        parse(doc)
    return ei.value


def test_every_field_error_is_reported():
    doc = {
        **BASE,
        "colour": "red",
        "window": {"tumbling": {"size": "x"}},
        "allowed_lateness": "soon",
        "trigger": {"after_cnt": 1},
        "aggregates": {"a": {"sum": "*"}, "b": {"countt": "v"}, "c": {"count": "*"}, "d": "max"},
    }
    e = errors_of(parse_pipeline_spec, doc)
    assert [(f.field, f.reason.split(":")[0]) for f in e.errors] == [
        ("window", "not a duration"),
        ("allowed_lateness", "not a duration"),
        ("trigger", "trigger"),
        ("aggregates", "a"),
        ("aggregates", "b"),
        ("aggregates", "d"),
        ("colour", "unknown field"),
    ]
    assert e.errors[3].reason == "a: sum needs a column, not '*'"
    assert e.errors[4].reason.startswith("b: unknown aggregate function 'countt'")
    assert e.errors[5].reason == "d: an aggregate is {function: column}, e.g. {sum: amount}"
    # the first error stays .field / .reason for callers that read one
    assert (e.field, e.reason) == (e.errors[0].field, e.errors[0].reason)
    assert str(e) == "\n".join(f"{f.field}: {f.reason}" for f in e.errors)


def test_every_check_across_fields_is_reported():
    doc = {**BASE, "key": ["timing", "g", "n"], "window": {"session": {"gap_column": "g"}}}
    e = errors_of(parse_pipeline_spec, doc)
    assert e.errors == [
        FieldError("key", "column names ['timing'] are reserved for pane metadata"),
        FieldError("aggregates", "outputs ['n'] clash with key columns"),
        FieldError("window.session.gap_column", "cannot be a key column"),
    ]


def test_run_spec_reports_its_own_fields_and_the_pipeline_fields():
    doc = {**BASE, "source": {"format": "json"}, "sink": {"format": "csv"}, "mode": "sometimes", "allowed_lateness": -1}
    e = errors_of(parse_run_spec, doc)
    assert [f.field for f in e.errors] == ["allowed_lateness", "mode", "source", "sink"]


def test_scenario_reports_pipeline_and_step_errors_together():
    doc = {
        "pipeline": {**BASE, "colour": 1},
        "timeline": [{"add": [{"t": 1}]}, {"wait": 5}, {"watermark": "noon"}],
        "expect": [],
    }
    e = errors_of(load_scenario, doc)
    assert [f.field for f in e.errors] == ["expect", "colour", "timeline[1]", "timeline[2]"]
    assert "noon" in e.errors[3].reason


def _write(tmp_path: Path, doc: dict) -> str:
    p = tmp_path / "spec.yaml"
    p.write_text(yaml.safe_dump(doc))
    return str(p)


def _stderr(result) -> str:
    try:
        return result.stderr
    except ValueError:  # older click without separate stderr
        return result.output


def test_cli_validate_prints_every_error_one_line_each(tmp_path):
    doc = {
        **BASE,
        "source": SOURCE,
        "window": {"tumbling": {"size": "5m", "offset": "9m"}},
        "aggregates": {"p": {"percentile": "v"}, "q": {"sum": None}},
        "colour": "red",
    }
    result = CliRunner().invoke(cli.main, ["validate", _write(tmp_path, doc)])
    assert result.exit_code == 2
    assert _stderr(result).splitlines() == [
        "error: window: tumbling offset must be smaller than size",
        "error: aggregates: p: percentile needs {column: COL, p: FRACTION}",
        "error: aggregates: q: sum needs a column",
        "error: colour: unknown field",
    ]


NATIVE_SLIDING = {
    **BASE,
    "source": SOURCE,
    "window": {"sliding": {"time_difference": "1 minute"}},
    "spark": {"plan": "native"},
}
NATIVE_MESSAGE = (
    "error: spark.plan: 'native' cannot run this pipeline: sliding windows need the engine (use auto or stateful)"
)


def test_cli_validate_refuses_a_native_plan_that_cannot_run_the_stream(tmp_path):
    # the spec itself parses (the plan is the CLI's check, not the spec's)
    assert parse_run_spec(NATIVE_SLIDING).spark.plan == "native"
    result = CliRunner().invoke(cli.main, ["validate", _write(tmp_path, NATIVE_SLIDING)])
    assert result.exit_code == 2
    assert _stderr(result).splitlines() == [NATIVE_MESSAGE]
    # a batch runs it natively; a stream the native plan covers is valid
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "part-0.json").write_text('{"t": 0}\n')
    for doc in ({**NATIVE_SLIDING, "mode": "batch"}, {**NATIVE_SLIDING, "window": {"tumbling": {"size": "1m"}}}):
        result = CliRunner().invoke(cli.main, ["validate", _write(tmp_path, doc)])
        assert result.exit_code == 0, _stderr(result)


def test_cli_run_refuses_a_native_plan_before_spark_starts(tmp_path, monkeypatch):
    import panes.runner

    def no_spark(*args, **kwargs):  # pragma: no cover - reaching it fails the test
        raise AssertionError("run_spec was called")

    monkeypatch.setattr(panes.runner, "run_spec", no_spark)
    result = CliRunner().invoke(cli.main, ["run", _write(tmp_path, NATIVE_SLIDING)])
    assert result.exit_code == 2
    assert _stderr(result).splitlines() == [NATIVE_MESSAGE]
    # --mode batch: the native batch plan runs sliding windows, so the check lets it through (to the
    # runner, whose failure is one line naming its cause; the source's files are there)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "part-0.json").write_text('{"t": 1}\n')
    result = CliRunner().invoke(cli.main, ["run", _write(tmp_path, NATIVE_SLIDING), "--mode", "batch"])
    assert result.exit_code == 1
    assert _stderr(result).startswith("error: AssertionError: run_spec was called (full traceback in ")
