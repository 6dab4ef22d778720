"""Kafka, up to where Spark needs its Kafka connector (not in PySpark's jars, and no broker here):
the source's values become records (one JSON record per value, dead letters for the rest), panes
become the sink's JSON values, and a spec that reads or writes Kafka on a Spark without the
connector is refused with the --packages line."""

import json

import pyspark
import pytest

import panes
from panes.io import check_kafka_sinks, kafka_frame, kafka_records, read_batch, read_stream
from panes.spec import SinkSpec, SourceSpec, SpecError

pytestmark = pytest.mark.spark

SERVERS = {"kafka.bootstrap.servers": "127.0.0.1:9"}
SOURCE = SourceSpec(format="kafka", schema="k STRING, t LONG, v LONG", options={**SERVERS, "subscribe": "events"})
#: the columns Spark's Kafka source gives
KAFKA_ROWS = (
    "key BINARY, value BINARY, topic STRING, partition INT, offset LONG, timestamp TIMESTAMP, timestampType INT"
)
MISSING = (
    "kafka needs Spark's Kafka connector, which is not on this Spark's classpath: start Spark with "
    f"--packages org.apache.spark:spark-sql-kafka-0-10_2.13:{pyspark.__version__} (spark.jars.packages)"
)


def _kafka_rows(spark, values):
    from datetime import datetime

    rows = [(None, v.encode(), "events", 0, i, datetime(2021, 1, 1), 0) for i, v in enumerate(values)]
    return spark.createDataFrame(rows, KAFKA_ROWS)


def test_kafka_values_are_records_and_the_rest_dead_letters(spark):
    values = [
        json.dumps({"k": "a", "t": 1000, "v": 2}),
        json.dumps({"k": "a", "t": 4000, "v": 3}),
        "not json",
        json.dumps({"k": "b", "t": "soon", "v": 1}),
        json.dumps({"k": "b", "t": 6000, "v": 4}),
    ]
    records = kafka_records(_kafka_rows(spark, values), SOURCE)
    spec = {"event_time": "t", "key": "k", "window": {"tumbling": {"size": 5000}}, "aggregates": {"s": {"sum": "v"}}}
    result = panes.window(records, spec)
    got = sorted((r["k"], r["window_start"].isoformat(), r["s"]) for r in result.panes.collect())
    assert got == [("a", "1970-01-01T00:00:00", 5), ("b", "1970-01-01T00:00:05", 4)]
    dead = sorted((r["reason"], r["record"]) for r in result.dead_letters.collect())
    assert dead == [("invalid_event_time", '{"k": "b", "t": "soon", "v": 1}'), ("malformed", "not json")]


def test_panes_are_the_kafka_sinks_json_values(spark):
    from datetime import datetime

    panes_df = spark.createDataFrame(
        [("a", datetime(2021, 1, 1, 10), 2.5), ("b", datetime(2021, 1, 1, 10, 0, 5), float("nan"))],
        "key STRING, window_start TIMESTAMP, total DOUBLE",
    )
    values = [r["value"] for r in kafka_frame(panes_df).collect()]
    assert kafka_frame(panes_df).columns == ["value"]
    assert [json.loads(v) for v in values] == [
        {"key": "a", "window_start": "2021-01-01T10:00:00.000Z", "total": 2.5},
        {"key": "b", "window_start": "2021-01-01T10:00:05.000Z"},
    ]


def test_a_kafka_source_without_the_connector_says_what_to_start_spark_with(spark):
    for read in (read_stream, read_batch):
        with pytest.raises(SpecError) as e:
            read(spark, SOURCE)
        assert [str(x) for x in e.value.errors] == [f"source.format: {MISSING}"]


def test_a_kafka_sink_without_the_connector_is_refused_before_the_query(spark):
    sink = SinkSpec(format="kafka", options={**SERVERS, "topic": "panes"})
    check_kafka_sinks(spark, SinkSpec(format="json", path="/tmp/x"), None)  # (no Kafka: nothing to check)
    with pytest.raises(SpecError) as e:
        check_kafka_sinks(spark, SinkSpec(format="json", path="/tmp/x"), sink)
    assert [str(x) for x in e.value.errors] == [f"dead_letter.format: {MISSING}"]
