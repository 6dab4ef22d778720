"""The sink plan (``plan='arrow'``, ``native.arrow_sink``): the native stream's rows into panes' Arrow
writer, no foreachBatch. It prints what the core prints on every replay scenario it runs and on
random timelines (late rows, lateness, watermark records, hopping gaps, keys or none, nulls), the
same sinks' rows as the foreachBatch plan through ``panes run`` (with the end of the input), and
it hands each micro-batch on once across a restart."""

import json
import os
import random
import shutil

import pytest

from panes.cli import check_plan
from panes.runner import run_spec
from panes.scenario import dumps, load_scenario, replay_core
from panes.spark.native.arrow_partials import sink_unsupported
from panes.spark.native.arrow_sink import SinkPlan
from panes.spark.replay import replay_spark
from panes.spec import SpecError, parse_run_spec
from tests.spark.test_native_end import FILES, _rows, run_doc
from tests.spark.test_replay_parity import (
    RANDOM_FIXED_WINDOWS,
    SCENARIOS,
    _dl,
    random_default_trigger_scenario,
)

pytestmark = pytest.mark.spark
LONG = pytest.mark.long


def _sink_scenarios() -> list:
    return [p for p in SCENARIOS if sink_unsupported(load_scenario(p).pipeline) is None]


def test_the_sink_plan_runs_the_default_trigger_on_fixed_windows():
    # (what it covers is known before Spark starts; these scenarios are the ones below)
    assert [p.stem for p in _sink_scenarios()] == [
        "malformed_records",
        "punctuation_records",
        "streaming102_heuristic",
        "streaming102_ingress_time",
        "streaming102_perfect",
    ]
    early = load_scenario(SCENARIOS[0].parent / "java_empty_pane_value.yaml").pipeline
    assert sink_unsupported(early) == "the sink plan runs the default trigger"
    sessions = load_scenario(SCENARIOS[0].parent / "keyed_sessions.yaml").pipeline
    assert sink_unsupported(sessions) == "the sink plan runs fixed windows (tumbling, hopping, global), not session"


#: make test replays the scenario of malformed records (dead letters read back from their records);
#: late rows come in the random timelines and through ``panes run`` below; the others are ``long``
QUICK = ("malformed_records",)


@pytest.mark.parametrize(
    "path", [pytest.param(p, id=p.stem, marks=[] if p.stem in QUICK else [LONG]) for p in _sink_scenarios()]
)
def test_scenarios_same_on_the_sink_plan_and_core(spark, path):
    scenario = load_scenario(path)
    core = replay_core(scenario)
    on_spark = replay_spark(scenario, spark=spark, plan="arrow")
    assert on_spark.panes == core.panes
    assert sorted(map(_dl, on_spark.dead_letters)) == sorted(map(_dl, core.dead_letters))
    # and byte for byte what the foreachBatch plan printed when the golden files were recorded
    golden = path.parents[1] / "golden"
    for what, rows in (("panes", on_spark.panes), ("dead", on_spark.dead_letters)):
        recorded = (golden / f"{path.stem}.spark-native.{what}.jsonl").read_text()
        assert "".join(dumps(r) + "\n" for r in rows) == recorded


def _random_sink_scenario(seed: int) -> dict:
    """Random fixed windows, keys, lateness, watermark records and nulls under the default trigger,
    with the aggregates the sink plan has an Arrow form of."""
    aggregates = {
        "n": {"count": "*"},
        "c": {"count": "v"},
        "s": {"sum": "v"},
        "lo": {"min": "v"},
        "hi": {"max": "v"},
        "a": {"avg": "v"},
    }
    window = [*RANDOM_FIXED_WINDOWS, "global"][seed % 4]
    return random_default_trigger_scenario(seed, random.Random(500 + seed), window, range(-3, 10), aggregates)


@pytest.mark.parametrize("seed", [pytest.param(s, marks=[] if s < 2 else [LONG]) for s in range(8)])
def test_random_timelines_same_on_the_sink_plan_and_core(spark, seed):
    scenario = load_scenario(_random_sink_scenario(seed))
    assert sink_unsupported(scenario.pipeline) is None
    core = replay_core(scenario)
    assert core.panes, "the scenario should produce panes"
    on_spark = replay_spark(scenario, spark=spark, plan="arrow")
    assert on_spark.panes == core.panes
    assert sorted(map(_dl, on_spark.dead_letters)) == sorted(map(_dl, core.dead_letters))


def _run(spark, src, out, window, lateness: str, plan: str, end: bool = True) -> dict:
    doc = run_doc(src, out, "sink_plan", window, lateness, plan, end)
    return run_spec(parse_run_spec(doc), spark=spark, progress=False)


def _write_files(src, upto: int | None = None) -> None:
    src.mkdir(exist_ok=True)
    for i, rows in enumerate(FILES[:upto]):
        path = src / f"part-{i}.json"
        if not path.exists():
            path.write_text("\n".join(json.dumps({"k": k, "t": t * 1000, "v": v}) for k, t, v in rows) + "\n")
            os.utime(path, (1_600_000_000 + i, 1_600_000_000 + i))


@pytest.mark.parametrize(
    "window, lateness",
    [
        ({"tumbling": {"size": "10 seconds"}}, "15 seconds"),
        pytest.param({"hopping": {"size": "10 seconds", "hop": "5 seconds"}}, "0 seconds", marks=[LONG]),
        pytest.param("global", "0 seconds", marks=[LONG]),
    ],
    ids=["tumbling", "hopping", "global"],
)
def test_panes_run_on_the_sink_plan_gives_the_foreach_batch_plans_rows(spark, tmp_path, window, lateness):
    src = tmp_path / "data"
    _write_files(src)
    got = {}
    for plan in ("native", "arrow"):
        out = tmp_path / plan
        counts = _run(spark, src, out, window, lateness, plan)
        assert counts["records_in"] == sum(map(len, FILES)) == counts["counted"] + counts["dead_letters"]
        got[plan] = (_rows(out / "panes"), _rows(out / "dead"), counts)
    assert got["arrow"] == got["native"]
    assert got["arrow"][0]  # (panes, each in the micro-batch the foreachBatch plan gave it)
    assert bool(got["arrow"][1]) == (window != "global")  # (late rows went to the dead letters)


def test_a_restart_hands_each_micro_batch_on_once(spark, tmp_path):
    window, lateness = {"tumbling": {"size": "10 seconds"}}, "15 seconds"
    src, whole = tmp_path / "data", tmp_path / "whole"
    _write_files(src)
    _run(spark, src, whole, window, lateness, "arrow")
    # the same files in two runs: the first ends after two files (its last windows stay open)
    src2, out = tmp_path / "data2", tmp_path / "restarted"
    _write_files(src2, 2)
    first = _run(spark, src2, out, window, lateness, "arrow", end=False)
    # a process that died after its last commit but before that micro-batch's delivery
    state = out / "checkpoint" / "panes_native"
    last = max(int(d.name[1:]) for d in state.glob("v*") if (d / "delivered").exists())
    (state / f"v{last}" / "delivered").unlink()
    shutil.rmtree(out / "panes" / f"batch={last}", ignore_errors=True)
    _write_files(src2)
    second = _run(spark, src2, out, window, lateness, "arrow")
    assert first["records_in"] + second["records_in"] == sum(map(len, FILES))
    assert _rows(out / "panes") == _rows(whole / "panes")
    assert _rows(out / "dead") == _rows(whole / "dead")


def test_a_pipeline_the_sink_plan_cannot_run_fails_before_spark_starts(tmp_path):
    doc = run_doc(tmp_path, tmp_path / "out", "sink_plan", {"session": {"gap": "5 seconds"}}, "0 seconds", "arrow")
    with pytest.raises(SpecError) as e:
        check_plan(parse_run_spec(doc))
    assert str(e.value) == (
        "spark.plan: 'arrow' cannot run this pipeline: the sink plan runs fixed windows (tumbling, hopping, "
        "global), not session (use auto or stateful)"
    )


def _sink_plan(root) -> SinkPlan:
    from pyspark.sql import types as ST

    from panes.core.windows import Tumbling
    from panes.spark.native.names import CREATED_LATE, IS_DEAD_LETTER, ROW_WATERMARK, WINDOW_END, WINDOW_START

    fields = [("k", ST.StringType()), (WINDOW_START, ST.LongType()), (WINDOW_END, ST.LongType())]
    fields += [(CREATED_LATE, ST.BooleanType()), ("__panes_partial_0", ST.LongType())]
    fields += [("__panes_partial_1", ST.LongType()), (ROW_WATERMARK, ST.LongType()), (IS_DEAD_LETTER, ST.IntegerType())]
    schema = ST.StructType([ST.StructField(n, t, True) for n, t in fields])
    partials: list[list] = [["__panes_partial_0", None, "count_all", "sum"], ["__panes_partial_1", "v", "sum", "sum"]]
    return SinkPlan(str(root), ["k"], Tumbling(10_000), partials, 5_000, 1_000, schema.json())


def _task_rows(rows: list) -> list:
    """A task's micro-batch: (key, event time ms, value), or None for a malformed row."""
    import pyarrow as pa

    from panes.spark.native.names import ROW_COUNTS, ROW_MALFORMED, ROW_TIME, ROW_WATERMARK

    ok = [r is not None for r in rows]
    good = [r or (None, 0, None) for r in rows]
    return [
        pa.record_batch(
            {
                "k": [r[0] for r in good],
                "v": pa.array([r[2] for r in good], pa.int64()),
                ROW_TIME: pa.array([r[1] for r in good], pa.int64()),
                ROW_WATERMARK: pa.array([r[1] if o else None for r, o in zip(good, ok)], pa.int64()),
                ROW_COUNTS: ok,
                ROW_MALFORMED: [not o for o in ok],
            }
        )
    ]


class _Message:
    """A task's commit message (``WriterCommitMessage``'s fields, without Spark)."""

    def __init__(self, partials, seen, dead):
        self.partials, self.seen, self.dead = partials, seen, dead


def _step(plan, batch_id: int, rows: list) -> None:
    from panes.spark.native.arrow_sink import commit_step, task_step

    commit_step(plan, [task_step(plan, _task_rows(rows), batch_id, 0, _Message)], batch_id)


def _windows(path) -> list[tuple]:
    import pyarrow.parquet as pq

    t = pq.read_table(path).to_pylist()
    return sorted((r["k"], r["__panes_window_start"], r["__panes_partial_0"], r["__panes_partial_1"]) for r in t)


def test_the_sink_steps_and_a_micro_batch_run_again(tmp_path):
    import pyarrow.parquet as pq

    from panes.spark.native.state_versions import windows_meta as meta

    # tumbling 10 s, allowed lateness 5 s, watermark 1 s behind the greatest event time
    plan = _sink_plan(tmp_path)
    _step(plan, 0, [("a", 1_000, 1), ("b", 2_000, 2), ("a", 12_000, 3)])
    assert meta(tmp_path, 0)["watermark"] == 11_000
    # a row of [0, 10 s) within the lateness joins its window; a malformed row; [0, 10 s) and
    # [10 s, 20 s) expire at 15 s and 25 s: both close
    _step(plan, 1, [("a", 3_000, 4), None, ("b", 26_000, 5)])
    m = meta(tmp_path, 1)
    assert (m["watermark"], m["watermark_before"], m["closed"], m["dead"]) == (25_000, 11_000, 3, 1)
    assert _windows(tmp_path / "v1" / "closed") == [("a", 0, 2, 5), ("a", 10_000, 1, 3), ("b", 0, 1, 2)]
    assert _windows(tmp_path / "v1" / "windows") == [("b", 20_000, 1, 5)]
    # a row of an expired window is a dead letter, and counts nowhere
    _step(plan, 2, [("a", 4_000, 6), ("c", 27_000, 7)])
    m = meta(tmp_path, 2)
    assert (m["watermark"], m["closed"], m["dead"]) == (26_000, 0, 1)
    assert _windows(tmp_path / "v2" / "windows") == [("b", 20_000, 1, 5), ("c", 20_000, 1, 7)]
    dead = sorted(tmp_path.glob("v2/dead/*.parquet"))
    assert [r["k"] for f in dead for r in pq.read_table(f).to_pylist()] == ["a"]
    # Spark runs micro-batch 2 again (after a failure before its commit was logged): the same version
    before = {p: p.read_bytes() for p in (tmp_path / "v2").rglob("*") if p.is_file()}
    _step(plan, 2, [("a", 4_000, 6), ("c", 27_000, 7)])
    assert {p: p.read_bytes() for p in (tmp_path / "v2").rglob("*") if p.is_file()} == before


def test_panes_explain_names_the_sink_plan(tmp_path):
    from click.testing import CliRunner

    from panes import cli
    from panes.spark.native.arrow_sink import PLAN_TEXT

    doc = run_doc(tmp_path, tmp_path / "out", "sink_plan", {"tumbling": {"size": "10 seconds"}}, "0 seconds", "arrow")
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(doc))
    result = CliRunner().invoke(cli.main, ["explain", str(spec)])
    assert result.exit_code == 0
    assert result.output == f"{PLAN_TEXT} (spark.plan: arrow)\n"
