"""One micro-batch of the stateful plan on the driver, in ``foreachBatch``
(``StatefulStreamResult.write_stream``).

The processor's output of the micro-batch is kept (``held``), and one job runs the operator and
collects the few rows the driver reads: each call's count row (kind "C": what it read, counted and emitted,
``stateful_counts``) and, with allowed lateness, the buckets' reports and the undecided panes, which
``settling`` decides. The callbacks then get only what there is: the dead-letter callback is not
called for a micro-batch without dead letters (as on the native plan), and a micro-batch without
panes hands the panes callback one empty DataFrame that reads nothing (``no_panes``). The counts
callback gets the micro-batch's counts, its pane rows as the driver decided them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as ST

from ..core.pipeline import Pipeline
from . import stateful_counts
from .failed_rows import FailedRows
from .session import is_connect
from .stateful import (
    KIND,
    Selection,
    dead_letter_selection,
    output_schema,
    pane_selection,
    panes_of,
    selected,
    sql_panes_of,
)
from .stateful_timing import OutputWatermarks
from .window_pipeline import is_sql

#: a callback ``f(df, batch_id)`` of ``write_stream``
Callback = Callable[[DataFrame, int], Any]
#: ``write_stream``'s ``on_counts(counts, batch_id)``: a micro-batch's counts (``stateful_counts``)
CountsCallback = Callable[[dict, int], Any]


def held(batch: DataFrame) -> tuple[DataFrame, Callable[[], object]]:
    """The micro-batch's output, kept for the jobs that read it as the first computes it (the
    operator runs once), and what lets it go. On classic Spark its rows as they are
    (``localCheckpoint(eager=False)``), not Spark's columnar cache, whose building (each column
    encoded, with its statistics) costs more than the rows' copy; let go through the
    ``LogicalRDD`` it reads (Spark drops a checkpoint's blocks only once the JVM collects its RDD).
    On Spark Connect, cached (the server's checkpoints are its to drop)."""
    if is_connect(batch.sparkSession):
        cached = batch.cache()
        return cached, cached.unpersist
    kept = batch.localCheckpoint(eager=False)
    rows = kept._jdf.logicalPlan().rdd()
    return kept, lambda: rows.unpersist(False)


class StatefulBatches:
    """The micro-batches of one query of the stateful plan (``p``; ``schema``: the stream's input
    schema; ``checkpoint``: the query's, where the driver's decisions are kept; ``view``: the table
    a SQL window pipeline reads)."""

    def __init__(self, p: Pipeline, schema: ST.StructType, checkpoint: str, view: str):
        self.p, self.schema, self.view = p, schema, view
        # (with allowed lateness, the provisional panes are decided here, what the decisions keep
        # written to the checkpoint per micro-batch: see ``settling``)
        self.watermarks = OutputWatermarks(p, checkpoint) if p.allowed_lateness > 0 else None
        # (the rows a SQL pipeline's query failed on stay in their window: taken out of later panes)
        self.failed_rows = FailedRows(schema, KIND, checkpoint) if is_sql(p) else None
        self._empty: tuple[Any, DataFrame] | None = None  # (session, the panes of a micro-batch with none)
        self.nonempty: list[DataFrame] = []  # (``has_rows``)
        # (the Columns each micro-batch reads its output with, built at the first: each Column is
        # JVM round trips: about 370 a micro-batch)
        self._counted: Column | None = None
        self._panes: Selection | None = None
        self._letters: Selection | None = None

    def run(
        self,
        batch: DataFrame,
        batch_id: int,
        on_panes: Callback,
        on_dead_letters: Callback,
        on_counts: CountsCallback | None = None,
    ) -> None:
        batch, release = held(batch)
        try:
            settled, counts = self.settled(batch, batch_id)
            pane_rows, letter_rows = counts["pane_rows"], counts["dead_letter_rows"]
            if self.failed_rows is not None:
                del counts["pane_rows"]  # (its window's rows: its panes are the query's, run below)
            if on_counts is not None:
                on_counts(counts, batch_id)
            if self.failed_rows is not None:
                self._sql_panes(settled, batch_id, on_panes, on_dead_letters, letter_rows)
                return
            if pane_rows:
                on_panes(self._with_rows(self.panes_of(settled)), batch_id)
            else:
                on_panes(self.no_panes(batch), batch_id)
            if letter_rows:
                on_dead_letters(self._with_rows(self.dead_letters_of(settled)), batch_id)
        finally:
            self.nonempty = []
            release()

    def panes_of(self, settled: DataFrame) -> DataFrame:
        """``stateful.panes_of`` the micro-batch's output."""
        if self.p.window_pipeline is not None:
            return panes_of(settled, self.p, self.schema, self.view)
        if self._panes is None:
            self._panes = pane_selection(self.p, self.schema)
        return selected(settled, self._panes)

    def dead_letters_of(self, settled: DataFrame) -> DataFrame:
        """``stateful.dead_letters_of`` the micro-batch's output."""
        if self._letters is None:
            self._letters = dead_letter_selection()
        return selected(settled, self._letters)

    def _with_rows(self, df: DataFrame) -> DataFrame:
        """``df``, known to hold rows (``has_rows``) while the callbacks of the micro-batch run."""
        self.nonempty.append(df)
        return df

    def has_rows(self, df: DataFrame) -> bool:
        """Whether ``df`` is a DataFrame of the current micro-batch's callbacks known to hold rows."""
        return any(df is d for d in self.nonempty)

    def settled(self, batch: DataFrame, batch_id: int) -> tuple[DataFrame, dict]:
        """The micro-batch's output with its provisional panes decided, and its counts (its pane
        rows as decided), from the one job that runs the operator (see the module)."""
        if self._counted is None:
            self._counted = F.col(KIND) == "C"
            if self.watermarks is not None:
                self._counted = self._counted | self.watermarks.collected()
        rows = [r.asDict() for r in batch.filter(self._counted).collect()]
        counts: dict = {"pane_rows": 0, "dead_letter_rows": 0}
        for r in rows:
            if r[KIND] == "C":
                stateful_counts.add(counts, r[stateful_counts.COUNTS])
        if self.watermarks is None:
            return batch, counts
        side = [r for r in rows if r[KIND] != "C"]
        settled, decided = self.watermarks.settle_rows(batch, side, batch_id)
        counts["pane_rows"] -= sum(1 for r in side if r[KIND] == "P") - decided
        return settled, counts

    def _sql_panes(
        self, settled: DataFrame, batch_id: int, on_panes: Callback, on_dead_letters: Callback, letter_rows: int
    ) -> None:
        """A SQL window pipeline's panes: its query runs now, and a pane it fails on sends its rows
        to the dead letters."""
        assert self.failed_rows is not None
        self.failed_rows.load(batch_id)
        panes, failed = sql_panes_of(self.failed_rows.without(settled), self.p, self.schema, self.view)
        self.failed_rows.remember(failed, batch_id)
        on_panes(panes, batch_id)
        if letter_rows or failed is not None:
            dead = self.dead_letters_of(settled)
            on_dead_letters(self._with_rows(dead if failed is None else dead.unionByName(failed)), batch_id)
        panes.unpersist()

    def no_panes(self, batch: DataFrame) -> DataFrame:
        """The panes of a micro-batch without any: one empty DataFrame per session, which reads
        nothing (a callback's job over it runs no task over the micro-batch)."""
        spark = batch.sparkSession
        session = getattr(spark, "_jsparkSession", None)  # (none: Spark Connect; built each time)
        if self._empty is None or session is None or not self._empty[0].equals(session):
            # (an empty relation Spark's optimizer knows is empty: a job over it reads nothing)
            none = spark.createDataFrame([], output_schema(self.p, self.schema)).limit(0)
            self._empty = (session, panes_of(none, self.p, self.schema, self.view))
        return self._empty[1]

    def is_no_panes(self, panes: DataFrame) -> bool:
        """Whether ``panes`` are those of a micro-batch without any (``no_panes``)."""
        return self._empty is not None and panes is self._empty[1]
