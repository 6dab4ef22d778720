"""A Kafka source or sink names what Spark's Kafka connector cannot do without, found before Spark
starts (tests/spark/test_kafka_spark.py goes on up to the connector)."""

import pytest

from panes.spec import SpecError, parse_run_spec

PIPELINE = {"event_time": "t", "window": {"tumbling": {"size": 1000}}, "aggregates": {"n": {"count": "*"}}}
SERVERS = {"kafka.bootstrap.servers": "broker:9092"}


def _errors(source: dict, sink: dict | None = None) -> list[str]:
    doc = {**PIPELINE, "source": source, **({"sink": sink} if sink else {})}
    try:
        parse_run_spec(doc)
    except SpecError as e:
        return [str(x) for x in e.errors]
    return []


@pytest.mark.parametrize(
    ("source", "error"),
    [
        ({"format": "kafka"}, "source: a kafka source needs options: {kafka.bootstrap.servers: HOST:PORT}"),
        (
            {"format": "kafka", "options": SERVERS},
            "source: a kafka source needs options.subscribe or options.subscribePattern or options.assign",
        ),
        (
            {"format": "kafka", "options": {**SERVERS, "subscribe": "events"}},
            "source: a kafka source needs a schema: each Kafka value is one JSON record of it",
        ),
    ],
)
def test_a_kafka_source_needs_its_servers_topics_and_schema(source, error):
    assert _errors(source) == [error]


def test_a_kafka_sink_needs_its_servers_and_topic():
    source = {"format": "kafka", "schema": "t LONG", "options": {**SERVERS, "subscribePattern": "ev.*"}}
    assert _errors(source) == []
    assert _errors(source, {"format": "kafka"}) == [
        "sink: a kafka sink needs options: {kafka.bootstrap.servers: HOST:PORT}"
    ]
    assert _errors(source, {"format": "kafka", "options": SERVERS}) == ["sink: a kafka sink needs options.topic"]
    assert _errors(source, {"format": "kafka", "options": {**SERVERS, "topic": "panes"}}) == []
