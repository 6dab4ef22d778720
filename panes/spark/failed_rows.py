"""The rows a SQL window pipeline's query failed on, on the stateful plan: each goes to the dead
letters once.

Spark runs the query per micro-batch in ``foreachBatch`` (``window_pipeline.guarded_sql_panes``),
after the processor wrote the window's state: the rows of a pane it failed on stay in their
window, and a later pane of it (accumulating, or the failed pane's retraction) holds them again.
The driver remembers them (per window: each row's record and how many such rows failed) and takes
them out of the later panes before the query runs, so each goes to the dead letters once and a
later pane runs over the rows after them, as in the core (its rows leave the window). What it
remembers is kept in the checkpoint per micro-batch id (``settling.DecisionStore``), so a
micro-batch run again or after a restart takes out the same rows.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as ST

from .settling import DecisionStore
from .window_pipeline import PANE_ID, record_columns

#: the columns that mark a pane row remembered as failed (dropped before the query runs)
ROW_ID, FAILED, RANK = "__panes_failed_row", "__panes_failed_count", "__panes_failed_rank"


class FailedRows:
    """What the driver remembers of the failed rows of a stream's SQL window pipeline (``schema``:
    the stream's; ``checkpoint``: where it is kept, None: in memory)."""

    DIR = "panes_failed_rows"

    def __init__(self, schema: ST.StructType, kind: str, checkpoint: str | None = None):
        self.columns = record_columns(schema)
        self.kind = kind
        self.counts: dict[str, int] = {}  # a row's identity (``row_identity``) -> rows that failed
        self.store = DecisionStore(checkpoint, self.DIR) if checkpoint is not None else None

    def row_identity(self) -> Column:
        """A pane row's window and record, as text (the record as its dead letter holds it)."""
        record = F.to_json(F.struct(*[F.col(f"`{c}`") for c in self.columns]))
        return F.to_json(F.struct(F.col("window_start"), F.col("window_end"), record.alias("record")))

    @staticmethod
    def letter_identity() -> Column:
        """A ``window_pipeline_failed`` dead letter's row identity (``row_identity``)."""
        window = F.col("windows")[0]
        return F.to_json(
            F.struct(
                F.unix_millis(window["start"]).alias("window_start"),
                F.unix_millis(window["end"]).alias("window_end"),
                F.col("record"),
            )
        )

    def load(self, batch_id: int) -> None:
        """What the micro-batch before ``batch_id`` left (in memory: what the last one did)."""
        if self.store is not None and self.store.keeps:
            self.counts = dict(self.store.before(batch_id) or {})

    def without(self, batch: DataFrame) -> DataFrame:
        """The processor's output rows without the pane rows remembered as failed: of each window
        row's identity, a pane's first as many as failed."""
        if not self.counts:
            return batch
        known = batch.sparkSession.createDataFrame(list(self.counts.items()), f"{ROW_ID} string, {FAILED} long")
        marked = batch.withColumn(ROW_ID, F.when(F.col(self.kind) == "P", self.row_identity()))
        joined = marked.join(F.broadcast(known), ROW_ID, "left")
        ranked = joined.withColumn(RANK, F.row_number().over(Window.partitionBy(PANE_ID, ROW_ID).orderBy(ROW_ID)))
        return ranked.filter(F.col(FAILED).isNull() | (F.col(RANK) > F.col(FAILED))).drop(ROW_ID, FAILED, RANK)

    def remember(self, letters: DataFrame | None, batch_id: int | None) -> None:
        """The micro-batch's failed rows (their dead letters) remembered, and kept."""
        changed = False
        if letters is not None:
            for r in letters.groupBy(self.letter_identity().alias(ROW_ID)).count().collect():
                self.counts[r[ROW_ID]] = self.counts.get(r[ROW_ID], 0) + int(r["count"])
                changed = True
        if changed and self.store is not None and batch_id is not None:
            self.store.write(batch_id, self.counts)
