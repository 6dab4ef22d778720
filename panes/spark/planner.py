"""Compile a pipeline to a Spark plan and run it on a DataFrame.

- Streaming DataFrame: the native plan per micro-batch (``native``; ``plan='arrow'``: its sink form,
  ``native.arrow_sink``) when the pipeline allows it; else the stateful plan (see ``stateful.py``).
- Bounded DataFrame: the final answer the stream converges to (every record counted, one final
  pane per window): the native step once (``native``: every window type, the built-in
  aggregates); the core engine over buckets of keys for user combine functions.
"""

from __future__ import annotations

import functools
import uuid
from dataclasses import replace

import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as ST

from ..core import rules
from ..core.output import pane_columns
from ..core.pipeline import Pipeline
from ..core.rules import Reason
from ..core.time import END_OF_INPUT, MIN_TIME
from ..core.triggers import Never
from . import metrics
from .bucket_layout import bucket_column, default_buckets, every_bucket
from .columns import (
    BUCKET,
    CLOCK,
    DEAD_LETTER_SCHEMA,
    DETAIL,
    EVENT_TIME_NUMBER,
    INVALID,
    NUM,
    PUNCT,
    SPARK_END_MS,
    TS,
    WMARK,
    Check,
    event_time_ms,
    numeric_string_columns,
    pane_schema,
    punctuation_records,
    reason_detail,
    record_json,
    valid,
    validation,
)
from .connect import check_bounded, check_stateful_client
from .deferred_processor import DeferredProcessor
from .native import batch_unsupported, never_late, stream_unsupported
from .native.arrow_stream import sink_checked
from .native.names import ROW_COUNTS, ROW_IN_WINDOW
from .native.step import NativeStep, batch_step
from .native.windows import window_plan, window_reads
from .record_files import REFERENCES, RecordFiles
from .results import BoundedResult, NativeStreamResult, StatefulStreamResult, WindowedResult
from .stateful import (
    KIND,
    BucketProcessor,
    dead_letters_of,
    output_schema,
    restore_integers,
)
from .stateful_counts import event_time_numbers
from .stateful_input import as_micros
from .window_pipeline import (
    FIXED_WINDOWS,
    assigned_rows,
    engine_pipeline,
    is_sql,
    plan_text,
    sql_check,
    table_panes,
)

__all__ = [
    "BoundedResult",
    "NativeStreamResult",
    "StatefulStreamResult",
    "WindowedResult",
    "explain_plan",
    "prepare",
    "engine_columns",
    "window_batch",
    "window_stream",
]


def explain_plan(pipeline: Pipeline, mode: str = "stream") -> str:
    if pipeline.window_pipeline is not None:
        return plan_text(pipeline, mode)
    if mode == "batch":
        why_not = batch_unsupported(pipeline)
        if why_not is None:
            return (
                "batch: native Spark aggregation (window assignment by expressions, sessions merged as intervals in "
                "time order by window functions (rows first grouped per gap of time when the gap is fixed), KIP-450 "
                "sliding windows framed with window functions, groupBy, native aggregate functions)"
            )
        return "batch: core engine over hash buckets of the key (" + why_not + ")"
    why = stream_unsupported(pipeline)
    if why is None:
        return (
            "stream: native Spark per micro-batch (window assignment, late split and partial aggregates by "
            "expressions, open windows merged with a groupBy and kept under the checkpoint; late rows to the "
            "dead letters)"
        )
    return (
        "stream: transformWithStateInPandas over hash buckets of the key, driving the core "
        "engine (event-time timers; late rows dead-lettered by the engine), because " + why
    )


def native_batch_supported(p: Pipeline) -> bool:
    return batch_unsupported(p) is None


# -- shared preparation ------------------------------------------------------------------------------


def prepare(
    df: DataFrame,
    p: Pipeline,
    buckets: int,
    ingestion: Column | None = None,
    control_wm: str | None = None,
    watermark: bool = True,
) -> DataFrame:
    """Add the engine's columns: event time (ms), dead-letter reason, the watermark column (not
    for bounded input: ``watermark=False``), the punctuation value, the bucket. ``control_wm``
    names a column of explicit watermark steps (replay); ``ingestion`` is the ingestion time when
    there is no event_time."""
    schema = df.schema  # (asked once: each DataFrame.schema is a JVM round trip)
    cols_out, _ = engine_columns(schema, p, ingestion, control_wm, watermark)
    out = df.withColumns(cols_out)
    if not buckets:
        return out  # batch native plan: no buckets
    bucket = bucket_column([F.col(k) for k in p.key], buckets)
    if CLOCK not in schema.fieldNames():
        return out.withColumn(BUCKET, bucket)
    # clock rows (heartbeat, scripted clock) reach every bucket
    return out.withColumn(
        BUCKET, F.explode(F.when(F.col(CLOCK).isNotNull(), every_bucket(buckets)).otherwise(F.array(bucket)))
    )


def engine_columns(
    schema: ST.StructType,
    p: Pipeline,
    ingestion: Column | None = None,
    control_wm: str | None = None,
    watermark: bool = True,
    reasons: bool = True,
) -> tuple[dict[str, Column], Column]:
    """The columns ``prepare`` adds, as expressions of the input's columns, and the test of a
    data row that counts (not punctuation, not a clock row, valid). ``reasons=False``: without
    the dead letters' reason and detail (INVALID, DETAIL), for a plan of the panes only (each
    Column costs JVM round trips)."""
    cols = schema.fieldNames()
    ts, ts_checks = _event_time(schema, p, ingestion)
    for k in p.key:
        if k not in cols:
            raise ValueError(f"key: no column {k!r} in the input ({cols})")
    for c in p.value_columns:
        if c not in cols:
            raise ValueError(f"aggregates: no column {c!r} in the input ({cols})")
    puncts, punct_checks = _punctuations(schema, p, control_wm)
    ts_checks = [*punct_checks, *ts_checks]
    punct = (F.greatest(*puncts) if len(puncts) > 1 else puncts[0]) if puncts else F.lit(None).cast("long")
    # numbers as numbers for the engine; the original column stays for the dead letters
    # (a JSON number inferred as string reads as a double)
    num = {c: F.col(c).try_cast("double") for c in numeric_string_columns(schema, p)}
    checks = validation(schema, p, num, ts_checks, window_reads(p.window)[1])
    data_row = _data_row(punct if puncts else None, CLOCK in cols)
    cols_out = {
        TS: ts,
        PUNCT: punct,
        **{NUM + c: v for c, v in num.items()},
        **({} if CLOCK in cols else {CLOCK: F.lit(None).cast("long")}),
    }
    if reasons:
        reason, detail = reason_detail(checks)
        cols_out[INVALID] = reason if data_row is None else F.when(data_row, reason)
        cols_out[DETAIL] = detail if data_row is None else F.when(data_row, detail)
    counts = valid(checks) if data_row is None else data_row & valid(checks)
    if watermark:
        cols_out[WMARK] = _watermark_tracked(p, ts, punct if puncts else None, counts)
    return cols_out, counts


def _event_time(schema: ST.StructType, p: Pipeline, ingestion: Column | None) -> tuple[Column, list[Check]]:
    """A row's event time in ms and its checks; the ingestion time (``ingestion`` or now) without
    ``event_time``."""
    if p.event_time:
        cols = schema.fieldNames()
        if p.event_time not in cols:
            raise ValueError(f"event_time: no column {p.event_time!r} in the input ({cols})")
        return event_time_ms(schema, p.event_time, p.time_unit)
    return (ingestion if ingestion is not None else F.unix_millis(F.current_timestamp())), []


def _punctuations(schema: ST.StructType, p: Pipeline, control_wm: str | None) -> tuple[list[Column], list[Check]]:
    """The watermark values a row carries (the control column's, a punctuation record's) and the
    check of a punctuation record's value."""
    punct_col = p.watermark.punctuation_column
    puncts = []
    if control_wm is not None:
        puncts.append(F.col(control_wm).cast("long"))
    if not punctuation_records(schema, p):
        return puncts, []
    # a punctuation record: a value in the punctuation column; one that is no time (or out of
    # the event-time range, where +infinity would end the input) is a dead letter
    punct_ms = event_time_ms(schema, punct_col, p.time_unit)[0]
    punct_ok = punct_ms.isNotNull() & rules.event_time_in_range(punct_ms)
    puncts.append(F.when(punct_ok, punct_ms))
    check = Check(
        F.col(punct_col).isNull() | punct_ok,
        Reason.INVALID_WATERMARK,
        f"watermark column {punct_col}: not a time in the event-time range",
    )
    return puncts, [check]


def _data_row(punct: Column | None, has_clock: bool) -> Column | None:
    """The test of a data row: not punctuation, not a clock row; None when every row is one (each
    column's expression written out, not referenced: one DataFrame step, as each costs an analysis
    of the plan)."""
    tests = [punct.isNull()] if punct is not None else []
    if has_clock:
        tests.append(F.col(CLOCK).isNull())
    return functools.reduce(lambda a, b: a & b, tests) if tests else None


def _watermark_tracked(p: Pipeline, ts: Column, punct: Column | None, counts: Column) -> Column:
    """The column Spark's watermark tracks: event time (max_delay rule) and punctuation values."""
    delay = p.watermark.max_delay
    wm_ms = F.when(counts, F.lit(None).cast("long") if p.watermark.punctuation else ts)
    if punct is not None:
        wm_ms = F.when(punct.isNotNull(), punct + F.lit(0 if p.watermark.punctuation else delay)).otherwise(wm_ms)
    return F.timestamp_millis(wm_ms)


# -- streaming -------------------------------------------------------------------------------------------


def needs_clock(p: Pipeline) -> bool:
    """Processing-time triggers and idleness need the processor to run when no data arrives."""
    return p.trigger.uses_processing_time() or p.watermark.idle_timeout is not None


def with_heartbeat(df: DataFrame, every_ms: int = 1000) -> DataFrame:
    """Union a clock stream: Spark 4's transformWithState runs event-time timers only in batches
    where the watermark moved, and a ProcessingTime-mode operator has no watermark at all. So a
    rate source adds one clock row per second (per trigger), delivered to every bucket; processing
    time then advances in the engine even when the real source is silent."""
    rate = df.sparkSession.readStream.format("rate").option("rowsPerSecond", max(1, 1000 // every_ms)).load()
    clock = rate.select(F.unix_millis(F.col("timestamp")).alias(CLOCK))
    return df.unionByName(clock, allowMissingColumns=True)


PLANS = ("auto", "native", "arrow", "stateful")


def window_stream(
    df: DataFrame,
    p: Pipeline,
    buckets: int | None = 8,
    scripted_clock: bool = False,
    ingestion: Column | None = None,
    control_wm: str | None = None,
    heartbeat: bool | None = None,
    plan: str = "auto",
    records: RecordFiles | None = None,
) -> WindowedResult:
    """The streaming plan: native when the pipeline allows it (``plan="auto"``), else stateful.
    ``buckets``: the stateful plan's (None: one per shuffle partition of the session). ``heartbeat``
    (default: when the pipeline needs processing time) adds the clock stream to the stateful plan,
    not with ``availableNow``. ``records``: the file source whose references ``df``'s rows carry."""
    if plan not in PLANS:
        raise ValueError(f"plan must be one of {PLANS}, not {plan!r}")
    why = stream_unsupported(p)
    if plan in ("native", "arrow") and why is not None:
        raise ValueError(f"plan {plan!r} cannot run this pipeline: {why}")
    if plan in ("auto", "native", "arrow") and why is None:
        return _native_stream(df, p, ingestion, control_wm, records, plan)
    df = df.drop(*REFERENCES)  # (the stateful plan keeps its rows' records)
    check_stateful_client(df.sparkSession)
    buckets = resolved_buckets(df, buckets)
    if heartbeat is None:
        heartbeat = needs_clock(p) and not scripted_clock
    if heartbeat:
        df = with_heartbeat(df)
    forced = "transformWithStateInPandas over hash buckets of the key, driving the core engine (plan='stateful')"
    text = explain_plan(p, "stream") if why is not None else f"stream: {forced}"
    return StatefulStreamResult(
        text, _stateful_stream(df, p, buckets, scripted_clock, ingestion, control_wm), p, df.schema, buckets
    )


def _native_stream(
    df: DataFrame, p: Pipeline, ingestion: Column | None, control_wm: str | None, records: RecordFiles | None, plan: str
) -> NativeStreamResult:
    record_columns = [c for c in df.columns if not c.startswith("__panes")]
    step = NativeStep(p, df.schema, record_columns, never_late(p) and control_wm is None, records)

    def rows(source: DataFrame) -> DataFrame:
        """``source``'s rows as a micro-batch of the step reads them (the stream's columns)."""
        prepared = prepare(source, p, 0, ingestion=ingestion, control_wm=control_wm).withColumns(step.row_columns())
        if source.isStreaming:
            counts = F.col(ROW_COUNTS)
            windows = (
                (counts, F.lit(False))
                if step.windows.several_per_row
                else (F.col(ROW_IN_WINDOW), counts & ~F.col(ROW_IN_WINDOW))
            )
            event_time = metrics.numeric_event_time(df.schema, p.event_time)
            prepared = prepared.observe(metrics.INPUT, *metrics.input_counts(control_wm, event_time, windows))
        return prepared.select(*[F.col(f"`{c}`") for c in step.stream_columns(prepared.columns)])

    def end_rows() -> DataFrame:
        """The micro-batch that ends the input: one control row at the end of time (other columns null)."""
        # (a range, not a list of rows: Spark knows the step's input is small; it collects its table)
        value = {control_wm: SPARK_END_MS}
        row = [F.lit(value.get(f.name)).cast(f.dataType).alias(f.name, metadata=f.metadata) for f in df.schema.fields]
        return rows(df.sparkSession.range(1).select(*row))

    source, ends = rows(df), end_rows if control_wm is not None else None
    sink = plan == "arrow" and sink_checked(step, source)  # (the sink plan: ``native.arrow_sink``)
    return NativeStreamResult(explain_plan(p, "stream"), step, source, ends, sink)


def _stateful_stream(
    df: DataFrame, p: Pipeline, buckets: int, scripted_clock: bool, ingestion: Column | None, control_wm: str | None
) -> DataFrame:
    """The stateful plan's output: panes and dead letters of every bucket (``stateful``)."""
    record_columns = [c for c in df.columns if not c.startswith("__panes")]
    prepared = prepare(df, p, buckets, ingestion=ingestion, control_wm=control_wm)
    engine_p = engine_pipeline(p)
    prepared, micros = as_micros(prepared, df.schema, engine_p, record_columns)
    # (the processor counts what it reads, no Spark observation: ``stateful_counts``)
    event_time_number, numbers = event_time_numbers(df.schema, p.event_time)
    if numbers is not None:
        prepared = prepared.withColumn(EVENT_TIME_NUMBER, numbers)
    prepared = prepared.withWatermark(WMARK, f"{0 if p.watermark.punctuation else p.watermark.max_delay} milliseconds")
    # punctuation and control rows reach the processor (it counts them); an empty column does not
    punctuated = control_wm is not None or punctuation_records(df.schema, p)
    empty = {WMARK, *([] if punctuated else [PUNCT]), *([] if CLOCK in df.columns else [CLOCK])}
    keep = [c for c in prepared.columns if c not in empty]
    # positional names, mapped back in the processor (PySpark renames names that are not identifiers)
    prepared = prepared.select(*[F.col(f"`{c}`").alias(f"c{i}") for i, c in enumerate(keep)])
    bucket_alias = f"c{keep.index(BUCKET)}"
    schema = df.schema
    sql_check(df.sparkSession, p, schema)
    out_schema = output_schema(p, schema)
    integral = tuple(f.name for f in schema.fields if isinstance(f.dataType, ST.IntegralType))
    integral_out = tuple(f.name for f in pane_schema(p, schema).fields if isinstance(f.dataType, ST.IntegralType))
    reads = (control_wm, event_time_number)  # (what the processor counts: ``stateful_counts``)
    processor = BucketProcessor(
        engine_p, record_columns, out_schema.fieldNames(), scripted_clock, keep, integral, integral_out, reads, micros
    )
    return prepared.groupBy(bucket_alias).transformWithStateInPandas(
        statefulProcessor=DeferredProcessor(processor),
        outputStructType=out_schema,
        outputMode="Append",
        timeMode="EventTime",
    )


# -- batch -----------------------------------------------------------------------------------------------


def window_batch(df: DataFrame, p: Pipeline, buckets: int | None = 8) -> BoundedResult:
    """The final answer for bounded input: every valid record counted, one pane per window.
    ``buckets``: the engine's, where it runs (None: one per shuffle partition of the session)."""
    schema = df.schema
    record_columns = [c for c in schema.fieldNames() if not c.startswith("__panes")]
    native = native_batch_supported(p)
    ingestion = None if p.event_time else F.unix_millis(F.current_timestamp())
    if p.window_pipeline is not None:
        return _window_pipeline_batch(df, p, resolved_buckets(df, buckets), ingestion)
    if native:
        # one native step from an empty state, then the end of the input
        step = batch_step(_final_answer(p), schema, record_columns)
        # (the final answer's pipeline differs from p only in what no check reads: the trigger,
        # accumulation, lateness; the ingestion time is the same expression for every run)
        cols, counts = step.memo(
            "bounded columns", lambda: engine_columns(schema, step.p, ingestion, watermark=False, reasons=False)
        )
        panes = step.closed(step.combine(step.on_time_bounded(df, cols, counts), None, MIN_TIME), END_OF_INPUT)

        def dead_letters() -> DataFrame:
            return step.dead_letters(prepare(df, p, 0, ingestion=ingestion, watermark=False), MIN_TIME)

        return BoundedResult(explain_plan(p, "batch"), panes, dead_letters)
    check_bounded(df.sparkSession)  # (Spark Connect: panes must import in the server's pandas workers)
    prepared = prepare(df, p, resolved_buckets(df, buckets), ingestion=ingestion, watermark=False)
    dead = _invalid_letters(prepared, record_columns, schema)
    good = prepared.filter(F.col(INVALID).isNull() & F.col(PUNCT).isNull() & F.col(CLOCK).isNull())
    for c in numeric_string_columns(schema, p):
        good = good.withColumn(c, F.col(NUM + c))
    panes = _engine_batch(good, p, schema, record_columns)
    return BoundedResult(explain_plan(p, "batch"), panes, dead)


def resolved_buckets(df: DataFrame, buckets: int | None) -> int:
    """``buckets``, or one per shuffle partition of ``df``'s session (read only for a plan that keeps
    buckets: a JVM round trip)."""
    return default_buckets(df.sparkSession) if buckets is None else buckets


def _window_pipeline_batch(df: DataFrame, p: Pipeline, buckets: int, ingestion: Column | None) -> BoundedResult:
    """A window pipeline's final answer: the rows of each window (assigned by expressions for a
    SQL pipeline over fixed windows, else by the engine over buckets of keys), then the pipeline
    (its SQL as Spark SQL over every window at once)."""
    schema = df.schema
    sql_check(df.sparkSession, p, schema)
    final = _final_answer(p)
    prepared = prepare(df, p, buckets, ingestion=ingestion, watermark=False)
    invalid = _invalid_letters(prepared, [c for c in schema.fieldNames() if not c.startswith("__panes")], schema)
    good = prepared.filter(F.col(INVALID).isNull() & F.col(PUNCT).isNull() & F.col(CLOCK).isNull())
    view = f"__panes_rows_{uuid.uuid4().hex}"
    if is_sql(p) and isinstance(p.window, FIXED_WINDOWS):
        rows = assigned_rows(good, final, schema, window_plan(p.window))
        return BoundedResult(plan_text(p, "batch"), table_panes(rows, final, schema, view, []), invalid)
    out_schema = output_schema(final, schema)
    processor = BucketProcessor(engine_pipeline(final), list(schema.fieldNames()), out_schema.fieldNames())
    integral = [f.name for f in schema.fields if isinstance(f.dataType, ST.IntegralType)]

    def run(pdf: pd.DataFrame) -> pd.DataFrame:
        from ..core.engine import TS as CORE_TS
        from ..core.engine import Engine

        engine = Engine(engine_pipeline(final))
        st = engine.new_state()
        batch = pdf.rename(columns={TS: CORE_TS}).drop(columns=[BUCKET])
        restore_integers(batch, integral)
        batch[CORE_TS] = batch[CORE_TS].astype("int64")
        res = engine.ingest(st, batch.sort_values(CORE_TS, kind="stable").reset_index(drop=True))
        res.extend(engine.advance(st, END_OF_INPUT))
        return processor.output_frame(int(pdf[BUCKET].iloc[0]), res.panes, res.dead_letters, 2)

    columns = [BUCKET, TS, *[c for c in schema.fieldNames() if not c.startswith("__panes")]]
    out = good.select(*columns).groupBy(BUCKET).applyInPandas(run, out_schema)
    panes = table_panes(out.filter(F.col(KIND) == "P"), final, schema, view, [])
    return BoundedResult(plan_text(p, "batch"), panes, invalid.unionByName(dead_letters_of(out)))


def _invalid_letters(prepared: DataFrame, record_columns: list[str], schema: ST.StructType) -> DataFrame:
    """The dead letters of records that fail their checks."""
    return prepared.filter(F.col(INVALID).isNotNull()).select(
        F.col(INVALID).alias("reason"),
        record_json(record_columns, schema).alias("record"),
        F.lit(None).cast("timestamp").alias("watermark"),
        F.lit(None).cast(DEAD_LETTER_SCHEMA["windows"].dataType).alias("windows"),
        F.col(DETAIL).alias("detail"),
    )


def _final_answer(p: Pipeline) -> Pipeline:
    """Bounded input: one final pane per window, whatever the trigger."""
    return replace(p, trigger=Never(), accumulation="accumulating", only_updated_panes=False, allowed_lateness=0)


def _engine_batch(good: DataFrame, p: Pipeline, schema: ST.StructType, record_columns: list[str]) -> DataFrame:
    """User combine functions: the core engine over buckets of keys, one
    Python call per bucket, with all records in one step and then the end of input."""
    import pandas as pd

    from ..core.engine import TS as CORE_TS
    from ..core.engine import Engine

    final = _final_answer(p)
    ps = pane_schema(p, schema)
    needed = list(dict.fromkeys([TS, *p.key, *p.value_columns, *window_reads(p.window)[0]]))

    integral = [
        c for c in p.value_columns if c in schema.fieldNames() and isinstance(schema[c].dataType, ST.IntegralType)
    ]

    def run(pdf: pd.DataFrame) -> pd.DataFrame:
        from .stateful import restore_integers

        engine = Engine(final)
        st = engine.new_state()
        batch = pdf.rename(columns={TS: CORE_TS})
        restore_integers(batch, integral)
        batch[CORE_TS] = batch[CORE_TS].astype("int64")
        res = engine.ingest(st, batch.sort_values(CORE_TS, kind="stable").reset_index(drop=True))
        res.extend(engine.advance(st, END_OF_INPUT))
        frame = pd.DataFrame(pane_columns(res.panes, final), columns=ps.fieldNames())
        for bound in ("window_start", "window_end"):
            frame[bound] = [None if ms is None else pd.Timestamp(ms, unit="ms") for ms in frame[bound]]
        # (one final pane per window)
        frame["timing"], frame["pane_index"], frame["is_last"], frame["retraction"] = "ON_TIME", 0, True, False
        return frame

    return good.select(BUCKET, *needed).groupBy(BUCKET).applyInPandas(run, ps)
