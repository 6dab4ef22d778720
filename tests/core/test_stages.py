"""Multi-stage pipelines on the core: every scenario in ``tests/scenarios/stages`` replays to its
golden output (byte for byte, through the CLI), and its final answer equals the same question
answered in batch (plain Python over the scenario's records); the merged watermark is the earlier
input's; dead letters name their input and are written once."""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path

import pytest
from click.testing import CliRunner

from panes.cli import main
from panes.core.stages import GraphRunner
from panes.core.time import MIN_TIME, format_instant, parse_instant
from panes.stage_scenario import load_stage_scenario, replay_stages_core

ROOT = Path(__file__).resolve().parents[1]
STAGES = ROOT / "scenarios" / "stages"
SCENARIOS = sorted(STAGES.glob("*.yaml"))
META = ("window_start", "window_end", "timing", "pane_index", "is_last", "retraction")


def plain(v):
    if isinstance(v, list):
        return tuple(plain(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, plain(x)) for k, x in v.items()))
    return v


def row_of(record: dict) -> tuple:
    """A printed row's values (not its pane metadata), hashable."""
    return tuple((k, plain(v)) for k, v in record.items() if k not in META)


def final_rows(records: list[dict], mode: str, key: list[str]) -> dict[tuple, Counter]:
    """Per window: the rows the output says hold at the end. Accumulating: each key's last pane
    (all its rows); retracting: the rows net of retractions; discarding: every row."""
    out: dict[tuple, Counter] = defaultdict(Counter)
    if mode == "accumulating":
        panes: dict = defaultdict(lambda: defaultdict(list))
        for r in records:
            panes[(r["window_start"], r["window_end"], tuple(r[k] for k in key))][r["pane_index"]].append(r)
        for (s, e, _), by_index in panes.items():
            out[(s, e)].update(row_of(r) for r in by_index[max(by_index)])
    else:
        for r in records:
            out[(r["window_start"], r["window_end"])][row_of(r)] += -1 if r["retraction"] else 1
    cleaned = {w: Counter({k: n for k, n in c.items() if n}) for w, c in out.items()}
    return {w: c for w, c in cleaned.items() if c}


def window_of(t: int, size: int, start: int | None = None) -> tuple:
    s = t - t % size if start is None else start
    return (format_instant(s), format_instant(s + size))


def hopping(t: int, size: int, hop: int) -> list[int]:
    last = t - t % hop
    return list(range(last, t - size, -hop))


def records_of(scenario_path: Path, input_name: str | None = None) -> list[dict]:
    sc = load_stage_scenario(scenario_path)
    return [r for s in sc.timeline if input_name in (None, s.get("input")) for r in s.get("add", [])]


def rows(*dicts) -> Counter:
    return Counter(tuple(d.items()) for d in dicts)


# -- the replay contract ---------------------------------------------------------------------------


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_replay_prints_the_golden_panes_and_dead_letters(path, tmp_path):
    dead = tmp_path / "dead.jsonl"
    result = CliRunner().invoke(main, ["replay", str(path), "--dead-letter", str(dead)])
    assert result.exit_code == 0, result.output
    golden = ROOT / "golden" / "stages"
    assert result.stdout == (golden / f"{path.stem}.panes.jsonl").read_text()
    assert dead.read_text() == (golden / f"{path.stem}.dead.jsonl").read_text()


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_validate_accepts_every_scenario(path):
    result = CliRunner().invoke(main, ["validate", str(path)])
    assert result.exit_code == 0, result.output
    assert "valid replay scenario" in result.output


# -- batch answers ---------------------------------------------------------------------------------


def test_q5_is_the_auctions_with_the_most_bids_of_each_hopping_window():
    path = STAGES / "nexmark_q5.yaml"
    counts: dict = defaultdict(Counter)
    for b in records_of(path):
        for s in hopping(parse_instant(b["ts"]), 10_000, 2_000):
            counts[window_of(0, 10_000, s)][b["auction"]] += 1
    expected = {
        w: Counter({(("num", n), ("auction", a)): 1 for a, n in c.items() if n == max(c.values())})
        for w, c in counts.items()
    }
    assert final_rows(replay_stages_core(load_stage_scenario(path)).panes, "accumulating", ["num"]) == expected
    assert len(expected) == 12  # every window from [-8 s, 2 s) to [14 s, 24 s), one every 2 s


def test_q7_is_the_bids_at_their_windows_highest_price():
    path = STAGES / "nexmark_q7.yaml"
    bids = records_of(path)
    top: dict = defaultdict(int)
    for b in bids:
        w = window_of(parse_instant(b["ts"]), 10_000)
        top[w] = max(top[w], b["price"])
    expected: dict = defaultdict(Counter)
    for b in bids:
        w = window_of(parse_instant(b["ts"]), 10_000)
        if b["price"] == top[w]:
            row = (("price", b["price"]), ("auction", b["auction"]), ("bidder", b["bidder"]), ("ts", b["ts"]))
            expected[w][row] += 1
    assert final_rows(replay_stages_core(load_stage_scenario(path)).panes, "accumulating", ["price"]) == expected
    assert sum(sum(c.values()) for c in expected.values()) == 5  # two ties at 40 and at 25, one at 6


def test_q8_is_the_people_who_registered_and_sold_in_the_same_window():
    path = STAGES / "nexmark_q8.yaml"
    people: dict = {}
    sales: dict = defaultdict(Counter)
    for p in records_of(path, "persons"):
        people.setdefault((window_of(parse_instant(p["ts"]), 10_000), p["id"]), p["name"])
    for a in records_of(path, "auctions"):
        sales[window_of(parse_instant(a["ts"]), 10_000)][a["seller"]] += 1
    expected: dict = defaultdict(Counter)
    for (w, pid), name in people.items():
        if sales[w][pid]:
            expected[w][(("id", pid), ("name", name), ("auctions", sales[w][pid]))] += 1
    assert final_rows(replay_stages_core(load_stage_scenario(path)).panes, "accumulating", ["id"]) == expected
    assert [next(iter(c))[0][1] for _, c in sorted(expected.items())] == [1000, 1002, 1003]


@pytest.mark.parametrize("mode", ["accumulating", "discarding", "retracting"])
def test_chained_stage_ends_at_the_batch_answer_in_every_mode(mode):
    path = STAGES / f"chained_{mode}.yaml"
    result = replay_stages_core(load_stage_scenario(path))
    late = [d["record"] for d in result.dead_letters]
    assert late == [{"k": "a", "v": 8, "t": "2024-01-01T00:00:03Z"}]
    sums: dict = defaultdict(Counter)
    for r in records_of(path):
        if r not in late:
            sums[window_of(parse_instant(r["t"]), 10_000)][r["k"]] += r["v"]
    got = final_rows(result.panes, mode, [])
    if mode == "discarding":  # deltas add up: the totals; the largest is the largest key's only once per pane
        totals = {w: sum(row[0][1] or 0 for row in c.elements()) for w, c in got.items()}
        assert totals == {w: sum(c.values()) for w, c in sums.items()}
    else:
        assert got == {
            w: Counter({(("total", sum(c.values())), ("largest", max(c.values()))): 1}) for w, c in sums.items()
        }


def test_chained_accumulating_stage_replaces_a_key_contribution_instead_of_adding_it():
    result = replay_stages_core(load_stage_scenario(STAGES / "chained_accumulating.yaml"))
    first = [(r["pane_index"], r["total"]) for r in result.panes if r["window_start"].endswith("00:00.000Z")]
    # a: 1, then 4 (1 + 3): the total restates 3 -> 6, not 3 -> 7
    assert first[:2] == [(0, 3), (1, 6)]
    assert not any(r["retraction"] for r in result.stages["per_key"])  # accumulating prints no retractions


def test_cogroup_lists_each_inputs_rows_per_key_and_window():
    path = STAGES / "cogroup.yaml"
    groups: dict = defaultdict(lambda: {"views": [], "clicks": []})
    for name in ("views", "clicks"):
        for r in records_of(path, name):
            groups[(window_of(parse_instant(r["at"]), 10_000), r["page"])][name].append(r)
    expected: dict = defaultdict(Counter)
    for (w, page), lists in groups.items():
        expected[w][(("page", page), ("views", plain(lists["views"])), ("clicks", plain(lists["clicks"])))] += 1
    assert final_rows(replay_stages_core(load_stage_scenario(path)).panes, "accumulating", ["page"]) == expected


def test_user_merge_gives_each_auction_its_bids_and_top_price():
    path = STAGES / "user_merge.yaml"
    stats: dict = {}
    for a in records_of(path, "auctions"):
        stats[(window_of(parse_instant(a["ts"]), 10_000), a["id"])] = [a["item"], 0, None]
    for b in records_of(path, "bids"):
        s = stats.get((window_of(parse_instant(b["ts"]), 10_000), b["auction"]))
        if s is not None:
            s[1] += 1
            s[2] = b["price"] if s[2] is None else max(s[2], b["price"])
    expected: dict = defaultdict(Counter)
    for (w, aid), (item, n, top) in stats.items():
        expected[w][(("id", aid), ("item", item), ("bids", n), ("top_price", top))] += 1
    assert final_rows(replay_stages_core(load_stage_scenario(path)).panes, "accumulating", ["id"]) == expected


def test_merged_watermark_is_the_earlier_input_and_moving_it_fires_downstream():
    sc = load_stage_scenario(STAGES / "merge_watermarks_apart.yaml")
    runner = GraphRunner(sc.graph)
    state = runner.new_state()
    seen = []
    for step in sc.timeline:
        res = runner.step(state, step.get("input"), step.get("add"), step.get("watermark"), step.get("end", False))
        seen.append(
            (
                state.inputs["orders"].watermark,
                state.inputs["payments"].watermark,
                state.watermarks["paid"],
                len(res.records["paid"]),
                len(res.records["paid_count"]),
            )
        )
    s = parse_instant("2024-01-01T00:00:00Z")
    assert seen[:5] == [
        (MIN_TIME, MIN_TIME, MIN_TIME, 0, 0),
        (MIN_TIME, s + 5_000, MIN_TIME, 0, 0),
        (s + 35_000, s + 5_000, s + 5_000, 0, 0),  # the orders ran ahead: the merge stays at 5 s
        (s + 35_000, s + 5_000, s + 5_000, 0, 0),
        (s + 35_000, s + 22_000, s + 22_000, 3, 2),  # payments to 22 s: two windows fire, here and downstream
    ]
    out = replay_stages_core(sc)
    assert [(r["window_start"][14:19], r["orders"], r["amount"]) for r in out.panes] == [
        ("00:00", 2, 42),
        ("00:10", 1, 50),
        ("00:30", 1, 8),
    ]


def test_late_data_on_each_input_is_dead_lettered_once_naming_its_input():
    path = STAGES / "late_data.yaml"
    result = replay_stages_core(load_stage_scenario(path))
    assert [(d["input"], d["stage"], d["record"]) for d in result.dead_letters] == [
        ("purchases", "with_buyer", {"buyer": 2, "amount": 4, "ts": "2024-01-01T00:00:09Z"}),
        ("people", "with_buyer", {"id": 3, "name": "cid", "ts": "2024-01-01T00:00:07Z"}),
    ]
    assert {d["watermark"] for d in result.dead_letters} == {"2024-01-01T00:00:16.000Z"}
    late = [d["record"] for d in result.dead_letters]
    people = {}
    for p in records_of(path, "people"):
        if p not in late:
            people[(window_of(parse_instant(p["ts"]), 10_000), p["id"])] = p
    expected: dict = defaultdict(Counter)
    for b in records_of(path, "purchases"):
        if b in late:
            continue
        w = window_of(parse_instant(b["ts"]), 10_000)
        p = people.get((w, b["buyer"]), {})
        expected[w][
            (
                ("buyer", b["buyer"]),
                ("amount", b["amount"]),
                ("purchases_ts", b["ts"]),
                ("name", p.get("name")),
                ("people_ts", p.get("ts")),
            )
        ] += 1
    assert final_rows(result.panes, "accumulating", ["buyer"]) == expected
    # the late purchase is late at 'spent' too, which sums the others
    spent = [(r["timing"], r["spent"]) for r in result.stages["spent"]]
    assert spent == [("ON_TIME", 12), ("LATE", 21), ("ON_TIME", 6)]


# -- where every record went ---------------------------------------------------------------------


def test_every_input_record_is_counted_once_across_the_stages_that_read_it():
    result = replay_stages_core(load_stage_scenario(STAGES / "accounting.yaml"))
    a = result.accounting.inputs["events"]
    assert (a.records_in, a.counted, a.dead_letters, a.in_no_window, a.watermark_records) == (9, 3, 4, 1, 1)
    assert dict(a.reasons) == {"malformed": 1, "missing_event_time": 1, "missing_key": 1, "late": 1}
    assert [(d["reason"], d.get("stage")) for d in result.dead_letters] == [
        ("missing_event_time", None),
        ("malformed", None),
        ("missing_key", "per_key"),
        ("late", "gaps"),
    ]
    assert result.accounting.summary() == (
        "events: records in 9 = 3 counted + 4 dead letters (late 1, malformed 1, missing_event_time 1, "
        "missing_key 1) + 1 in no window + 1 watermark records"
    )


#: two stages keyed on k read one input: a record without k is a dead letter at both
TWO_KEYED_READERS = {
    "pipeline": {
        "inputs": {"events": {"event_time": "t", "watermark": {"punctuation": True}}},
        "stages": [
            {
                "name": "per_k",
                "from": "events",
                "key": "k",
                "window": {"tumbling": {"size": 10_000}},
                "aggregates": {"n": {"count": "*"}},
            },
            {
                "name": "sums",
                "from": "events",
                "key": "k",
                "window": {"tumbling": {"size": 10_000}},
                "aggregates": {"v": {"sum": "v"}},
            },
        ],
        "output": "sums",
    },
    "timeline": [{"add": [{"k": "a", "t": 1000, "v": 1}, {"t": 2000, "v": 2}]}, {"end": True}],
}


def test_a_record_dead_lettered_at_two_stages_is_one_dead_letter_as_it_is_counted():
    # issue 28: a missing key at both stages that read the record (as late at both): one dead
    # letter, the first stage's, as the input's account counts it
    result = replay_stages_core(load_stage_scenario(TWO_KEYED_READERS))
    assert [(d["reason"], d["stage"], d["record"]) for d in result.dead_letters] == [
        ("missing_key", "per_k", {"t": 2000, "v": 2})
    ]
    a = result.accounting.inputs["events"]
    assert (a.records_in, a.counted, dict(a.reasons)) == (2, 1, {"missing_key": 1})
    assert len(result.dead_letters) == a.dead_letters


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_replay_accounts_for_every_record_of_each_input(path):
    if path.stem == "user_merge":
        pytest.importorskip("merges")
    sc = load_stage_scenario(path)
    result = replay_stages_core(sc)
    for inp in sc.graph.inputs:
        a = result.accounting.inputs[inp.name]
        arrived = [r for s in sc.timeline if s.get("input") == inp.name for r in s.get("add", [])]
        assert a.records_in == len(arrived)
        assert a.unaccounted == 0
        letters = [d for d in result.dead_letters if d["input"] == inp.name]
        assert a.dead_letters == len(letters)
    assert "does not add up" not in result.accounting.summary()


def test_replay_prints_the_account_per_input_in_its_last_line():
    result = CliRunner().invoke(main, ["replay", str(STAGES / "late_data.yaml")])
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines()[-1] == (
        "done: 6 panes, 2 dead letters (not kept: pass --dead-letter FILE); "
        "purchases: records in 5 = 4 counted + 1 dead letters (late 1) + 0 in no window; "
        "people: records in 4 = 3 counted + 1 dead letters (late 1) + 0 in no window"
    )
