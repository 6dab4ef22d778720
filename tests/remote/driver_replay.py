"""A driver that replays scenarios on a remote Spark: ``connect URL`` (a Spark Connect session) or
``cluster URL`` (a classic session on a standalone master, CLUSTER_APP_CONF's settings), and a
JSON mapping of scenario files to their plans (``{"x.yaml": "native,stateful"}``). Prints,
on its last line, JSON: {scenario: {plan: {"panes": lines, "dead": lines}}} as ``panes replay``
prints them (panes.scenario.dumps)."""

import json
import os
import sys
from pathlib import Path


def session(kind: str, url: str):
    from panes.spark.session import get_spark

    if kind == "connect":
        return get_spark(remote=url)
    return get_spark(url, conf=json.loads(os.environ.get("CLUSTER_APP_CONF", "{}")))


def main(kind: str, url: str, runs: dict[str, str]) -> dict:
    """``runs``: scenario file -> its plans, comma separated."""
    from panes.scenario import dumps, load_scenario
    from panes.spark.replay import replay_spark

    spark = session(kind, url)
    out: dict = {}
    try:
        for file, plans in runs.items():
            path = Path(file)
            scenario = load_scenario(path)
            for plan in plans.split(","):
                got = replay_spark(scenario, spark=spark, plan=plan)
                out.setdefault(path.stem, {})[plan] = {
                    "panes": "".join(dumps(r) + "\n" for r in got.panes),
                    "dead": "".join(dumps(r) + "\n" for r in got.dead_letters),
                }
    finally:
        spark.stop()
    return out


if __name__ == "__main__":
    kind, url, runs = sys.argv[1:]
    print(json.dumps(main(kind, url, json.loads(runs))))
