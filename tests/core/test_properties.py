"""Properties of the core engine against brute-force definitions, for random records, arrival
orders and batchings (hypothesis). Each test drives ``panes.core.engine.Engine.step`` directly with
pandas batches (``__ts`` int64 ms plus key and value columns), then ends the input.

(a) no lateness (a large max delay): each (key, window) of tumbling and hopping windows (overlapping
    or with gaps) gets exactly one pane, whose sum / count / members equal a brute-force group-by;
(b) max delay 0 and any arrival order: nothing is lost (every record is in its windows' panes, in the
    dead letters as late, or in a hopping gap), the panes equal brute force over what was on time,
    and each final pane is LATE exactly when the output watermark (brute force: every live window's
    hold and garbage-collection timer) had passed the window as the watermark move that collects it
    began;
(c) sessions equal a per-key sort-and-split: consecutive records less than a gap apart share a session
    [first, last + gap);
(d) KIP-450 sliding windows equal the definition: [t - D, t] for every record plus every non-empty
    [t + 1, t + 1 + D], deduplicated by bounds, with inclusive ends;
(e) sessions and sliding windows with late data (max delay 0) lose nothing either.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from panes.core.aggregates import Aggregate, CollectList, Count, Sum
from panes.core.engine import TS, Engine
from panes.core.pipeline import Pipeline, WatermarkStrategy
from panes.core.time import END_OF_INPUT, MIN_TIME
from panes.core.windows import Hopping, Sessions, Sliding, Tumbling

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
NO_LATENESS = 10**9
KEYS = ["a", "b", "c"]
AGGS = (Aggregate("s", Sum("v")), Aggregate("n", Count("*")), Aggregate("ids", CollectList("id")))


# -- inputs ---------------------------------------------------------------------------------------


@st.composite
def records(draw, max_size=40, lo=-300, hi=1500, keys=KEYS):
    n = draw(st.integers(0, max_size))
    return [
        {"id": i, "k": draw(st.sampled_from(keys)), "t": draw(st.integers(lo, hi)), "v": draw(st.integers(-10, 10))}
        for i in range(n)
    ]


@st.composite
def arrivals(draw, recs):
    """A random arrival order of the records, cut into batches (possibly empty ones)."""
    order = draw(st.permutations(recs)) if recs else []
    cuts = sorted(draw(st.lists(st.integers(0, len(order)), max_size=6)))
    bounds = [0] + cuts + [len(order)]
    return [order[a:b] for a, b in zip(bounds, bounds[1:])]


tumbling = st.integers(1, 300).flatmap(lambda size: st.builds(Tumbling, st.just(size), st.integers(0, size - 1)))
hopping = st.tuples(st.integers(1, 100), st.integers(1, 100)).flatmap(
    lambda sh: st.builds(Hopping, st.just(sh[0]), st.just(sh[1]), st.integers(0, sh[1] - 1))
)
hopping_with_gaps = (
    st.tuples(st.integers(1, 60), st.integers(1, 60))
    .filter(lambda sh: sh[1] > sh[0])
    .flatmap(lambda sh: st.builds(Hopping, st.just(sh[0]), st.just(sh[1]), st.integers(0, sh[1] - 1)))
)
fixed_windows = st.one_of(tumbling, hopping, hopping_with_gaps)


def frame(batch: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            TS: np.array([r["t"] for r in batch], dtype=np.int64),
            "k": pd.Series([r["k"] for r in batch], dtype=object),
            "v": np.array([r["v"] for r in batch], dtype=np.int64),
            "id": np.array([r["id"] for r in batch], dtype=np.int64),
        }
    )


def run(pipeline: Pipeline, batches: list[list[dict]]):
    """Step the engine once per batch, then end the input. Returns (panes, dead letters, metrics)."""
    eng = Engine(pipeline)
    state = eng.new_state()
    panes, dead = [], []
    for b in batches:
        res = eng.step(state, frame(b))
        panes += res.panes
        dead += res.dead_letters
    res = eng.step(state, None, end=True)
    panes += res.panes
    dead += res.dead_letters
    return panes, dead, state.metrics


def pipeline(window, max_delay=NO_LATENESS, lateness=0) -> Pipeline:
    return Pipeline(
        window=window,
        aggregates=AGGS,
        key=("k",),
        event_time="t",
        watermark=WatermarkStrategy(max_delay=max_delay),
        allowed_lateness=lateness,
    )


# -- brute force ----------------------------------------------------------------------------------


def brute_windows(window, t: int) -> list[tuple[int, int]]:
    """The [start, end) windows of a fixed assigner that contain t, by the definition."""
    if isinstance(window, Tumbling):
        start = window.offset + ((t - window.offset) // window.size) * window.size
        return [(start, start + window.size)]
    out = []
    k = (t - window.offset) // window.hop  # the last window start at or before t
    while window.offset + k * window.hop + window.size > t:
        s = window.offset + k * window.hop
        out.append((s, s + window.size))
        k -= 1
    return sorted(out)


def group(recs, windows_of):
    """{(key, start, end): sorted ids} over (record, window) pairs."""
    out = defaultdict(list)
    for r in recs:
        for w in windows_of(r):
            out[(r["k"], *w)].append(r["id"])
    return {k: sorted(v) for k, v in out.items()}


def pane_table(panes, by_id, late_windows=frozenset()):
    """{(key, start, end): (sum, count, sorted ids)}, asserting one final pane per window: ON_TIME,
    or LATE for the windows in ``late_windows``."""
    out = {}
    for p in panes:
        w = (p.key[0], p.window_start, p.window_end)
        assert w not in out, f"two panes for {w}"
        timing = "LATE" if w in late_windows else "ON_TIME"
        assert (p.timing, p.pane_index, p.is_last, p.retraction) == (timing, 0, True, False), p
        s, n, ids = p.values
        out[w] = (s, n, sorted(ids))
    return out


def expected_table(groups, by_id):
    return {w: (sum(by_id[i]["v"] for i in ids), len(ids), ids) for w, ids in groups.items()}


# -- (a) fixed windows, nothing late ----------------------------------------------------------------


@SETTINGS
@given(data=st.data(), window=fixed_windows)
def test_fixed_windows_equal_brute_force_group_by(data, window):
    recs = data.draw(records())
    batches = data.draw(arrivals(recs))
    panes, dead, metrics = run(pipeline(window), batches)
    by_id = {r["id"]: r for r in recs}
    want = expected_table(group(recs, lambda r: brute_windows(window, r["t"])), by_id)
    assert pane_table(panes, by_id) == want
    assert dead == []
    assert metrics["rows"] == len(recs)
    assert metrics["rows_in_gap"] == sum(1 for r in recs if not brute_windows(window, r["t"]))


def test_brute_force_windows_examples():
    """The brute force itself, on the Atlas examples."""
    assert brute_windows(Hopping(20, 5), 2) == [(-15, 5), (-10, 10), (-5, 15), (0, 20)]
    assert brute_windows(Hopping(3, 5), 3) == []
    assert brute_windows(Hopping(3, 5), 5) == [(5, 8)]
    assert brute_windows(Tumbling(10, 3), -8) == [(-17, -7)]


# -- (b) watermark = max event time: late records go to the dead letters ------------------------------


@SETTINGS
@given(data=st.data(), window=fixed_windows, lateness=st.sampled_from([0, 0, 1, 25, 100]))
def test_nothing_is_lost_with_max_delay_zero(data, window, lateness):
    recs = data.draw(records(max_size=30, lo=0, hi=600))
    batches = data.draw(arrivals(recs))
    panes, dead, metrics = run(pipeline(window, max_delay=0, lateness=lateness), batches)

    # the definition: a batch is checked against the watermark from before it (the largest event
    # time of the earlier batches); a record misses the windows that expired by then. A record holds
    # the output watermark at its window's end - 1 when it came before the watermark passed the end,
    # else at the garbage-collection time end + lateness - 1, as does every live window's GC timer.
    # When a watermark move collects windows, the output watermark is the new watermark held back
    # by every window alive as the move began: a collected window's pane is LATE when that passed
    # its end.
    wm = MIN_TIME
    counted, missed = [], {}
    holds = {}  # live window -> earliest hold or timer
    late_finals = set()  # the windows whose final pane is LATE by that rule
    for b in batches + [None]:
        for r in b or []:
            for w in brute_windows(window, r["t"]):
                if wm >= w[1] + lateness:
                    missed.setdefault(r["id"], (wm, []))[1].append(w)
                else:
                    counted.append((r, w))
                    hold = w[1] - 1 if wm < w[1] else w[1] + lateness - 1
                    kw = (r["k"], *w)
                    holds[kw] = min(holds.get(kw, w[1] + lateness - 1), hold)
        new_wm = END_OF_INPUT if b is None else max([wm] + [r["t"] for r in b])
        output = min([new_wm] + list(holds.values()))
        for kw in [kw for kw in holds if new_wm >= kw[2] + lateness]:
            if output >= kw[2]:
                late_finals.add(kw)
            del holds[kw]
        wm = new_wm

    by_id = {r["id"]: r for r in recs}
    groups = defaultdict(list)
    for r, w in counted:
        groups[(r["k"], *w)].append(r["id"])
    want = expected_table({k: sorted(v) for k, v in groups.items()}, by_id)
    assert pane_table(panes, by_id, late_finals) == want
    if lateness == 0:
        assert not late_finals

    got_dead = {}
    for d in dead:
        assert d.reason == "late"
        i = d.record["id"]
        assert i not in got_dead, "a record is dead-lettered once"
        assert d.record == {"k": by_id[i]["k"], "v": by_id[i]["v"], "id": i}
        got_dead[i] = (d.watermark, sorted(d.windows))
    assert got_dead == {i: (w, sorted(ws)) for i, (w, ws) in missed.items()}
    assert metrics["rows_late"] == len(missed)

    # nothing lost: each record is in all its windows' panes, or was late for some of them,
    # or is in no window at all
    in_panes = defaultdict(set)
    for p in panes:
        for i in p.values[2]:
            in_panes[i].add((p.window_start, p.window_end))
    gap = 0
    for r in recs:
        ws = set(brute_windows(window, r["t"]))
        if not ws:
            gap += 1
            assert r["id"] not in in_panes and r["id"] not in got_dead
            continue
        late_ws = set(missed.get(r["id"], (None, []))[1])
        assert in_panes[r["id"]] | late_ws == ws
        assert not in_panes[r["id"]] & late_ws
    assert metrics["rows_in_gap"] == gap


# -- (c) sessions -----------------------------------------------------------------------------------


def brute_sessions(recs, gap):
    out = {}
    by_key = defaultdict(list)
    for r in recs:
        by_key[r["k"]].append(r)
    for k, rs in by_key.items():
        rs = sorted(rs, key=lambda r: r["t"])
        cur = [rs[0]]
        for r in rs[1:]:
            if r["t"] - cur[-1]["t"] < gap:
                cur.append(r)
            else:
                out[(k, cur[0]["t"], cur[-1]["t"] + gap)] = sorted(x["id"] for x in cur)
                cur = [r]
        out[(k, cur[0]["t"], cur[-1]["t"] + gap)] = sorted(x["id"] for x in cur)
    return out


@SETTINGS
@given(data=st.data(), gap=st.integers(1, 80))
def test_sessions_equal_sort_and_split(data, gap):
    recs = data.draw(records(max_size=30, lo=0, hi=500, keys=["a", "b"]))
    batches = data.draw(arrivals(recs))
    panes, dead, metrics = run(pipeline(Sessions(gap=gap)), batches)
    by_id = {r["id"]: r for r in recs}
    assert pane_table(panes, by_id) == expected_table(brute_sessions(recs, gap), by_id)
    assert dead == []


def test_brute_sessions_examples():
    recs = [{"id": i, "k": "a", "t": t, "v": 0} for i, t in enumerate([0, 25, 8, 17, 35])]
    assert brute_sessions(recs, 10) == {("a", 0, 35): [0, 1, 2, 3], ("a", 35, 45): [4]}


# -- (d) KIP-450 sliding windows ---------------------------------------------------------------------


def brute_sliding(recs, D):
    """{(key, start, last): ids}: left windows of every record, non-empty right windows, by bounds."""
    out = {}
    by_key = defaultdict(list)
    for r in recs:
        by_key[r["k"]].append(r)
    for k, rs in by_key.items():
        bounds = set()
        for r in rs:
            t = r["t"]
            bounds.add((t - D, t))
            if any(t + 1 <= x["t"] <= t + 1 + D for x in rs):
                bounds.add((t + 1, t + 1 + D))
        for s, e in bounds:
            out[(k, s, e)] = sorted(x["id"] for x in rs if s <= x["t"] <= e)
    return out


@SETTINGS
@given(data=st.data(), D=st.integers(1, 50))
def test_sliding_windows_equal_kip450_definition(data, D):
    recs = data.draw(records(max_size=25, lo=0, hi=200, keys=["a", "b"]))
    batches = data.draw(arrivals(recs))
    panes, dead, metrics = run(pipeline(Sliding(D)), batches)
    by_id = {r["id"]: r for r in recs}
    # panes report window_end as the last instant (inclusive)
    assert pane_table(panes, by_id) == expected_table(brute_sliding(recs, D), by_id)
    assert dead == []


def test_brute_sliding_examples():
    """kip450_sliding.yaml's records for key a: 1000, 1005, 1020, 1012 with D = 10."""
    recs = [{"id": i, "k": "a", "t": t, "v": 0} for i, t in enumerate([1000, 1005, 1020, 1012])]
    assert brute_sliding(recs, 10) == {
        ("a", 990, 1000): [0],
        ("a", 995, 1005): [0, 1],
        ("a", 1010, 1020): [2, 3],
        ("a", 1002, 1012): [1, 3],
        ("a", 1001, 1011): [1],
        ("a", 1006, 1016): [3],
        ("a", 1013, 1023): [2],
    }


# -- (e) record-defined windows with late data: nothing is lost --------------------------------------


@SETTINGS
@given(data=st.data(), gap=st.integers(1, 80), lateness=st.sampled_from([0, 5, 50]))
def test_sessions_with_late_data_lose_nothing(data, gap, lateness):
    """max delay 0: every record is in exactly one session pane or dead-lettered as late, and each
    session spans [first member, last member + gap)."""
    recs = data.draw(records(max_size=25, lo=0, hi=400, keys=["a", "b"]))
    batches = data.draw(arrivals(recs))
    panes, dead, metrics = run(pipeline(Sessions(gap=gap), max_delay=0, lateness=lateness), batches)
    by_id = {r["id"]: r for r in recs}
    in_panes = [i for p in panes for i in p.values[2]]
    late_ids = [d.record["id"] for d in dead]
    assert all(d.reason == "late" for d in dead)
    assert sorted(in_panes + late_ids) == sorted(by_id)
    for p in panes:
        ts = [by_id[i]["t"] for i in p.values[2]]
        assert (p.window_start, p.window_end) == (min(ts), max(ts) + gap)
        assert all(by_id[i]["k"] == p.key[0] for i in p.values[2])


@SETTINGS
@given(data=st.data(), D=st.integers(1, 50), lateness=st.sampled_from([0, 5, 50]))
def test_sliding_with_late_data_loses_nothing(data, D, lateness):
    """max delay 0: every record is in some pane or dead-lettered once; a pane's members lie within
    its inclusive bounds [start, last]; no window is emitted twice."""
    recs = data.draw(records(max_size=25, lo=0, hi=300, keys=["a", "b"]))
    batches = data.draw(arrivals(recs))
    panes, dead, metrics = run(pipeline(Sliding(D), max_delay=0, lateness=lateness), batches)
    by_id = {r["id"]: r for r in recs}
    in_panes = {i for p in panes for i in p.values[2]}
    late_ids = [d.record["id"] for d in dead]
    assert len(late_ids) == len(set(late_ids))
    assert in_panes | set(late_ids) == set(by_id)
    windows = [(p.key, p.window_start, p.window_end) for p in panes]
    assert len(windows) == len(set(windows))
    for p in panes:
        assert p.window_end - p.window_start == D
        assert all(p.window_start <= by_id[i]["t"] <= p.window_end for i in p.values[2])
