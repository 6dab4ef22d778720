"""``panes replay``: a scenario's timeline through the core engine, or through Spark (one
micro-batch per step), printing the same panes. Scenarios and the core's run are in
``panes.scenario`` (multi-stage ones in ``panes.stage_scenario``)."""

from __future__ import annotations

from pathlib import Path

from .scenario import ReplayResult, load_scenario, replay_core
from .spec import load_document
from .stage_scenario import is_stage_scenario, load_stage_scenario, replay_stages_core


def replay(source: str | Path | dict, engine: str = "core") -> ReplayResult:
    doc = source if isinstance(source, dict) else load_document(source)
    if engine not in ("core", "spark"):
        raise ValueError(f"unknown engine {engine!r}: core or spark")
    if is_stage_scenario(doc):
        stages = load_stage_scenario(doc)
        if engine == "core":
            return replay_stages_core(stages)
        from .spark.stages.replay import replay_stages_spark

        return replay_stages_spark(stages)
    scenario = load_scenario(doc)
    if engine == "core":
        return replay_core(scenario)
    from .spark.replay import replay_spark

    return replay_spark(scenario)
