"""``panes replay SCENARIO --plot PATH``: what the Streaming 102 picture draws where (the timeline's
parts, exact), and that a picture is written (no pixel is compared)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from panes import cli
from panes.plot import Bar, Dot, bar_levels, check_plot, plot_replay, scenario_timeline
from panes.scenario import load_scenario
from panes.spec import SpecError

ROOT = Path(__file__).resolve().parents[2]
SMALL = {
    "name": "small",
    "pipeline": {
        "event_time": "t",
        "key": "k",
        "window": {"tumbling": {"size": "10 seconds"}},
        "allowed_lateness": "10 seconds",
        "trigger": {"after_watermark": {"late": {"count": 1}}},
        "aggregates": {"total": {"sum": "v"}},
    },
    "timeline": [
        {
            "processing_time": 100_000,
            "add": [{"k": "a", "v": 1, "t": 1000}, {"k": "b", "v": 2, "t": 12000}, {"k": "a", "v": 3}],
        },
        {"processing_time": 101_000, "watermark": 11000},
        {"processing_time": 102_000, "add": [{"k": "a", "v": 4, "t": 5000}, {"v": 5, "t": 6000}]},
        {"processing_time": 103_000, "end": True},
    ],
}


def test_the_timeline_holds_each_record_pane_and_watermark_where_it_is_drawn():
    tl = scenario_timeline(load_scenario(SMALL))
    assert (tl.title, tl.clock, tl.lanes, tl.end_of_input) == ("small", True, ["a", "b", "(no key)"], 103_000.0)
    assert tl.subtitle == (
        'window {"tumbling": {"size": "10 seconds"}}, trigger {"after_watermark": {"late": {"count": 1}}}, '
        'allowed_lateness "10 seconds", accumulating'
    )
    assert tl.dots == [
        Dot("a", 1000, 100_000.0, "on_time", None, "1"),
        Dot("b", 12000, 100_000.0, "on_time", None, "2"),
        Dot("a", None, 100_000.0, "dead", "missing_event_time", "3"),  # (at the left edge)
        Dot("a", 5000, 102_000.0, "late", None, "4"),  # behind the watermark (12 s), still counted
        Dot("(no key)", 6000, 102_000.0, "dead", "missing_key", "5"),
    ]
    assert tl.bars == [
        Bar("a", 0, 10_000, 100_000.0, "1 · on time", "ON_TIME", False),
        Bar("a", 0, 10_000, 102_000.0, "5 · late", "LATE", False),
        Bar("b", 10_000, 20_000, 103_000.0, "2 · on time", "ON_TIME", False),
    ]
    # the watermark after each step before the end (max event time, no delay; 11 s does not move it back)
    assert tl.watermark == [(100_000.0, 12000), (101_000.0, 12000), (102_000.0, 12000)]


def test_without_a_clock_the_steps_are_the_y_axis_and_retractions_are_their_own_bars():
    doc = {
        "pipeline": {
            "event_time": "t",
            "window": {"tumbling": {"size": "10 seconds"}},
            "trigger": {"after_watermark": {"early": {"count": 1}}},
            "accumulation": "retracting",
            "aggregates": {"n": {"count": "*"}},
        },
        "timeline": [{"add": [{"t": 1000}]}, {"add": [{"t": 2000}]}, {"watermark": 10_000}],
    }
    tl = scenario_timeline(load_scenario(doc))
    assert (tl.title, tl.clock, tl.lanes, tl.end_of_input) == ("scenario", False, [""], None)
    assert [(d.event_time, d.y, d.fate, d.label) for d in tl.dots] == [
        (1000, 0.0, "on_time", ""),
        (2000, 1.0, "on_time", ""),
    ]
    assert [(b.y, b.label, b.retraction) for b in tl.bars] == [
        (0.0, "1 · early", False),
        (1.0, "retract 1 · early", True),
        (1.0, "2 · early", False),
        (2.0, "retract 2 · early", True),
        (2.0, "2 · on time", False),
    ]
    assert tl.watermark == [(0.0, 1000), (1.0, 2000), (2.0, 10_000)]
    # a retraction and its replacement, emitted at one time over one window, are drawn one above the other
    assert bar_levels(tl.bars) == [0, 0, 1, 0, 1]


def test_bar_levels_stack_only_overlapping_windows_emitted_at_one_time():
    bars = [
        Bar("", 0, 10, 1.0, "", "EARLY", False),
        Bar("", 10, 20, 1.0, "", "EARLY", False),  # touches the first: same level
        Bar("", 5, 15, 1.0, "", "EARLY", False),  # overlaps both
        Bar("", None, None, 1.0, "", "EARLY", False),  # the global window overlaps everything
        Bar("", 0, 10, 2.0, "", "EARLY", False),  # another time
    ]
    assert bar_levels(bars) == [0, 0, 1, 2, 0]


@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_a_picture_is_written(tmp_path, suffix):
    pytest.importorskip("matplotlib")
    path = tmp_path / f"timeline{suffix}"
    tl = plot_replay(ROOT / "tests/scenarios/streaming102_early_late_accumulating.yaml", path)
    assert len(tl.dots) == 10 and len(tl.bars) == 10
    data = path.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") if suffix == ".png" else b"<svg" in data[:2000]
    assert len(data) > 10_000


def test_panes_replay_plot_prints_the_panes_and_draws_them(tmp_path):
    pytest.importorskip("matplotlib")
    scenario = ROOT / "tests/scenarios/streaming102_early_late_discarding.yaml"
    path = tmp_path / "t.png"
    r = CliRunner().invoke(cli.main, ["replay", str(scenario), "--plot", str(path)])
    assert r.exit_code == 0, r.output
    assert len([ln for ln in r.stdout.splitlines() if ln.startswith("{")]) == 10
    assert r.stderr.splitlines()[-1].endswith(f"; picture in {path}")
    assert path.read_bytes().startswith(b"\x89PNG")


def _one_line(tmp_path, *args):
    r = CliRunner().invoke(cli.main, ["replay", *map(str, args)])
    assert r.exit_code == 2 and r.stdout == ""
    return r.stderr.strip()


def test_plot_mistakes_are_one_line_before_anything_runs(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump(SMALL))
    assert _one_line(tmp_path, scenario, "--plot", tmp_path / "no" / "t.png") == (
        f"error: --plot: cannot write {tmp_path / 'no' / 't.png'}: no such directory"
    )
    assert _one_line(tmp_path, scenario, "--plot", tmp_path / "t.gif") == (
        f"error: --plot: {tmp_path / 't.gif'}: a .png, .svg or .pdf file"
    )
    assert _one_line(tmp_path, scenario, "--plot", tmp_path / "t.png", "--engine", "spark") == (
        "error: --plot: the picture is drawn from the core's replay: use it with --engine core"
    )
    with pytest.raises(SpecError, match="single-stage"):
        check_plot(ROOT / "tests/scenarios/stages/nexmark_q5.yaml", tmp_path / "t.png")
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # (as if the plot extra were not installed)
    assert _one_line(tmp_path, scenario, "--plot", tmp_path / "t.png") == (
        "error: --plot: pictures need matplotlib: pip install 'panes[plot]'"
    )
    assert not (tmp_path / "t.png").exists()


def test_a_window_pipelines_pane_rows_are_labelled_with_their_columns():
    tl = scenario_timeline(load_scenario(ROOT / "tests/scenarios/window_pipeline_top_n.yaml"))
    assert [(b.lane, b.label) for b in tl.bars][:3] == [
        ("north", "eve / 90 / 2024-05-01T1… · on time"),
        ("north", "bob / 75 / 2024-05-01T1… · on time"),
        ("north", "ada / 40 / 2024-05-01T1… · on time"),
    ]
