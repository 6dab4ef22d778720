"""Record the golden replay outputs: ``python tests/golden/record.py [--spark]``.

Each scenario in ``tests/scenarios`` gives ``<name>.panes.jsonl`` and ``<name>.dead.jsonl``, exactly
what ``panes replay SCENARIO --dead-letter ...`` prints on the core; with ``--spark`` also
``<name>.spark-<plan>.{panes,dead}.jsonl`` from the Spark engine on each plan that runs it. The
multi-stage scenarios in ``tests/scenarios/stages`` give theirs in ``tests/golden/stages`` (with
``--spark``, ``<name>.spark.{panes,dead}.jsonl`` from the Spark plan of multi-stage pipelines).
Re-record only for an intended change of behaviour, and say so in the commit. ``--stages``
records only the multi-stage scenarios.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# the tests' user functions (tests/spark/merges.py), for this process and Spark's Python workers
_USER = str(Path(__file__).resolve().parents[1] / "spark")
sys.path.insert(0, _USER)
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (_USER, os.environ.get("PYTHONPATH", "")) if p)

HERE = Path(__file__).resolve().parent
SCENARIOS = sorted((HERE.parent / "scenarios").glob("*.yaml"))
STAGE_SCENARIOS = sorted((HERE.parent / "scenarios" / "stages").glob("*.yaml"))


def lines(rows) -> str:
    from panes.scenario import dumps

    return "".join(dumps(r) + "\n" for r in rows)


def record_stages(spark: bool) -> None:
    from panes.stage_scenario import load_stage_scenario, replay_stages_core

    out = HERE / "stages"
    out.mkdir(exist_ok=True)
    for path in STAGE_SCENARIOS:
        res = replay_stages_core(load_stage_scenario(path))
        (out / f"{path.stem}.panes.jsonl").write_text(lines(res.panes))
        (out / f"{path.stem}.dead.jsonl").write_text(lines(res.dead_letters))
        if spark:
            from panes.spark.stages.replay import replay_stages_spark

            res = replay_stages_spark(load_stage_scenario(path))
            (out / f"{path.stem}.spark.panes.jsonl").write_text(lines(res.panes))
            (out / f"{path.stem}.spark.dead.jsonl").write_text(lines(res.dead_letters))


def main() -> None:
    from panes.scenario import load_scenario, replay_core

    if "--stages" in sys.argv:  # only the multi-stage scenarios
        record_stages("--spark" in sys.argv)
        return
    record_stages("--spark" in sys.argv)
    for path in SCENARIOS:
        res = replay_core(load_scenario(path))
        (HERE / f"{path.stem}.panes.jsonl").write_text(lines(res.panes))
        (HERE / f"{path.stem}.dead.jsonl").write_text(lines(res.dead_letters))
    if "--spark" in sys.argv:
        from panes.spark.native import stream_unsupported
        from panes.spark.replay import replay_spark

        for path in SCENARIOS:
            scenario = load_scenario(path)
            for plan in ("stateful", "native"):
                if plan == "native" and stream_unsupported(scenario.pipeline):
                    continue
                res = replay_spark(scenario, plan=plan)
                (HERE / f"{path.stem}.spark-{plan}.panes.jsonl").write_text(lines(res.panes))
                (HERE / f"{path.stem}.spark-{plan}.dead.jsonl").write_text(lines(res.dead_letters))


if __name__ == "__main__":
    main()
