"""The batch path gives the final answer the stream converges to: for every replay scenario with
event time, the batch result over the scenario's records (less those the stream dead-lettered)
equals the stream's final panes."""

import json
from pathlib import Path

import pytest

from panes.core.time import format_instant
from panes.core.triggers import Never
from panes.core.windows import GlobalWindows, Sessions
from panes.scenario import load_scenario, replay_core
from panes.spark.planner import window_batch

pytestmark = pytest.mark.spark
SCENARIOS = sorted((Path(__file__).resolve().parents[1] / "scenarios").glob("*.yaml"))


def _final(panes, pipe):
    """The last non-retraction pane of each (key, window), without pane metadata; for sessions,
    only the windows that were not merged into a larger one later."""
    out = {}
    for p in panes:
        if p["retraction"]:
            continue
        k = (tuple(p[c] for c in pipe.key), p["window_start"], p["window_end"])
        out[k] = tuple(p[a.output] for a in pipe.aggregates)
    if isinstance(pipe.window, Sessions):
        out = {
            k: v
            for k, v in out.items()
            if not any(o != k and o[0] == k[0] and o[1] <= k[1] and k[2] <= o[2] for o in out)
        }
    return out


def _batch_scenarios() -> list:
    """Each scenario; a retracting one ``long`` when its accumulating twin (the same timeline) is
    there: bounded input ignores the mode (one final pane per window), so its batch job repeats
    the twin's (make test-long runs it)."""
    stems = {p.stem for p in SCENARIOS}
    return [
        pytest.param(
            p,
            id=p.stem,
            marks=[pytest.mark.long]
            if p.stem.endswith("_retracting") and p.stem.removesuffix("_retracting") + "_accumulating" in stems
            else [],
        )
        for p in SCENARIOS
    ]


@pytest.mark.parametrize("path", _batch_scenarios())
def test_batch_equals_stream_final(spark, path):
    scenario = load_scenario(path)
    pipe = scenario.pipeline
    if not pipe.event_time:
        pytest.skip("ingestion time: a batch run stamps records with a different time")
    if pipe.accumulation == "discarding" and not isinstance(pipe.trigger, Never):
        pytest.skip("discarding panes are deltas; their sum is checked in the core property tests")
    core = replay_core(scenario)
    dropped = [json.dumps(d["record"], sort_keys=True) for d in core.dead_letters]
    records = [
        r
        for s in scenario.timeline
        for r in s.get("add", [])
        if isinstance(r, dict)
        and not (pipe.watermark.punctuation and r.get(pipe.watermark.punctuation_column) is not None)
    ]
    for d in dropped:
        for i, r in enumerate(records):
            if json.dumps(r, sort_keys=True) == d:
                del records[i]
                break
    if not records:
        pytest.skip("no records")
    df = spark.read.json(spark.sparkContext.parallelize([json.dumps(r) for r in records]))
    res = window_batch(df, pipe)
    got = {}
    for row in res.panes.collect():
        r = row.asDict(recursive=True)
        ws = (
            None
            if isinstance(pipe.window, GlobalWindows)
            else format_instant(round(r["window_start"].timestamp() * 1000))
        )
        we = (
            None
            if isinstance(pipe.window, GlobalWindows)
            else format_instant(round(r["window_end"].timestamp() * 1000))
        )
        got[(tuple(r[c] for c in pipe.key), ws, we)] = tuple(r[a.output] for a in pipe.aggregates)
    want = _final(core.panes, pipe)
    assert got == want
    assert res.dead_letters.count() == 0


@pytest.mark.parametrize(
    "window",
    [
        {"hopping": {"size": 7000, "hop": 3000, "offset": 1000}},
        {"hopping": {"size": 3000, "hop": 5000, "offset": 2000}},
        {"tumbling": {"size": 4000, "offset": 500}},
        {"session": {"gap": 700}},
        {"sliding": {"time_difference": 900}},
    ],
    ids=["hop_overlap_offset", "hop_gaps", "tumbling_offset", "sessions", "sliding"],
)
def test_native_batch_windows_equal_the_core(spark, window):
    import random

    rnd = random.Random(7)
    records = [{"k": rnd.choice("xyz"), "t": rnd.randint(-20_000, 60_000), "v": rnd.randint(0, 50)} for _ in range(300)]
    records += [dict(r, v=r["v"] + 1) for r in records[:30]]  # ties in event time, broken by arrival
    doc = {
        "pipeline": {
            "event_time": "t",
            "key": "k",
            "window": window,
            "watermark": {"max_delay": 10**9},
            "aggregates": {
                "n": {"count": "*"},
                "s": {"sum": "v"},
                "m": {"median": "v"},
                "f": {"first": "v"},
                "l": {"collect_list": "v"},
            },
        },
        "timeline": [{"add": records}, {"end": True}],
    }
    scenario = load_scenario(doc)
    want = _final(replay_core(scenario).panes, scenario.pipeline)
    res = window_batch(spark.createDataFrame(records, "k STRING, t LONG, v LONG"), scenario.pipeline)
    assert "native" in res.plan
    got = {}
    for row in res.panes.collect():
        r = row.asDict(recursive=True)
        got[
            (
                (r["k"],),
                format_instant(round(r["window_start"].timestamp() * 1000)),
                format_instant(round(r["window_end"].timestamp() * 1000)),
            )
        ] = (r["n"], r["s"], r["m"], r["f"], r["l"])
    assert got == want


def test_native_batch_counts_nan_as_no_value_like_the_core(spark):
    """NaN in a float column is no value for the aggregates (as null is), as in the core."""
    records = [
        {"k": "a", "t": 1000, "v": 1.5},
        {"k": "a", "t": 2000, "v": float("nan")},
        {"k": "a", "t": 3000, "v": None},
    ]
    doc = {
        "pipeline": {
            "event_time": "t",
            "key": "k",
            "window": {"tumbling": {"size": 10_000}},
            "aggregates": {
                "rows": {"count": "*"},
                "n": {"count": "v"},
                "s": {"sum": "v"},
                "hi": {"max": "v"},
                "med": {"median": "v"},
            },
        },
        "timeline": [{"add": records}, {"end": True}],
    }
    scenario = load_scenario(doc)
    core = replay_core(scenario).panes
    assert [(p["rows"], p["n"], p["s"], p["hi"], p["med"]) for p in core] == [(3, 1, 1.5, 1.5, 1.5)]
    res = window_batch(spark.createDataFrame(records, "k STRING, t LONG, v DOUBLE"), scenario.pipeline)
    assert [(r["rows"], r["n"], r["s"], r["hi"], r["med"]) for r in res.panes.collect()] == [(3, 1, 1.5, 1.5, 1.5)]


@pytest.mark.parametrize(
    "window",
    [{"tumbling": {"size": 10_000}}, {"session": {"gap_column": "g"}}, "global"],
    ids=["tumbling", "session_gap_column", "global"],
)
def test_native_batch_dead_letters_like_the_core(spark, window):
    """Each malformed record is left out of the panes and dead-lettered once, with the reason of
    the first check it fails (event time, then key, then numbers, then the session gap), as in
    the core; the others count. (Read as strings, as JSON whose values mix types is: a number
    in a string column is a number.)"""
    records = [
        {"k": "a", "t": "1000", "v": 2, "g": 500},
        {"k": "a", "t": "2024-01-01T00:00:01Z", "v": 3, "g": 500},
        {"k": "a", "v": 4, "g": 500},  # no event time
        {"t": "1500", "v": 5, "g": 500},  # no key
        {"v": 6, "g": 500},  # neither: the event time is reported
        {"k": "a", "t": "yesterday", "v": 7, "g": 500},  # not a time
        {"k": "b", "t": "1200", "v": "five", "g": 500},  # not a number
        {"k": "b", "t": "1300", "g": 500},  # no value: counts, as null
        {"k": "b", "t": "1400", "v": 8, "g": -1},  # a gap that is no gap (sessions)
        {"k": "b", "t": "not a time", "v": "nine"},  # the event time is reported
    ]
    doc = {
        "pipeline": {
            "event_time": "t",
            "key": "k",
            "window": window,
            "aggregates": {"n": {"count": "*"}, "s": {"sum": "v"}},
        },
        "timeline": [{"add": records}, {"end": True}],
    }
    scenario = load_scenario(doc)
    core = replay_core(scenario)
    df = spark.read.schema("k STRING, t STRING, v STRING, g LONG").json(
        spark.sparkContext.parallelize([json.dumps(r) for r in records])
    )
    res = window_batch(df, scenario.pipeline)
    assert "native" in res.plan

    def reasons(rows):
        return sorted(
            (d["reason"], json.dumps({k: str(v) for k, v in d["record"].items() if v is not None}, sort_keys=True))
            for d in rows
        )

    got = reasons({"reason": r["reason"], "record": json.loads(r["record"])} for r in res.dead_letters.collect())
    assert got == reasons(core.dead_letters)
    want_reasons = [
        "invalid_event_time",
        "invalid_event_time",
        "invalid_value",
        "missing_event_time",
        "missing_event_time",
        "missing_key",
    ]
    if "session" in window:
        want_reasons.insert(3, "invalid_value")
    assert [r for r, _ in got] == want_reasons
    assert sorted((r["k"], r["n"], r["s"]) for r in res.panes.collect()) == sorted(
        (p["k"], p["n"], p["s"]) for p in core.panes if not p["retraction"] and p["is_last"]
    )


def test_a_pipeline_run_again_reuses_its_step_and_answers_for_its_own_rows(spark):
    """A bounded run of a pipeline and input schema built before reuses that run's step (its
    Columns: planning a short batch query is mostly building them) and gives the answer, and
    the dead letters, of its own rows."""
    from panes import pipeline
    from panes.spark.native.step import batch_step

    p = pipeline(
        {
            "event_time": "t",
            "key": "k",
            "window": {"tumbling": {"size": 10_000}},
            "aggregates": {"n": {"count": "*"}, "s": {"sum": "v"}},
        }
    )
    schema = "k STRING, t LONG, v LONG"
    first = spark.createDataFrame([("a", 1000, 2), ("a", 2000, 3)], schema)
    second = spark.createDataFrame([("a", 1500, 10), ("b", 12_000, 4), ("b", None, 1)], schema)

    def run(df):
        from pyspark.sql import functions as F

        res = window_batch(df, p)
        panes = res.panes.select("k", F.unix_millis("window_start").alias("start"), "n", "s")
        return sorted(map(tuple, panes.collect())), sorted(r["reason"] for r in res.dead_letters.collect())

    assert run(first) == ([("a", 0, 2, 5)], [])
    assert run(second) == ([("a", 0, 1, 10), ("b", 10_000, 1, 4)], ["missing_event_time"])
    assert batch_step(p, first.schema, first.columns) is batch_step(p, second.schema, second.columns)
    other = batch_step(p, spark.createDataFrame([], "k STRING, t LONG, v DOUBLE").schema, first.columns)
    assert other is not batch_step(p, first.schema, first.columns)  # (another schema: its own step)
