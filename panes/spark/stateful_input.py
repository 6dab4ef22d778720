"""The record's timestamp columns on their way into the stateful plan's processor.

PySpark hands a ``transformWithStateInPandas`` processor its rows regrouped one row at a time:
a timestamp column becomes a pandas ``Timestamp`` object per row, then is inferred back into a
column, which costs several times a column of longs. The engine reads a record's event time from
its own milliseconds column, so a timestamp column that it does not read as a key or an
aggregate's input is needed only for a dead letter's record: it travels as microseconds since the
epoch (``as_micros``), and ``TimestampsAsMicros.value`` gives a dead letter the value PySpark
would have given (the session's time zone, naive).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as ST

from ..core.pipeline import Pipeline


@dataclass(frozen=True)
class TimestampsAsMicros:
    """The columns that reach the processor as microseconds, and the session's time zone."""

    columns: frozenset[str] = frozenset()
    time_zone: str = "UTC"

    def value(self, micros: int) -> pd.Timestamp:
        """A column's value as PySpark converts a timestamp for a processor."""
        return pd.Timestamp(micros, unit="us", tz="UTC").tz_convert(self.time_zone).tz_localize(None)


def as_micros(
    prepared: DataFrame, schema: ST.StructType, p: Pipeline, record_columns: Sequence[str]
) -> tuple[DataFrame, TimestampsAsMicros]:
    """``prepared`` (the processor's input, its engine columns already taken from the record) with
    the timestamp columns the engine does not read as microseconds (none when the windows keep
    their rows: a window pipeline reads every column)."""
    reads = set(p.key) | set(p.input_columns(list(record_columns)))
    names = [
        f.name
        for f in schema.fields
        if isinstance(f.dataType, ST.TimestampType) and f.name in record_columns and f.name not in reads
    ]
    if not names:
        return prepared, TimestampsAsMicros()
    time_zone = prepared.sparkSession.conf.get("spark.sql.session.timeZone") or "UTC"
    micros = prepared.withColumns({c: F.unix_micros(F.col(f"`{c}`")) for c in names})
    return micros, TimestampsAsMicros(frozenset(names), time_zone)
