"""Properties of triggers and accumulation modes, for random inputs, triggers and batchings
(Streaming 102, Table 1's relations):

(a) the last accumulating pane of each window equals the batch result over the records the stream
    accepted (those not dead-lettered);
(b) discarding panes sum to it (sum and count);
(c) retracting output, retraction rows negated, nets to it;
and nothing is lost: every record is in its window's result or in the dead letters.
"""

from __future__ import annotations

import json
from collections import defaultdict

from hypothesis import given, settings
from hypothesis import strategies as st

from panes.scenario import load_scenario, replay_core

TRIGGERS = [
    None,
    {"after_watermark": {}},
    {"after_watermark": {"early": {"count": 2}}},
    {"after_watermark": {"early": {"every": 1000}, "late": {"count": 1}}},
    {"after_watermark": {"late": {"every": 2000}}},
    {"repeatedly": {"after_count": 3}},
    {"after_count": 2},
    {"repeatedly": {"after_any": [{"after_count": 2}, {"after_processing_time": 1500}]}},
    {"repeatedly": {"after_all": [{"after_count": 2}, {"after_processing_time": 500}]}},
    {"after_each": [{"after_count": 2}, {"repeatedly": {"after_count": 1}}]},
    {"or_finally": {"trigger": {"repeatedly": {"after_count": 1}}, "finally": {"after_count": 4}}},
    {"repeatedly": {"every": 1000}},
    "beam_default",
]


@st.composite
def scenarios(draw):
    n = draw(st.integers(1, 25))
    records = [
        {"k": draw(st.sampled_from(["a", "b"])), "t": draw(st.integers(0, 30_000)), "v": draw(st.integers(-5, 20))}
        for _ in range(n)
    ]
    window = draw(st.sampled_from([{"tumbling": {"size": 5000}}, {"tumbling": {"size": 3000, "offset": 1000}}]))
    trigger = draw(st.sampled_from(TRIGGERS))
    mode = draw(st.sampled_from(["accumulating", "discarding", "retracting"]))
    timeline = []
    clock = 0
    i = 0
    while i < n:
        size = draw(st.integers(1, 4))
        clock += draw(st.integers(0, 1500))
        timeline.append({"processing_time": clock, "add": records[i : i + size]})
        i += size
        if draw(st.booleans()):
            clock += draw(st.integers(0, 2500))
            timeline.append({"processing_time": clock})
    timeline.append({"end": True})
    pipeline = {
        "event_time": "t",
        "key": "k",
        "window": window,
        "watermark": {"max_delay": draw(st.sampled_from([0, 2000, 10_000]))},
        "allowed_lateness": draw(st.sampled_from([0, 3000])),
        "accumulation": mode,
        "aggregates": {"s": {"sum": "v"}, "n": {"count": "*"}},
    }
    if trigger is not None:
        pipeline["trigger"] = trigger
    return {"pipeline": pipeline, "timeline": timeline}, records


def _window_of(t, window):
    ((kind, o),) = window.items()
    size, off = o["size"], o.get("offset", 0)
    start = t - (t - off) % size
    return start


@settings(max_examples=150, deadline=None)
@given(scenarios())
def test_panes_relate_to_the_batch_result(case):
    doc, records = case
    res = replay_core(load_scenario(doc))
    dead = [json.dumps(d["record"], sort_keys=True) for d in res.dead_letters]
    # a record is late, or its window's trigger had finished: that window emitted its last pane
    closed = {(p["k"], p["window_start"]) for p in res.panes if p["is_last"]}
    for d in res.dead_letters:
        assert d["reason"] in ("late", "window_closed")
        if d["reason"] == "window_closed":
            assert all((d["record"]["k"], w["start"]) in closed for w in d["windows"])
    accepted = list(records)
    for d in dead:
        accepted.remove(next(r for r in accepted if json.dumps(r, sort_keys=True) == d))
    want = defaultdict(lambda: [0, 0])
    from panes.core.time import format_instant

    for r in accepted:
        s = _window_of(r["t"], doc["pipeline"]["window"])
        w = want[(r["k"], format_instant(s))]
        w[0] += r["v"]
        w[1] += 1
    mode = doc["pipeline"]["accumulation"]
    got_last: dict = {}
    net = defaultdict(lambda: [0, 0])
    for p in res.panes:
        key = (p["k"], p["window_start"])
        sign = -1 if p["retraction"] else 1
        net[key][0] += sign * (p["s"] or 0)
        net[key][1] += sign * p["n"]
        if not p["retraction"]:
            got_last[key] = [p["s"] or 0, p["n"]]
    want = {k: v for k, v in want.items()}
    if mode == "discarding":
        assert {k: v for k, v in net.items() if v != [0, 0]} == {k: v for k, v in want.items() if v != [0, 0]}
    else:
        # (a) the last pane is the whole window; (c) retractions net to it
        assert {k: v for k, v in got_last.items() if v[1]} == want
        if mode == "retracting":
            assert {k: v for k, v in net.items() if v[1]} == want
    # pane indexes count up from 0 per window, retractions restate the previous index
    seen = defaultdict(int)
    for p in res.panes:
        key = (p["k"], p["window_start"])
        if p["retraction"]:
            assert p["pane_index"] == seen[key] - 1
        else:
            assert p["pane_index"] == seen[key]
            seen[key] += 1
