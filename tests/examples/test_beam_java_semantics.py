"""Where Beam Python (2.77, DirectRunner) departs from the Dataflow model, panes follows the model
as Beam Java implements it (shared/conformance/README.md lists the departures). One test per case."""

from panes.scenario import load_scenario, replay_core


def run(pipeline, timeline):
    base = {"event_time": "t", "watermark": {"punctuation": True}, "aggregates": {"v": {"collect_list": "t"}}}
    return replay_core(load_scenario({"pipeline": {**base, **pipeline}, "timeline": timeline}))


def rows(res):
    return [
        (p["window_start"][17:19] if p["window_start"] else None, p["timing"], p["pane_index"], p["is_last"], p["v"])
        for p in res.panes
    ]


def test_1_garbage_collection_flushes_what_no_firing_took():
    # Repeatedly(AfterCount(3)): 5 elements fire once with 3; the 2 left are emitted when the
    # window expires (Beam Python loses them and stalls)
    res = run(
        {
            "window": {"tumbling": {"size": 10_000}},
            "trigger": {"repeatedly": {"after_count": 3}},
            "accumulation": "discarding",
        },
        [{"add": [{"t": t} for t in (1000, 2000, 3000)]}, {"add": [{"t": 4000}, {"t": 5000}]}, {"watermark": 10_000}],
    )
    assert rows(res) == [("00", "EARLY", 0, False, [1000, 2000, 3000]), ("00", "ON_TIME", 1, True, [4000, 5000])]


def test_2_is_last_on_the_final_pane_of_default_and_after_watermark_with_late_firings():
    res = run(
        {"window": {"tumbling": {"size": 10_000}}, "trigger": "beam_default"},
        [{"add": [{"t": 1000}]}, {"watermark": 10_000}],
    )
    assert rows(res) == [("00", "ON_TIME", 0, True, [1000])]  # no allowed lateness: the last one
    res = run(
        {
            "window": {"tumbling": {"size": 10_000}},
            "allowed_lateness": 5000,
            "trigger": {"after_watermark": {"late": {"count": 5}}},
        },
        [{"add": [{"t": 1000}]}, {"watermark": 10_000}, {"add": [{"t": 2000}]}, {"watermark": 15_000}],
    )
    # a late element the late trigger has not fired for is flushed at expiry, as the last pane
    assert rows(res) == [("00", "ON_TIME", 0, False, [1000]), ("00", "LATE", 1, True, [1000, 2000])]


def test_3_processing_time_is_not_compared_with_window_ends():
    # an early processing-time firing at a clock value past the window's end is still EARLY and
    # does not close the window (Beam Python labels it LATE and closes it)
    res = run(
        {
            "window": {"tumbling": {"size": 10_000}},
            "trigger": {"after_watermark": {"early": {"after_processing_time": 1000}}},
        },
        [
            {"processing_time": 50_000, "add": [{"t": 1000}]},
            {"processing_time": 51_001},
            {"add": [{"t": 2000}]},
            {"watermark": 10_000},
        ],
    )
    assert rows(res) == [("00", "EARLY", 0, False, [1000]), ("00", "ON_TIME", 1, True, [1000, 2000])]


def test_4_after_processing_time_is_a_state_not_a_callback():
    # AfterAll(count 2, time 1 s): the time passes first, the count later: fires then
    res = run(
        {"window": "global", "trigger": {"after_all": [{"after_count": 2}, {"after_processing_time": 1000}]}},
        [{"processing_time": 0, "add": [{"t": 1}]}, {"processing_time": 5000}, {"add": [{"t": 2}]}],
    )
    assert [(p["timing"], p["v"]) for p in res.panes] == [("EARLY", [1, 2])]
    # Repeatedly(AfterAny(count 3, time 1 s)): a firing by time resets the count branch too
    res = run(
        {
            "window": "global",
            "trigger": {"repeatedly": {"after_any": [{"after_count": 3}, {"after_processing_time": 1000}]}},
            "accumulation": "discarding",
        },
        [
            {"processing_time": 0, "add": [{"t": 1}, {"t": 2}]},
            {"processing_time": 1001},
            {"add": [{"t": 3}]},
            {"add": [{"t": 4}]},
            {"processing_time": 2002},
        ],
    )
    assert [p["v"] for p in res.panes] == [[1, 2], [3, 4]]


def test_5_data_at_watermark_equal_to_end_plus_lateness_is_late():
    res = run(
        {"window": {"tumbling": {"size": 10_000}}, "allowed_lateness": 5000},
        [
            {"add": [{"t": 1000}]},
            {"watermark": 14_999},
            {"add": [{"t": 2000}]},
            {"watermark": 15_000},
            {"add": [{"t": 3000}]},
        ],
    )
    assert rows(res) == [("00", "ON_TIME", 0, True, [1000, 2000])]
    assert [(d["reason"], d["record"]["t"], d["watermark"][17:23]) for d in res.dead_letters] == [
        ("late", 3000, "15.000")
    ]


def test_6_empty_on_time_pane_and_pane_index_after_a_merge():
    # an ON_TIME pane is emitted even when empty (discarding after an early pane)
    res = run(
        {
            "window": {"tumbling": {"size": 10_000}},
            "trigger": {"after_watermark": {"early": {"count": 1}}},
            "accumulation": "discarding",
        },
        [{"add": [{"t": 1000}]}, {"watermark": 10_000}],
    )
    assert rows(res) == [("00", "EARLY", 0, False, [1000]), ("00", "ON_TIME", 1, True, [])]
    # a session that merges into a new window starts its pane index at 0
    res = run(
        {"window": {"session": {"gap": 10_000}}, "trigger": {"after_watermark": {"early": {"count": 1}}}},
        [{"add": [{"t": 1000}]}, {"add": [{"t": 5000}]}],
    )
    assert [(p["window_start"][17:23], p["window_end"][17:23], p["pane_index"]) for p in res.panes] == [
        ("01.000", "11.000", 0),
        ("01.000", "15.000", 0),
    ]
