"""A stage run as parts (``Engine(partial=True)`` per part, as the stateful Spark plan's hash
buckets) gives the whole stage's panes once ``StageWatermarks`` decides the provisional ones from
the parts' reports: the parts' bundles are Spark's micro-batches (the watermark's move of the step
before, the clock's, the step's records), the watermark is the stage's, and a part with neither
records nor a due timer does not run (it keeps what it reported last)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from panes.core import rules
from panes.core.engine import Engine, EngineState, Pane
from panes.core.engine.parts import PartReport, StageWatermarks
from panes.core.output import emission_order, pane_record
from panes.core.records import parse_records
from panes.core.time import MIN_TIME
from panes.scenario import load_scenario, replay_core

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"


def _part_of(key: tuple, parts: int) -> int:
    return sum(ord(c) for c in str(key)) % parts


def _bundle(engine: Engine, st: EngineState, wm: int | None, clock: int | None, batch) -> tuple[list, tuple]:
    """One part's micro-batch: (phase, pane) pairs and its report's holds."""
    out, holds = [], [engine.earliest_hold(st)]
    out += [(0, p) for p in engine.advance(st, wm).panes]
    holds.append(engine.earliest_hold(st))
    if clock is not None and clock > st.processing_time:
        out += [(1, p) for p in engine.advance(st, None, clock).panes]
    holds.append(engine.earliest_hold(st))
    if batch is not None and len(batch):
        out += [(2, p) for p in engine.ingest(st, batch).panes]
    holds.append(engine.earliest_hold(st))
    return out, tuple(holds)


def _ordered(emitted: list) -> list:
    """(phase, order, pane): a retraction takes the emission order of the pane it precedes (a
    session's merged-away window has its own start), as the engine orders them."""
    out, following = [], None
    for phase, pane in reversed(emitted):
        if not pane.retraction:
            following = emission_order(pane)
        out.append((phase, following if pane.retraction else emission_order(pane), pane))
    return out[::-1]


def run_in_parts(scenario, parts: int, restarted: bool = False) -> list[dict]:
    """``restarted``: the stage's decisions start each bundle from the last one's snapshot, through
    JSON (as a restarted Spark query reads them from its checkpoint)."""
    p = scenario.pipeline
    engines = [Engine(p, partial=True) for _ in range(parts)]
    states = [e.new_state() for e in engines]
    retracting = p.accumulation == "retracting"
    stage = StageWatermarks(retracting=retracting, allowed_lateness=p.allowed_lateness)
    wm, max_ts, clock, panes = MIN_TIME, MIN_TIME, 0, []
    steps = [*scenario.timeline, {}]  # (a last bundle: what the final watermark makes due)
    for i, step in enumerate(steps):
        clock = max(clock, step.get("processing_time", clock))
        parsed = parse_records(p, step.get("add", []), ingestion_time=clock) if step.get("add") else None
        frame = parsed.frame if parsed is not None else None
        by_part = {}
        if frame is not None and len(frame):
            codes = np.array([_part_of(tuple(r), parts) for r in frame[list(p.key)].itertuples(index=False)])
            by_part = {b: frame[codes == b].reset_index(drop=True) for b in set(codes.tolist())}
        if restarted:
            snapshot = json.loads(json.dumps(stage.snapshot()))
            stage = StageWatermarks(retracting, p.allowed_lateness).restore(snapshot)
        reports, emitted = [], []
        for b, (engine, st) in enumerate(zip(engines, states)):
            due = wm >= st.wake_event or (st.wake_clock is not None and clock > st.wake_clock)
            if b not in by_part and not due and not (i and "processing_time" in step):
                continue  # (Spark runs no bucket without rows, clock rows or a due timer)
            out, holds = _bundle(engine, st, wm if wm > MIN_TIME else None, clock, by_part.get(b))
            reports.append(PartReport(b, st.watermark, holds))
            emitted += out
        stage.bundle(reports)
        emitted = sorted(_ordered(emitted), key=lambda e: e[:2])
        for phase, _, pane in emitted:
            timing = stage.timing(
                pane.provisional,
                pane.timing,
                phase,
                pane.window_end,
                (pane.key, pane.window_start, pane.window_end, pane.pane_index),
                pane.retraction,
            )
            if timing is not None:
                panes.append(
                    pane_record(
                        Pane(
                            *[
                                timing if f == "timing" else getattr(pane, f)
                                for f in (
                                    "key",
                                    "window_start",
                                    "window_end",
                                    "timing",
                                    "pane_index",
                                    "is_last",
                                    "retraction",
                                    "values",
                                )
                            ]
                        ),
                        p,
                    )
                )
        if frame is not None and len(frame):
            max_ts = max(max_ts, int(frame["__ts"].max()))
        explicit = step.get("watermark", MIN_TIME)
        if parsed is not None and parsed.punctuation is not None:
            explicit = max(explicit, parsed.punctuation)
        wm = rules.watermark_after(
            wm, max_ts, p.watermark.max_delay, p.watermark.punctuation, explicit, step.get("end", False)
        )
    return panes


@pytest.mark.parametrize("name", ["java_cross_key_hold", "java_released_hold", "java_gc_late_leftover"])
@pytest.mark.parametrize("parts", [1, 2, 3])
def test_issue_cases_in_parts(name, parts):
    scenario = load_scenario(SCENARIOS / f"{name}.yaml")
    assert run_in_parts(scenario, parts) == replay_core(scenario).panes


def _random(seed: int) -> dict:
    rnd = random.Random(seed)
    triggers = [
        None,
        {"after_count": 2},
        {"repeatedly": {"after_count": 2}},
        {"after_watermark": {"late": {"count": 1}}},
        {"repeatedly": {"after_any": [{"after_count": 3}, {"after_processing_time": 1500}]}},
    ]
    timeline, clock = [], 0
    for _ in range(rnd.randint(3, 9)):
        clock += rnd.randint(0, 1500)
        step: dict = {"processing_time": clock}
        if rnd.random() < 0.7:
            step["add"] = [
                {"k": rnd.choice("abcd"), "t": rnd.randint(0, 20_000), "v": rnd.randint(0, 9)}
                for _ in range(rnd.randint(1, 4))
            ]
        if rnd.random() < 0.4:
            step["watermark"] = rnd.randint(0, 25_000)
        timeline.append(step)
    timeline.append({"end": True})
    trigger = triggers[seed % len(triggers)]
    pipeline = {
        "event_time": "t",
        "key": "k",
        "window": [{"tumbling": {"size": 4000}}, {"session": {"gap": 1500}}, {"hopping": {"size": 6000, "hop": 2000}}][
            seed % 3
        ],
        "watermark": {"punctuation": True},
        "allowed_lateness": 10_000,
        "accumulation": ["discarding", "accumulating", "retracting"][seed % 3 if seed % 5 else 2],
        "aggregates": {"s": {"sum": "v"}, "n": {"count": "*"}},
    }
    if trigger is not None:
        pipeline["trigger"] = trigger
    return {"pipeline": pipeline, "timeline": timeline}


@pytest.mark.parametrize("restarted", [False, True], ids=["kept", "restarted"])
# (122, 134, 194, 209: an empty pane the stage does not emit, after an EARLY one it would retract)
@pytest.mark.parametrize("seed", [*range(60), 122, 134, 194, 209])
def test_random_stages_in_parts_give_the_whole_stage_panes(seed, restarted):
    scenario = load_scenario(_random(seed))
    assert run_in_parts(scenario, 3, restarted) == replay_core(scenario).panes


def test_a_late_pane_is_kept_for_its_retraction_until_its_window_expired():
    # window [10 s, 20 s), lateness 10 s: it expires at 30 s; its LATE pane's retraction can come
    # up to the bundle whose watermark reaches 30 s, not after
    stage = StageWatermarks(retracting=True, allowed_lateness=10_000)
    pane = (("k0",), 10_000, 20_000, 0)
    stage.bundle([PartReport(0, 25_000, (25_000,) * 4)])
    assert stage.timing(1, "ON_TIME", 0, 20_000, pane, False) == "LATE"
    assert stage.snapshot()["late_panes"] == [[pane, 30_000]]
    for watermark, kept in [(29_000, 1), (30_000, 1), (31_000, 1), (32_000, 0)]:
        stage.bundle([PartReport(0, watermark, (watermark,) * 4)])
        assert len(stage.late_panes) == kept
    again = StageWatermarks(retracting=True, allowed_lateness=10_000).restore(
        json.loads(json.dumps({**stage.snapshot(), "late_panes": [[list(pane), 30_000]]}))
    )
    assert again.timing(1, "ON_TIME", 0, 20_000, pane, True) == "LATE"  # (a retraction finds it after a restart)


def test_a_retraction_in_front_of_an_empty_pane_goes_with_that_pane():
    # window [0, 4 s): the stage's output watermark 5 s (passed): the empty pane is LATE, not
    # emitted, nor the retraction in front of it; at 3 s (not passed) both, the retraction EARLY
    restated, empty = (("k",), 0, 4000, 0), (("k",), 0, 4000, 1)
    for hold, kept in [(5000, [None, None]), (3000, ["EARLY", "ON_TIME"])]:
        stage = StageWatermarks(retracting=True, allowed_lateness=10_000)
        stage.bundle([PartReport(0, 5000, (hold,) * 4)])
        assert [
            stage.timing(3, "EARLY", 0, 4000, restated, True),
            stage.timing(2, "ON_TIME", 0, 4000, empty, False),
        ] == kept
        assert stage.snapshot()["late_panes"] == []
