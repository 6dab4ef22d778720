"""Crash safety (issue 26): a real ``panes run`` killed with SIGKILL at random moments (its whole process
group: Python, the JVM, Spark's workers) and run again gives exactly the panes and dead letters of an
uninterrupted run, each once in the file sinks, on the native and the stateful plan. Two kills per plan,
bounded in time; ``make chaos`` does twenty (tests/chaos.py)."""

from __future__ import annotations

import pytest

from tests.chaos import chaos

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("plan", ["native", "stateful"])
def test_a_run_killed_and_run_again_writes_what_an_uninterrupted_run_writes(tmp_path, plan):
    result = chaos(tmp_path, plan, kills=2, seed=3, log=lambda message: None, files=4, budget=400)
    assert result["kills"] >= 1
    assert result["panes"] > 0 and result["dead_letters"] > 0
    assert result["missing"] == [] and result["extra"] == []
    assert result["identical"]
