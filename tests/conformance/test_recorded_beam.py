"""The bounded slice of the differential check against Beam Python that runs without Beam: panes'
core against Beam Python's recorded panes for 30 generated scenarios
(beam_python_2_77_recorded.json, written by record_beam_fixtures.py), through the same comparison
and the same list of known differences (KNOWN_DIFFERENCES.md) as ``make conformance``."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from tests.conformance import beam_diff as bd

FIXTURES = json.loads((Path(__file__).resolve().parent / "beam_python_2_77_recorded.json").read_text())["scenarios"]


@pytest.mark.parametrize("entry", FIXTURES, ids=[e["scenario"]["id"] for e in FIXTURES])
def test_panes_agrees_with_recorded_beam_python_up_to_known_differences(entry):
    sc, beam = entry["scenario"], entry["beam"]
    outcome = bd.compare(sc, bd.run_panes(sc), beam)
    assert outcome.status == "ok"
    assert [bd.diff_text(d) for d in outcome.unexplained] == []


def test_the_recorded_slice_is_varied_and_compares_panes():
    kinds = {(e["scenario"]["window"]["kind"], e["scenario"]["trigger"][0]) for e in FIXTURES}
    assert len(FIXTURES) == 30 and len(kinds) >= 15
    # most Beam panes are matched pane for pane, not accepted as a whole window
    compared = 0
    for e in FIXTURES:
        outcome = bd.compare(e["scenario"], bd.run_panes(e["scenario"]), e["beam"])
        accepted_windows = {(d.key, d.start, d.end) for d in outcome.diffs if d.what in ("missing_in_beam", "window")}
        compared += sum((b["key"], b["start"], b["end"]) not in accepted_windows for b in e["beam"]["panes"])
    assert compared >= 100


@pytest.mark.parametrize("mutation", ["value", "index", "timing", "drop"])
def test_the_check_catches_a_changed_pane(mutation):
    """Not vacuous: one pane of panes' output changed, in a scenario where Beam emitted that window
    in full, is an unexplained difference."""
    caught = 0
    for e in FIXTURES[:10]:
        sc = e["scenario"]
        result = bd.run_panes(sc)
        beam_windows = {(b["key"], b["start"], b["end"]) for b in e["beam"]["panes"]}
        target = next(
            (
                i
                for i, p in enumerate(result["panes"])
                if (p["key"], p["start"], p["end"]) in beam_windows and p["step"] != bd.gc_step(sc, p["end"])
            ),
            None,
        )
        if target is None:
            continue
        mutated = copy.deepcopy(result)
        p = mutated["panes"][target]
        if mutation == "value":
            p["values"] = p["values"] + [999]
            p["sum"] = (p["sum"] or 0) + 999
        elif mutation == "index":
            p["index"] += 1
        elif mutation == "timing":
            p["timing"] = "LATE" if p["timing"] == "EARLY" else "EARLY"
        else:
            del mutated["panes"][target]
        caught += bool(bd.compare(sc, mutated, e["beam"]).unexplained)
    assert caught >= 8
