"""Every replay scenario in the suite gives the same panes on Spark as in the core, and the same
dead letters (reasons, records, watermarks, windows): on the stateful plan (the engine inside
transformWithStateInPandas) for all of them, and on the native plan for every one it supports."""

import json
from pathlib import Path

import pytest

from panes.scenario import dumps, load_scenario, replay_core
from panes.spark.native import NativeStream, stream_unsupported
from panes.spark.replay import replay_spark
from tests.spark.answers import record_answers

SCENARIOS = sorted((Path(__file__).resolve().parents[1] / "scenarios").glob("*.yaml"))

pytestmark = pytest.mark.spark

# make test replays each scenario once on Spark; make test-long (the ``long`` marker) also the repeats:
#: scenarios that replay one timeline in the three accumulation modes: on the stateful plan the mode
#: is the core engine's (its golden tests pin each) and the Spark path one (only retracting has a
#: branch of its own, kept): the accumulating and discarding ones there are repeats
REPEATED_MODES = ("_accumulating", "_discarding")
#: the scenarios replayed with tables added in make test: what the random timelines with tables
#: added do not have (ingestion time, punctuation, malformed records)
TABLES_ADDED_SLICE = ("streaming102_ingress_time", "punctuation_records", "malformed_records")
LONG = pytest.mark.long


def _scenario_plans() -> list:
    """Each scenario on each plan. make test replays each scenario on one plan: the native one where
    it carries the scenario (its SQL is the plan with rules of its own), else the stateful one (the
    core engine itself, inside transformWithStateInPandas: its Spark side, the state, timers and
    the holds across buckets, also has tests of its own); the other plan is ``long``."""
    stems = {p.stem for p in SCENARIOS}
    out = []
    for path in SCENARIOS:
        native = not stream_unsupported(load_scenario(path).pipeline)
        for plan in ("stateful", "native"):
            mode = next((m for m in REPEATED_MODES if path.stem.endswith(m)), None)
            repeat = plan == "stateful" and mode is not None and path.stem[: -len(mode)] + "_retracting" in stems
            other = plan == "stateful" and native
            marks = [LONG] if repeat or other else []
            out.append(pytest.param(path, plan, id=f"{path.stem}-{plan}", marks=marks))
    return out


def _dl(d):
    """A dead letter, its record's values as strings: a JSON column whose values mix types is
    read by Spark as strings (5 and "five" both become strings), the core keeps them as they are."""
    out = dict(d)
    out["record"] = {k: str(v).lower() for k, v in d["record"].items() if v is not None}
    out.pop("detail", None)
    return json.dumps(out, sort_keys=True)


@pytest.mark.parametrize("path, plan", _scenario_plans())
def test_spark_engine_prints_the_core_panes(spark, path, plan):
    scenario = load_scenario(path)
    if plan == "native" and stream_unsupported(scenario.pipeline):
        pytest.skip(f"native plan: {stream_unsupported(scenario.pipeline)}")
    core = replay_core(scenario)
    on_spark = replay_spark(scenario, spark=spark, plan=plan)
    assert on_spark.panes == core.panes
    assert sorted(map(_dl, on_spark.dead_letters)) == sorted(map(_dl, core.dead_letters))
    # and byte for byte what this plan printed when the golden files were recorded
    golden = Path(__file__).resolve().parents[1] / "golden"
    for what, rows in (("panes", on_spark.panes), ("dead", on_spark.dead_letters)):
        recorded = (golden / f"{path.stem}.spark-{plan}.{what}.jsonl").read_text()
        assert "".join(dumps(r) + "\n" for r in rows) == recorded


def _random_scenario(seed):
    import random

    rnd = random.Random(seed)
    triggers = [
        {"after_watermark": {"early": {"count": 2}, "late": {"count": 1}}},
        {"repeatedly": {"after_any": [{"after_count": 3}, {"after_processing_time": 1500}]}},
        {"after_watermark": {"early": {"every": 1000}}},
    ]
    windows = [{"tumbling": {"size": 4000}}, {"hopping": {"size": 6000, "hop": 2000}}, {"session": {"gap": 1500}}]
    timeline, clock = [], 0
    for _ in range(6):
        clock += rnd.randint(0, 1500)
        recs = [
            {"k": rnd.choice("abc"), "t": rnd.randint(0, 20_000), "v": rnd.randint(0, 9)}
            for _ in range(rnd.randint(1, 5))
        ]
        timeline.append({"processing_time": clock, "add": recs})
        if rnd.random() < 0.4:
            clock += 1000
            timeline.append({"processing_time": clock})
    timeline.append({"end": True})
    return {
        "pipeline": {
            "event_time": "t",
            "key": "k",
            "window": windows[seed % 3],
            "trigger": triggers[seed % 3],
            "accumulation": ["retracting", "discarding", "accumulating"][seed % 3],
            "watermark": {"max_delay": 3000},
            "allowed_lateness": 2000,
            "aggregates": {"s": {"sum": "v"}, "m": {"max": "v"}, "vals": {"collect_list": "v"}},
        },
        "timeline": timeline,
    }


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_timelines_same_on_spark_and_core(spark, seed):
    scenario = load_scenario(_random_scenario(seed))
    core = replay_core(scenario)
    on_spark = replay_spark(scenario, spark=spark, plan="stateful")
    assert on_spark.panes == core.panes
    assert sorted(map(_dl, on_spark.dead_letters)) == sorted(map(_dl, core.dead_letters))


def random_timeline(rnd, values) -> list[dict]:
    """Seven steps of 1-6 records (keys a-c, event times 0-25 s, a value of ``values`` or null),
    each followed at random by a watermark record, then the end of the input."""
    timeline: list[dict] = []
    for _ in range(7):
        recs = [
            {"k": rnd.choice("abc"), "t": rnd.randint(0, 25_000), "v": rnd.choice([None, *values])}
            for _ in range(rnd.randint(1, 6))
        ]
        timeline.append({"add": recs})
        if rnd.random() < 0.3:
            timeline.append({"watermark": rnd.randint(0, 20_000)})
    timeline.append({"end": True})
    return timeline


#: the fixed windows of the random default-trigger timelines (sessions or the global window after them)
RANDOM_FIXED_WINDOWS = [
    {"tumbling": {"size": 4000, "offset": 500}},
    {"hopping": {"size": 6000, "hop": 2000}},
    {"hopping": {"size": 2000, "hop": 5000}},
]


def random_default_trigger_scenario(seed: int, rnd, window, values, aggregates: dict) -> dict:
    """A random timeline (``random_timeline``) under the default trigger: keyed for even seeds,
    a random watermark delay and allowed lateness."""
    timeline = random_timeline(rnd, values)
    return {
        "pipeline": {
            "event_time": "t",
            "key": [] if seed % 2 else "k",
            "window": window,
            "watermark": {"max_delay": rnd.choice([0, 2000])},
            "allowed_lateness": rnd.choice([0, 3000]),
            "aggregates": aggregates,
        },
        "timeline": timeline,
    }


def _random_default_trigger_scenario(seed):
    """Random windows, keys, lateness and aggregates under the default trigger: what the native
    plan runs. Late rows, hopping gaps, sessions merging across micro-batches, ties in event time."""
    import random

    windows = [*RANDOM_FIXED_WINDOWS, {"session": {"gap": 1500}}]
    aggregates = {
        "n": {"count": "*"},
        "c": {"count": "v"},
        "s": {"sum": "v"},
        "lo": {"min": "v"},
        "a": {"avg": "v"},
        "f": {"first": "v"},
        "l": {"last": "v"},
        "vals": {"collect_list": "v"},
        "d": {"count_distinct": "v"},
        "top": {"top_k": {"column": "v", "k": 2}},
        "med": {"median": "v"},
    }
    return random_default_trigger_scenario(seed, random.Random(100 + seed), windows[seed % 4], range(10), aggregates)


def _same_on_native_plan_and_core(spark, scenario):
    """The native plan runs the scenario, which produces panes, and prints what the core prints."""
    assert stream_unsupported(scenario.pipeline) is None
    core = replay_core(scenario)
    assert core.panes, "the scenario should produce panes"
    on_spark = replay_spark(scenario, spark=spark, plan="native")
    assert on_spark.panes == core.panes
    assert sorted(map(_dl, on_spark.dead_letters)) == sorted(map(_dl, core.dead_letters))


def _seeds_and_writes(seeds) -> list:
    """Each seed with each way of writing the tables (``table_writes``); in make test one way per
    seed, each way for half of the seeds (collected for seeds 0 and 1 mod 4: read back from its
    file for odd seeds), the other pairs ``long``."""
    return [
        pytest.param(
            seed, writes, id=f"{writes}-{seed}", marks=[] if (writes == "collected") == (seed % 4 < 2) else [LONG]
        )
        for writes in ("collected", "written_by_spark")
        for seed in seeds
    ]


@pytest.fixture
def table_writes(request, monkeypatch):
    """The native steps' tables collected to the driver from the first step on (the micro-batches
    of a replay are small), or all written by Spark jobs: the decisions taken, per step. A
    collected table is handed to the next step and the panes as a local relation, or for odd
    seeds (``LOCAL_ROWS`` -1) read back from its Parquet file; a table written by Spark is
    always read back."""
    from panes.spark.native import store

    local = request.param == "collected" and request.node.callspec.params["seed"] % 2 == 0
    if request.param == "written_by_spark":
        monkeypatch.setattr(store, "COLLECT_ROWS", -1)
    if not local:
        monkeypatch.setattr(store, "LOCAL_ROWS", -1)
    decisions = record_answers(monkeypatch, NativeStream, "collects")
    relations = record_answers(monkeypatch, NativeStream, "local_relation")
    yield decisions
    collected = request.param == "collected"
    assert decisions and decisions[0] == collected  # (the first step too: its table's types from its plan)
    assert any(decisions) == collected
    assert any(r is not None for r in relations) == local


@pytest.mark.parametrize("seed, table_writes", _seeds_and_writes(range(4)), indirect=["table_writes"])
def test_random_default_trigger_timelines_same_on_native_plan_and_core(spark, seed, table_writes):
    scenario = load_scenario(_random_default_trigger_scenario(seed))
    _same_on_native_plan_and_core(spark, scenario)


def _random_session_scenario(seed, dense: bool = False):
    """Sessions under the default trigger, merging across micro-batches: rows that bridge kept
    sessions, touching sessions (kept apart), late rows, a fixed gap or a gap per record.
    ``dense``: many rows per micro-batch over a few gaps of time, so that rows a little more
    than a gap apart meet in one micro-batch (they are in two sessions)."""
    import random

    rnd = random.Random(300 + seed + (50 if dense else 0))
    per_record = seed % 2 == 1
    span = 8_000 if dense else 20_000
    timeline = []
    for _ in range(8):
        recs = []
        for _ in range(rnd.randint(10, 25) if dense else rnd.randint(1, 6)):
            r = {
                "k": rnd.choice("ab"),
                "t": rnd.choice([rnd.randint(0, span), 1000 * rnd.randint(0, span // 1000)]),
                "v": rnd.choice([None, *range(5)]),
            }
            if per_record:
                r["g"] = rnd.choice([500, 1000, 3000])
            recs.append(r)
        timeline.append({"add": recs})
        if rnd.random() < 0.3:
            timeline.append({"watermark": rnd.randint(0, 15_000)})
    timeline.append({"end": True})
    window = {"session": {"gap_column": "g"}} if per_record else {"session": {"gap": 1000}}
    return {
        "pipeline": {
            "event_time": "t",
            "key": [] if seed == 2 else "k",
            "window": window,
            "watermark": {"max_delay": rnd.choice([0, 2000])},
            "allowed_lateness": rnd.choice([0, 3000]),
            "aggregates": {"n": {"count": "*"}, "s": {"sum": "v"}, "f": {"first": "v"}, "vals": {"collect_list": "v"}},
        },
        "timeline": timeline,
    }


@pytest.mark.parametrize("seed, table_writes", _seeds_and_writes(range(4)), indirect=["table_writes"])
def test_random_session_timelines_same_on_native_plan_and_core(spark, seed, table_writes):
    scenario = load_scenario(_random_session_scenario(seed))
    _same_on_native_plan_and_core(spark, scenario)


@pytest.mark.parametrize("seed", [0, 2])
def test_dense_session_timelines_same_on_native_plan_and_core(spark, seed):
    """Fixed gap (the native plan first combines each key's rows per gap-long bucket of time)."""
    scenario = load_scenario(_random_session_scenario(seed, dense=True))
    _same_on_native_plan_and_core(spark, scenario)


def _random_counting_trigger_scenario(seed):
    """after_watermark with early / late firings by count, in the three accumulation modes: what
    the native plan runs besides the default trigger (EARLY, ON_TIME, LATE panes, retractions,
    empty ON_TIME panes in discarding mode, windows created late within the allowed lateness)."""
    import random

    rnd = random.Random(200 + seed)
    windows = [{"tumbling": {"size": 4000}}, {"hopping": {"size": 6000, "hop": 2000}}, {"global": {}}]
    triggers = [
        {"after_watermark": {"early": {"count": 1}}},
        {"after_watermark": {"early": {"count": 2}, "late": {"count": 1}}},
        {"after_watermark": {"late": {"count": 2}}},
        {"after_watermark": {"early": {"after_count": 3}, "late": {"count": 1}}},
    ]
    timeline = []
    for _ in range(7):
        timeline.append(
            {
                "add": [
                    {"k": rnd.choice("ab"), "t": rnd.randint(0, 20_000), "v": rnd.choice([None, *range(10)])}
                    for _ in range(rnd.randint(1, 6))
                ]
            }
        )
        if rnd.random() < 0.3:
            timeline.append({"watermark": rnd.randint(0, 20_000)})
    timeline.append({"end": True})
    trigger = triggers[seed % 4]
    return {
        "pipeline": {
            "event_time": "t",
            "key": "k",
            "window": windows[seed % 3],
            "trigger": trigger,
            "accumulation": ["accumulating", "discarding", "retracting"][seed % 3],
            "allowed_lateness": 3000 if "late" in trigger["after_watermark"] else 0,
            "watermark": {"max_delay": rnd.choice([0, 2000])},
            "aggregates": {
                "n": {"count": "*"},
                "s": {"sum": "v"},
                "vals": {"collect_list": "v"},
                "a": {"avg": "v"},
                "hi": {"max": "v"},
            },
        },
        "timeline": timeline,
    }


@pytest.mark.parametrize("seed, table_writes", _seeds_and_writes(range(6)), indirect=["table_writes"])
def test_random_counting_trigger_timelines_same_on_native_plan_and_core(spark, seed, table_writes):
    scenario = load_scenario(_random_counting_trigger_scenario(seed))
    _same_on_native_plan_and_core(spark, scenario)


def test_a_retraction_names_the_pane_it_takes_back_from_an_earlier_micro_batch(spark):
    """Retracting mode: each pane is taken back, in a later micro-batch, under its own timing and
    index (the native plan keeps the last pane between micro-batches: EARLY, ON_TIME, LATE)."""
    scenario = load_scenario(
        {
            "pipeline": {
                "event_time": "t",
                "window": {"tumbling": {"size": 10000}},
                "trigger": {"after_watermark": {"early": {"count": 1}, "late": {"count": 1}}},
                "accumulation": "retracting",
                "allowed_lateness": 10000,
                "aggregates": {"n": {"count": "*"}, "s": {"sum": "v"}},
            },
            "timeline": [
                {"add": [{"t": 1000, "v": 1}]},
                {"add": [{"t": 2000, "v": 2}]},
                {"watermark": 10000},
                {"add": [{"t": 3000, "v": 3}]},
                {"add": [{"t": 4000, "v": 4}]},
                {"end": True},
            ],
        }
    )
    on_spark = replay_spark(scenario, spark=spark, plan="native")
    taken_back = [(p["timing"], p["pane_index"], p["n"], p["s"]) for p in on_spark.panes if p["retraction"]]
    assert taken_back == [("EARLY", 0, 1, 1), ("EARLY", 1, 2, 3), ("ON_TIME", 2, 2, 3), ("LATE", 3, 3, 6)]
    assert on_spark.panes == replay_core(scenario).panes


@pytest.fixture
def tables_added(monkeypatch):
    """Native steps add their rows' partials as a table of their own whenever they may (no rewrite
    for a small state or for windows about to close; one at 3 tables, or when the added tables
    hold as many rows as the oldest): the decisions taken, per step (True: a rewrite)."""
    from panes.spark.native import store

    monkeypatch.setattr(store, "SMALL_STATE_ROWS", 0)
    monkeypatch.setattr(store, "MAX_TABLES", 3)
    monkeypatch.setattr(store, "CLOSING_STEPS", None)
    return record_answers(monkeypatch, NativeStream, "rewrites")


@pytest.mark.parametrize("seed", [0, 1, 2, 4, 5, 8, 9])
def test_random_default_trigger_timelines_same_when_steps_add_tables(spark, seed, tables_added):
    """The closing windows merge their partials across the tables of several steps."""
    scenario = load_scenario(_random_default_trigger_scenario(seed))
    _same_on_native_plan_and_core(spark, scenario)
    assert False in tables_added and tables_added.count(True) >= 1


@pytest.mark.parametrize("seed", [0, 1])
def test_global_window_timelines_same_when_steps_add_tables(spark, seed, monkeypatch):
    """The global window, keyed and not, every step after the first adding a table: its
    partials merge across all of them at the end."""
    from panes.spark import native

    tables_seen: list[int] = []

    def never(self, tables, wm, advance):
        tables_seen.append(len(tables))
        return not tables

    monkeypatch.setattr(native.NativeStream, "rewrites", never)
    scenario = _random_default_trigger_scenario(seed)
    scenario["pipeline"]["window"] = "global"
    _same_on_native_plan_and_core(spark, load_scenario(scenario))
    assert max(tables_seen) >= 5


@pytest.mark.parametrize(
    "path", [pytest.param(p, id=p.stem, marks=[] if p.stem in TABLES_ADDED_SLICE else [LONG]) for p in SCENARIOS]
)
def test_scenarios_same_when_steps_add_tables(spark, path, tables_added):
    from panes.spark.native import appends

    scenario = load_scenario(path)
    if stream_unsupported(scenario.pipeline) or not appends(scenario.pipeline):
        pytest.skip("the native plan rewrites its windows every step for this pipeline")
    core = replay_core(scenario)
    on_spark = replay_spark(scenario, spark=spark, plan="native")
    assert on_spark.panes == core.panes
    assert sorted(map(_dl, on_spark.dead_letters)) == sorted(map(_dl, core.dead_letters))
