"""The driver's side of the single-stage stateful plan's output watermark (see ``stateful``): its
output rows as ``settling`` reads them."""

from __future__ import annotations

from ..core.engine.parts import PartReport
from ..core.pipeline import Pipeline
from ..core.time import MAX_TIME
from .settling import DecisionStore, Provisional, RowLayout, Settler
from .stateful import KIND, ORDER, PART, PART_HOLDS, PART_WATERMARK, PHASE, PROVISIONAL
from .window_pipeline import PANE_ID


class StatefulRows(RowLayout):
    """The processor's output rows (``stateful.output_schema``): a window pipeline's pane is
    several rows with one ``PANE_ID``, decided once."""

    kind, provisional = KIND, PROVISIONAL

    def __init__(self, key: tuple[str, ...]):
        self.key = list(key)

    def report(self, row: dict) -> PartReport:
        return PartReport(row[PART], row[PART_WATERMARK], tuple(row[PART_HOLDS]))

    def order(self, row: dict) -> tuple:
        return (row[PHASE], row[ORDER])

    def pane(self, row: dict) -> Provisional:
        end = MAX_TIME if row["window_end"] is None else row["window_end"]
        table_pane = row.get(PANE_ID)
        return Provisional(
            row[PROVISIONAL],
            row["timing"],
            row[PHASE],
            end,
            (tuple(row[k] for k in self.key), row["window_start"], row["window_end"], row["pane_index"]),
            row["retraction"],
            None if table_pane is None else (row[PHASE], table_pane),
        )

    def decided(self, row: dict, timing: str) -> dict:
        return {**row, "timing": timing, PROVISIONAL: 0}


class OutputWatermarks(Settler):
    """The stage's provisional panes decided on the driver, micro-batch after micro-batch;
    ``checkpoint``: the query's, where the decisions are kept (``settling.DecisionStore``; None:
    in memory, as a replay that runs one query keeps them)."""

    def __init__(self, p: Pipeline, checkpoint: str | None = None):
        store = DecisionStore(checkpoint) if checkpoint is not None else None
        super().__init__(StatefulRows(p.key), p.accumulation == "retracting", p.allowed_lateness, store)
