"""The SparkSession panes makes: what its streaming queries write their checkpoints with, and what its
settings save."""

from __future__ import annotations

from jvm_calls import round_trips

from panes.spark.session import CHANGELOG_CHECKPOINTS, CHECKPOINT_FILE_MANAGER, FILE_SYSTEM_MANAGERS
from tests.spark.session_conf import session_conf


def _manager_class(spark, directory) -> str:
    """The class of the checkpoint file manager Spark makes for ``directory`` from the session's
    Hadoop configuration, as a streaming query does for its offset and commit logs."""
    name = spark.conf.get(CHECKPOINT_FILE_MANAGER)
    package = name.rsplit(".", 1)[0]
    jvm = spark._jvm
    factory = getattr(jvm, f"{package}.CheckpointFileManager")
    hadoop_conf = spark._jsparkSession.sessionState().newHadoopConf()
    return factory.create(jvm.org.apache.hadoop.fs.Path(str(directory)), hadoop_conf).getClass().getName()


def test_streaming_checkpoints_are_written_through_file_system_calls(spark, tmp_path):
    # Spark's default manager renames through Hadoop's FileContext, which starts a readlink
    # process per rename on a local disk (about 16 per micro-batch of a file source)
    assert spark.conf.get(CHECKPOINT_FILE_MANAGER) in FILE_SYSTEM_MANAGERS
    assert _manager_class(spark, tmp_path) == spark.conf.get(CHECKPOINT_FILE_MANAGER)


def test_a_checkpoint_written_that_way_keeps_its_logs_and_their_checksums(spark, tmp_path):
    # what a restart reads (offsets, commits, the file source's log) and what panes' checkpoint
    # repairs remove beside an entry (its .crc) are where they were with Spark's default manager
    src = tmp_path / "in"
    src.mkdir()
    spark.createDataFrame([(1,)], "x LONG").write.parquet(str(src / "a"))
    ck = tmp_path / "ck"
    q = (
        spark.readStream.schema("x LONG")
        .parquet(str(src / "a"))
        .writeStream.format("noop")
        .option("checkpointLocation", str(ck))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()
    for log in ("offsets", "commits", "sources/0"):
        names = sorted(f.name for f in (ck / log).iterdir())
        assert names == [".0.crc", "0"], log


def _counts_per_key(spark, src, ck, changelog: str) -> dict:
    """A streaming count per key over the directories in ``src`` (RocksDB state, complete mode), run to the
    end of what is there with ``ck`` and changelog checkpoints ``changelog``: the counts."""
    name = f"counts_{changelog}_{ck.name}"
    with session_conf(spark, CHANGELOG_CHECKPOINTS, changelog):
        q = (
            spark.readStream.schema("k STRING")
            .parquet(str(src / "*"))
            .groupBy("k")
            .count()
            .writeStream.format("memory")
            .queryName(name)
            .outputMode("complete")
            .option("checkpointLocation", str(ck))
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination()
    return {r["k"]: r["count"] for r in spark.table(name).collect()}


def test_state_stores_commit_changelogs_and_continue_a_checkpoint_written_with_snapshots(spark, tmp_path):
    # a commit writes the micro-batch's changes (<version>.changelog), not the store's files; a
    # checkpoint an earlier panes wrote with snapshots only (<version>.zip) goes on from its state
    assert spark.conf.get(CHANGELOG_CHECKPOINTS) == "true"
    src, ck = tmp_path / "in", tmp_path / "ck"
    spark.createDataFrame([("a",), ("b",), ("a",)], "k STRING").write.parquet(str(src / "1"))
    store = ck / "state" / "0" / "0"
    assert _counts_per_key(spark, src, ck, "false") == {"a": 2, "b": 1}
    assert {"1.zip"} <= {f.name for f in store.iterdir()} and not list(store.glob("*.changelog"))
    spark.createDataFrame([("a",), ("c",)], "k STRING").write.parquet(str(src / "2"))
    assert _counts_per_key(spark, src, ck, "true") == {"a": 3, "b": 1, "c": 1}
    assert [f.name for f in store.glob("*.changelog")] == ["2.changelog"]


def _compiled(spark) -> int:
    return spark._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME().getCount()


def test_a_query_run_again_after_many_others_reuses_its_generated_code(spark):
    # Spark keeps 100 pieces of generated code by default; one stateful query of panes has about
    # 60, so queries that alternate in a session (two stages, a replay beside a stream) would
    # compile each other's out. 120 other pieces of code later, the first query compiles nothing.
    def first():
        return spark.range(5).selectExpr("id * 7919 + 104729 AS v").filter("v % 3 = 1").collect()

    assert [r.v for r in first()] == [112648, 136405]
    for i in range(120):  # (each its own code: Spark writes a literal into the code it generates)
        assert spark.range(1).selectExpr(f"id * {i + 2} + {i} AS v").collect()[0].v == i
    before = _compiled(spark)
    assert [r.v for r in first()] == [112648, 136405]
    assert _compiled(spark) == before


def test_a_column_function_costs_no_round_trips_for_its_python_call_site(spark):
    # PySpark's default wraps each Column function with the session, the conf and the call site
    # sent to the JVM and cleared (about five round trips) for errors' query context; panes builds
    # its plans from hundreds of them
    from pyspark.sql import functions as F

    def build():
        return F.coalesce(F.abs(F.col("a")), F.greatest(F.col("b"), F.lit(0)), F.lit(1))

    build()  # (the JVM's function objects looked up once)
    assert round_trips(build) <= 40  # (34 here; with PySpark's default 54)
