"""Crash safety (issue 26): a real ``panes run`` killed with SIGKILL at random moments (its whole process
group: Python, the JVM, Spark's workers) and run again gives exactly the panes and dead letters of an
uninterrupted run, each once in the file sinks, on the native and the stateful plan. Each run is a
Spark start (about a minute), so ``make test`` kills the native plan once over three micro-batches;
``make test-long`` each plan three times over four; ``make chaos`` twenty times (tests/chaos.py)."""

from __future__ import annotations

import pytest

from tests.chaos import chaos

pytestmark = pytest.mark.spark


@pytest.mark.parametrize(
    "plan, kills, files, seed",
    [
        # (seed 5 kills at 68% of the uninterrupted run's time: past the Spark start, in the micro-batches)
        ("native", 1, 3, 5),
        pytest.param("native", 3, 4, 3, marks=pytest.mark.long),
        pytest.param("stateful", 3, 4, 3, marks=pytest.mark.long),
    ],
)
def test_a_run_killed_and_run_again_writes_what_an_uninterrupted_run_writes(tmp_path, plan, kills, files, seed):
    result = chaos(tmp_path, plan, kills=kills, seed=seed, log=lambda message: None, files=files, budget=400)
    assert result["kills"] >= 1
    assert result["panes"] > 0 and result["dead_letters"] > 0
    assert result["missing"] == [] and result["extra"] == []
    assert result["identical"]
