"""The driver's side of a stage's output watermark on Spark: the timing of the panes a bucket could
not decide (``buckets.PROV``), from every bucket's report of its holds (``buckets.HOLDS``), as the
core decides it for the whole stage (``core.engine.parts.StageWatermarks``). A restarted query
starts without the reports of the buckets that have not run since: until they run, their holds
count as none (as on the single-stage stateful plan)."""

from __future__ import annotations

import json

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ...core.engine.parts import PartReport, StageWatermarks
from ...core.stages import Stage, StageGraph, StageRunner
from ..columns import BUCKET
from .buckets import CONTRIB, HOLDS, KIND, OUTPUT, PART_WATERMARK, PROV, ROW, STEP_PHASE, SUB, WE, dumps


class StageTimings:
    """One stage's provisional panes decided, micro-batch after micro-batch."""

    def __init__(self, graph: StageGraph, stage: Stage):
        retracting = StageRunner(graph, stage).pipeline.accumulation == "retracting"
        self.watermarks = StageWatermarks(retracting=retracting)

    def settle(self, rows: DataFrame) -> DataFrame:
        """The stage's output rows of a micro-batch (cached) with its provisional panes decided: they
        and the reports are collected (few rows), decided and put back beside the others; an empty
        pane decided LATE is left out."""
        side = [r.asDict() for r in rows.filter((F.col(KIND) == "H") | (F.col(PROV) > 0)).collect()]
        reports = [PartReport(r[BUCKET], r[PART_WATERMARK], tuple(r[HOLDS] or ())) for r in side if r[KIND] == "H"]
        self.watermarks.bundle(r for r in reports if r.holds)
        decided = self.decide([r for r in side if r[KIND] == "P"])
        settled = rows.filter(F.coalesce(F.col(PROV), F.lit(0)) == 0)
        if not decided:
            return settled
        return settled.unionByName(rows.sparkSession.createDataFrame(decided, schema=OUTPUT))

    def decide(self, panes: list[dict]) -> list[dict]:
        """Provisional pane rows, decided in the order the stage emitted them; the rows of one pane
        (a merge's table) take one decision."""
        out: list[dict] = []
        decided: dict[tuple, str | None] = {}
        for r in sorted(panes, key=lambda r: (r[STEP_PHASE], r[BUCKET], r[SUB])):
            record = json.loads(r[ROW])
            pane = (r[CONTRIB], record["pane_index"], record["retraction"])
            if pane not in decided:
                decided[pane] = self.watermarks.timing(
                    r[PROV], record["timing"], r[STEP_PHASE], r[WE], pane[:2], record["retraction"]
                )
            timing = decided[pane]
            if timing is not None:
                out.append({**r, ROW: dumps({**record, "timing": timing}), PROV: 0})
        return out
