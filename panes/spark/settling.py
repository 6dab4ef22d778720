"""The driver's side of a stage's output watermark on Spark, with allowed lateness: a micro-batch's
reports of its buckets' holds taken in, and the panes a bucket could not decide (provisional: their
timing hangs on other buckets' holds) decided as the core decides them for the whole stage
(``core.engine.parts.StageWatermarks``). One routine for the single-stage stateful plan
(``stateful_timing.OutputWatermarks``) and a multi-stage pipeline's stages
(``stages.timing.StageTimings``), each over its own row layout (``RowLayout``).

``Settler.settle`` collects the reports and provisional panes of a cached micro-batch (few rows;
``settle_rows`` takes them collected), decides them and puts them back beside the others; an
empty pane decided LATE is left out. What
the driver keeps from one micro-batch to the next (``StageWatermarks.snapshot``) is written to the
checkpoint under the micro-batch's id (``DecisionStore``), and each micro-batch starts from the
version before its own: a micro-batch that Spark runs again after a failure or a restart decides
as it did the first time (the Apex seed's idempotency rule), and a restarted query knows every
bucket's holds and the LATE panes whose retraction is to come.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as ST

from ..core.engine.parts import PartReport, StageWatermarks
from .connect import local_checkpoint_refusal


@dataclass(frozen=True)
class Provisional:
    """What a provisional pane's decision needs (``StageWatermarks.timing``); ``rows_of``: the
    pane's rows share it and take one decision (None: the row is the pane)."""

    provisional: int
    timing: str
    phase: int
    window_end: int
    pane: tuple
    retraction: bool
    rows_of: tuple | None = None


class RowLayout:
    """Where a plan's output rows hold what the driver reads and writes."""

    kind: str  # the column of a row's kind: "H" a bucket's report, "P" a pane
    provisional: str  # the column of ``Pane.provisional`` (0 or null: decided)

    def report(self, row: dict) -> PartReport | None:
        raise NotImplementedError

    def order(self, row: dict) -> tuple:
        """Where a pane row stands in the stage's emission order."""
        raise NotImplementedError

    def pane(self, row: dict) -> Provisional:
        raise NotImplementedError

    def decided(self, row: dict, timing: str) -> dict:
        """The row with its pane's timing decided."""
        raise NotImplementedError


class DecisionStore:
    """What the driver keeps between micro-batches, one JSON file per micro-batch under
    ``<checkpoint>/<directory>`` (``panes_decisions`` by default): ``v<batch id>.json``, written
    whole (to a temporary name, then renamed) after the micro-batch decided. A checkpoint on
    another file system than the driver's keeps nothing: a restarted query starts afresh (holds of
    buckets that have not run count as none, a LATE pane's retraction comes out ON_TIME)."""

    DIR = "panes_decisions"

    def __init__(self, checkpoint: str | None, directory: str = DIR):
        self.root: Path | None = None
        if checkpoint is not None and local_checkpoint_refusal(checkpoint) is None:
            url = urlparse(checkpoint)
            self.root = Path(url.path if url.scheme == "file" else checkpoint).resolve() / directory

    @property
    def keeps(self) -> bool:
        """Whether it keeps anything (else what the driver keeps stays in its memory)."""
        return self.root is not None

    def versions(self) -> list[int]:
        if self.root is None or not self.root.exists():
            return []
        return sorted(int(f.stem[1:]) for f in self.root.glob("v*.json") if f.stem[1:].isdigit())

    def before(self, batch_id: int) -> dict | None:
        """The snapshot of the last micro-batch before ``batch_id`` (None: none)."""
        prior = [v for v in self.versions() if v < batch_id]
        if self.root is None or not prior:
            return None
        return json.loads((self.root / f"v{prior[-1]}.json").read_text())

    def write(self, batch_id: int, snapshot: dict) -> None:
        """Writes the micro-batch's snapshot; keeps it and the one before (Spark may run this
        micro-batch again), and none after it (left by a run this one replaces)."""
        if self.root is None:
            return
        self.root.mkdir(parents=True, exist_ok=True)
        path = self.root / f"v{batch_id}.json"
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps(snapshot))
        tmp.replace(path)
        versions = self.versions()
        keep = [v for v in versions if v <= batch_id][-2:]
        for v in versions:
            if v not in keep:
                (self.root / f"v{v}.json").unlink(missing_ok=True)

    def clear(self) -> None:
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)


class Settler:
    """A stage's provisional panes decided, micro-batch after micro-batch (see the module)."""

    def __init__(self, layout: RowLayout, retracting: bool, allowed_lateness: int, store: DecisionStore | None = None):
        self.layout = layout
        self.retracting, self.allowed_lateness = retracting, allowed_lateness
        self.watermarks = self.fresh()
        self.store = store
        self._collected: Column | None = None  # (``collected``: built once, each is JVM round trips)

    def fresh(self) -> StageWatermarks:
        return StageWatermarks(retracting=self.retracting, allowed_lateness=self.allowed_lateness)

    def restore(self, snapshot: dict | None) -> None:
        """Starts from ``snapshot`` (None: from nothing)."""
        self.watermarks = self.fresh() if snapshot is None else self.fresh().restore(snapshot)

    def decide(self, rows: Iterable[dict]) -> list[dict]:
        """A micro-batch's rows (dicts of the plan's output columns): the reports taken in and left
        out, the provisional panes decided in the order the stage emitted them (an empty LATE one
        left out), the other rows as they were."""
        L = self.layout
        rows = list(rows)
        self.watermarks.bundle(r for r in map(L.report, (r for r in rows if r[L.kind] == "H")) if r is not None)
        out = []
        decided: dict[tuple, str | None] = {}
        for r in sorted((r for r in rows if r[L.kind] != "H"), key=L.order):
            if r[L.kind] == "P" and r.get(L.provisional):
                pane = L.pane(r)
                if pane.rows_of is None or pane.rows_of not in decided:
                    timing = self.watermarks.timing(
                        pane.provisional,
                        pane.timing,
                        pane.phase,
                        pane.window_end,
                        # (as text: what the store keeps, whatever the types of the key's values)
                        json.dumps(pane.pane, default=str),
                        pane.retraction,
                    )
                    if pane.rows_of is not None:
                        decided[pane.rows_of] = timing
                else:
                    timing = decided[pane.rows_of]
                if timing is None:
                    continue
                r = L.decided(r, timing)
            out.append(r)
        return out

    def collected(self) -> Column:
        """The rows ``settle_rows`` reads: the reports and the undecided panes."""
        if self._collected is None:
            L = self.layout
            self._collected = (F.col(L.kind) == "H") | (F.coalesce(F.col(L.provisional), F.lit(0)) > 0)
        return self._collected

    def settle(self, batch: DataFrame, batch_id: int | None = None, schema: ST.StructType | None = None) -> DataFrame:
        """A cached micro-batch's output (``schema``: its rows', by default the batch's) with its
        provisional panes decided and without the reports. ``batch_id``: the micro-batch's, for the
        store (None: decisions kept in memory only)."""
        rows = [r.asDict() for r in batch.filter(self.collected()).collect()]
        return self.settle_rows(batch, rows, batch_id, schema)[0]

    def settle_rows(
        self, batch: DataFrame, rows: list[dict], batch_id: int | None = None, schema: ST.StructType | None = None
    ) -> tuple[DataFrame, int]:
        """``settle`` with the rows it reads (``collected``) already collected; and how many pane
        rows its decisions put back."""
        if self.store is not None and self.store.keeps and batch_id is not None:
            self.restore(self.store.before(batch_id))
        decided = self.decide(rows)
        if self.store is not None and batch_id is not None:
            self.store.write(batch_id, self.watermarks.snapshot())
        settled = batch.filter(~self.collected())
        if not decided:
            return settled, 0
        return settled.unionByName(batch.sparkSession.createDataFrame(decided, schema=schema or batch.schema)), len(
            decided
        )
