"""Sources and sinks named in a spec. Files (JSON lines, CSV, Parquet; a streaming source picks up
new files as they arrive), Kafka where Spark's Kafka connector is on the classpath (``KAFKA_PACKAGE``;
a Kafka record's value is one JSON record of ``source.schema``, a pane is written as one JSON
value), console, a Python callback. File sinks write each micro-batch to its own ``batch=<id>``
directory, overwriting it on a replay after a restart, so a restarted query's output is
exactly-once."""

from __future__ import annotations

import re
import sys

import pyspark
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as ST

from .core.json_lines import dumps
from .refs import load_callback
from .spark.columns import RAW
from .spark.record_files import INDEXED_FORMATS, METADATA, RecordFiles
from .spec import SinkSpec, SourceSpec, SpecError

#: how every text output (JSON, CSV, the console, stdout) writes an instant: ISO-8601 UTC, ms, Z
TIMESTAMP_FORMAT = "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"
#: the ``--packages`` coordinate of Spark's Kafka connector for this PySpark (not in its jars)
KAFKA_PACKAGE = f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pyspark.__version__}"


def _reader(reader, src: SourceSpec):
    if src.schema_:
        reader = reader.schema(src.schema_)
    opts = dict(src.options)
    if src.format == "csv":
        opts.setdefault("header", "true")
        if not src.schema_:
            opts.setdefault("inferSchema", "true")
    return reader.options(**{k: str(v) for k, v in opts.items()})


def read_batch(spark: SparkSession, src: SourceSpec) -> DataFrame:
    if _json_lines(src):
        schema = _with_raw(src, src.schema_ or inferred_schema(spark, src))
        return json_records(spark.read.options(**_options(src)).text(src.path or ""), schema, src)
    if src.format in ("json", "csv", "parquet"):
        return getattr(_reader(spark.read, src), src.format)(src.path)
    if src.format == "kafka":
        return kafka_records(_kafka_load(spark.read, src), src)
    raise ValueError(f"source.format: {src.format} cannot be read as a batch")


def read_stream(spark: SparkSession, src: SourceSpec) -> DataFrame:
    if src.format in ("json", "csv", "parquet"):
        # a streaming file source needs its schema up front: without one, inferred from what is there
        schema = _with_raw(src, src.schema_ or inferred_schema(spark, src))
        opts = _options(src)
        if src.max_files_per_trigger:
            opts["maxFilesPerTrigger"] = str(src.max_files_per_trigger)
        if _json_lines(src):
            return json_records(spark.readStream.options(**opts).text(src.path or ""), schema, src)
        if src.format == "csv":
            opts.setdefault("header", "true")
        return getattr(spark.readStream.schema(schema).options(**opts), src.format)(src.path)
    if src.format == "kafka":
        return kafka_records(_kafka_load(spark.readStream, src), src)
    if src.format == "rate":
        return _reader(spark.readStream.format("rate"), src).load()
    raise ValueError(f"source.format: {src.format} cannot be read as a stream")


def with_record_references(df: DataFrame, src: SourceSpec) -> tuple[DataFrame, RecordFiles | None]:
    """A file source's stream (``read_stream``) with each row's reference in its file, and where the
    native plan reads a dead letter's record back from (``record_files``); as it is, and None, for a
    source whose rows have no index in their file."""
    path = src.path or ""
    if src.format not in INDEXED_FORMATS or not path or any(c in path for c in "*?[{"):
        return df, None  # (a glob's files: no one directory their partitions' values are read under)
    if METADATA in df.columns:
        return df, None  # (a column of that name hides Spark's file metadata)
    # (a file read on its own takes its partitions' values from its directories under the source's)
    options = {"basePath": path, **_options(src)}
    return RecordFiles.referenced(df), RecordFiles.of(src.format, df.schema, options)


def kafka_missing(field: str) -> SpecError:
    """Spark has no Kafka connector: what to start it with."""
    return SpecError(
        field,
        f"kafka needs Spark's Kafka connector, which is not on this Spark's classpath: start Spark with "
        f"--packages {KAFKA_PACKAGE} (spark.jars.packages)",
    )


def _connector_missing(e: Exception) -> bool:
    # (Spark 4.0: "Failed to find data source: kafka"; 4.3: [KAFKA_DATA_SOURCE_NOT_ENABLED] before it)
    return re.search(r"KAFKA_DATA_SOURCE_NOT_ENABLED|Failed to find (the )?data source: kafka\b", str(e)) is not None


def _kafka_load(reader, src: SourceSpec) -> DataFrame:
    """The Kafka source's rows (key, value, topic, partition, offset, timestamp, ...)."""
    try:
        raw = reader.format("kafka").options(**_options(src)).load()
        _ = raw.schema  # (a Connect session analyses the plan only when asked)
    except Exception as e:
        if _connector_missing(e):
            raise kafka_missing("source.format") from None
        raise
    return raw


def kafka_records(raw: DataFrame, src: SourceSpec) -> DataFrame:
    """Kafka's rows as records of ``source.schema``: each value, as UTF-8 text, is one JSON record
    (``json_records``: a value that is not one, or does not fit the schema, is a dead letter with
    its text)."""
    values = raw.select(F.col("value").cast("string").alias("value"))
    return json_records(values, f"{src.schema_}, `{RAW}` STRING", src.model_copy(update={"options": {}}))


def check_kafka_sinks(spark: SparkSession, *sinks: SinkSpec | None) -> None:
    """A Kafka sink needs the connector: said before the query starts (its first write would fail
    inside the query)."""
    for field, sink in zip(("sink", "dead_letter"), sinks):
        if sink is None or sink.format != "kafka":
            continue
        try:
            _ = spark.read.format("kafka").load().schema
        except Exception as e:  # (with the connector: a missing subscribe option; without: none)
            if _connector_missing(e):
                raise kafka_missing(f"{field}.format") from None


def kafka_frame(df: DataFrame) -> DataFrame:
    """Rows as a Kafka sink's records: each row one JSON ``value`` (``for_output``'s text forms)."""
    return for_output(df).selectExpr("to_json(struct(*)) AS value")


def _options(src: SourceSpec) -> dict[str, str]:
    return {k: str(v) for k, v in src.options.items()}


def _json_lines(src: SourceSpec) -> bool:
    """A JSON source read line by line (``json_records``): every line is one record, or a dead
    letter; not a ``multiLine`` one (Spark's reader reads those whole)."""
    return src.format == "json" and str(src.options.get("multiLine", "false")).lower() != "true"


def json_records(lines: DataFrame, schema, src: SourceSpec) -> DataFrame:
    """A text source's lines as records of ``schema`` (with ``RAW``): each non-blank line is one
    record. Spark's JSON reader would make several records of a line holding an array of objects,
    and none of ``[]``; here such a line, one that is not JSON, and one whose value does not fit its
    column's type keep their text in ``RAW`` (its dead letter's record)."""
    opts = {**_options(src), "columnNameOfCorruptRecord": RAW, "mode": "PERMISSIVE"}
    record = F.from_json(F.col("value"), schema, opts)
    parsed = lines.filter(F.trim(F.col("value")) != "").select(record.alias(RAW + "_record"), F.col("value"))
    struct = schema if isinstance(schema, ST.StructType) else parsed.schema[RAW + "_record"].dataType
    assert isinstance(struct, ST.StructType)
    names = [f.name for f in struct.fields if f.name != RAW]
    raw = F.when(F.col(f"{RAW}_record").isNull() | F.col(f"{RAW}_record.`{RAW}`").isNotNull(), F.col("value"))
    return parsed.select(*[F.col(f"{RAW}_record").getField(n).alias(n) for n in names], raw.alias(RAW))


def inferred_schema(spark: SparkSession, src: SourceSpec) -> ST.StructType:
    """The schema Spark infers from a file source's files; SpecError when it cannot."""
    from pyspark.errors import AnalysisException

    opts = {**_options(src), "columnNameOfCorruptRecord": RAW} if src.format == "json" else {}
    try:
        if src.format == "json":
            return spark.read.options(**opts).json(src.path or "").schema
        return getattr(_reader(spark.read, src), src.format)(src.path).schema
    except AnalysisException as e:
        cause = next((ln for ln in str(e).splitlines() if ln.strip()), "")
        raise SpecError(
            "source.schema", f"Spark cannot infer the columns of {src.path} ({cause}): declare source.schema"
        ) from None


def _with_raw(src: SourceSpec, schema):
    """A JSON source's schema (DDL or StructType) with the column of lines read as they were."""
    if src.format != "json":
        return schema
    if isinstance(schema, str):
        return f"{schema}, `{RAW}` STRING"
    return schema if RAW in schema.fieldNames() else schema.add(RAW, ST.StringType())


def write_batch(df: DataFrame, sink: SinkSpec, batch_id: int | None = None, title: str = "") -> None:
    """Write one DataFrame (a micro-batch, or a whole batch result) to a sink. Text outputs get
    instants in ``TIMESTAMP_FORMAT`` and no NaN or infinity (null instead: JSON has neither)."""
    fmt = sink.format
    if fmt in ("json", "csv", "console", "stdout"):
        df = for_output(df)
    if fmt == "stdout":
        for row in df.toLocalIterator():
            sys.stdout.write(dumps(row.asDict(recursive=True)) + "\n")
        sys.stdout.flush()
    elif fmt == "noop":
        df.write.format("noop").mode("overwrite").save()
    elif fmt in ("json", "parquet", "csv"):
        path = sink.path if batch_id is None else f"{sink.path}/batch={batch_id}"
        w = df.write.mode("overwrite").options(**{k: str(v) for k, v in sink.options.items()})
        if fmt == "csv":
            w = w.option("header", "true")
        getattr(w, fmt)(path)
    elif fmt == "console":
        rows = df.collect()
        if rows:
            _print_rows(rows, df.columns, title, stderr=sink.options.get("to") == "stderr")
    elif fmt == "callback":
        load_callback(sink.callback or "")(df, batch_id)
    elif fmt == "kafka":
        kafka_frame(df).write.format("kafka").options(**{k: str(v) for k, v in sink.options.items()}).save()
    elif fmt == "memory":
        df.createOrReplaceTempView(sink.options.get("name", "panes_output"))
    else:
        raise ValueError(f"sink.format: unknown {fmt}")


#: sinks whose write of an empty micro-batch leaves nothing: a micro-batch's output is written
#: once, its counts observed as the write runs (no job to count it first)
OBSERVED_SINKS = ("noop", "kafka")
#: sinks whose write is one Spark job: observed too when the micro-batch's output is known to
#: have rows (``WindowedResult.has_rows``)
WRITTEN_IN_ONE_JOB = ("json", "parquet", "csv", "console")


def observed_write(df: DataFrame, sink: SinkSpec, batch_id: int, counts: list) -> dict:
    """Writes ``df`` to ``sink`` and returns ``counts`` (aggregate Columns) as Spark observed them
    in that write: one job."""
    from pyspark.sql import Observation

    seen = Observation(f"panes_sink_{batch_id}")
    write_batch(df.observe(seen, *counts), sink, batch_id)
    return seen.get


def for_output(df: DataFrame) -> DataFrame:
    """``df`` for a text output: instants as text in ``TIMESTAMP_FORMAT`` (UTC whatever the
    session's time zone), NaN and infinities as null, inside arrays and structs too."""
    schema = df.schema
    if not any(_needs(f.dataType) for f in schema.fields):
        return df
    return df.select(*[_plain(F.col(f"`{f.name}`"), f.dataType).alias(f.name) for f in schema.fields])


def _needs(t: ST.DataType) -> bool:
    if isinstance(t, (ST.TimestampType, ST.TimestampNTZType, ST.DoubleType, ST.FloatType)):
        return True
    if isinstance(t, ST.ArrayType):
        return _needs(t.elementType)
    if isinstance(t, ST.MapType):
        return _needs(t.valueType)
    if isinstance(t, ST.StructType):
        return any(_needs(f.dataType) for f in t.fields)
    return False


def _plain(c: Column, t: ST.DataType) -> Column:
    if not _needs(t):
        return c
    if isinstance(t, ST.TimestampType):
        return F.date_format(F.to_utc_timestamp(c, F.current_timezone()), TIMESTAMP_FORMAT)
    if isinstance(t, ST.TimestampNTZType):
        return F.date_format(c, TIMESTAMP_FORMAT)
    if isinstance(t, (ST.DoubleType, ST.FloatType)):
        return F.when(~F.isnan(c) & (F.abs(c) != F.lit(float("inf"))), c)
    if isinstance(t, ST.ArrayType):
        return F.transform(c, lambda x: _plain(x, t.elementType))
    if isinstance(t, ST.MapType):
        return F.transform_values(c, lambda _, v: _plain(v, t.valueType))
    assert isinstance(t, ST.StructType)
    fields = [_plain(c[f.name], f.dataType).alias(f.name) for f in t.fields]
    return F.when(c.isNotNull(), F.struct(*fields))


def _print_rows(rows, columns, title: str, stderr: bool = False) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title or None, show_lines=False, title_justify="left")
    for c in columns:
        table.add_column(c)
    for r in rows:
        table.add_row(*[_fmt(v) for v in r])
    Console(width=240, stderr=stderr).print(table)


def _fmt(v) -> str:
    if v is None:
        return ""
    if isinstance(v, list):
        return ", ".join(_fmt(x) for x in v)
    if hasattr(v, "asDict"):
        d = v.asDict()
        if set(d) == {"start", "end"}:
            return f"[{_fmt(d['start'])}, {_fmt(d['end'])})"
        return str({k: _fmt(x) for k, x in d.items()})
    return str(v)
