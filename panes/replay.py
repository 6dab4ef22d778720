"""``panes replay``: a scenario's timeline through the core engine, or through Spark (one
micro-batch per step), printing the same panes. Scenarios and the core's run are in
``panes.scenario``."""

from __future__ import annotations

from pathlib import Path

from .scenario import ReplayResult, load_scenario, replay_core


def replay(source: str | Path | dict, engine: str = "core") -> ReplayResult:
    scenario = load_scenario(source)
    if engine == "core":
        return replay_core(scenario)
    if engine == "spark":
        from .spark.replay import replay_spark

        return replay_spark(scenario)
    raise ValueError(f"unknown engine {engine!r}: core or spark")
