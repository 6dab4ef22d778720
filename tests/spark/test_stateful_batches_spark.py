"""The stateful plan's micro-batches on the driver (``stateful_batch.StatefulBatches``): one Spark
job runs the operator, and the callbacks get only what there is: no dead-letter callback for a
micro-batch without dead letters, an empty DataFrame that reads nothing for one without panes."""

import json
import os

import pytest

import panes

pytestmark = pytest.mark.spark

PIPELINE = {
    "event_time": "t",
    "key": "k",
    "window": {"tumbling": {"size": 10_000}},
    "aggregates": {"n": {"count": "*"}},
}
#: batch 0: two records, no window closes; the watermark moves to 25 s, so a no-data batch 1
#: closes [0 s, 10 s) (also with 10 s of allowed lateness); batch 2: a late record, a dead letter
#: and no pane
FILES = [[{"k": "a", "t": 1000}, {"k": "a", "t": 25_000}], [{"k": "a", "t": 2000}]]


def _jobs_per_batch(spark, run_id: str) -> dict[int, int]:
    """The Spark jobs of each micro-batch of the query run ``run_id`` (its job group)."""
    sc = spark.sparkContext._jsc.sc()
    jobs = spark._jvm.scala.jdk.javaapi.CollectionConverters.asJava(sc.statusStore().jobsList(None))
    out: dict[int, int] = {}
    for j in jobs:
        if j.jobGroup().isEmpty() or j.jobGroup().get() != run_id or not j.description().isDefined():
            continue
        for line in j.description().get().splitlines():
            if line.startswith("batch = "):
                batch = int(line.split("=", 1)[1])
                out[batch] = out.get(batch, 0) + 1
    return out


def _kept_partitions(spark) -> int:
    """The partitions of RDDs or cached tables Spark's block manager holds now."""
    return sum(i.numCachedPartitions() for i in spark.sparkContext._jsc.sc().getRDDStorageInfo())


@pytest.mark.parametrize("lateness", [0, 10_000])  # (with lateness: the driver reads the holds too)
def test_one_job_runs_the_operator_and_the_callbacks_get_only_what_there_is(spark, tmp_path, lateness):
    src = tmp_path / "in"
    src.mkdir()
    df = spark.readStream.schema("k STRING, t LONG").option("maxFilesPerTrigger", 1).json(str(src))
    result = panes.window(df, {**PIPELINE, "allowed_lateness": lateness}, buckets=4, plan="stateful")
    got: list = []
    kept: list = []  # (partitions held while each callback runs)
    before = _kept_partitions(spark)  # (what other tests of the session left)

    def on_panes(d, i):
        got.append(("P", i, result.no_panes(d), [(r["k"], r["n"], r["timing"]) for r in d.collect()]))
        kept.append((i, _kept_partitions(spark) - before))

    def on_dead(d, i):
        got.append(("D", i, False, [(r["reason"], json.loads(r["record"])) for r in d.collect()]))

    q = result.write_stream(on_panes, on_dead, str(tmp_path / "ck"))
    try:
        for n, rows in enumerate(FILES):
            path = src / f"b{n}.json"
            path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
            os.utime(path, (1_600_000_000 + n,) * 2)
            q.processAllAvailable()
        run_id = str(q.runId)
    finally:
        q.stop()
    after = _kept_partitions(spark) - before
    assert got == [
        ("P", 0, True, []),
        ("P", 1, False, [("a", 1, "ON_TIME")]),
        ("P", 2, True, []),
        ("D", 2, False, [("late", {"k": "a", "t": 2000})]),
    ]
    # the operator's job, and one job of each callback's collect that has rows to read (an
    # empty one reads nothing)
    assert _jobs_per_batch(spark, run_id) == {0: 1, 1: 2, 2: 2}
    # the operator's output of a micro-batch is held for its callbacks (``held``: each of its
    # partitions, one per shuffle partition) and let go after them (held still, the next
    # micro-batch's callbacks would see them too)
    parts = int(spark.conf.get("spark.sql.shuffle.partitions"))
    assert kept == [(0, parts), (1, parts), (2, parts)] and after == 0
