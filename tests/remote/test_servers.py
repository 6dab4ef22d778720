"""The server fixtures work: a Connect server answers and runs Python with panes on the server; a
standalone cluster runs tasks on its two executors, which import panes."""

import json
import os
import sys
from pathlib import Path

import pytest
from servers import CLUSTER_APP_CONF

DRIVER = Path(__file__).with_name("driver_probe.py")

pytestmark = [pytest.mark.spark, pytest.mark.remote]


def test_connect_server_answers_with_panes_confs(connect_server, run_driver):
    got = run_driver(DRIVER, "connect", connect_server.url, timeout=300)
    assert got["sum"] == 6
    assert got["python"] == os.path.normpath(sys.executable)
    assert got["panes"] is True
    assert got["state_store"] == "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
    assert got["time_zone"] == "UTC"


def test_standalone_cluster_runs_tasks_on_two_executors(standalone_cluster, run_driver):
    state = standalone_cluster._state()
    assert state["aliveworkers"] == 2
    got = run_driver(
        DRIVER, "cluster", standalone_cluster.url, env={"CLUSTER_APP_CONF": json.dumps(CLUSTER_APP_CONF)}, timeout=600
    )
    assert got["master"] == standalone_cluster.url
    assert got["executors"] == ["0", "1"]
    assert got["python"] == [os.path.normpath(sys.executable)]
    assert got["panes"] is True
