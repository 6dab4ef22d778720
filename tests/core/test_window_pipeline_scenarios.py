"""What the window pipeline scenarios (tests/scenarios/window_pipeline_*.yaml) and the traffic
example say, with exact values: Benthos' numbers from SQL and from a pandas function, the top three
orders with a tie, a failing window's rows in the dead letters, and the example's window-pipeline
spec giving the panes of its aggregates spec."""

import json
from pathlib import Path

from panes.scenario import load_scenario, replay_core
from panes.spec import load_run_spec

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "tests" / "scenarios"
A, B = "cbf2eafc-806e-4067-9211-97be7e42cee3", "7f3c1d52-2b9e-4a61-8d0e-3c5a9b7e1f40"


def replay(name):
    return replay_core(load_scenario(SCENARIOS / f"{name}.yaml"))


def test_benthos_traffic_as_sql_over_the_window_rows_gives_benthos_numbers():
    by_aggregates = {
        (p["traffic_light"], p["window_start"]): (p["total_cars"], p["passengers"])
        for p in replay("benthos_traffic").panes
    }
    panes = replay("window_pipeline_benthos_traffic").panes
    assert {(p["traffic_light"], p["window_start"]): (p["total_cars"], p["passengers"]) for p in panes} == by_aggregates
    assert by_aggregates == {
        (A, "2021-08-07T09:00:00.000Z"): (3, 11),
        (B, "2021-08-07T09:00:00.000Z"): (2, 6),
        (A, "2021-08-07T10:00:00.000Z"): (3, 9),
        (B, "2021-08-07T10:00:00.000Z"): (2, 6),
    }
    assert all(p["created_at"] == p["window_end"] for p in panes)  # Benthos' window_end_timestamp
    # one pane per hour, its rows in the query's ORDER BY
    assert [(p["window_start"][11:16], p["traffic_light"]) for p in panes] == [
        ("09:00", B),
        ("09:00", A),
        ("10:00", B),
        ("10:00", A),
    ]


def test_a_pandas_function_gives_each_light_s_distinct_cars_sorted():
    panes = replay("window_pipeline_function").panes
    assert [(p["window_start"][11:16], p["traffic_light"], p["cars"], p["passengers"]) for p in panes] == [
        ("09:00", B, ["AB1C DEF", "LM4N OPQ"], 6),
        ("09:00", A, ["AB1C DEF", "GH7J KLM", "XY9Z QRS"], 11),
        ("10:00", B, ["CD2E FGH", "LM4N OPQ"], 6),
        ("10:00", A, ["AB1C DEF", "TT5U VWX", "XY9Z QRS"], 9),
    ]


def test_top_three_orders_per_window_keep_the_earlier_of_two_tying_orders():
    res = replay("window_pipeline_top_n")
    assert [(p["region"], p["window_start"][11:16], p["customer"], p["amount"]) for p in res.panes] == [
        ("north", "12:00", "eve", 90),
        ("north", "12:00", "bob", 75),
        ("north", "12:00", "ada", 40),
        ("south", "12:00", "gus", 30),
        ("south", "12:00", "cyd", 12),
        ("north", "12:10", "hal", 55),
        ("south", "12:10", "ivy", 60),
        ("south", "12:10", "kim", 5),
    ]
    assert [(d["reason"], d["record"]["customer"]) for d in res.dead_letters] == [("late", "jon")]


def test_early_panes_run_the_pipeline_over_the_rows_so_far_or_since_the_last_pane():
    def north(mode):
        return [
            (p["timing"], p["pane_index"], p["retraction"], p["customer"], p["spent"])
            for p in replay(f"window_pipeline_early_{mode}").panes
            if p["region"] == "north" and p["window_start"].endswith("12:00:00.000Z")
        ]

    assert north("accumulating") == [
        ("EARLY", 0, False, "ada", 40),
        ("EARLY", 0, False, "bob", 25),
        ("EARLY", 1, False, "cyd", 70),
        ("EARLY", 1, False, "ada", 50),
        ("ON_TIME", 2, False, "cyd", 70),
        ("ON_TIME", 2, False, "bob", 55),
        ("LATE", 3, False, "bob", 105),
        ("LATE", 3, False, "cyd", 70),
    ]
    assert north("discarding") == [
        ("EARLY", 0, False, "ada", 40),
        ("EARLY", 0, False, "bob", 25),
        ("EARLY", 1, False, "cyd", 70),
        ("EARLY", 1, False, "ada", 10),
        ("ON_TIME", 2, False, "bob", 30),
        ("LATE", 3, False, "bob", 50),
    ]
    retracting = north("retracting")
    assert [r for r in retracting if not r[2]] == north("accumulating")
    assert [r for r in retracting if r[2]] == [
        ("EARLY", 0, True, "ada", 40),
        ("EARLY", 0, True, "bob", 25),
        ("EARLY", 1, True, "cyd", 70),
        ("EARLY", 1, True, "ada", 50),
        ("ON_TIME", 2, True, "cyd", 70),
        ("ON_TIME", 2, True, "bob", 55),
    ]
    # each retraction comes right before the pane that restates it
    assert [r[1] for r in retracting] == [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3]


def test_a_failing_window_sends_its_rows_to_the_dead_letters_and_the_rest_goes_on():
    res = replay("window_pipeline_failure")
    assert [(p["traffic_light"], p["window_start"][11:16], p["cars"], p["per_car"]) for p in res.panes] == [
        ("a", "09:00", 2, 2.0),
        ("a", "10:00", 1, 2.0),
        ("b", "10:00", 1, 2.0),
    ]
    assert [
        (d["reason"], d["record"]["registration_plate"], d["window"]["start"], d["detail"]) for d in res.dead_letters
    ] == [
        ("window_pipeline_failed", "AB1C DEF", "2021-08-07T09:00:00.000Z", "ValueError: a car without passengers"),
        ("window_pipeline_failed", "GH7J KLM", "2021-08-07T09:00:00.000Z", "ValueError: a car without passengers"),
    ]


def test_the_traffic_example_as_a_window_pipeline_gives_the_panes_of_its_aggregates():
    timeline = [
        {"add": [json.loads(line) for line in f.read_text().splitlines() if line.strip()]}
        for f in sorted((ROOT / "examples" / "traffic" / "data").glob("part-*.json"))
    ]
    timeline.append({"end": True})
    outputs = []
    for spec in ("pipeline.yaml", "window_pipeline.yaml"):
        run = load_run_spec(ROOT / "examples" / "traffic" / spec)
        pipeline = {
            k: v
            for k, v in run.model_dump(by_alias=True, exclude_none=True).items()
            if k in ("event_time", "key", "window", "watermark", "aggregates", "window_pipeline")
        }
        outputs.append(replay_core(load_scenario({"pipeline": pipeline, "timeline": timeline})))
    aggregates, window_pipeline = outputs
    assert window_pipeline.panes == aggregates.panes and len(aggregates.panes) > 4
    assert window_pipeline.dead_letters == aggregates.dead_letters
