"""The buckets' labels (``panes.spark.bucket_layout``): Spark places them evenly on its shuffle
partitions, and a checkpoint kept in another number of buckets, or numbered 0..n-1 by an older
panes, is refused before its query starts."""

from __future__ import annotations

import functools
import json
import os

import pytest
from pyspark.sql import functions as F

import panes
from panes.core.engine.columnar import StateFormatError
from panes.spark.bucket_layout import labels, made_with, spark_hash_int, spark_partition
from panes.spark.columns import BUCKET
from panes.spark.planner import prepare
from panes.spark.stages.stream import StagesStream, write_state
from panes.spec import MAX_BUCKETS

PIPELINE = {
    "event_time": "t",
    "key": "k",
    "window": {"tumbling": {"size": 10_000}},
    "aggregates": {"s": {"sum": "v"}},
}


def _placed(found: tuple[int, ...], partitions: int) -> list[int]:
    """How many of the labels each partition gets."""
    counts = [0] * partitions
    for label in found:
        counts[spark_partition(label, partitions)] += 1
    return counts


@pytest.mark.parametrize(
    "buckets, partitions, placed",
    [
        (8, 2, [4, 4]),  # (numbered 0..7: 3 and 5)
        (8, 4, [2, 2, 2, 2]),
        (8, 8, [1] * 8),
        (8, 16, None),  # (a partition each: i or i + 8)
        (2, 2, [1, 1]),  # (numbered 0 and 1: both in one)
        (6, 3, [2, 2, 2]),
        (6, 2, [3, 3]),
        (1, 1, [1]),
    ],
)
def test_labels_fall_evenly_on_partitions_that_divide_or_are_divided_by_the_buckets(buckets, partitions, placed):
    found = labels(buckets)
    assert len(set(found)) == buckets and all(made_with(x) == buckets for x in found)
    if placed is None:
        assert sorted(_placed(found, partitions)) == [0] * (partitions - buckets) + [1] * buckets
    else:
        assert _placed(found, partitions) == placed


def test_a_label_says_how_many_buckets_it_belongs_to_and_fits_a_spark_int():
    assert [made_with(x) for x in (0, 7, (1 << 20) - 1)] == [None, None, None]  # (an older panes' numbers)
    assert max(labels(MAX_BUCKETS)) < 2**31 and made_with(labels(MAX_BUCKETS)[-1]) == MAX_BUCKETS
    with pytest.raises(ValueError, match="buckets: 0 is not between 1 and 1024"):
        labels(0)


@pytest.mark.spark
def test_the_hash_is_spark_s_and_the_prepared_rows_land_one_bucket_to_a_partition(spark):
    values = [-(2**31), -7, -1, 0, 1, 2, 41, 2**31 - 1, *labels(8)]
    got = spark.createDataFrame([(v,) for v in values], "v INT").select(F.hash("v")).collect()
    assert [r[0] for r in got] == [spark_hash_int(v) for v in values]
    # the stateful plan's grouping (HashPartitioning by the bucket column) over 2 partitions
    rows = [(f"key{i}", i, i * 1000) for i in range(200)]
    df = spark.createDataFrame(rows, "k STRING, v LONG, t LONG")
    prepared = prepare(df, panes.pipeline(PIPELINE), 2, watermark=False)
    placed = (
        prepared.repartition(2, BUCKET)
        .select(BUCKET, F.spark_partition_id().alias("part"))
        .groupBy(BUCKET, "part")
        .count()
        .collect()
    )
    assert sorted((r[BUCKET], r["part"]) for r in placed) == sorted(
        (label, spark_partition(label, 2)) for label in labels(2)
    )
    assert sorted(r["part"] for r in placed) == [0, 1] and sum(r["count"] for r in placed) == 200


def _stream(spark, src, buckets):
    df = spark.readStream.schema("k STRING, v LONG, t LONG").option("maxFilesPerTrigger", 1).json(str(src))
    return panes.window(df, PIPELINE, buckets=buckets, plan="stateful")


def _consume(df, batch_id) -> None:
    df.collect()


def _run(spark, src, buckets, checkpoint) -> None:
    q = _stream(spark, src, buckets).write_stream(_consume, _consume, checkpoint)
    try:
        q.processAllAvailable()
    finally:
        q.stop()


@pytest.mark.spark
def test_an_api_checkpoint_of_other_buckets_is_refused_before_the_query_starts(spark, tmp_path, monkeypatch):
    src = tmp_path / "in"
    src.mkdir()
    (src / "a.json").write_text(json.dumps({"k": "a", "v": 1, "t": 1_000}) + "\n")
    os.utime(src / "a.json", (1_600_000_000,) * 2)
    two = str(tmp_path / "two")
    _run(spark, src, 2, two)
    active = len(spark.streams.active)
    with pytest.raises(StateFormatError) as e:
        _stream(spark, src, 4).write_stream(_consume, _consume, two)
    assert str(e.value) == (
        f"checkpoint {two} keeps its state in 2 hash buckets, not 4 (a key's state is in its bucket of those 2): "
        f"run with buckets=2 (spark.buckets: 2), or start afresh with a new checkpoint directory (or remove {two})"
    )
    assert len(spark.streams.active) == active
    _run(spark, src, 2, two)  # (the same buckets go on)
    # buckets numbered 0..n-1, as an older panes grouped them
    numbered = str(tmp_path / "numbered")
    with monkeypatch.context() as m:
        m.setattr("panes.spark.planner.bucket_column", lambda key, n: F.pmod(F.xxhash64(*key), F.lit(n)).cast("int"))
        _run(spark, src, 2, numbered)
    with pytest.raises(StateFormatError, match="numbers its hash buckets 0..n-1, as panes before the bucket layout"):
        _stream(spark, src, 2).write_stream(_consume, _consume, numbered)


def test_a_stage_checkpoint_of_other_buckets_is_refused(tmp_path):
    stream = StagesStream(None, {}, str(tmp_path / "ck"), buckets=4)  # type: ignore[arg-type]
    assert stream.layout_refusal() is None  # (nothing kept yet)
    version = stream.root / "v3"
    write_state(version / "counts", [(labels(8)[0], b"state")])
    (version / "meta.json").write_text("{}")
    assert stream.layout_refusal() == (
        f"checkpoint {tmp_path / 'ck'} keeps its state in 8 hash buckets, not 4 (a key's state is in its bucket of "
        f"those 8): run with buckets=8 (spark.buckets: 8), or start afresh with a new checkpoint directory (or "
        f"remove {tmp_path / 'ck'})"
    )
    write_state(version / "counts", [(labels(4)[2], b"state")])
    assert stream.layout_refusal() is None
    write_state(version / "counts", [(3, b"state")])
    assert "numbers its hash buckets 0..n-1" in (stream.layout_refusal() or "")


def test_a_spec_without_buckets_has_one_per_shuffle_partition():
    from panes.spec import SparkSpec

    assert [SparkSpec().bucket_count, SparkSpec(shuffle_partitions=6).bucket_count] == [2, 6]
    assert SparkSpec(shuffle_partitions=6, conf={"spark.sql.shuffle.partitions": "16"}).bucket_count == 16
    assert SparkSpec(shuffle_partitions=5000).bucket_count == MAX_BUCKETS
    assert SparkSpec(shuffle_partitions=6, buckets=8).bucket_count == 8


@pytest.mark.spark
def test_the_api_without_buckets_has_one_per_shuffle_partition_of_the_session(spark, tmp_path):
    partitions = int(spark.conf.get("spark.sql.shuffle.partitions"))
    src = tmp_path / "in"
    src.mkdir()
    assert _stream(spark, src, None).buckets == partitions
    assert _stream(spark, src, 3).buckets == 3


@pytest.mark.spark
def test_a_native_plan_does_not_ask_the_session_for_buckets_it_does_not_keep(spark, tmp_path):
    from tests.spark.jvm_calls import round_trips

    df = spark.readStream.schema("k STRING, v LONG, t LONG").json(str(tmp_path))
    results = []

    def build(buckets):
        results.append(panes.window(df, PIPELINE, buckets=buckets))

    calls = {}
    for buckets in (None, 3, None, 3):  # (the second round: after what the first one cached)
        calls[buckets] = round_trips(functools.partial(build, buckets))
    assert all(r.plan.startswith("stream: native") for r in results)
    assert calls[None] == calls[3]
