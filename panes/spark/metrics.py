"""panes' counts on the native plan as Spark observed metrics: every micro-batch's
``StreamingQueryProgress.observedMetrics["panes"]`` (``INPUT``) holds them, so Spark's listeners, UI
and monitoring see them (``panes.core.accounting`` says what they add up to). The stateful plan's
processor counts them itself (``stateful_counts``: the same names).

``INPUT``, on the stream's prepared rows: ``records_in`` (the records read, not panes' control
rows), ``watermark_records``, the records each check refused (one count per reason: ``malformed``,
``invalid_event_time``...), the least and greatest numeric event time (``event_time_min``/``_max``:
a run warns when they look like another unit), ``in_window`` and ``in_no_window`` (valid records
with a window, and in a hopping gap).

Lateness is decided per micro-batch inside ``foreachBatch``, where Spark collects no observed
metrics: the records counted are ``in_window`` less the late dead letters the sink received
(``panes.runner``). So is a SQL window pipeline's failure (its query runs there): its
``window_pipeline_failed`` dead letters are those its sink received.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as ST

from ..core.pipeline import Pipeline
from ..core.rules import VALIDATION_ORDER, Reason
from .columns import CLOCK, INVALID, PUNCT, TS

INPUT = "panes"
#: the reasons a record's own checks give (late is decided against the watermark, later)
RECORD_REASONS = tuple(r.value for r in VALIDATION_ORDER if r is not Reason.LATE)
#: the first Spark whose progress counts a micro-batch's observed metrics once, however many jobs
#: ``foreachBatch`` runs over the micro-batch
OBSERVED_ONCE_FROM = (4, 3)


def counted_per_read(spark_version: str) -> bool:
    """Whether Spark ``spark_version`` adds a micro-batch's observed metrics once per job that reads
    it inside ``foreachBatch`` (the native plan's step reads it again for its dead letters): a
    micro-batch read twice would count each record twice. The native plan then caches the
    micro-batch, so that the observation runs in its first job only."""
    major, minor = (int(part) for part in spark_version.split(".")[:2])
    return (major, minor) < OBSERVED_ONCE_FROM


def input_counts(control: str | None, event_time: Column | None, windows: tuple[Column, Column] | None) -> list[Column]:
    """The ``INPUT`` metrics of a prepared stream (columns INVALID, PUNCT, CLOCK; ``control``: the
    column of panes' control rows). ``event_time``: the event-time column's numbers (None when it
    holds none); ``windows``: (in a window, in no window) of a valid record, native plan."""
    is_record = F.col(CLOCK).isNull()
    if control is not None:
        is_record = is_record & F.col(control).isNull()
    out = [
        F.count_if(is_record).alias("records_in"),
        F.count_if(is_record & F.col(PUNCT).isNotNull()).alias("watermark_records"),
    ]
    out += [F.count_if(F.col(INVALID) == F.lit(r)).alias(r) for r in RECORD_REASONS]
    if windows is not None:
        out += [F.count_if(windows[0]).alias("in_window"), F.count_if(windows[1]).alias("in_no_window")]
    if event_time is not None:
        out += [F.min(event_time).alias("event_time_min"), F.max(event_time).alias("event_time_max")]
    return out


def numeric_event_time(schema: ST.StructType, column: str | None) -> Column | None:
    """The numbers an event-time column holds (as doubles: numbers, or strings of digits), for the
    unit warning; None for a column of timestamps or dates (or no column)."""
    if column is None or column not in schema.fieldNames():
        return None
    dtype = schema[column].dataType
    c = F.col(f"`{column}`")
    if isinstance(dtype, ST.NumericType):
        return c.cast("double")
    if isinstance(dtype, ST.StringType):
        s = F.trim(c)
        return F.when(s.rlike(r"^-?[0-9]+$"), s.try_cast("double"))
    return None


def bounded_counts(df: DataFrame, p: Pipeline) -> dict:
    """The ``INPUT`` metrics of bounded input, in one aggregation over it (no late records: every
    valid record in a window counts)."""
    from .native.names import WINDOW_END
    from .native.windows import window_plan
    from .planner import prepare

    prepared = prepare(df, p, 0, watermark=False)
    plan = window_plan(p.window)
    valid = F.col(PUNCT).isNull() & F.col(INVALID).isNull()
    in_window = plan.row_window(F.col(TS))[WINDOW_END].isNotNull() if plan.has_gaps else F.lit(True)
    windows = (valid & in_window, valid & ~in_window)
    row = prepared.agg(*input_counts(None, numeric_event_time(df.schema, p.event_time), windows)).first()
    return row.asDict() if row is not None else {}
