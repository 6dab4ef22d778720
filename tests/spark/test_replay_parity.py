"""Every replay scenario in the suite gives the same panes on Spark as in the core, and the same
dead letters (reasons, records, watermarks, windows)."""

import pytest

from panes.replay import load_scenario, replay_core
from panes.spark.replay import replay_spark

from pathlib import Path

SCENARIOS = sorted((Path(__file__).resolve().parents[1] / "scenarios").glob("*.yaml"))

pytestmark = pytest.mark.spark


def _dl(d):
    out = dict(d)
    out["record"] = {k: v for k, v in d["record"].items() if v is not None}
    out.pop("detail", None)
    return out


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_spark_engine_prints_the_core_panes(spark, path):
    scenario = load_scenario(path)
    core = replay_core(scenario)
    on_spark = replay_spark(scenario, spark=spark)
    assert on_spark.panes == core.panes
    assert sorted(map(repr, map(_dl, on_spark.dead_letters))) == sorted(map(repr, map(_dl, core.dead_letters)))
