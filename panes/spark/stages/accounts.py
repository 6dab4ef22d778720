"""Where a micro-batch's input records went, on Spark: the core's rule (``core.stages.accounts``)
over the micro-batch's rows, the stages' dead letters and the records they put in no window, in
two small aggregates collected by the driver."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ...core.accounting import Accounting
from ...core.stages import StageGraph
from ...core.stages.accounts import GraphAccounting
from ..columns import CLOCK, INVALID, PUNCT, TS
from .buckets import KIND, LETTER_INPUT, ROW, STAGE_INDEX
from .transport import INPUT, RECORD, SEQ

#: a dead letter's record: its arrival number, or for a stage's pane (no arrival number) one of its own
RECORD_ID = "__panes_record_id"


def arrivals(batch: DataFrame) -> dict[str, Accounting]:
    """Each input's records in, watermark records, dead letters of its own checks, and its valid
    records (as ``counted`` until the stages' part is taken off)."""
    record = F.col(RECORD).isNotNull() & F.col(CLOCK).isNull()
    valid = record & F.col(INVALID).isNull() & F.col(PUNCT).isNull() & F.col(TS).isNotNull()
    stats = (
        batch.groupBy(INPUT, INVALID)
        .agg(
            F.count(F.when(record, 1)).alias("records"),
            F.count(F.when(record & F.col(INVALID).isNull() & F.col(PUNCT).isNotNull(), 1)).alias("punct"),
            F.count(F.when(valid, 1)).alias("valid"),
        )
        .collect()
    )
    out: dict[str, Accounting] = {}
    for r in stats:
        a = out.setdefault(r[INPUT], Accounting())
        a.records_in += r["records"]
        a.watermark_records += r["punct"]
        a.counted += r["valid"]
        if r[INVALID] is not None and r["records"]:
            a.reasons[r[INVALID]] += r["records"]
    return out


def batch_accounting(
    graph: StageGraph, batch: DataFrame, letters: DataFrame, stage_rows: dict[str, DataFrame]
) -> GraphAccounting:
    """The micro-batch's account. ``letters``: its dead letters (once per late record), with the
    index of the stage that wrote each (-1: an input's own checks)."""
    inputs = arrivals(batch)
    readers = {name: len(graph.readers(name)) for name in graph.input_names}
    staged = letters.filter(F.col(STAGE_INDEX) >= 0).select(
        LETTER_INPUT,
        F.coalesce(F.col(SEQ), -1 - F.monotonically_increasing_id()).alias(RECORD_ID),
        STAGE_INDEX,
        F.get_json_object(F.col(ROW), "$.reason").alias("reason"),
    )
    union = staged
    for rows in stage_rows.values():
        gaps = rows.filter(F.col(KIND) == "N").select(LETTER_INPUT, F.col(SEQ).alias(RECORD_ID))
        union = union.unionByName(gaps, allowMissingColumns=True)
    per_record = union.groupBy(LETTER_INPUT, RECORD_ID).agg(
        F.min_by("reason", F.when(F.col("reason").isNotNull(), F.col(STAGE_INDEX))).alias("reason"),
        F.count(F.when(F.col("reason").isNull(), 1)).alias("gaps"),
    )
    out = GraphAccounting()
    found = per_record.groupBy(LETTER_INPUT, "reason", "gaps").count().collect()
    for r in found:
        name, n = r[LETTER_INPUT], r["count"]
        if name not in readers:  # a stage's pane, dead-lettered downstream
            if r["reason"] is not None:
                out.pane_letters[r["reason"]] += n
            continue
        a = inputs.setdefault(name, Accounting())
        if r["reason"] is not None:
            a.reasons[r["reason"]] += n
            a.counted -= n
        elif r["gaps"] == readers[name]:
            a.in_no_window += n
            a.counted -= n
    for name in graph.input_names:
        if name in inputs:
            out.add_input(name, inputs[name])
    return out
