"""A multi-stage stream's checkpoint (``panes.stage_checkpoint``): it remembers what its state means
and refuses a spec that changes it, naming each field; it refuses new data once its inputs ended,
has nothing to do when nothing is new, and asks for --end-input after an interrupted ending."""

from __future__ import annotations

import copy
import json

import pytest

from panes import checkpoint as ck
from panes.stage_checkpoint import checkpoint_errors, finished, mark_ended, run_errors, stages_meaning
from panes.stage_spec import parse_stages_run_spec


def _doc(tmp_path) -> dict:
    for name in ("bids", "auctions"):
        (tmp_path / name).mkdir(exist_ok=True)
        (tmp_path / name / "part-0.json").write_text('{"auction": 1, "id": 1, "ts": 1}\n')
    source = {"format": "json", "schema": "auction LONG, id LONG, ts LONG"}
    return {
        "inputs": {
            "bids": {"event_time": "ts", "source": {**source, "path": str(tmp_path / "bids")}},
            "auctions": {"event_time": "ts", "source": {**source, "path": str(tmp_path / "auctions")}},
        },
        "stages": [
            {
                "name": "per_auction",
                "from": "bids",
                "key": "auction",
                "window": {"tumbling": {"size": "10 s"}},
                "aggregates": {"num": {"count": "*"}},
            },
            {"name": "hottest", "from": "per_auction", "aggregates": {"top": {"max": "num"}}},
            {
                "name": "joined",
                "from": ["per_auction", "auctions"],
                "key": {"per_auction": "auction", "auctions": "id"},
                "window": {"tumbling": {"size": "10 s"}},
                "join": "inner",
            },
        ],
        "checkpoint": str(tmp_path / "checkpoint"),
        "sink": {"format": "json", "path": str(tmp_path / "out")},
    }


def _errors(doc, end_input=False):
    return [(e.field, e.reason) for e in checkpoint_errors(parse_stages_run_spec(doc), end_input)]


def test_a_spec_that_changes_what_the_state_means_is_refused_naming_each_field(tmp_path):
    doc = _doc(tmp_path)
    ck.record(doc["checkpoint"], stages_meaning(parse_stages_run_spec(doc)))
    assert _errors(doc) == []
    changed = copy.deepcopy(doc)
    changed["stages"][0]["window"] = {"tumbling": {"size": "20 s"}}
    changed["stages"][1]["accumulation"] = "retracting"
    changed["inputs"]["auctions"]["event_time"] = "id"
    fields = [f for f, _ in _errors(changed)]
    assert fields == ["inputs.auctions.event_time", "stages[0].window", "stages[1].window", "stages[1].accumulation"]
    (_, reason), *_ = _errors(changed)
    assert reason == (
        f'changed since checkpoint {doc["checkpoint"]} was started ("ts" -> "id"): its state holds what the '
        f"old spec made; start afresh with a new checkpoint directory (or remove {doc['checkpoint']})"
    )
    renamed = copy.deepcopy(doc)
    renamed["stages"][1]["name"] = "top"
    assert [f for f, _ in _errors(renamed)] == ["stages"]


def test_changes_that_leave_the_state_alone_pass(tmp_path):
    doc = _doc(tmp_path)
    ck.record(doc["checkpoint"], stages_meaning(parse_stages_run_spec(doc)))
    edited = copy.deepcopy(doc)
    edited["sink"] = {"format": "console"}
    edited["inputs"]["bids"]["watermark"] = {"max_delay": "5 s"}
    edited["spark"] = {"trigger_interval": "2 s", "available_now": True}
    edited["output"] = "hottest"
    assert _errors(edited) == []


def test_once_the_inputs_ended_new_data_is_refused_and_nothing_new_has_nothing_to_do(tmp_path):
    doc = _doc(tmp_path)
    spec = parse_stages_run_spec(doc)
    mark_ended(spec)
    assert finished(spec) and _errors(doc) == []
    assert json.loads((tmp_path / "checkpoint" / "panes" / "ended.json").read_text())["files"].keys() == {
        "bids",
        "auctions",
    }
    (tmp_path / "auctions" / "part-1.json").write_text('{"auction": 2, "id": 2, "ts": 2}\n')
    assert not finished(parse_stages_run_spec(doc))
    ((field, reason),) = _errors(doc)
    assert field == "checkpoint"
    assert reason.startswith(f"the inputs of {doc['checkpoint']} ended at ")
    assert reason.endswith(
        "every window closed, and more data would all be late; start afresh with a new "
        f"checkpoint directory (or remove {doc['checkpoint']})"
    )


def test_an_interrupted_ending_asks_for_end_input(tmp_path):
    doc = _doc(tmp_path)
    control = tmp_path / "checkpoint" / ck.CONTROL_DIR
    control.mkdir(parents=True)
    (control / ck.END_FILES[0]).write_text("{}\n")
    assert _errors(doc) == [
        (
            "checkpoint",
            f"an earlier run began ending the inputs of {doc['checkpoint']} and was stopped: run again with "
            f"--end-input to finish it",
        )
    ]
    assert _errors(doc, end_input=True) == []


def test_a_run_checks_each_input_source_before_spark_starts(tmp_path):
    doc = _doc(tmp_path)
    doc["inputs"]["auctions"]["source"]["path"] = str(tmp_path / "nowhere")
    errors = run_errors(parse_stages_run_spec(doc))
    assert [(e.field, e.reason) for e in errors] == [
        ("inputs.auctions.source.path", f"no such file or directory: {tmp_path / 'nowhere'}")
    ]


@pytest.mark.parametrize("older_layout, fields", [(True, ["spark.bucket_layout"]), (False, ["spark.buckets"])])
def test_a_stage_checkpoint_s_buckets_and_their_layout_are_refused_as_a_single_stage_one_s(
    tmp_path, older_layout, fields
):
    # one home for a changed field's reason (``checkpoint.changed_fields``): the same lines as ``panes run``'s.
    # Run with 4 shuffle partitions (so 4 buckets) on a checkpoint that kept 2: a checkpoint of an older
    # layout cannot go on with any number, so no line says which one would; else the line names the 2.
    from panes.spec import parse_run_spec

    drop = "spark.bucket_layout" if older_layout else None
    doc = _doc(tmp_path)
    path = doc["checkpoint"]
    meaning = stages_meaning(parse_stages_run_spec(doc))
    ck.record(path, {k: v for k, v in meaning.items() if k != drop})
    more = {**copy.deepcopy(doc), "spark": {"shuffle_partitions": 4}}
    single = str(tmp_path / "single")
    run = {"source": doc["inputs"]["bids"]["source"], "event_time": "ts", "key": ["auction"], "checkpoint": single}
    run |= {"window": {"tumbling": {"size": "10 s"}}, "aggregates": {"num": {"count": "*"}}, "sink": doc["sink"]}
    old = {k: v for k, v in ck.state_meaning(parse_run_spec(run), "stateful").items() if k != drop}
    ck.record(single, old)
    now = ck.state_meaning(parse_run_spec({**run, "spark": {"shuffle_partitions": 4}}), "stateful")
    assert [(e.field, e.reason.replace(single, path)) for e in ck.check(single, now, False)] == _errors(more)
    assert [f for f, _ in _errors(more)] == fields
    start = "numbers its hash buckets 0..n-1" if older_layout else "keeps its state in 2 hash buckets, not 4"
    assert _errors(more)[0][1].startswith(f"checkpoint {path} {start}")
