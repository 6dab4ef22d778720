"""A chained pipeline's result at the end equals the batch answer, in every accumulation mode of
either stage, for random records, windows (tumbling, and hopping: inherited windows must keep each
pane in its own window), triggers, lateness and batchings (Streaming 102's point about chained
pipelines): per window, the total of the per-key sums over the records the first stage accepted
(not dead-lettered), and with restating upstream panes (accumulating, retracting) also the largest
per-key sum and the number of keys. Nothing is late at the second stage."""

from __future__ import annotations

from collections import defaultdict

from hypothesis import given, settings
from hypothesis import strategies as st

from panes.core.time import format_instant
from panes.stage_scenario import load_stage_scenario, replay_stages_core

#: the second stage's triggers keep a window open until it expires (one that finishes, such as
#: after_watermark without late firings, closes it: later panes are late there, as in one stage)
TRIGGERS = [
    None,
    {"after_watermark": {"early": {"count": 1}, "late": {"count": 1}}},
    {"repeatedly": {"after_count": 2}},
    {"after_watermark": {"late": {"count": 1}}},
]
FIRST_TRIGGERS = TRIGGERS + [{"after_watermark": {"early": {"count": 2}}}]
MODES = ["accumulating", "discarding", "retracting"]
WINDOWS = [({"tumbling": {"size": 5000}}, 5000, 5000), ({"hopping": {"size": 6000, "hop": 2000}}, 6000, 2000)]


@st.composite
def chains(draw):
    n = draw(st.integers(1, 20))
    records = [
        {"k": draw(st.sampled_from("abc")), "t": draw(st.integers(0, 30_000)), "v": draw(st.integers(-5, 20))}
        for _ in range(n)
    ]
    window = draw(st.sampled_from(WINDOWS))
    lateness = draw(st.sampled_from([0, 3000, 8000]))
    up, down = draw(st.sampled_from(MODES)), draw(st.sampled_from(MODES))
    timeline, i = [], 0
    while i < n:
        size = draw(st.integers(1, 4))
        step: dict = {"add": records[i : i + size]}
        if draw(st.booleans()):
            step["watermark"] = draw(st.integers(0, 35_000))
        timeline.append(step)
        i += size
    timeline.append({"end": True})
    aggregates: dict = {"total": {"sum": "s"}}
    if not (down == "discarding" and up != "discarding"):  # a discarding stage over restatements sums
        aggregates.update(largest={"max": "s"}, keys={"count": "*"})
    pipeline = {
        "inputs": {"events": {"event_time": "t", "watermark": {"punctuation": True}}},
        "stages": [
            {
                "name": "per_key",
                "from": "events",
                "key": "k",
                "window": window[0],
                "allowed_lateness": lateness,
                "trigger": draw(st.sampled_from(FIRST_TRIGGERS)),
                "accumulation": up,
                "aggregates": {"s": {"sum": "v"}},
            },
            {
                "name": "total",
                "from": "per_key",
                "allowed_lateness": lateness,
                "trigger": draw(st.sampled_from(TRIGGERS)),
                "accumulation": down,
                "aggregates": aggregates,
            },
        ],
    }
    return {"pipeline": pipeline, "timeline": timeline}, window, up, down


def batch_answer(records: list[dict], missed: list[tuple[dict, tuple]], size: int, hop: int) -> dict:
    """Per window: the total, largest and number of the per-key sums, over the records in it that
    were not dead-lettered for it (a late record names the windows it missed)."""
    sums: dict = defaultdict(lambda: defaultdict(int))
    skipped = list(missed)
    for r in records:
        last = r["t"] - r["t"] % hop
        for s in range(last, r["t"] - size, -hop):
            w = (format_instant(s), format_instant(s + size))
            if (r, w) in skipped:
                skipped.remove((r, w))
                continue
            sums[w][r["k"]] += r["v"]
    return {w: (sum(c.values()), max(c.values()), len(c)) for w, c in sums.items()}


def final_answer(panes: list[dict], mode: str) -> dict:
    out: dict = {}
    if mode == "discarding":
        totals: dict = defaultdict(int)
        for p in panes:
            totals[(p["window_start"], p["window_end"])] += p["total"] or 0
        return {w: (t, None, None) for w, t in totals.items()}
    for p in panes:  # retracting: the last non-retraction row is the net answer
        if not p["retraction"]:
            out[(p["window_start"], p["window_end"])] = (p["total"], p.get("largest"), p.get("keys"))
    return out


@settings(max_examples=150, deadline=None)
@given(chains())
def test_chained_result_at_the_end_equals_the_batch_answer(case):
    doc, (_, size, hop), up, down = case
    result = replay_stages_core(load_stage_scenario(doc))
    assert {d["stage"] for d in result.dead_letters} <= {"per_key"}  # nothing is late downstream
    missed = [(d["record"], (w["start"], w["end"])) for d in result.dead_letters for w in d["windows"]]
    records = [r for s in doc["timeline"] for r in s.get("add", [])]
    expected = batch_answer(records, missed, size, hop)
    got = final_answer(result.panes, down)
    if down == "discarding" or up == "discarding":
        # discarding panes add: the totals are right; a largest or a count of deltas is not the batch's
        got = {w: v[0] for w, v in got.items() if v[0] != 0 or w in expected}
        assert got == {w: v[0] for w, v in expected.items() if w in got}
        assert set(expected) <= set(got)
    else:
        assert got == expected
