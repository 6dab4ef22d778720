"""Window pipelines on Spark, beyond the replay scenarios (tests/scenarios/window_pipeline_*, which
test_replay_parity runs on the stateful plan against the core): bounded input gives the core's
final answer (SQL over fixed windows natively, sessions and functions through the engine), a
function's declared schema types its columns, a streaming SQL pipeline's panes come through
write_stream with the query's column types, the traffic example's window-pipeline spec gives
the panes of its aggregates spec through ``panes run``, a run accounts for a failed window's records
as the core does, and random timelines with allowed lateness (timings decided across buckets) give
the core's panes."""

import json
import shutil
from pathlib import Path

import pytest
from pyspark.sql import types as ST

import panes
from panes.core.table import plain_value
from panes.runner import run_spec
from panes.scenario import load_scenario, replay_core
from panes.spark.planner import window_batch, window_stream
from panes.spec import load_run_spec, parse_run_spec

pytestmark = pytest.mark.spark
ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "tests" / "scenarios"


def one_step(name):
    """A scenario's records in one step, then the end: what bounded input answers."""
    scenario = load_scenario(SCENARIOS / f"{name}.yaml")
    records = [r for s in scenario.timeline for r in s.get("add", [])]
    return (
        scenario,
        records,
        replay_core(load_scenario({**scenario.raw, "timeline": [{"add": records}, {"end": True}]})),
    )


def as_records(df):
    """A panes DataFrame's rows as the core's records (instants as ISO text, a function's JSON
    column parsed), sorted."""
    out = []
    for r in df.collect():
        d = {k: plain_value(v) for k, v in r.asDict(recursive=True).items()}
        d.update(json.loads(d.pop("values")) if "values" in d else {})
        out.append(d)
    return sorted(out, key=lambda d: json.dumps(d, sort_keys=True))


def core_sorted(rows):
    return sorted(rows, key=lambda d: json.dumps(d, sort_keys=True))


@pytest.mark.parametrize(
    "name",
    ["window_pipeline_top_n", "window_pipeline_benthos_traffic", "window_pipeline_function", "window_pipeline_failure"],
)
def test_bounded_input_gives_the_core_s_final_answer(spark, name):
    scenario, records, core = one_step(name)
    df = spark.read.json(spark.sparkContext.parallelize([json.dumps(r) for r in records]))
    result = window_batch(df, scenario.pipeline)
    assert as_records(result.panes) == core_sorted(core.panes)
    dead = [r.asDict(recursive=True) for r in result.dead_letters.collect()]
    assert sorted((d["reason"], json.loads(d["record"])["registration_plate"]) for d in dead) == sorted(
        (d["reason"], d["record"]["registration_plate"]) for d in core.dead_letters
    )


def test_sql_over_fixed_windows_runs_without_the_engine_and_sessions_through_it(spark):
    scenario, records, _ = one_step("window_pipeline_top_n")
    df = spark.read.json(spark.sparkContext.parallelize([json.dumps(r) for r in records]))
    fixed = window_batch(df, scenario.pipeline)
    assert fixed.plan.startswith("batch: rows assigned to their windows by expressions")
    assert "ArrowEvalPython" not in fixed.panes._jdf.queryExecution().executedPlan().toString()
    assert "FlatMapGroupsInPandas" not in fixed.panes._jdf.queryExecution().executedPlan().toString()
    doc = {**scenario.raw, "pipeline": {**scenario.raw["pipeline"], "window": {"session": {"gap": "3 minutes"}}}}
    sessions = load_scenario({**doc, "timeline": [{"add": records}, {"end": True}]})
    result = window_batch(df, sessions.pipeline)
    assert result.plan.startswith("batch: the core engine over hash buckets of the key keeps each window's rows")
    assert as_records(result.panes) == core_sorted(replay_core(sessions).panes)


def test_a_function_s_declared_schema_types_its_columns(spark):
    scenario, records, core = one_step("window_pipeline_function")
    spec = {
        **scenario.raw["pipeline"],
        "window_pipeline": {
            "fn": "window_functions:distinct_cars",
            "schema": "traffic_light STRING, cars ARRAY<STRING>, total_cars LONG, passengers LONG",
        },
    }
    df = spark.read.json(spark.sparkContext.parallelize([json.dumps(r) for r in records]))
    result = window_batch(df, panes.pipeline(spec))
    assert result.panes.schema["cars"].dataType == ST.ArrayType(ST.StringType())
    assert result.panes.schema["total_cars"].dataType == ST.LongType()
    assert as_records(result.panes) == core_sorted(core.panes)


def test_a_streaming_sql_pipeline_hands_typed_panes_to_write_stream(spark, tmp_path):
    scenario, records, core = one_step("window_pipeline_top_n")
    src = tmp_path / "in"
    src.mkdir()
    (src / "part-0.json").write_text("\n".join(json.dumps(r) for r in records) + "\n")
    schema = spark.read.json(str(src)).schema
    stream = spark.readStream.schema(schema).json(str(src))
    result = window_stream(stream, scenario.pipeline, plan="auto")
    assert result.plan.startswith(
        "stream: transformWithStateInPandas over hash buckets of the key, the core "
        "engine keeping each window's rows as columns in its state; per micro-batch, "
        "the SQL, rewritten"
    )
    with pytest.raises(ValueError, match="a window pipeline's SQL runs per micro-batch"):
        result.panes  # noqa: B018
    got, types = [], {}

    def on_panes(df, batch_id):
        types.update({f.name: f.dataType for f in df.schema.fields})
        got.extend(as_records(df))

    q = result.write_stream(on_panes, lambda df, i: None, str(tmp_path / "ckpt"), availableNow=True)
    q.awaitTermination()
    assert types["amount"] == ST.LongType() and types["window_start"] == ST.TimestampType()
    # the input ends without a watermark past the last windows: the stream emits what closed
    closed = [p for p in core.panes if p["window_end"] <= "2024-05-01T12:10:00.000Z"]
    assert core_sorted(got) == core_sorted(closed) and closed


def _example_spec(tmp_path, spec_file, name):
    src = tmp_path / "data"
    if not src.exists():
        src.mkdir()
        for i, f in enumerate(["part-0.json", "part-1.json", "part-2.json"]):
            shutil.copy(ROOT / "examples" / "traffic" / "data" / f, src / f)
            import os

            os.utime(src / f, (1_600_000_000 + i, 1_600_000_000 + i))
    spec = load_run_spec(ROOT / "examples" / "traffic" / spec_file)
    spec.source.path = str(src)
    spec.sink.format, spec.sink.path = "json", str(tmp_path / name / "panes")
    spec.dead_letter.format, spec.dead_letter.path = "json", str(tmp_path / name / "dead")
    spec.checkpoint = str(tmp_path / name / "checkpoint")
    return spec


def test_the_traffic_example_as_a_window_pipeline_gives_the_panes_of_its_aggregates(spark, tmp_path):
    outputs = []
    for spec_file, name in (("pipeline.yaml", "aggregates"), ("window_pipeline.yaml", "window_pipeline")):
        # (the input ends: every window closes)
        run_spec(_example_spec(tmp_path, spec_file, name), spark=spark, progress=False, end_input=True)
        # (without the micro-batch a row came in: the stateful plan emits a closed window's pane in the
        # micro-batch after the one whose watermark closed it, the native plan in that one)
        rows = [r.asDict() for r in spark.read.json(str(tmp_path / name / "panes")).drop("batch").collect()]
        dead = [r.asDict() for r in spark.read.json(str(tmp_path / name / "dead")).drop("batch").collect()]
        # dead letters: the reason and the record's values (the plans write its JSON each their own way,
        # with or without null fields)
        letters = [[d["reason"], {k: v for k, v in json.loads(d["record"]).items() if v is not None}] for d in dead]
        outputs.append(
            (
                sorted(json.dumps(r, sort_keys=True) for r in rows),
                sorted(json.dumps(d, sort_keys=True) for d in letters),
            )
        )
    assert outputs[0] == outputs[1]
    assert len(outputs[0][0]) == 9 and len(outputs[0][1]) == 3


def test_a_query_that_fails_at_run_time_on_one_window_sends_its_rows_to_the_dead_letters(spark):
    from panes.spark.replay import replay_spark

    scenario = load_scenario(
        {
            "pipeline": {
                "event_time": "t",
                "key": "k",
                "window": {"tumbling": {"size": 10}},
                "window_pipeline": {"sql": "SELECT CAST(code AS INT) AS n FROM rows ORDER BY n"},
            },
            "timeline": [
                {
                    "add": [
                        {"k": "a", "t": 1, "code": "7"},
                        {"k": "b", "t": 2, "code": "x"},
                        {"k": "b", "t": 3, "code": "8"},
                        {"k": "a", "t": 12, "code": "9"},
                    ]
                },
                {"end": True},
            ],
        }
    )
    res = replay_spark(scenario, spark=spark, plan="stateful")
    assert [(p["k"], p["window_start"][-6:], p["n"]) for p in res.panes] == [("a", "0.000Z", 7), ("a", "0.010Z", 9)]
    assert sorted((d["reason"], d["record"]["code"], d["window"]["start"][-6:]) for d in res.dead_letters) == [
        ("window_pipeline_failed", "8", "0.000Z"),
        ("window_pipeline_failed", "x", "0.000Z"),
    ]
    assert {d["detail"].split("]")[0] for d in res.dead_letters} == {"[CAST_INVALID_INPUT"}


def test_rows_a_query_failed_on_go_to_the_dead_letters_once_and_leave_later_panes(spark):
    # issue 31: a pane per record, accumulating: the first pane fails on x; the later panes of the
    # window hold x again (its state was written before the query ran): taken out, not dead-lettered
    # again, the later panes run over the rows after it (as in the core)
    from panes.spark.replay import replay_spark

    scenario = load_scenario(
        {
            "pipeline": {
                "event_time": "t",
                "key": "k",
                "window": {"tumbling": {"size": 10}},
                "trigger": {"repeatedly": {"after_count": 1}},
                "window_pipeline": {"sql": "SELECT CAST(code AS INT) AS n FROM rows ORDER BY n"},
            },
            "timeline": [
                {"add": [{"k": "b", "t": 2, "code": "x"}]},
                {"add": [{"k": "b", "t": 3, "code": "8"}]},
                {"add": [{"k": "b", "t": 4, "code": "9"}]},
                {"end": True},
            ],
        }
    )
    res = replay_spark(scenario, spark=spark, plan="stateful")
    assert [(d["reason"], d["record"]["code"]) for d in res.dead_letters] == [("window_pipeline_failed", "x")]
    assert [(p["timing"], p["n"]) for p in res.panes] == [
        ("EARLY", 8),
        ("EARLY", 8),
        ("EARLY", 9),
        ("ON_TIME", 8),
        ("ON_TIME", 9),
    ]


def test_a_query_spark_cannot_analyse_fails_before_the_stream_starts(spark, tmp_path):
    scenario, records, _ = one_step("window_pipeline_top_n")
    src = tmp_path / "in"
    src.mkdir()
    (src / "part-0.json").write_text("\n".join(json.dumps(r) for r in records) + "\n")
    stream = spark.readStream.schema(spark.read.json(str(src)).schema).json(str(src))
    pipe = panes.pipeline({**scenario.raw["pipeline"], "window_pipeline": {"sql": "SELECT price FROM rows"}})
    with pytest.raises(ValueError) as e:
        window_stream(stream, pipe)
    assert str(e.value).startswith("window_pipeline.sql: [UNRESOLVED_COLUMN.WITH_SUGGESTION]")
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("mode", ["stream", "batch"])
def test_a_run_counts_the_records_of_a_failed_window_beside_the_sum_as_the_core(spark, tmp_path, mode):
    # (the failed window's records were counted when they came: their dead letters are reported beside
    # the sum, in its reasons, on Spark as in the core)
    scenario, records, core = one_step("window_pipeline_failure")
    src = tmp_path / "in"
    src.mkdir()
    (src / "part-0.json").write_text("\n".join(json.dumps(r) for r in records) + "\n")
    spec = parse_run_spec(
        {
            "mode": mode,
            "source": {"format": "json", "path": str(src)},
            **scenario.raw["pipeline"],
            "sink": {"format": "json", "path": str(tmp_path / "panes")},
            "dead_letter": {"format": "json", "path": str(tmp_path / "dead")},
            **({"checkpoint": str(tmp_path / "ckpt")} if mode == "stream" else {}),
        }
    )
    counts = run_spec(spec, spark=spark, progress=mode == "batch", end_input=True)
    assert core.accounting is not None and core.accounting.failed_later == 2
    want = core.accounting.as_dict()
    assert {k: counts[k] for k in want} == want
    assert want["counted"] == 6 and want["dead_letters"] == 0 and want["reasons"] == {"window_pipeline_failed": 2}


def _random_late_scenario(seed):
    """Random timelines with allowed lateness over three keys (the replay's four buckets each see
    their own holds): early and late panes of several rows, in each accumulation mode."""
    import random

    rnd = random.Random(700 + seed)
    triggers = [
        {"after_watermark": {"early": {"count": 2}, "late": {"count": 1}}},
        {"repeatedly": {"after_count": 2}},
        {"after_watermark": {"late": {"count": 1}}},
    ]
    windows = [{"tumbling": {"size": 4000}}, {"hopping": {"size": 6000, "hop": 2000}}, {"session": {"gap": 1500}}]
    timeline = []
    for _ in range(6):
        recs = [
            {"k": rnd.choice("abc"), "t": rnd.randint(0, 20_000), "v": rnd.randint(0, 3)}
            for _ in range(rnd.randint(1, 5))
        ]
        timeline.append({"add": recs})
        if rnd.random() < 0.5:
            timeline.append({"watermark": rnd.randint(0, 25_000)})
    timeline.append({"end": True})
    return {
        "pipeline": {
            "event_time": "t",
            "key": "k",
            "window": windows[seed % 3],
            "trigger": triggers[seed % 3],
            "accumulation": ["retracting", "discarding", "accumulating"][seed % 3],
            "watermark": {"punctuation": True},
            "allowed_lateness": 5000,
            "window_pipeline": {"sql": "SELECT v, count(*) AS n FROM rows GROUP BY v ORDER BY v"},
        },
        "timeline": timeline,
    }


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_timelines_with_allowed_lateness_same_on_spark_and_core(spark, seed):
    from panes.spark.replay import replay_spark

    scenario = load_scenario(_random_late_scenario(seed))
    core = replay_core(scenario)
    assert len({p["timing"] for p in core.panes}) > 1  # (timings to decide)
    on_spark = replay_spark(scenario, spark=spark, plan="stateful")
    assert on_spark.panes == core.panes

    def letters(res):
        return sorted(json.dumps([d["reason"], d["record"]], sort_keys=True) for d in res.dead_letters)

    assert letters(on_spark) == letters(core)
