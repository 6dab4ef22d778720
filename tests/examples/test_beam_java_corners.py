"""Issue 27's six points and issue 32's three cases, each through ``panes replay`` (the CLI) on the
core, with Beam Java's exact panes (read from Beam Java's runners-core source: ReduceFnRunner,
PaneInfoTracker, WatermarkHold, the trigger state machines). tests/spark/test_replay_parity.py
runs the same scenarios (tests/scenarios/java_*.yaml) on Spark's plans."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from panes.cli import main

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"


def replay(name: str, tmp_path) -> tuple[list, list]:
    """(panes as (key, window start s, timing, index, is_last, values, sum), dead letters as (reason, v))."""
    dead = tmp_path / "dead.jsonl"
    result = CliRunner().invoke(main, ["replay", str(SCENARIOS / f"{name}.yaml"), "--dead-letter", str(dead)])
    assert result.exit_code == 0, result.output
    panes = [json.loads(line) for line in result.stdout.splitlines()]
    letters = [json.loads(line) for line in dead.read_text().splitlines()]
    return (
        [
            (p["k"], int(p["window_start"][17:19]), p["timing"], p["pane_index"], p["is_last"], p["values"], p["sum"])
            for p in panes
        ],
        [(d["reason"], d["record"]["v"]) for d in letters],
    )


def test_27_1_an_empty_pane_carries_each_aggregates_value_for_no_input(tmp_path):
    panes, _ = replay("java_empty_pane_value", tmp_path)
    assert panes == [("k", 0, "EARLY", 0, False, [1], 1), ("k", 0, "ON_TIME", 1, True, [], 0)]


def test_27_2_an_early_after_each_moves_on_to_its_next_trigger(tmp_path):
    panes, _ = replay("java_early_after_each_repeats", tmp_path)
    assert [(timing, index, last, total) for _, _, timing, index, last, _, total in panes] == [
        ("EARLY", 0, False, 3),
        ("EARLY", 1, False, 7),
        ("EARLY", 2, False, 31),
        ("ON_TIME", 3, True, 31),
    ]


def test_27_3_late_data_near_a_closed_session_opens_a_new_one(tmp_path):
    panes, dead = replay("java_late_data_on_closed_session", tmp_path)
    assert panes == [
        ("k", 1, "ON_TIME", 0, True, [1], 1),
        ("k", 5, "LATE", 0, True, [2], 2),
        ("k", 3, "LATE", 0, True, [4], 4),
    ]
    assert dead == [("window_closed", 3)]  # its session is exactly the closed [1 s, 11 s)


def test_27_4_a_processing_time_deadline_fires_strictly_after_it(tmp_path):
    panes, _ = replay("java_processing_time_deadline", tmp_path)
    assert [p[2:] for p in panes] == [("EARLY", 0, False, [1, 2], 3), ("ON_TIME", 1, True, [], 0)]


@pytest.mark.parametrize(
    "name, expected",
    [
        ("java_gc_without_watermark_trigger", [("EARLY", 0, False, [1, 2], 3), ("ON_TIME", 1, False, [3, 4], 7)]),
        ("java_gc_after_the_last_firing", [("EARLY", 0, False, [1, 2], 3)]),
        ("java_gc_on_time_leftover", [("EARLY", 0, False, [1, 2], 3), ("ON_TIME", 1, True, [3], 3)]),
        ("java_gc_late_leftover", [("EARLY", 0, False, [1, 2], 3), ("LATE", 1, True, [3], 3)]),
    ],
)
def test_27_5_garbage_collection_without_a_watermark_trigger(tmp_path, name, expected):
    panes, _ = replay(name, tmp_path)
    assert [p[2:] for p in panes] == expected


@pytest.mark.parametrize("engine", ["core", "spark"])
def test_27_6_a_trigger_that_never_finishes_where_beam_takes_a_once_trigger_is_refused(tmp_path, engine):
    # (on Spark too: the scenario is refused before Spark starts)
    spec = tmp_path / "s.yaml"
    spec.write_text(
        json.dumps(
            {
                "pipeline": {
                    "event_time": "t",
                    "window": {"tumbling": {"size": 10_000}},
                    "aggregates": {"n": {"count": "*"}},
                    "trigger": {
                        "or_finally": {
                            "trigger": {"repeatedly": {"after_count": 1}},
                            "finally": {"repeatedly": {"after_count": 2}},
                        }
                    },
                },
                "timeline": [{"end": True}],
            }
        )
    )
    result = CliRunner().invoke(main, ["replay", str(spec), "--engine", engine])
    assert result.exit_code == 2
    assert result.output.strip() == (
        "error: trigger: trigger.or_finally.finally: repeatedly never finishes; Beam Java takes only a trigger that "
        "fires once here (Trigger.orFinally(OnceTrigger)), panes one that can finish"
    )


@pytest.mark.parametrize(
    "trigger, message",
    [
        (
            {"after_watermark": {"early": {"repeatedly": {"after_count": 1}}}},
            "trigger.after_watermark.early: repeatedly never finishes",
        ),
        (
            {"after_watermark": {"late": {"after_watermark": {"late": {"count": 1}}}}},
            "trigger.after_watermark.late: after_watermark never finishes",
        ),
        (
            {"after_any": [{"after_count": 1}, {"repeatedly": {"after_count": 2}}]},
            "trigger.after_any[1]: repeatedly never finishes; Beam Java takes only a trigger that fires once here "
            "(AfterFirst.of(OnceTrigger...))",
        ),
        (
            {
                "after_all": [
                    {"after_count": 1},
                    {"after_each": [{"after_count": 1}, {"repeatedly": {"after_count": 1}}]},
                ]
            },
            "trigger.after_all[1]: after_each never finishes",
        ),
        ({"after_each": [{"after_count": 1}]}, "trigger.after_each takes at least two triggers"),
    ],
)
def test_27_6_once_trigger_sites(tmp_path, trigger, message):
    spec = tmp_path / "s.yaml"
    spec.write_text(
        json.dumps(
            {
                "pipeline": {
                    "event_time": "t",
                    "window": {"tumbling": {"size": 10_000}},
                    "aggregates": {"n": {"count": "*"}},
                    "trigger": trigger,
                },
                "timeline": [{"end": True}],
            }
        )
    )
    result = CliRunner().invoke(main, ["validate", str(spec)])
    assert result.exit_code == 2 and result.output.count("error:") == 1 and message in result.output, result.output


def test_27_6_finishing_composites_are_accepted_where_beam_takes_a_once_trigger(tmp_path):
    # after_each of finishing triggers as an early trigger (27.2), or_finally as finally: they can finish
    spec = tmp_path / "s.yaml"
    trigger = {
        "or_finally": {
            "trigger": {"after_watermark": {"early": {"after_each": [{"after_count": 2}, {"after_count": 1}]}}},
            "finally": {"or_finally": {"trigger": {"count": 1}, "finally": {"count": 9}}},
        }
    }
    spec.write_text(
        json.dumps(
            {
                "pipeline": {
                    "event_time": "t",
                    "window": {"tumbling": {"size": 10_000}},
                    "aggregates": {"n": {"count": "*"}},
                    "trigger": trigger,
                },
                "timeline": [{"end": True}],
            }
        )
    )
    result = CliRunner().invoke(main, ["validate", str(spec)])
    assert result.exit_code == 0, result.output


def test_32_1_another_keys_hold_keeps_a_late_created_window_on_time(tmp_path):
    panes, _ = replay("java_cross_key_hold", tmp_path)
    assert panes == [("k0", 10, "ON_TIME", 0, True, [2, 3], 5), ("k1", 0, "ON_TIME", 0, True, [1], 1)]


def test_32_2_a_released_hold_makes_the_next_pane_late(tmp_path):
    panes, _ = replay("java_released_hold", tmp_path)
    assert [p[2:] for p in panes] == [("EARLY", 0, False, [1], 1), ("LATE", 1, False, [2], 2)]


def test_32_3_an_after_watermark_child_that_saw_no_record_fires_at_the_next_one(tmp_path):
    panes, _ = replay("java_after_each_watermark_child", tmp_path)
    assert [p[2:] for p in panes] == [
        ("EARLY", 0, False, [1], 1),
        ("LATE", 1, False, [2], 2),
        ("LATE", 2, True, [4], 4),
    ]
