"""A native stream's micro-batches reuse the code Spark generated for the ones before: a step's
watermark is never a literal in its plans (Spark writes a literal number into the code of a stage,
so each new watermark made it compile the step's stages again, twice each; see
native/expressions.py)."""

import datetime as dt

import pytest

from panes import pipeline
from panes.spark.native import NativeStep, NativeStream
from panes.spark.planner import prepare

T0 = dt.datetime(2024, 1, 1)


def _compiled(spark) -> int:
    """How many pieces of code Spark's code generator has compiled in this JVM."""
    return spark._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME().getCount()


SPECS = {
    "default": {"window": {"tumbling": {"size": "10 seconds"}}},
    "early_retracting": {
        "window": {"tumbling": {"size": "10 seconds"}},
        "accumulation": "retracting",
        "trigger": {"after_watermark": {"early": {"count": 2}}},
    },
    "sessions": {"window": {"session": {"gap": "3 seconds"}}},
    # (windows of a row from an array filtered by a lambda function: size not a multiple of the hop)
    "hopping": {"window": {"hopping": {"size": "10 seconds", "hop": "4 seconds"}}},
}


@pytest.mark.parametrize("kind", sorted(SPECS))
def test_a_new_watermark_compiles_no_new_code(spark, tmp_path, kind):
    """Micro-batch i has rows at 10 i + 1..3 s and, from the second on, a late one at 10 i - 18 s:
    each moves the watermark and closes the windows before it, so from the second on every step
    has the same plans with another watermark. After two such steps, the next three compile
    nothing, and their panes and dead letters are exact."""
    spec = {"event_time": "ts", "key": ["k"], "aggregates": {"n": {"count": "*"}, "total": {"sum": "v"}}, **SPECS[kind]}
    p = pipeline(spec)
    schema = "k string, ts timestamp, v long"
    step = NativeStep(p, spark.createDataFrame([], schema).schema, ["k", "ts", "v"])
    stream = NativeStream(step, str(tmp_path / "ckpt"))
    compiled, panes, dead = [], [], []
    for i in range(6):
        rows = [("a", T0 + dt.timedelta(seconds=10 * i + s), s) for s in (1, 2, 3)]
        rows += [("b", T0 + dt.timedelta(seconds=10 * i - 18), 100)] if i else []  # (its window expired)
        path = str(tmp_path / f"in{i}")
        # (from files: Spark computes a plan over an in-memory relation in its optimizer, no code)
        spark.createDataFrame(rows, schema).coalesce(1).write.parquet(path)
        batch = prepare(spark.read.schema(schema).parquet(path), p, 0).withColumns(step.row_columns())
        before = _compiled(spark)
        stream.run(
            batch,
            i,
            lambda df, b: panes.extend(
                (r.k, r.window_start.second, r.timing, r.retraction, r.n, r.total) for r in df.collect()
            ),
            lambda df, b: dead.extend((b, r.reason, r.watermark.second) for r in df.collect()),
        )
        compiled.append(_compiled(spark) - before)
    assert compiled[3:] == [0, 0, 0], compiled
    assert sorted(dead) == [(i, "late", 10 * i - 7) for i in range(1, 6)]
    # the windows closed by micro-batches 1-5 (the last watermark: 53 s): a's at 0-40 s
    # (sessions: [10 i + 1, 10 i + 6) s; hopping: each window of a's rows that ends by 53 s)
    start = 1 if kind == "sessions" else 0
    closed = [("a", 10 * i + start, "ON_TIME", False, 3, 6) for i in range(5)]
    if kind == "hopping":
        values = [(10 * i + v, v) for i in range(6) for v in (1, 2, 3)]
        windows = {t - t % 4 - 4 * j for t, _ in values for j in range(3) if t - t % 4 - 4 * j + 10 > t}
        closed = [
            ("a", s % 60, "ON_TIME", False, len(vs), sum(vs))
            for s in sorted(windows)
            if s + 10 <= 53
            for vs in [[v for t, v in values if s <= t < s + 10]]
        ]
    if kind == "early_retracting":  # an early pane in each window's micro-batch, then retracted
        closed += [("a", 10 * i, "EARLY", False, 3, 6) for i in range(6)]
        closed += [("a", 10 * i, "EARLY", True, 3, 6) for i in range(5)]
    assert sorted(panes) == sorted(closed)
