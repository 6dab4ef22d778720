"""The driver's side of a stage's output watermark on Spark: the timing of the panes a bucket could
not decide (``buckets.PROV``), from every bucket's report of its holds (``buckets.HOLDS``), decided
by ``settling.Settler`` over the stage's output rows (``StageRows``)."""

from __future__ import annotations

import json

from ...core.engine.parts import PartReport
from ...core.stages import Stage, StageGraph, StageRunner
from ..columns import BUCKET
from ..settling import Provisional, RowLayout, Settler
from .buckets import CONTRIB, HOLDS, KIND, PART_WATERMARK, PROV, ROW, STEP_PHASE, SUB, WE, dumps


class StageRows(RowLayout):
    """A stage's output rows (``buckets.OUTPUT``): a pane's record is JSON text (``ROW``); the rows
    of one pane (a merge's table) take one decision."""

    kind, provisional = KIND, PROV

    def report(self, row: dict) -> PartReport | None:
        # (a bucket without holds to report: none)
        return PartReport(row[BUCKET], row[PART_WATERMARK], tuple(row[HOLDS])) if row[HOLDS] else None

    def order(self, row: dict) -> tuple:
        return (row[STEP_PHASE], row[BUCKET], row[SUB])

    def pane(self, row: dict) -> Provisional:
        record = json.loads(row[ROW])
        pane = (row[CONTRIB], record["pane_index"])
        return Provisional(
            row[PROV],
            record["timing"],
            row[STEP_PHASE],
            row[WE],
            pane,
            record["retraction"],
            # (one pane's rows share it, two panes never: the contributor is the pane's key and
            # window, and a firing retracts a window's pane once; sessions merged in one firing
            # are retracted each under its own window; tests/core/test_stage_pane_keys.py)
            (*pane, record["retraction"]),
        )

    def decided(self, row: dict, timing: str) -> dict:
        return {**row, ROW: dumps({**json.loads(row[ROW]), "timing": timing}), PROV: 0}


class StageTimings(Settler):
    """One stage's provisional panes decided, micro-batch after micro-batch (what it keeps between
    them: ``snapshot``, kept by ``stream.StagesStream`` with the micro-batch's watermarks)."""

    def __init__(self, graph: StageGraph, stage: Stage):
        p = StageRunner(graph, stage).pipeline
        super().__init__(StageRows(), p.accumulation == "retracting", p.allowed_lateness)
