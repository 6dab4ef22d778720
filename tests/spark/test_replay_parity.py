"""Every replay scenario in the suite gives the same panes on Spark as in the core, and the same
dead letters (reasons, records, watermarks, windows)."""

import json

import pytest

from panes.replay import load_scenario, replay_core
from panes.spark.replay import replay_spark

from pathlib import Path

SCENARIOS = sorted((Path(__file__).resolve().parents[1] / "scenarios").glob("*.yaml"))

pytestmark = pytest.mark.spark


def _dl(d):
    """A dead letter, its record's values as strings: a JSON column whose values mix types is
    read by Spark as strings (5 and "five" both become strings), the core keeps them as they are."""
    out = dict(d)
    out["record"] = {k: str(v).lower() for k, v in d["record"].items() if v is not None}
    out.pop("detail", None)
    return json.dumps(out, sort_keys=True)


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_spark_engine_prints_the_core_panes(spark, path):
    scenario = load_scenario(path)
    core = replay_core(scenario)
    on_spark = replay_spark(scenario, spark=spark)
    assert on_spark.panes == core.panes
    assert sorted(map(_dl, on_spark.dead_letters)) == sorted(map(_dl, core.dead_letters))


def _random_scenario(seed):
    import random

    rnd = random.Random(seed)
    triggers = [{"after_watermark": {"early": {"count": 2}, "late": {"count": 1}}},
                {"repeatedly": {"after_any": [{"after_count": 3}, {"after_processing_time": 1500}]}},
                {"after_watermark": {"early": {"every": 1000}}}]
    windows = [{"tumbling": {"size": 4000}}, {"hopping": {"size": 6000, "hop": 2000}}, {"session": {"gap": 1500}}]
    timeline, clock = [], 0
    for _ in range(6):
        clock += rnd.randint(0, 1500)
        recs = [{"k": rnd.choice("abc"), "t": rnd.randint(0, 20_000), "v": rnd.randint(0, 9)}
                for _ in range(rnd.randint(1, 5))]
        timeline.append({"processing_time": clock, "add": recs})
        if rnd.random() < 0.4:
            clock += 1000
            timeline.append({"processing_time": clock})
    timeline.append({"end": True})
    return {"pipeline": {"event_time": "t", "key": "k", "window": windows[seed % 3],
                         "trigger": triggers[seed % 3], "accumulation": ["retracting", "discarding", "accumulating"][seed % 3],
                         "watermark": {"max_delay": 3000}, "allowed_lateness": 2000,
                         "aggregates": {"s": {"sum": "v"}, "m": {"max": "v"}, "vals": {"collect_list": "v"}}},
            "timeline": timeline}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_timelines_same_on_spark_and_core(spark, seed):
    scenario = load_scenario(_random_scenario(seed))
    core = replay_core(scenario)
    on_spark = replay_spark(scenario, spark=spark)
    assert on_spark.panes == core.panes
    assert sorted(map(_dl, on_spark.dead_letters)) == sorted(map(_dl, core.dead_letters))
