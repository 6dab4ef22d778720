"""Record the golden replay outputs: ``python tests/golden/record.py [--spark]``.

Each scenario in ``tests/scenarios`` gives ``<name>.panes.jsonl`` and ``<name>.dead.jsonl``, exactly
what ``panes replay SCENARIO --dead-letter ...`` prints on the core; with ``--spark`` also
``<name>.spark-<plan>.{panes,dead}.jsonl`` from the Spark engine on each plan that runs it.
Re-record only for an intended change of behaviour, and say so in the commit.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCENARIOS = sorted((HERE.parent / "scenarios").glob("*.yaml"))


def lines(rows) -> str:
    from panes.scenario import dumps

    return "".join(dumps(r) + "\n" for r in rows)


def main() -> None:
    from panes.scenario import load_scenario, replay_core

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
