"""plan_building: with its switch on (PANES_FAST_PLANNING=1), fewer JVM round trips while panes
builds a plan, the same plan, and PySpark as it was once the last block has left; with it off (the
default), nothing patched. The private PySpark and py4j internals it patches are checked here: a
PySpark whose internals changed fails these tests."""

import threading

import pytest
from jvm_calls import round_trips as _round_trips
from pyspark.sql import functions as F

from panes.spark import session


def _expression():
    return F.when(F.col("a").isNull(), F.lit(-1)).otherwise(F.coalesce(F.col("a"), F.col("b")) + F.lit(1))


@pytest.fixture
def fast_planning(monkeypatch):
    monkeypatch.setenv(session.FAST_PLANNING, "1")


def test_a_plan_built_in_the_block_costs_fewer_round_trips_and_gives_the_same_rows(spark, fast_planning):
    df = spark.createDataFrame([(1, 2), (None, 3), (5, None)], "a int, b int")
    _expression()  # (first lookups out of the count)
    outside = _round_trips(_expression)
    with session.plan_building():
        _expression()
        inside = _round_trips(_expression)
        rows_inside = df.select(_expression().alias("x"), F.struct("a", "b").alias("s")).collect()
    rows_outside = df.select(_expression().alias("x"), F.struct("a", "b").alias("s")).collect()
    # in the block, one round trip per call: seven functions (when, col x3, lit x2, coalesce), three
    # column operations (isNull, otherwise, +), coalesce's list of columns (a Java list, its two
    # elements, the Seq). Outside, PySpark also looks up each function (two round trips) and
    # captures each call site.
    assert inside == 14, inside
    assert outside > 2 * 7 + inside, outside
    assert rows_inside == rows_outside
    assert [r.x for r in rows_inside] == [2, -1, 6]


def test_pyspark_is_left_as_it_was_after_nested_blocks_and_blocks_in_threads(spark, fast_planning):
    import pyspark.errors.utils as U

    jvm = spark.sparkContext._jvm
    names = set(session.HOT_CLASSES)
    assert len(names) == 3
    debugging = U._enable_debugging_cache
    assert not names & set(vars(jvm))
    inside, go = threading.Event(), threading.Event()
    seen = {}

    def other():
        with session.plan_building():
            inside.set()
            go.wait(30)
            seen["other"] = set(vars(jvm)) & names

    t = threading.Thread(target=other)
    t.start()
    inside.wait(30)
    with session.plan_building():
        with session.plan_building():
            assert U._enable_debugging_cache is False
            seen["nested"] = set(vars(jvm)) & names
        go.set()
        t.join(30)
        assert U._enable_debugging_cache is False  # (this block still runs)
    assert seen == {"other": names, "nested": names}
    assert U._enable_debugging_cache == debugging
    assert not names & set(vars(jvm))
    assert session.active_blocks() == 0
    assert session.patches() == []


def test_with_the_switch_on_the_internals_it_patches_exist_and_are_patched(spark, fast_planning):
    """The private names the switch relies on: PySpark's call-site capture flag, the active
    SparkContext's JVM view and its ``__dict__``, py4j's ``JavaClass`` views of the hot classes and
    their ``JavaMember`` methods. Each is patched in the block, and restored after it."""
    import pyspark.errors.utils as U
    from py4j.java_gateway import JavaClass, JavaMember
    from pyspark import SparkContext

    assert isinstance(U._enable_debugging_cache, bool)
    jvm = SparkContext._active_spark_context._jvm
    assert jvm is spark.sparkContext._jvm and isinstance(vars(jvm), dict)
    for name in session.HOT_CLASSES:
        assert isinstance(getattr(jvm, name), JavaClass), name
    assert isinstance(jvm.PythonUtils.toSeq, JavaMember)
    assert session.patches() == []
    with session.plan_building():
        assert session.patches() == ["call sites", *session.HOT_CLASSES]
        assert U._enable_debugging_cache is False
        for name in session.HOT_CLASSES:
            assert isinstance(vars(jvm)[name], JavaClass), name
        toseq = jvm.PythonUtils.toSeq
        assert isinstance(toseq, JavaMember) and jvm.PythonUtils.toSeq is toseq  # (looked up once)
    assert session.patches() == [] and not set(session.HOT_CLASSES) & set(vars(jvm))


def test_with_the_switch_off_nothing_is_patched(spark, monkeypatch):
    import pyspark.errors.utils as U

    monkeypatch.delenv(session.FAST_PLANNING, raising=False)
    jvm = spark.sparkContext._jvm
    debugging, before = U._enable_debugging_cache, dict(vars(jvm))
    with session.plan_building(), session.plan_building():
        assert not session.fast_planning()
        assert session.patches() == [] and session.active_blocks() == 0
        assert U._enable_debugging_cache == debugging
        assert dict(vars(jvm)) == before
        assert not set(session.HOT_CLASSES) & set(vars(jvm))
    assert U._enable_debugging_cache == debugging and dict(vars(jvm)) == before
