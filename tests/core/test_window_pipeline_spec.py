"""The spec's ``window_pipeline`` (``{sql: ...}`` or ``{fn: "module:function"}``), the alternative
to ``aggregates`` in one stage: parsed into the core's objects, its mistakes reported in one line
each, naming the field, before anything runs."""

import pytest
from click.testing import CliRunner

from panes import cli
from panes.core.window_pipeline import FunctionTransform, SqlTransform, WindowPipeline
from panes.spec import FieldError, SpecError, parse_pipeline_spec

BASE = {"event_time": "t", "key": "k", "window": {"tumbling": {"size": "1 hour"}}}


def errors(doc):
    with pytest.raises(SpecError) as e:
        parse_pipeline_spec(doc)
    return e.value.errors


def test_a_window_pipeline_in_the_spec_is_the_stage_s_what():
    p = parse_pipeline_spec({**BASE, "window_pipeline": {"sql": "SELECT * FROM rows ORDER BY v DESC LIMIT 3"}})
    pipe = p.to_pipeline()
    assert pipe.aggregates == () and isinstance(pipe.window_pipeline, WindowPipeline)
    assert isinstance(pipe.window_pipeline.transform, SqlTransform)
    assert pipe.window_pipeline.describe() == {"sql": "SELECT * FROM rows ORDER BY v DESC LIMIT 3"}
    assert pipe.accumulators == (pipe.window_pipeline,) and pipe.keeps_rows
    fn = parse_pipeline_spec({**BASE, "window_pipeline": {"fn": "window_functions:largest"}}).to_pipeline()
    assert isinstance(fn.window_pipeline.transform, FunctionTransform)
    assert fn.window_pipeline.describe() == {"fn": "window_functions:largest"}


@pytest.mark.parametrize(
    "extra, expected",
    [
        (
            {"aggregates": {"n": {"count": "*"}}, "window_pipeline": {"sql": "SELECT * FROM rows"}},
            FieldError("window_pipeline", "aggregates and window_pipeline are alternatives: give one of them"),
        ),
        ({}, FieldError("aggregates", "required field is missing (or a window_pipeline)")),
        (
            {"only_updated_panes": True, "window_pipeline": {"sql": "SELECT * FROM rows"}},
            FieldError("only_updated_panes", "not with a window_pipeline sql (a function's panes can be skipped)"),
        ),
        (
            {"window_pipeline": {"sql": "SELECT a FROM rows JOIN rows s ON a = b"}},
            FieldError("window_pipeline.sql", "JOIN is not supported"),
        ),
        (
            {"window_pipeline": {"sql": "SELECT count(*) FROM rows"}},
            FieldError("window_pipeline.sql", "give COUNT(*) a name: COUNT(*) AS name"),
        ),
        (
            {"window_pipeline": {"fn": "window_functions:no_such"}},
            FieldError(
                "window_pipeline.fn",
                "module 'window_functions' has no 'no_such' (window function 'window_functions:no_such')",
            ),
        ),
        (
            {"window_pipeline": {"python": "x"}},
            FieldError("window_pipeline", "unknown window_pipeline 'python'; one of ['fn', 'sql']"),
        ),
        (
            {"window_pipeline": "SELECT 1"},
            FieldError(
                "window_pipeline", "window_pipeline is one of {sql: 'SELECT ... FROM rows'}, {fn: 'module:function'}"
            ),
        ),
    ],
)
def test_window_pipeline_mistakes_name_the_field(extra, expected):
    assert errors({**BASE, **extra}) == [expected]


def test_panes_validate_prints_the_sql_refusal_in_one_line(tmp_path):
    spec = tmp_path / "p.yaml"
    spec.write_text(
        "event_time: t\nwindow: {tumbling: {size: 1 hour}}\nsource: {format: json, path: d}\n"
        "window_pipeline: {sql: 'SELECT a FROM rows UNION ALL SELECT a FROM rows'}\n"
    )
    result = CliRunner().invoke(cli.main, ["validate", str(spec)])
    assert result.exit_code == 2
    assert result.output == "error: window_pipeline.sql: UNION is not supported (one SELECT over rows)\n"


def test_a_core_replay_of_sql_outside_the_core_subset_fails_in_one_line_before_it_runs(tmp_path):
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        '{"pipeline": {"window": {"tumbling": {"size": 10}}, "window_pipeline": '
        '{"sql": "SELECT percentile_approx(v, 0.5) AS p FROM rows"}}, "timeline": [{"end": true}]}'
    )
    result = CliRunner().invoke(cli.main, ["replay", str(scenario)])
    assert result.exit_code == 2
    assert result.output.startswith(
        "error: window_pipeline.sql: the core's SQL engine does not run function "
        "approx_quantile as Spark does; replay it with --engine spark"
    )
    assert result.output.count("\n") == 1


def test_a_function_may_declare_its_output_schema_for_spark():
    p = parse_pipeline_spec(
        {**BASE, "window_pipeline": {"fn": "window_functions:largest", "schema": "v LONG, t LONG, ends STRING"}}
    ).to_pipeline()
    assert p.window_pipeline.transform.schema == "v LONG, t LONG, ends STRING"
    assert p.window_pipeline.describe() == {"fn": "window_functions:largest", "schema": "v LONG, t LONG, ends STRING"}
    assert errors({**BASE, "window_pipeline": {"sql": "SELECT * FROM rows", "schema": "a INT"}}) == [
        FieldError("window_pipeline.sql", "window_pipeline sql takes no option 'schema'")
    ]
    assert errors({**BASE, "window_pipeline": {"fn": "window_functions:largest", "schema": ""}}) == [
        FieldError("window_pipeline.fn", "schema is a Spark DDL string such as 'car STRING, n LONG', got ''")
    ]


def test_keep_rows_hands_the_window_rows_on_with_their_order():
    import numpy as np

    from panes.core.window_pipeline import ROW_SEQ, ROW_TS, KeepRows, PaneWindow, WindowRows

    rows = WindowRows(PaneWindow(("a",), 0, 10), np.array([1, 4]), np.array([7, 3]), {"v": np.array([5, 6])})
    assert KeepRows().run(rows).records() == [{"v": 5, ROW_TS: 1, ROW_SEQ: 7}, {"v": 6, ROW_TS: 4, ROW_SEQ: 3}]


def test_classes_and_spec_build_the_same_window_pipeline():
    import panes

    built = panes.Pipeline(
        window=panes.Tumbling(size=3_600_000),
        key=("k",),
        event_time="t",
        window_pipeline=panes.WindowPipeline(panes.SqlTransform("SELECT * FROM rows ORDER BY v DESC LIMIT 3")),
    )
    assert panes.pipeline({**BASE, "window_pipeline": {"sql": "SELECT * FROM rows ORDER BY v DESC LIMIT 3"}}) == built
    fn = panes.WindowPipeline(panes.FunctionTransform("window_functions:largest", "v LONG, t LONG, ends STRING"))
    assert panes.pipeline({**BASE, "window_pipeline": fn.describe()}).window_pipeline == fn
    assert {"WindowPipeline", "SqlTransform", "FunctionTransform", "Table"} <= set(panes.__all__)


def test_a_window_pipeline_replay_on_spark_connect_is_refused_in_one_line():
    # (its replay collects the panes in this process's foreachBatch, which Connect runs on the server)
    from pathlib import Path

    from panes.scenario import load_scenario
    from panes.spark.connect import ConnectRefusal
    from panes.spark.replay import replay_spark

    connect_session = type("SparkSession", (), {"__module__": "pyspark.sql.connect.session"})()
    scenario = load_scenario(Path(__file__).resolve().parents[1] / "scenarios" / "window_pipeline_top_n.yaml")
    with pytest.raises(ConnectRefusal) as e:
        replay_spark(scenario, spark=connect_session)
    assert str(e.value) == (
        "Spark Connect cannot replay a window pipeline: its panes are collected in this process's foreachBatch, "
        "which Spark Connect runs on the server; replay it on a classic session (a master, not spark.remote)"
    )


def test_a_window_pipeline_s_columns_are_checked_against_an_inferred_schema():
    from panes.preflight import check_columns
    from panes.spec import parse_run_spec

    spec = parse_run_spec(
        {
            "source": {"format": "json", "path": "in"},
            **BASE,
            "window_pipeline": {"sql": "SELECT * FROM rows"},
            "sink": {"format": "console"},
        }
    )
    assert check_columns(spec, ["t", "k", "v"], "the source's columns") == []
    assert [(e.field, e.reason) for e in check_columns(spec, ["t", "v"], "the source's columns")] == [
        ("key", "no column 'k' in the source's columns (t, v)")
    ]
