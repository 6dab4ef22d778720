"""plan_building: fewer JVM round trips while panes builds a plan, the same plan, and PySpark as it
was once the last block has left."""

import threading

from py4j import clientserver
from pyspark.sql import functions as F

from panes.spark import session


def _round_trips(build) -> int:
    sent = []
    orig = clientserver.ClientServerConnection.send_command

    def counting(self, command):
        if not command.startswith("m"):  # (py4j's garbage collection of Java objects, at any time)
            sent.append(command)
        return orig(self, command)

    clientserver.ClientServerConnection.send_command = counting
    try:
        build()
    finally:
        clientserver.ClientServerConnection.send_command = orig
    return len(sent)


def _expression():
    return F.when(F.col("a").isNull(), F.lit(-1)).otherwise(F.coalesce(F.col("a"), F.col("b")) + F.lit(1))


def test_a_plan_built_in_the_block_costs_fewer_round_trips_and_gives_the_same_rows(spark):
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


def test_pyspark_is_left_as_it_was_after_nested_blocks_and_blocks_in_threads(spark):
    import pyspark.errors.utils as U

    jvm = spark.sparkContext._jvm
    names = set(session._HOT_CLASSES)
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
    assert session._depth == 0
