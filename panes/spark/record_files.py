"""A file source's records by reference, for the native plan's dead letters.

Any row of a stream may become a dead letter (late, malformed), whose record is kept whole, so the
native plan's stream carries every record column to its step, and Spark's scan decodes them all
for every row, though the windows read a few (on Nexmark's bids, the strings that no aggregate
reads are most of the scan). A Parquet file names each row by its file and its index in it
(Spark's ``_metadata``): the stream then carries those two in place of the record columns the
pipeline does not read, and a micro-batch with dead letters reads their records back from their
files, with the source's own schema and options, so the record is the one the stream read.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as ST

#: the file a row was read from, and its index in it (``_metadata.file_path``, ``.row_index``)
REF_FILE = "__panes_record_file"
REF_ROW = "__panes_record_row"
REFERENCES = (REF_FILE, REF_ROW)
#: the formats whose rows Spark indexes within their file
INDEXED_FORMATS = ("parquet",)
#: the hidden column of a file source's metadata
METADATA = "_metadata"


def _references() -> list[Column]:
    return [F.col(f"{METADATA}.file_path").alias(REF_FILE), F.col(f"{METADATA}.row_index").alias(REF_ROW)]


@dataclass(frozen=True)
class RecordFiles:
    """How a file source read its records: its format, schema (as JSON) and options."""

    format: str
    schema: str
    options: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, fmt: str, schema: ST.StructType, options: dict[str, str]) -> RecordFiles:
        """A source of one of the ``INDEXED_FORMATS``."""
        return cls(fmt, schema.json(), tuple(sorted(options.items())))

    @staticmethod
    def referenced(source: DataFrame) -> DataFrame:
        """``source`` (the file source's own DataFrame) with each row's reference."""
        return source.select("*", *_references())

    def with_records(self, dead: DataFrame, record: Callable[[], Column], name: str) -> DataFrame:
        """``dead`` (rows with their references) with each one's record (``record()``: its
        expression over the source's columns) as column ``name``, read back from its file: one
        job lists the files, one reads them."""
        files = [r[0] for r in dead.select(REF_FILE).distinct().collect() if r[0] is not None]
        if not files:  # (only panes' own rows, which are never dead letters, have none)
            return dead.withColumn(name, F.lit(None).cast("string"))
        schema = ST.StructType.fromJson(json.loads(self.schema))
        read = dead.sparkSession.read.schema(schema).options(**dict(self.options)).format(self.format)
        records = read.load(files).select(*_references(), record().alias(name))
        return dead.join(records, list(REFERENCES), "left")
