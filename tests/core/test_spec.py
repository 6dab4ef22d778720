"""Spec validation (panes.spec): a wrong field fails with its path and the reason; valid specs
become the core's Pipeline objects; ``panes validate`` reports errors on stderr with exit code 2."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

import panes
from panes import cli
from panes.core import triggers as T
from panes.core.aggregates import (
    Aggregate,
    Avg,
    CollectList,
    Count,
    CountDistinct,
    Percentile,
    Sum,
    TopK,
    make_aggregate,
)
from panes.core.pipeline import Pipeline, WatermarkStrategy
from panes.core.windows import GlobalWindows, Hopping, Sessions, Sliding, Tumbling
from panes.scenario import load_scenario
from panes.spec import SpecError, parse_pipeline_spec, parse_run_spec, parse_trigger, parse_window

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"
MIN = 60_000

BASE = {"event_time": "t", "window": {"tumbling": {"size": "5 minutes"}}, "aggregates": {"n": {"count": "*"}}}


def spec(**changes):
    d = dict(BASE)
    for k, v in changes.items():
        if v is None:
            d.pop(k, None)
        else:
            d[k] = v
    return d


def error_of(doc) -> SpecError:
    with pytest.raises(SpecError) as ei:
        parse_pipeline_spec(doc)
    return ei.value


# -- errors name the field ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "doc, field, words",
    [
        # unknown fields
        (spec(colour="red"), "colour", ["unknown field"]),
        (spec(watermark={"max_dely": "1s"}), "watermark.max_dely", ["unknown field"]),
        (spec(window={"tumbling": {"size": "5m", "hop": "1m"}}), "window", ["no option", "hop"]),
        # bad durations
        (spec(window={"tumbling": {"size": "five minutes"}}), "window", ["not a duration", "five minutes"]),
        (spec(allowed_lateness="soon"), "allowed_lateness", ["not a duration", "soon"]),
        (spec(allowed_lateness=-5), "allowed_lateness", ["negative"]),
        (spec(watermark={"max_delay": "x"}), "watermark.max_delay", ["not a duration"]),
        (spec(watermark={"idle_timeout": "2 fortnights"}), "watermark.idle_timeout", ["not a duration"]),
        # windows
        (spec(window={"rolling": {"size": "5m"}}), "window", ["unknown window type", "rolling"]),
        (spec(window="weekly"), "window", ["tumbling"]),
        (spec(window=None), "window", ["required"]),
        (spec(window={"tumbling": {"size": "5m", "offset": "5m"}}), "window", ["offset", "smaller than size"]),
        (spec(window={"tumbling": {"size": "5m", "offset": "7m"}}), "window", ["offset", "smaller than size"]),
        (spec(window={"tumbling": {}}), "window", ["needs size"]),
        (spec(window={"tumbling": {"size": 0}}), "window", ["positive"]),
        (spec(window={"hopping": {"size": "5m"}}), "window", ["needs hop"]),
        (spec(window={"hopping": {"size": "5m", "hop": "1m", "offset": "1m"}}), "window", ["offset", "hop"]),
        (spec(window={"session": {"gap": "1m", "gap_column": "g"}}), "window", ["exactly one of gap and gap_column"]),
        (spec(window={"session": {}}), "window", ["exactly one of gap and gap_column"]),
        (spec(window={"session": {"gap": 0}}), "window", ["positive"]),
        (spec(window={"sliding": {}}), "window", ["time_difference"]),
        (spec(window={"sliding": {"time_difference": 0}}), "window", ["positive"]),
        # aggregates
        (spec(aggregates={"n": {"countt": "*"}}), "aggregates", ["n:", "unknown aggregate function", "countt"]),
        (spec(aggregates={"p95": {"percentile": {"column": "v"}}}), "aggregates", ["p95:", "percentile needs p"]),
        (spec(aggregates={"p95": {"percentile": "v"}}), "aggregates", ["p95:", "percentile needs"]),
        (spec(aggregates={"p95": {"percentile": {"column": "v", "p": 95}}}), "aggregates", ["p95:", "[0, 1]"]),
        (spec(aggregates={"s": {"sum": "*"}}), "aggregates", ["s:", "not '*'"]),
        (spec(aggregates={"s": {"sum": None}}), "aggregates", ["s:", "needs a column"]),
        (spec(aggregates={"s": {"sum": {"column": "v", "scale": 2}}}), "aggregates", ["s:", "no options", "scale"]),
        (spec(aggregates={"c": {"combine": "v"}}), "aggregates", ["c:", "combine needs"]),
        (spec(aggregates={"c": {"combine": {"column": "v"}}}), "aggregates", ["c:", "combine needs fn"]),
        (
            spec(aggregates={"c": {"combine": {"column": "v", "fn": "no_such_mod_xyz:Fn"}}}),
            "aggregates",
            ["c:", "cannot import"],
        ),
        (spec(aggregates={"k": {"top_k": {"column": "v", "k": 0}}}), "aggregates", ["k:", "at least 1"]),
        (spec(aggregates={}), "aggregates", ["non-empty"]),
        (spec(aggregates={"n": "count"}), "aggregates", ["n:", "{function: column}"]),
        (spec(aggregates=None), "aggregates", ["required"]),
        # triggers
        (spec(trigger={"after_cnt": 3}), "trigger", ["unknown trigger", "after_cnt"]),
        (spec(trigger="sometimes"), "trigger", ["a trigger is"]),
        (spec(trigger={"after_count": 0}), "trigger", ["after_count", "positive integer"]),
        (spec(trigger={"count": "three"}), "trigger", ["count", "positive integer"]),
        (
            spec(trigger={"after_watermark": {"early": {"every": "x"}}}),
            "trigger",
            ["trigger.after_watermark.early.every", "not a duration"],
        ),
        (
            spec(trigger={"after_watermark": {"soon": {"count": 1}}}),
            "trigger",
            ["after_watermark takes only early and late"],
        ),
        (spec(trigger={"after_any": []}), "trigger", ["after_any", "non-empty list"]),
        (spec(trigger={"after_all": [{"after_count": 2}, {"bogus": 1}]}), "trigger", ["trigger.after_all[1]", "bogus"]),
        (spec(trigger={"or_finally": {"trigger": {"count": 1}}}), "trigger", ["or_finally"]),
        (spec(trigger={"every": 0}), "trigger", ["every", "positive"]),
        # other fields
        (spec(accumulation="summing"), "accumulation", ["discarding", "accumulating", "retracting"]),
        (spec(only_updated_panes="often"), "only_updated_panes", []),
    ],
)
def test_spec_errors_name_the_field(doc, field, words):
    e = error_of(doc)
    assert e.field == field, str(e)
    for w in words:
        assert w in e.reason, (w, e.reason)
    assert str(e).startswith(f"{field}: ")


def test_spec_key_clash_and_session_gap_column_rules():
    e = error_of(spec(key="n"))
    assert "n" in str(e) and "clash" in str(e)
    e = error_of(spec(key=["user", "g"], window={"session": {"gap_column": "g"}}))
    assert "gap_column" in str(e)


@pytest.mark.parametrize(
    "doc, field",
    [
        (spec(aggregates={"window_start": {"count": "*"}}), "aggregates"),
        (spec(aggregates={"n": {"count": "*"}, "is_last": {"max": "v"}}), "aggregates"),
        (spec(key="timing"), "key"),
    ],
)
def test_reserved_output_names_name_the_field(doc, field):
    e = error_of(doc)
    assert "reserved" in e.reason
    assert e.field.split(".")[0] == field, f"field {e.field!r}: {e}"


@pytest.mark.parametrize(
    "doc, name",
    [
        (spec(aggregates={"window_start": {"count": "*"}}), "window_start"),
        (spec(aggregates={"window_end": {"max": "t"}}), "window_end"),
        (spec(aggregates={"timing": {"count": "*"}}), "timing"),
        (spec(aggregates={"pane_index": {"count": "*"}}), "pane_index"),
        (spec(aggregates={"is_last": {"count": "*"}}), "is_last"),
        (spec(aggregates={"retraction": {"count": "*"}}), "retraction"),
        (spec(key="timing"), "timing"),
    ],
)
def test_reserved_output_names_are_rejected(doc, name):
    e = error_of(doc)
    assert "reserved" in str(e) and name in str(e)


def test_run_spec_errors():
    with pytest.raises(SpecError) as ei:
        parse_run_spec(spec())
    assert ei.value.field == "source"
    with pytest.raises(SpecError) as ei:
        parse_run_spec(spec(source={"format": "json"}))
    assert ei.value.field == "source" and "path" in ei.value.reason
    with pytest.raises(SpecError) as ei:
        parse_run_spec(spec(source={"format": "avro", "path": "x"}))
    assert ei.value.field == "source.format"
    with pytest.raises(SpecError) as ei:
        parse_run_spec(spec(source={"format": "json", "path": "x"}, sink={"format": "json"}))
    assert ei.value.field == "sink"
    with pytest.raises(SpecError) as ei:
        parse_run_spec(spec(source={"format": "json", "path": "x"}, spark={"trigger_interval": "often"}))
    assert ei.value.field == "spark.trigger_interval"
    with pytest.raises(SpecError) as ei:
        parse_run_spec(spec(source={"format": "json", "path": "x"}, mode="eventually"))
    assert ei.value.field == "mode"


def test_scenario_errors():
    with pytest.raises(SpecError) as ei:
        load_scenario({"pipeline": BASE, "timeline": [], "expect": []})
    assert ei.value.field == "expect" and ei.value.reason == "unknown field"
    with pytest.raises(SpecError) as ei:
        load_scenario({"timeline": []})
    assert ei.value.field == "pipeline"
    with pytest.raises(SpecError) as ei:
        load_scenario({"pipeline": BASE})
    assert ei.value.field == "timeline"
    with pytest.raises(SpecError) as ei:
        load_scenario({"pipeline": BASE, "timeline": [{"end": True}, {"wait": 5}]})
    assert ei.value.field == "timeline[1]"
    with pytest.raises(SpecError) as ei:
        load_scenario({"pipeline": BASE, "timeline": [{"watermark": "noon"}]})
    assert ei.value.field == "timeline[0]" and "noon" in ei.value.reason
    with pytest.raises(SpecError) as ei:
        load_scenario({"pipeline": BASE, "timeline": [{"add": {"t": 1}}]})
    assert ei.value.field == "timeline[0].add"
    with pytest.raises(SpecError) as ei:
        load_scenario({"pipeline": spec(colour=1), "timeline": []})
    assert ei.value.field == "colour"


# -- valid specs become Pipeline objects ----------------------------------------------------------


def test_minimal_spec_to_pipeline():
    p = parse_pipeline_spec(BASE).to_pipeline()
    assert p == Pipeline(window=Tumbling(5 * MIN), aggregates=(Aggregate("n", Count("*")),), event_time="t")
    # the defaults
    assert p.key == ()
    assert p.watermark == WatermarkStrategy(
        max_delay=0, punctuation=False, punctuation_column="watermark", idle_timeout=None
    )
    assert p.allowed_lateness == 0
    assert p.trigger == T.Never()
    assert p.accumulation == "accumulating"
    assert p.only_updated_panes is False


def test_full_spec_to_pipeline():
    doc = {
        "name": "full",
        "event_time": "ts",
        "key": ["region", "shop"],
        "window": {"hopping": {"size": "10 minutes", "hop": "1 minute", "offset": "30s"}},
        "watermark": {"max_delay": "2 minutes", "idle_timeout": "1 minute"},
        "allowed_lateness": "1h",
        "trigger": {"after_watermark": {"early": {"every": "1 minute"}, "late": {"count": 1}}},
        "accumulation": "retracting",
        "only_updated_panes": True,
        "aggregates": {
            "orders": {"count": "*"},
            "revenue": {"sum": "amount"},
            "avg_amount": {"mean": "amount"},
            "p95": {"percentile": {"column": "latency", "p": 0.95}},
            "top": {"top_k": {"column": "amount", "k": 2}},
            "customers": {"count_distinct": "customer"},
            "items": {"collect_list": "item"},
        },
    }
    p = parse_pipeline_spec(doc).to_pipeline()
    assert p == Pipeline(
        window=Hopping(10 * MIN, MIN, 30_000),
        aggregates=(
            Aggregate("orders", Count("*")),
            Aggregate("revenue", Sum("amount")),
            Aggregate("avg_amount", Avg("amount")),
            Aggregate("p95", Percentile("latency", 0.95)),
            Aggregate("top", TopK("amount", 2)),
            Aggregate("customers", CountDistinct("customer")),
            Aggregate("items", CollectList("item")),
        ),
        key=("region", "shop"),
        event_time="ts",
        watermark=WatermarkStrategy(max_delay=2 * MIN, idle_timeout=MIN),
        allowed_lateness=60 * MIN,
        trigger=T.AfterWatermark(early=T.AfterProcessingTime(0, MIN), late=T.AfterCount(1)),
        accumulation="retracting",
        only_updated_panes=True,
    )
    assert p.value_columns == ("amount", "latency", "customer", "item")
    # panes.pipeline accepts the same mapping (and ignores run fields)
    assert panes.pipeline({**doc, "source": {"format": "json", "path": "x"}, "mode": "batch"}) == p


@pytest.mark.parametrize(
    "window, fn",
    [
        ({"tumbling": {"size": "1 hour"}}, Tumbling(3_600_000)),
        ({"tumbling": {"size": 1000, "offset": 250}}, Tumbling(1000, 250)),
        ({"hopping": {"size": "20 seconds", "hop": "5 seconds"}}, Hopping(20_000, 5000)),
        ({"hopping": {"size": "3s", "hop": "5s"}}, Hopping(3000, 5000)),
        ({"session": {"gap": "10 seconds"}}, Sessions(gap=10_000)),
        ({"session": {"gap_column": "g"}}, Sessions(gap_column="g")),
        ({"sliding": {"time_difference": "10ms"}}, Sliding(10)),
        ("global", GlobalWindows()),
        ({"global": None}, GlobalWindows()),
    ],
)
def test_windows_parse_and_describe_round_trip(window, fn):
    assert parse_window(window) == fn
    assert parse_window(fn.describe()) == fn


@pytest.mark.parametrize(
    "trigger, tree",
    [
        (None, T.Never()),
        ("default", T.Never()),
        ("at_close", T.Never()),
        ("after_watermark", T.AfterWatermark()),
        ("beam_default", T.Repeatedly(T.AfterWatermark())),
        ({"after_count": 3}, T.AfterCount(3)),
        ({"count": 3}, T.Repeatedly(T.AfterCount(3))),
        ({"every": "1 minute"}, T.Repeatedly(T.AfterProcessingTime(0, MIN))),
        ({"after_processing_time": "30s"}, T.AfterProcessingTime(30_000)),
        ({"after_watermark": {"early": {"count": 2}}}, T.AfterWatermark(early=T.AfterCount(2))),
        ({"after_watermark": {"late": {"after_count": 2}}}, T.AfterWatermark(late=T.AfterCount(2))),
        (
            {"after_any": [{"after_count": 2}, {"after_processing_time": 1500}]},
            T.AfterAny((T.AfterCount(2), T.AfterProcessingTime(1500))),
        ),
        ({"after_all": [{"after_count": 2}, "after_watermark"]}, T.AfterAll((T.AfterCount(2), T.AfterWatermark()))),
        (
            {"after_each": [{"after_count": 2}, {"repeatedly": {"after_count": 1}}]},
            T.AfterEach((T.AfterCount(2), T.Repeatedly(T.AfterCount(1)))),
        ),
        (
            {"or_finally": {"trigger": {"count": 1}, "finally": {"after_count": 4}}},
            T.OrFinally(T.Repeatedly(T.AfterCount(1)), T.AfterCount(4)),
        ),
    ],
)
def test_triggers_parse_and_describe_round_trip(trigger, tree):
    assert parse_trigger(trigger) == tree
    if trigger == {"every": "1 minute"}:
        # describe() spells the repeated aligned timer {"repeatedly": {"every": ...}}, which parses
        # to Repeatedly(Repeatedly(...)): the same firings, not the same tree
        assert tree.describe() == {"repeatedly": {"every": MIN}}
        return
    assert parse_trigger(tree.describe()) == tree


def test_every_as_early_firing_round_trips():
    tree = T.AfterWatermark(early=T.AfterProcessingTime(0, MIN), late=T.AfterCount(1))
    assert tree.describe() == {"after_watermark": {"early": {"every": MIN}, "late": {"after_count": 1}}}
    assert parse_trigger(tree.describe()) == tree


@pytest.mark.parametrize(
    "output, fn, arg",
    [
        ("n", "count", "*"),
        ("c", "count", "v"),
        ("s", "sum", "v"),
        ("m", "median", "v"),
        ("p", "percentile", {"column": "v", "p": 0.9}),
        ("k", "top_k", {"column": "v", "k": 5}),
        ("d", "count_distinct", "v"),
        ("f", "first", "v"),
        ("l", "last", "v"),
    ],
)
def test_aggregates_describe_round_trip(output, fn, arg):
    agg = make_aggregate(output, fn, arg)
    ((fn2, arg2),) = agg.fn.describe().items()
    assert make_aggregate(output, fn2, arg2) == agg


@pytest.mark.parametrize("path", sorted(SCENARIOS.glob("*.yaml")), ids=lambda p: p.stem)
def test_every_scenario_is_valid(path):
    sc = load_scenario(path)
    assert isinstance(sc.pipeline, Pipeline)
    assert sc.timeline


# -- the CLI ----------------------------------------------------------------------------------------


def _write(tmp_path: Path, doc: dict, name: str = "spec.yaml") -> str:
    p = tmp_path / name
    p.write_text(yaml.safe_dump(doc))
    return str(p)


def _stderr(result) -> str:
    try:
        return result.stderr
    except ValueError:  # older click without separate stderr
        return result.output


@pytest.mark.parametrize(
    "doc, field",
    [
        (
            spec(source={"format": "json", "path": "data"}, window={"tumbling": {"size": "5 minutes", "offset": "9m"}}),
            "window",
        ),
        (spec(source={"format": "json", "path": "data"}, allowed_lateness="soon"), "allowed_lateness"),
        (spec(source={"format": "json", "path": "data"}, colour="red"), "colour"),
        (spec(source={"format": "json", "path": "data"}, aggregates={"p": {"percentile": "v"}}), "aggregates"),
        (spec(source={"format": "json", "path": "data"}, trigger={"after_cnt": 1}), "trigger"),
        (spec(), "source"),
        ({"pipeline": BASE, "timeline": [{"add": []}], "expect": []}, "expect"),
        ({"pipeline": spec(window={"rolling": {}}), "timeline": [{"end": True}]}, "window"),
    ],
)
def test_cli_validate_bad_spec_exits_2_and_names_the_field(tmp_path, doc, field):
    result = CliRunner().invoke(cli.main, ["validate", _write(tmp_path, doc)])
    assert result.exit_code == 2, result.output
    err = _stderr(result)
    assert err.startswith("error: ")
    assert f"{field}: " in err


def test_cli_validate_good_spec(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "part-0.json").write_text('{"k": "a", "t": 0}\n')
    doc = spec(source={"format": "json", "path": "data"}, key="k")
    result = CliRunner().invoke(cli.main, ["validate", _write(tmp_path, doc)])
    assert result.exit_code == 0, _stderr(result)
    assert "valid (stream, window" in result.output


def test_cli_validate_missing_file(tmp_path):
    result = CliRunner().invoke(cli.main, ["validate", str(tmp_path / "nope.yaml")])
    assert result.exit_code == 2
    assert "no such file" in _stderr(result)


def test_cli_validate_not_yaml(tmp_path):
    p = tmp_path / "broken.yaml"
    p.write_text("window: {tumbling: [\n")
    result = CliRunner().invoke(cli.main, ["validate", str(p)])
    assert result.exit_code == 2
    assert "not valid YAML" in _stderr(result)


@pytest.mark.parametrize("path", sorted(SCENARIOS.glob("*.yaml")), ids=lambda p: p.stem)
def test_cli_validate_scenarios(path):
    result = CliRunner().invoke(cli.main, ["validate", str(path)])
    assert result.exit_code == 0, _stderr(result)
    assert "valid replay scenario" in result.output


def test_cli_replay_prints_panes_and_writes_dead_letters(tmp_path):
    import json

    out = tmp_path / "dead.jsonl"
    result = CliRunner().invoke(
        cli.main, ["replay", str(SCENARIOS / "streaming102_heuristic.yaml"), "--dead-letter", str(out)]
    )
    assert result.exit_code == 0, _stderr(result)
    panes_ = [json.loads(line) for line in result.stdout.splitlines()]
    assert [p["score"] for p in panes_] == [5, 22, 3, 12]
    dead = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(d["reason"], d["record"]["score"]) for d in dead] == [("late", 9)]


def test_cli_replay_bad_scenario_exits_2(tmp_path):
    p = _write(tmp_path, {"pipeline": spec(window={"tumbling": {"size": "x"}}), "timeline": [{"end": True}]})
    result = CliRunner().invoke(cli.main, ["replay", p])
    assert result.exit_code == 2
    assert "window: " in _stderr(result)
