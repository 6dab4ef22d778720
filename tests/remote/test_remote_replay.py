"""Streaming replays on a Spark Connect server and on a standalone cluster print what the local run
printed (the golden files tests/golden/*.spark-<plan>.*.jsonl, recorded on local[2]), on the native
and the stateful plan."""

import json
from pathlib import Path

import pytest
from servers import CLUSTER_APP_CONF

ROOT = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).with_name("driver_replay.py")
GOLDEN = ROOT / "tests" / "golden"
#: on both plans: keyed sessions with a late record and a collect_list (whose native form is
#: pickled to a Connect server with the foreachBatch function), and every kind of malformed
#: record; on the stateful plan also early and late firings, which the native plan cannot run
SCENARIOS = {
    "keyed_sessions": "native,stateful",
    "malformed_records": "native,stateful",
    "streaming102_early_late_accumulating": "stateful",
}
#: the cluster's slice that make test runs (remote_quick)
QUICK = {"keyed_sessions": "native,stateful"}

pytestmark = [pytest.mark.spark, pytest.mark.remote]


def _expect(stem: str, plan: str) -> dict:
    return {w: (GOLDEN / f"{stem}.spark-{plan}.{w}.jsonl").read_text() for w in ("panes", "dead")}


def _check(got: dict, scenarios: dict) -> None:
    assert set(got) == set(scenarios)
    for stem, plans in scenarios.items():
        for plan in plans.split(","):
            assert got[stem][plan] == _expect(stem, plan), (stem, plan)


def _replay(run_driver, kind: str, url: str, scenarios: dict, env: dict | None = None) -> dict:
    runs = {str(ROOT / "tests" / "scenarios" / f"{stem}.yaml"): plans for stem, plans in scenarios.items()}
    return run_driver(DRIVER, kind, url, json.dumps(runs), env=env, timeout=1200)


def test_replays_on_spark_connect_equal_the_local_run(connect_server, run_driver):
    _check(_replay(run_driver, "connect", connect_server.url, SCENARIOS), SCENARIOS)


@pytest.mark.remote_quick
def test_a_replay_on_a_standalone_cluster_equals_the_local_run(standalone_cluster, run_driver):
    env = {"CLUSTER_APP_CONF": json.dumps(CLUSTER_APP_CONF)}
    _check(_replay(run_driver, "cluster", standalone_cluster.url, QUICK, env=env), QUICK)


def test_replays_on_a_standalone_cluster_equal_the_local_run(standalone_cluster, run_driver):
    rest = {stem: plans for stem, plans in SCENARIOS.items() if stem not in QUICK}
    env = {"CLUSTER_APP_CONF": json.dumps(CLUSTER_APP_CONF)}
    _check(_replay(run_driver, "cluster", standalone_cluster.url, rest, env=env), rest)
