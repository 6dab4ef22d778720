"""The key under which the driver decides a multi-stage pipeline's provisional pane once for all
its rows (``spark.stages.timing.StageRows``: contributor, pane index, retraction) is one pane's:
a firing that merges two sessions that had each fired retracts each under its own window (the
contributor is the pane's key and window), so the two retractions and the merged session's pane
are three keys."""

from __future__ import annotations

import json

from panes.core.stages.rows import CONTRIBUTOR, PHASE
from panes.core.stages.step import StageRunner
from panes.spark.stages.buckets import BucketStep
from panes.spark.stages.timing import StageRows
from panes.stage_scenario import load_stage_scenario

SCENARIO = {
    "name": "sessions_merged_in_a_stage",
    "pipeline": {
        "inputs": {"events": {"event_time": "t", "watermark": {"punctuation": True}}},
        "stages": [
            {
                "name": "sessions",
                "from": "events",
                "key": "k",
                "window": {"session": {"gap": "10 s"}},
                "trigger": {"after_watermark": {"early": {"count": 1}, "late": {"count": 1}}},
                "allowed_lateness": "30 s",
                "accumulation": "retracting",
                "aggregates": {"s": {"sum": "v"}},
            },
            {
                "name": "total",
                "from": "sessions",
                "key": "k",
                "window": {"tumbling": {"size": "1 minute"}},
                "allowed_lateness": "30 s",
                "accumulation": "retracting",
                "aggregates": {"total": {"sum": "s"}},
            },
        ],
        "output": "total",
    },
    "timeline": [{"add": [{"k": "a", "v": 1, "t": "2024-01-01T00:00:01Z"}]}],
}


def test_a_firing_that_merges_two_fired_sessions_gives_each_pane_its_own_decision_key():
    from panes.core.stages.run import GraphRunner

    graph = load_stage_scenario(SCENARIO).graph
    runner = GraphRunner(graph)
    stage: StageRunner = runner.runners["sessions"]
    frames = []
    step = stage.step

    def keep(*args, **kwargs):
        res = step(*args, **kwargs)
        frames.append((res.rows, res.records))
        return res

    stage.step = keep  # type: ignore[method-assign]
    state = runner.new_state()
    # two sessions of key a, each fires an EARLY pane; then a record between them merges them
    for v, t in [(1, "2024-01-01T00:00:01Z"), (2, "2024-01-01T00:00:15Z"), (4, "2024-01-01T00:00:08Z")]:
        runner.step(state, "events", [{"k": "a", "v": v, "t": t}])
    rows, records = frames[-1]
    assert [(r["window_start"], r["window_end"], r["pane_index"], r["retraction"], r["s"]) for r in records] == [
        ("2024-01-01T00:00:01.000Z", "2024-01-01T00:00:11.000Z", 0, True, 1),
        ("2024-01-01T00:00:15.000Z", "2024-01-01T00:00:25.000Z", 0, True, 2),
        ("2024-01-01T00:00:01.000Z", "2024-01-01T00:00:25.000Z", 0, False, 7),
    ]
    assert rows[PHASE].tolist() == [1, 1, 1]  # (one firing)
    # the rows as the stage's Spark step writes them, as the driver keys them
    out = BucketStep(graph, "sessions", 0, 0, None, {}).panes(stage, rows, records)
    keys = [StageRows().pane(r).rows_of for r in out]
    assert len(set(keys)) == 3
    base = 1_704_067_200_000  # 2024-01-01T00:00:00Z
    bounds = [[base + s * 1000 for s in pair] for pair in ([1, 11], [15, 25], [1, 25])]
    assert [json.loads(k[0]) for k in keys] == [[["a"], *b] for b in bounds]
    assert [k[0] for k in keys] == rows[CONTRIBUTOR].tolist()
