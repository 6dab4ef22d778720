"""The seed documents' trigger, session, sliding and idleness examples, through `panes replay`
(core engine; tests/spark/test_replay_parity.py runs the same scenarios on Spark)."""

import random
from pathlib import Path

import pytest

from panes.core.engine import Engine
from panes.core.records import parse_records
from panes.scenario import load_scenario, replay_core

SCEN = Path(__file__).resolve().parents[1] / "scenarios"


def _panes(name):
    return replay_core(load_scenario(SCEN / f"{name}.yaml"))


def _w(p):
    return p["window_start"][11:19]


def _by_window(panes, field="score"):
    out = {}
    for p in panes:
        out.setdefault(_w(p), []).append((p["timing"], p["pane_index"], p["retraction"], p[field]))
    return out


# -- Streaming 102: early / on-time / late firings in the three accumulation modes ------------------


def test_early_late_accumulating_table1():
    got = _by_window(_panes("streaming102_early_late_accumulating").panes)
    # window [12:02, 12:04): panes 7, 14, 22 (Table 1, accumulating)
    assert got["12:02:00"] == [("EARLY", 0, False, 7), ("EARLY", 1, False, 14), ("ON_TIME", 2, False, 22)]
    # window [12:00, 12:02): the 9 arrives late and corrects 5 to 14
    assert got["12:00:00"] == [("EARLY", 0, False, 5), ("ON_TIME", 1, False, 5), ("LATE", 2, False, 14)]
    finals = {w: ps[-1][3] for w, ps in got.items()}
    assert finals == {"12:00:00": 14, "12:02:00": 22, "12:04:00": 3, "12:06:00": 12}
    assert sum(finals.values()) == 51


def test_early_late_discarding_panes_sum_to_the_totals():
    got = _by_window(_panes("streaming102_early_late_discarding").panes)
    assert got["12:02:00"] == [("EARLY", 0, False, 7), ("EARLY", 1, False, 7), ("ON_TIME", 2, False, 8)]
    totals = {w: sum(v or 0 for *_, v in ps) for w, ps in got.items()}
    assert totals == {"12:00:00": 14, "12:02:00": 22, "12:04:00": 3, "12:06:00": 12}


def test_early_late_retracting_nets_to_the_totals():
    got = _by_window(_panes("streaming102_early_late_retracting").panes)
    # Table 1, accumulating & retracting: 7; -7, 14; -14, 22
    assert [(r, v) for _, _, r, v in got["12:02:00"]] == [(False, 7), (True, 7), (False, 14), (True, 14), (False, 22)]
    net = {w: sum(-v if r else v for _, _, r, v in ps) for w, ps in got.items()}
    assert net == {"12:00:00": 14, "12:02:00": 22, "12:04:00": 3, "12:06:00": 12}
    # a retraction restates the pane it retracts (same index and timing)
    assert got["12:00:00"][3:5] == [("ON_TIME", 1, True, 5), ("LATE", 2, False, 14)]


def test_processing_time_windows_by_triggers():
    # Listing 9: global window, repeated discarding firings every 2 minutes of processing time; the
    # empty on-time pane at the end of input sums to 0 (Sum's identity)
    res = _panes("streaming102_processing_time_triggers")
    assert [(p["timing"], p["score"]) for p in res.panes] == [
        ("EARLY", 12),
        ("EARLY", 21),
        ("EARLY", 18),
        ("ON_TIME", 0),
    ]


def test_processing_time_windows_by_ingress_time():
    # Listing 10: ingress time as event time, default trigger: the same 12, 21, 18
    res = _panes("streaming102_ingress_time")
    assert [(_w(p), p["window_end"][11:19], p["score"]) for p in res.panes] == [
        ("12:04:00", "12:06:00", 12),
        ("12:06:00", "12:08:00", 21),
        ("12:08:00", "12:10:00", 18),
    ]


# -- sessions that merge, with retractions --------------------------------------------------------


def test_sessions_merge_with_retractions():
    res = _panes("streaming102_sessions_retracting")
    rows = [
        (p["window_start"][11:19], p["window_end"][11:19], p["timing"], p["retraction"], p["score"]) for p in res.panes
    ]
    # the 7's session [12:02:26, 12:03:26) was emitted early; the 4 at 12:03:19 merges it with the
    # 3 at 12:03:39 into [12:02:26, 12:04:39): a retraction of the 7, then the merged pane
    i = rows.index(("12:02:26", "12:03:26", "EARLY", True, 7))
    assert rows[i + 1] == ("12:02:26", "12:04:39", "EARLY", False, 14)
    assert ("12:02:26", "12:04:39", "ON_TIME", False, 22) in rows
    net = {}
    for s, e, _, r, v in rows:
        net[(s, e)] = net.get((s, e), 0) + (-v if r else v)
    assert {k: v for k, v in net.items() if v} == {
        ("12:00:26", "12:01:26"): 5,
        ("12:01:26", "12:02:26"): 9,
        ("12:02:26", "12:04:39"): 22,
        ("12:05:01", "12:06:01"): 3,
        ("12:06:39", "12:08:46"): 12,
    }


@pytest.mark.parametrize("mode", ["accumulating", "discarding"])
def test_sessions_merge_without_retractions(mode):
    res = _panes(f"streaming102_sessions_{mode}")
    assert not any(p["retraction"] for p in res.panes)
    merged = [p for p in res.panes if p["window_start"][11:19] == "12:02:26" and p["window_end"][11:19] == "12:04:39"]
    vals = [p["score"] for p in merged]
    assert vals == ([14, 22] if mode == "accumulating" else [7, 8])


# -- KIP-450 sliding windows: the same windows in any arrival order --------------------------------


def _sliding_windows(order, D=10):
    doc = {
        "pipeline": {
            "event_time": "t",
            "key": "k",
            "window": {"sliding": {"time_difference": D}},
            "watermark": {"max_delay": 1000},
            "aggregates": {"n": {"count": "*"}, "s": {"sum": "t"}},
        },
        "timeline": [{"add": [{"k": "a", "t": t}]} for t in order] + [{"end": True}],
    }
    res = replay_core(load_scenario(doc))
    return sorted((p["window_start"], p["window_end"], p["n"], p["s"]) for p in res.panes)


def test_kip450_in_order_and_shuffled_give_the_same_windows():
    times = [1000, 1005, 1012, 1020, 1020, 1031, 1100]
    want = _sliding_windows(times)
    rnd = random.Random(3)
    for _ in range(5):
        shuffled = times[:]
        rnd.shuffle(shuffled)
        assert _sliding_windows(shuffled) == want
    # both ends inclusive: [t - 10, t] of every record, plus the non-empty [t + 1, t + 11]
    assert ("1970-01-01T00:00:00.995Z", "1970-01-01T00:00:01.005Z", 2, 2005) in want
    assert ("1970-01-01T00:00:01.021Z", "1970-01-01T00:00:01.031Z", 1, 1031) in want
    assert len(want) == len(set((a, b) for a, b, *_ in want))


def test_kip450_with_early_firings_emits_updates_as_panes():
    doc = {
        "pipeline": {
            "event_time": "t",
            "window": {"sliding": {"time_difference": 10}},
            "watermark": {"max_delay": 1000},
            "trigger": {"after_watermark": {"early": {"count": 1}}},
            "aggregates": {"n": {"count": "*"}},
        },
        "timeline": [{"add": [{"t": 1000}]}, {"add": [{"t": 1005}]}, {"end": True}],
    }
    res = replay_core(load_scenario(doc))
    rows = [(p["window_start"][20:23], p["window_end"][20:23], p["timing"], p["pane_index"], p["n"]) for p in res.panes]
    # [990, 1000] early with 1, then [995, 1005] and [1001, 1011] appear; at the end all go ON_TIME
    assert rows[:3] == [("990", "000", "EARLY", 0, 1), ("995", "005", "EARLY", 0, 2), ("001", "011", "EARLY", 0, 1)]
    assert sorted(r for r in rows if r[2] == "ON_TIME") == [
        ("001", "011", "ON_TIME", 1, 1),
        ("990", "000", "ON_TIME", 1, 1),
        ("995", "005", "ON_TIME", 1, 2),
    ]


# -- Atlas idleness table: which step closes which window ------------------------------------------


def test_atlas_idleness_closes_windows_at_the_right_processing_time():
    scenario = load_scenario(SCEN / "atlas_idleness.yaml")
    engine = Engine(scenario.pipeline)
    st = engine.new_state()
    emitted = []
    for step in scenario.timeline:
        pt = step.get("processing_time")
        got = []
        if pt is not None and pt > st.processing_time:
            got += engine.advance(st, None, pt, idle=not step.get("add")).panes
        batch = None
        if "add" in step:
            batch = parse_records(scenario.pipeline, step["add"], st.processing_time).frame
        got += engine.step(st, batch, end=step.get("end", False)).panes
        emitted.append([(p.window_start, p.values[0]) for p in got])
    minute = 60_000
    t0 = 1704110400000  # 2024-01-01T12:00Z
    # steps: 12:00 .. 12:09, then end
    assert emitted[1:4] == [[], [], []]  # idle, but processing time has not passed 12:03 + 1 min
    assert emitted[5] == [(t0, 2)]  # 12:05: the record at 12:05 moves the watermark
    assert emitted[6] == []  # 12:06: idle, timeout not over
    assert emitted[7] == [(t0 + 3 * minute, 1)]  # 12:07: closed by the idleness timeout
    assert st.metrics["rows_late"] == 1  # 12:08: the record for 12:03-12:06 is late


def test_session_gap_from_a_column():
    res = _panes("session_gap_column")
    assert [(p["user"], p["window_start"][14:19], p["window_end"][14:19], p["n"], p["clicks"]) for p in res.panes] == [
        ("b", "00:00", "00:02", 1, 5),
        ("b", "00:03", "00:05", 1, 6),
        ("a", "00:00", "00:10", 2, 3),
        ("a", "00:20", "00:21", 1, 3),
    ]
