"""The seed documents' examples, replayed through the pure core (``panes.replay.replay``).

Every expected pane and dead letter is written out literally from the semantics the seeds describe
(Atlas Stream Processing's tables, Streaming 102's Figure 6, Benthos' traffic-light example), not
computed by the code under test. Besides the final output, some tests check *when* a pane comes
out: the step of the timeline after which it is first emitted.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from panes.replay import replay
from panes.scenario import Scenario, load_scenario, replay_core

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"


def pane(start, end, *, timing="ON_TIME", index=0, last=True, retraction=False, key=None, **values):
    """A pane as ``panes replay`` prints it. ``key`` is a mapping of key columns."""
    out = dict(key or {})
    out.update(window_start=start, window_end=end, timing=timing, pane_index=index, is_last=last, retraction=retraction)
    out.update(values)
    return out


def late(record, watermark, *windows):
    """A dead letter for a record that arrived after its windows closed."""
    wins = [{"start": s, "end": e} for s, e in windows]
    return {"reason": "late", "record": record, "watermark": watermark, "window": wins[0], "windows": wins}


def emitted_by_step(path: Path) -> list[list[dict]]:
    """The panes emitted by each step of the scenario's timeline (prefix replays)."""
    sc = load_scenario(path)
    out, before = [], 0
    for k in range(1, len(sc.timeline) + 1):
        panes = replay_core(Scenario(sc.pipeline, sc.timeline[:k], sc.raw)).panes
        out.append(panes[before:])
        before = len(panes)
    return out


def T(hms: str, day: str = "2024-01-01") -> str:
    """An instant as panes formats it: 'HH:MM:SS(.mmm)' on ``day``, UTC."""
    if "." not in hms:
        hms += ".000"
    return f"{day}T{hms}Z"


# -- Atlas: allowed lateness ---------------------------------------------------------------------


def test_atlas_allowed_lateness_panes_and_dead_letters():
    r = replay(SCENARIOS / "atlas_allowed_lateness.yaml")
    assert r.panes == [
        # 7 records: 12:00, 12:01, 12:03, 12:02, 12:04, 12:01 and the 12:04 that arrives when
        # the watermark is 12:06 (12:00-12:05 is still open: 12:06 - 2 minutes < 12:05);
        # event-time order, ties in arrival order (ids 2 then 6, 5 then 9)
        pane(T("12:00:00"), T("12:05:00"), n=7, ids=[1, 2, 6, 4, 3, 5, 9]),
        pane(T("12:05:00"), T("12:10:00"), n=3, ids=[7, 8, 10]),
    ]
    assert r.dead_letters == [
        late({"id": 11, "t": "2024-01-01T12:03:00Z"}, T("12:07:00"), (T("12:00:00"), T("12:05:00"))),
    ]


def test_atlas_allowed_lateness_first_window_closes_at_watermark_1207():
    steps = emitted_by_step(SCENARIOS / "atlas_allowed_lateness.yaml")
    # the watermark goes 12:00 .. 12:04, 12:05, 12:06, 12:06: nothing closes
    assert [len(s) for s in steps[:9]] == [0] * 9
    # the 12:07 record (step 10) moves the watermark to 12:07 = 12:05 + 2 minutes
    assert [(p["window_start"], p["n"]) for p in steps[9]] == [(T("12:00:00"), 7)]
    assert steps[10] == []  # the late record changes nothing
    assert [(p["window_start"], p["n"]) for p in steps[11]] == [(T("12:05:00"), 3)]


# -- Atlas: watermarks (the existing scenario) -----------------------------------------------------


def test_atlas_watermark_table():
    r = replay(SCENARIOS / "atlas_watermark.yaml")
    assert r.panes == [
        pane(
            T("12:00:00"),
            T("12:05:00"),
            n=7,
            times=[
                "2024-01-01T12:00:00Z",
                "2024-01-01T12:00:00Z",
                "2024-01-01T12:01:00Z",
                "2024-01-01T12:01:00Z",
                "2024-01-01T12:02:00Z",
                "2024-01-01T12:03:00Z",
                "2024-01-01T12:04:00Z",
            ],
        ),
        pane(
            T("12:05:00"),
            T("12:10:00"),
            n=3,
            times=["2024-01-01T12:05:00Z", "2024-01-01T12:06:00Z", "2024-01-01T12:06:00Z"],
        ),
    ]
    assert r.dead_letters == []
    steps = emitted_by_step(SCENARIOS / "atlas_watermark.yaml")
    # 12:00-12:05 closes when the 12:05 record (step 8, processing time 12:07) arrives
    assert [len(s) for s in steps] == [0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1]


# -- Streaming 102, Figure 6 -----------------------------------------------------------------------

TEAM = {"team": "TeamX"}


def test_streaming102_perfect_watermark():
    r = replay(SCENARIOS / "streaming102_perfect.yaml")
    assert r.panes == [
        pane(T("12:00:00"), T("12:02:00"), key=TEAM, score=14),  # 5 + 9
        pane(T("12:02:00"), T("12:04:00"), key=TEAM, score=22),  # 7 + 3 + 4 + 8
        pane(T("12:04:00"), T("12:06:00"), key=TEAM, score=3),
        pane(T("12:06:00"), T("12:08:00"), key=TEAM, score=12),  # 3 + 8 + 1
    ]
    assert sum(p["score"] for p in r.panes) == 51
    assert r.dead_letters == []


def test_streaming102_perfect_watermark_fires_each_window_at_its_watermark_step():
    steps = emitted_by_step(SCENARIOS / "streaming102_perfect.yaml")
    fired = {i: [p["window_start"] for p in s] for i, s in enumerate(steps) if s}
    # steps: 0 watermark 12:00, 1-9 records, 10 watermark 12:02, 11 record, 12 watermark 12:04,
    # 13 watermark 12:06, 14 watermark 12:08, 15 end
    assert fired == {10: [T("12:00:00")], 12: [T("12:02:00")], 13: [T("12:04:00")], 14: [T("12:06:00")]}


def test_streaming102_heuristic_watermark():
    r = replay(SCENARIOS / "streaming102_heuristic.yaml")
    assert r.panes == [
        pane(T("12:00:00"), T("12:02:00"), key=TEAM, score=5),  # fired before the 9 arrived
        pane(T("12:02:00"), T("12:04:00"), key=TEAM, score=22),
        pane(T("12:04:00"), T("12:06:00"), key=TEAM, score=3),
        pane(T("12:06:00"), T("12:08:00"), key=TEAM, score=12),
    ]
    assert r.dead_letters == [
        late({"team": "TeamX", "score": 9, "t": "2024-01-01T12:01:26Z"}, T("12:06:00"), (T("12:00:00"), T("12:02:00"))),
    ]


def test_streaming102_heuristic_watermark_firing_steps():
    steps = emitted_by_step(SCENARIOS / "streaming102_heuristic.yaml")
    fired = {i: [p["window_start"] for p in s] for i, s in enumerate(steps) if s}
    # 3: watermark 12:02 (pt 12:06), 8: watermark 12:04 (pt 12:07:30),
    # 10: watermark 12:06 (pt 12:07:40), 14: watermark 12:08:30 (pt 12:09:30)
    assert fired == {3: [T("12:00:00")], 8: [T("12:02:00")], 10: [T("12:04:00")], 14: [T("12:06:00")]}


# -- Benthos traffic lights ------------------------------------------------------------------------

LIGHT_A = {"traffic_light": "cbf2eafc-806e-4067-9211-97be7e42cee3"}
LIGHT_B = {"traffic_light": "7f3c1d52-2b9e-4a61-8d0e-3c5a9b7e1f40"}


def test_benthos_traffic_lights():
    r = replay(SCENARIOS / "benthos_traffic.yaml")
    day = "2021-08-07"
    assert r.panes == [
        # panes that close together come out by window end, start, then key ("7f3c..." < "cbf2...")
        # B 09h: AB1C DEF, LM4N OPQ; 2 + 4 passengers
        pane(T("09:00:00", day), T("10:00:00", day), key=LIGHT_B, total_cars=2, passengers=6),
        # A 09h: XY9Z QRS, AB1C DEF (twice), GH7J KLM; 1 + 3 + 2 + 5
        pane(T("09:00:00", day), T("10:00:00", day), key=LIGHT_A, total_cars=3, passengers=11),
        # B 10h: LM4N OPQ (twice), CD2E FGH; 1 + 2 + 3
        pane(T("10:00:00", day), T("11:00:00", day), key=LIGHT_B, total_cars=2, passengers=6),
        # A 10h: AB1C DEF, TT5U VWX, XY9Z QRS; 3 + 4 + 2
        pane(T("10:00:00", day), T("11:00:00", day), key=LIGHT_A, total_cars=3, passengers=9),
    ]
    assert r.dead_letters == []
    steps = emitted_by_step(SCENARIOS / "benthos_traffic.yaml")
    # the 09:00 hour closes when the 10:00:00 record (step 5) moves the watermark to 10:00
    assert [len(s) for s in steps] == [0, 0, 0, 0, 2, 0, 0, 0, 2]


# -- Atlas hopping windows -------------------------------------------------------------------------


def test_atlas_hopping_overlap_each_record_in_four_windows():
    r = replay(SCENARIOS / "atlas_hopping_overlap.yaml")
    assert r.panes == [
        pane(T("11:59:45"), T("12:00:05"), n=1, ids=["a"]),
        pane(T("11:59:50"), T("12:00:10"), n=2, ids=["a", "b"]),
        pane(T("11:59:55"), T("12:00:15"), n=3, ids=["a", "b", "c"]),
        pane(T("12:00:00"), T("12:00:20"), n=3, ids=["a", "b", "c"]),
        pane(T("12:00:05"), T("12:00:25"), n=3, ids=["b", "c", "d"]),
        pane(T("12:00:10"), T("12:00:30"), n=2, ids=["c", "d"]),
        pane(T("12:00:15"), T("12:00:35"), n=1, ids=["d"]),
        pane(T("12:00:20"), T("12:00:40"), n=1, ids=["d"]),
    ]
    for rec in "abcd":
        assert sum(rec in p["ids"] for p in r.panes) == 4
    assert r.dead_letters == []
    assert r.metrics["rows_in_gap"] == 0
    steps = emitted_by_step(SCENARIOS / "atlas_hopping_overlap.yaml")
    assert [[p["window_end"] for p in s] for s in steps] == [
        [],
        [T("12:00:05")],  # watermark 12:00:07
        [T("12:00:10")],  # watermark 12:00:13
        [T("12:00:15"), T("12:00:20")],  # watermark 12:00:21
        [T("12:00:25"), T("12:00:30"), T("12:00:35"), T("12:00:40")],  # end
    ]


def test_atlas_hopping_gaps_records_in_no_window():
    r = replay(SCENARIOS / "atlas_hopping_gaps.yaml")
    assert r.panes == [
        pane(T("12:00:00"), T("12:00:03"), n=1, ids=[1]),
        pane(T("12:00:05"), T("12:00:08"), n=2, ids=[4, 5]),
        pane(T("12:00:10"), T("12:00:13"), n=1, ids=[8]),
    ]
    # 12:00:03, 12:00:04.999, 12:00:08, 12:00:09 fall in gaps: not processed, not dead letters
    assert r.dead_letters == []
    assert r.metrics["rows_in_gap"] == 4
    assert r.metrics["rows"] == 8


# -- sessions --------------------------------------------------------------------------------------


def test_keyed_sessions_merge_out_of_order():
    r = replay(SCENARIOS / "keyed_sessions.yaml")
    A, B = {"user": "a"}, {"user": "b"}
    assert r.panes == [
        # closed by the watermark 12:00:40 (a record at 12:01:10, max delay 30 s)
        pane(T("12:00:05"), T("12:00:24"), key=B, n=2, total=40, ids=["b5", "b14"]),
        pane(T("12:00:00"), T("12:00:35"), key=A, n=4, total=10, ids=["a0", "a8", "a17", "a25"]),
        pane(T("12:00:30"), T("12:00:40"), key=B, n=1, total=20, ids=["b30"]),
        # closed at the end of the input
        pane(T("12:00:35"), T("12:00:45"), key=A, n=1, total=5, ids=["a35"]),
        pane(T("12:00:40"), T("12:00:50"), key=B, n=1, total=40, ids=["b40"]),
        pane(T("12:01:10"), T("12:01:20"), key=A, n=1, total=6, ids=["a70"]),
    ]
    assert r.dead_letters == [
        late(
            {"user": "a", "id": "a3", "v": 7, "t": "2024-01-01T12:00:03Z"},
            T("12:00:40"),
            (T("12:00:03"), T("12:00:13")),
        ),
    ]
    steps = emitted_by_step(SCENARIOS / "keyed_sessions.yaml")
    assert [len(s) for s in steps] == [0, 0, 0, 0, 3, 0, 3]


# -- malformed records -----------------------------------------------------------------------------


def test_malformed_records_go_to_dead_letters_with_the_reason():
    r = replay(SCENARIOS / "malformed_records.yaml")
    assert r.panes == [
        # a: v 1 at 00:00:01 and v 8 at epoch ms 1704067207000 (00:00:07)
        pane(T("00:00:00"), T("00:00:10"), key={"k": "a"}, n=2, total=9),
        # b: one record with a null value: counted by count("*"), ignored by sum
        pane(T("00:00:00"), T("00:00:10"), key={"k": "b"}, n=1, total=None),
    ]
    got = [(d["reason"], d["record"]) for d in r.dead_letters]
    assert got == [
        ("missing_event_time", {"k": "a", "v": 2}),
        ("invalid_event_time", {"k": "a", "v": 3, "t": "yesterday"}),
        ("missing_key", {"v": 4, "t": "2024-01-01T00:00:02Z"}),
        ("invalid_value", {"k": "a", "v": "five", "t": "2024-01-01T00:00:03Z"}),
        ("missing_key", {"k": None, "v": 6, "t": "2024-01-01T00:00:04Z"}),
        ("invalid_value", {"k": "a", "v": True, "t": "2024-01-01T00:00:05Z"}),
        ("malformed", {"value": "just a string"}),
        ("missing_event_time", {"k": "a", "v": 9, "t": None}),
    ]
    for d in r.dead_letters:
        # malformed records were never windowed: no watermark, no window
        assert "watermark" not in d and "window" not in d and "windows" not in d
        assert d["detail"]
    details = {d["reason"]: d["detail"] for d in r.dead_letters}
    assert "'t'" in details["missing_event_time"]
    assert "yesterday" in details["invalid_event_time"]
    assert "k" in details["missing_key"]
    assert "v" in details["invalid_value"]


# -- every scenario loads, validates and replays ---------------------------------------------------


@pytest.mark.parametrize("path", sorted(SCENARIOS.glob("*.yaml")), ids=lambda p: p.stem)
def test_every_scenario_replays_on_the_core(path):
    r = replay(path)
    assert r.panes, f"{path.name} emits no pane"
    for p in r.panes:
        assert p["timing"] in ("EARLY", "ON_TIME", "LATE")
    keys = set(r.panes[0]) - {"window_start", "window_end", "timing", "pane_index", "is_last", "retraction"}
    assert all(
        set(p) - {"window_start", "window_end", "timing", "pane_index", "is_last", "retraction"} == keys
        for p in r.panes
    )
