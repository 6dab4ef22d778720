"""The record's timestamp columns reach the stateful plan's processor as microseconds when the
engine does not read them (``stateful_input``): a dead letter's record still holds them as PySpark
gives them to a processor, in the session's time zone."""

from __future__ import annotations

import json
import os

import pytest

from panes.spec import parse_run_spec
from tests.spark.session_conf import session_conf

pytestmark = pytest.mark.spark

SCHEMA = "k STRING, t TIMESTAMP, seen TIMESTAMP, v LONG"


def _doc(tmp_path) -> dict:
    data = tmp_path / "data"
    data.mkdir()
    first = [
        {"k": "a", "t": "2021-08-07T10:15:00Z", "seen": "2021-08-07T10:15:01.5Z", "v": 1},
        {"k": "b", "t": "2021-08-07T13:30:00Z", "seen": None, "v": 1},
    ]
    late = {"k": "a", "t": "2021-08-07T10:20:00.250Z", "seen": "1969-12-31T23:59:59.123456Z", "v": 2}
    (data / "part-0.json").write_text("".join(json.dumps(r) + "\n" for r in first))
    (data / "part-1.json").write_text(json.dumps(late) + "\n")
    for i in range(2):  # (a file source reads files in modification-time order)
        os.utime(data / f"part-{i}.json", (1_600_000_000 + i,) * 2)
    return {
        **_base_spec(),
        "aggregates": {"n": {"count": "*"}, "total": {"sum": "v"}},
        "source": {"format": "json", "path": str(data), "schema": SCHEMA, "max_files_per_trigger": 1},
        "sink": {"format": "json", "path": str(tmp_path / "panes")},
        "checkpoint": str(tmp_path / "checkpoint"),
        "spark": {"available_now": True},
    }


def _late_record(spark, tmp_path, doc: dict) -> dict:
    import panes
    from panes.io import read_stream

    result = panes.window(read_stream(spark, parse_run_spec(doc).source), doc, plan="stateful")
    dead: list = []
    query = result.write_stream(
        lambda d, i: d.count(), lambda d, i: dead.extend(d.collect()), str(tmp_path / "ck"), availableNow=True
    )
    query.awaitTermination()
    assert [d["reason"] for d in dead] == ["late"]
    return json.loads(dead[0]["record"])


@pytest.mark.parametrize(
    "zone, t, seen",
    [
        ("UTC", "2021-08-07T10:20:00.250000", "1969-12-31T23:59:59.123456"),
        ("America/New_York", "2021-08-07T06:20:00.250000", "1969-12-31T18:59:59.123456"),
    ],
)
def test_a_dead_letter_holds_its_timestamps_as_pyspark_gives_them(spark, tmp_path, zone, t, seen):
    with session_conf(spark, "spark.sql.session.timeZone", zone):
        record = _late_record(spark, tmp_path, _doc(tmp_path))
    assert record == {"k": "a", "t": t, "seen": seen, "v": 2}


def test_only_the_timestamps_the_engine_does_not_read_travel_as_microseconds(spark):
    import panes
    from panes.spark.stateful_input import as_micros

    df = spark.createDataFrame([], SCHEMA)
    columns = ["k", "t", "seen", "v"]
    spec = _base_spec()
    assert as_micros(df, df.schema, panes.pipeline(spec), columns)[1].columns == {"t", "seen"}
    # an aggregate's input, a key: the engine reads them as they are
    read = {**spec, "key": ["k", "seen"], "aggregates": {"first": {"max": "t"}}}
    assert as_micros(df, df.schema, panes.pipeline(read), columns)[1].columns == frozenset()


def _base_spec() -> dict:
    return {
        "event_time": "t",
        "key": "k",
        "window": {"tumbling": {"size": "1 hour"}},
        "aggregates": {"n": {"count": "*"}},
    }
