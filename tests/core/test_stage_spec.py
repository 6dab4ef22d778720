"""The multi-stage spec: every mistake is one field error naming the field, found before anything
runs (and together); panes validate prints them, exit code 2."""

from __future__ import annotations

import copy
import json

import pytest
from click.testing import CliRunner

from panes.cli import main
from panes.spec import SpecError
from panes.stage_scenario import load_stage_scenario
from panes.stage_spec import parse_stages_spec

Q5 = {
    "inputs": {"bids": {"event_time": "ts"}},
    "stages": [
        {
            "name": "per_auction",
            "from": "bids",
            "key": "auction",
            "window": {"hopping": {"size": "10 s", "hop": "2 s"}},
            "aggregates": {"num": {"count": "*"}},
        },
        {"name": "hottest", "from": "per_auction", "aggregates": {"maxnum": {"max": "num"}}},
        {
            "name": "q5",
            "from": ["per_auction", "hottest"],
            "key": {"per_auction": "num", "hottest": "maxnum"},
            "join": "inner",
        },
    ],
    "output": "q5",
}


def errors(doc) -> list[tuple[str, str]]:
    with pytest.raises(SpecError) as e:
        parse_stages_spec(doc)
    return [(f.field, f.reason) for f in e.value.errors]


def changed(path: list, value) -> dict:
    doc = copy.deepcopy(Q5)
    node = doc
    for p in path[:-1]:
        node = node[p]
    if value is None:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return doc


def test_q5_spec_gives_its_graph():
    graph = parse_stages_spec(Q5).to_graph()
    assert [s.name for s in graph.stages] == ["per_auction", "hottest", "q5"]
    assert graph.output_stage.keys == (("num",), ("maxnum",))
    assert graph.windows(graph.stage("hottest")).describe() == {
        "inherited": {"hopping": {"size": 10000, "hop": 2000, "offset": 0}}
    }


@pytest.mark.parametrize(
    "path, value, field, reason",
    [
        (["stages", 1, "from"], "nope", "stages[1].from", "'nope' is no input or earlier stage"),
        (["stages", 1, "from"], "q5", "stages[1].from", "'q5' is no input or earlier stage"),
        (["stages", 0, "window"], None, "stages[0].window", "required: an input has no windows to inherit"),
        (
            ["stages", 2, "key"],
            "num",
            "stages[2].key",
            "a merge stage names each side's key: {per_auction: ..., hottest: ...}",
        ),
        (
            ["stages", 2, "key"],
            {"per_auction": "num"},
            "stages[2].key",
            "a mapping names the key column(s) of each of ['per_auction', 'hottest']",
        ),
        (
            ["stages", 2, "join"],
            "outer",
            "stages[2].join",
            "join is one of inner, left, cogroup or {merge: 'module:Class'}",
        ),
        (
            ["stages", 2, "join"],
            {"merge": "no_such_module:Merge"},
            "stages[2].join",
            "cannot import module 'no_such_module' for merge 'no_such_module:Merge': No module named 'no_such_module'",
        ),
        (
            ["stages", 2, "join"],
            None,
            "stages[2].join",
            "a stage reading two has a join (inner, left, cogroup or {merge: 'module:Class'}), not aggregates",
        ),
        (
            ["stages", 1, "aggregates"],
            {"m": {"max": "price"}},
            "stages[1].aggregates",
            "per_auction has no column ['price']; it has ['auction', 'num']",
        ),
        (
            ["stages", 1, "key"],
            "bidder",
            "stages[1].key",
            "per_auction has no column ['bidder']; it has ['auction', 'num']",
        ),
        (["stages", 1, "name"], "bids", "stages[1].name", "'bids' is already an input or a stage"),
        (
            ["stages", 1, "aggregates"],
            {"timing": {"max": "num"}},
            "stages[1].aggregates",
            "column names ['timing'] are reserved for pane metadata",
        ),
        (["output"], "nope", "output", "no stage 'nope'; the stages are ['per_auction', 'hottest', 'q5']"),
        (
            ["stages", 1, "window"],
            {"tumbling": {"size": "1 x"}},
            "stages[1].window",
            "not a duration: '1 x' (use e.g. '2 minutes', '30s', '1500ms' or milliseconds)",
        ),
    ],
)
def test_a_mistake_names_its_field(path, value, field, reason):
    assert (field, reason) in errors(changed(path, value))


def test_discarding_stage_over_restating_panes_only_sums_or_counts():
    doc = changed(["stages", 1, "accumulation"], "discarding")
    assert errors(doc) == [
        (
            "stages[1].aggregates",
            "a discarding stage over per_auction's restating panes can sum "
            "or count (a retraction subtracts), not ['maxnum']",
        )
    ]
    doc["stages"][1]["aggregates"] = {"total": {"sum": "num"}, "rows": {"count": "*"}}
    doc["stages"].pop()
    doc["output"] = "hottest"
    parse_stages_spec(doc)


def test_every_mistake_is_reported_at_once():
    doc = changed(["stages", 1, "from"], "nope")
    doc["output"] = "nope"
    doc["stages"][0].pop("window")
    assert [f for f, _ in errors(doc)] == ["stages[0].window", "stages[1].from", "output"]


def test_a_step_needs_its_input_when_there_are_two(tmp_path):
    import json

    doc = {
        "pipeline": {
            "inputs": {"a": {"event_time": "t"}, "b": {"event_time": "t"}},
            "stages": [
                {
                    "name": "j",
                    "from": ["a", "b"],
                    "key": {"a": "k", "b": "k"},
                    "window": {"tumbling": {"size": 1000}},
                    "join": "inner",
                }
            ],
        },
        "timeline": [{"add": [{"k": 1, "t": 0}]}, {"watermark": 5, "input": "c"}, {"end": True}],
    }
    with pytest.raises(SpecError) as e:
        load_stage_scenario(doc)
    assert [(f.field, f.reason) for f in e.value.errors] == [
        ("timeline[0].input", "required: the pipeline has inputs ['a', 'b']"),
        ("timeline[1].input", "no input 'c'; the inputs are ['a', 'b']"),
    ]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    result = CliRunner().invoke(main, ["validate", str(path)])
    assert result.exit_code == 2
    assert result.output.splitlines() == [
        "error: timeline[0].input: required: the pipeline has inputs ['a', 'b']",
        "error: timeline[1].input: no input 'c'; the inputs are ['a', 'b']",
    ]


def test_validate_checks_a_run_specs_sources_and_outputs(tmp_path):
    # issue 28: as panes run does before Spark starts, each input's source and where it writes
    data = tmp_path / "bids"
    data.mkdir()
    (data / "part-0.json").write_text('{"auction": 1, "ts": "2024-01-01T00:00:00Z"}\n')
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    run = {"mode": "batch", "sink": {"format": "json", "path": str(tmp_path / "out")}}
    doc = copy.deepcopy(Q5)
    doc["inputs"]["bids"]["source"] = {"format": "json", "path": str(data)}
    path = tmp_path / "run.json"
    path.write_text(json.dumps({**doc, **run}))
    result = CliRunner().invoke(main, ["validate", str(path)])
    assert (result.exit_code, result.output) == (0, f"{path}: valid (batch, 3 stages, output q5)\n")
    assert not (tmp_path / "out").exists()  # (nothing created)
    doc["inputs"]["bids"]["source"]["path"] = str(tmp_path / "nowhere")
    path.write_text(json.dumps({**doc, **run, "dead_letter": {"format": "json", "path": str(blocker / "dead")}}))
    result = CliRunner().invoke(main, ["validate", str(path)])
    assert result.exit_code == 2
    assert result.output.splitlines() == [
        f"error: inputs.bids.source.path: no such file or directory: {tmp_path / 'nowhere'}",
        f"error: dead_letter.path: cannot write to {blocker / 'dead'}: {blocker} is a file, not a directory",
    ]
