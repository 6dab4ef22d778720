"""The stage's output watermark on Spark: a pane's timing hangs on every key's holds, across the
stateful plan's hash buckets (each bucket reports its holds, the driver decides the panes its
bucket could not: ``stateful_timing.OutputWatermarks``), in the replay and in ``write_stream``."""

import json
import os
import time

import pytest
from pyspark.sql import functions as F

import panes
from panes.core.engine.parts import StageWatermarks
from panes.scenario import load_scenario, replay_core
from panes.spark.replay import replay_spark
from panes.spark.stages.replay import replay_stages_spark
from panes.spark.stateful import KIND, ORDER, PART, PART_HOLDS, PART_WATERMARK, PHASE, PROVISIONAL
from panes.spark.stateful_timing import OutputWatermarks
from panes.spark.window_pipeline import PANE_ID
from panes.stage_scenario import load_stage_scenario, replay_stages_core
from tests.spark.answers import record_answers

pytestmark = pytest.mark.spark

KEYS = [f"k{i}" for i in range(1, 8)]
PIPELINE = {
    "event_time": "t",
    "key": "k",
    "window": {"tumbling": {"size": 10_000}},
    "allowed_lateness": 600_000,
    "trigger": {"after_count": 2},
    "accumulation": "discarding",
    "aggregates": {"s": {"sum": "v"}},
}


def _holders(spark, buckets: int) -> list[str]:
    """The keys whose hash bucket (``planner.prepare``) is not k0's: only another bucket's holds
    can keep k0's window ON_TIME."""
    rows = (
        spark.createDataFrame([(k,) for k in ["k0", *KEYS]], "k STRING")
        .select("k", F.pmod(F.xxhash64("k"), F.lit(buckets)).alias("b"))
        .collect()
    )
    bucket = {r.k: r.b for r in rows}
    holders = [k for k in KEYS if bucket[k] != bucket["k0"]]
    assert holders
    return holders


def test_other_buckets_holds_keep_a_late_created_window_on_time_in_the_replay(spark, monkeypatch):
    # issue 32, case 1, over keys in 8 buckets: k0's window [10 s, 20 s) comes into being after the
    # watermark passed its end; the unfired records of keys in other buckets hold the output watermark
    late = [{"k": "k0", "v": 2, "t": 12_000}, {"k": "k0", "v": 3, "t": 13_000}]
    scenario = load_scenario(
        {
            "pipeline": {**PIPELINE, "watermark": {"punctuation": True}},
            "timeline": [
                {"add": [{"k": k, "v": 1, "t": 5000} for k in _holders(spark, 8)]},
                {"watermark": 30_000},
                {"add": late},
                {"end": True},
            ],
        }
    )
    decisions = record_answers(monkeypatch, StageWatermarks, "timing")
    core = replay_core(scenario)
    assert core.panes[0]["k"] == "k0" and core.panes[0]["timing"] == "ON_TIME"
    assert replay_spark(scenario, buckets=8, spark=spark, plan="stateful").panes == core.panes
    assert "ON_TIME" in decisions  # k0's bucket alone would have said LATE


def test_write_stream_decides_the_provisional_panes(spark, tmp_path, monkeypatch):
    src = tmp_path / "in"
    src.mkdir()
    holders = _holders(spark, 8)
    batches = [
        [{"k": k, "v": 1, "t": 5000} for k in holders] + [{"k": holders[0], "v": 0, "t": 30_000}],
        [{"k": "k0", "v": 2, "t": 12_000}, {"k": "k0", "v": 3, "t": 13_000}],
    ]
    df = spark.readStream.schema("k STRING, v LONG, t LONG").option("maxFilesPerTrigger", 1).json(str(src))
    result = panes.window(df, PIPELINE, buckets=8, plan="stateful")
    seen: list = []
    decisions = record_answers(monkeypatch, StageWatermarks, "timing")
    q = result.write_stream(
        lambda d, i: seen.extend(r.asDict() for r in d.collect()), lambda d, i: None, checkpoint=str(tmp_path / "ck")
    )
    try:
        base = time.time() - 1000
        for n, rows in enumerate(batches):
            path = src / f"b{n}.json"
            path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
            os.utime(path, (base + n, base + n))
            q.processAllAvailable()
    finally:
        q.stop()
    k0 = [(r["timing"], r["pane_index"], r["s"]) for r in seen if r["k"] == "k0"]
    assert k0 == [("ON_TIME", 0, 5)]
    assert "ON_TIME" in decisions


def test_a_provisional_table_pane_and_its_retraction_are_decided_once_each(spark):
    # a window pipeline's pane is several rows: decided once, so every row of its retraction is LATE
    # too (the retraction finds its pane's LATE decision once)
    scenario = load_scenario(
        {
            "pipeline": {
                "event_time": "t",
                "key": "k",
                "window": {"tumbling": {"size": 10_000}},
                "allowed_lateness": 600_000,
                "watermark": {"punctuation": True},
                "trigger": {"repeatedly": {"after_count": 2}},
                "accumulation": "retracting",
                "window_pipeline": {"sql": "SELECT v FROM rows"},
            },
            "timeline": [
                {"watermark": 30_000},
                {"add": [{"k": "k0", "v": 1, "t": 12_000}, {"k": "k0", "v": 2, "t": 13_000}]},
                {"add": [{"k": "k0", "v": 3, "t": 14_000}, {"k": "k0", "v": 4, "t": 15_000}]},
                {"end": True},
            ],
        }
    )
    core = replay_core(scenario)
    assert [(p["timing"], p["pane_index"], p["retraction"], p["v"]) for p in core.panes] == [
        ("LATE", 0, False, 1),
        ("LATE", 0, False, 2),
        ("LATE", 0, True, 1),
        ("LATE", 0, True, 2),
        ("LATE", 1, False, 1),
        ("LATE", 1, False, 2),
        ("LATE", 1, False, 3),
        ("LATE", 1, False, 4),
    ]
    assert replay_spark(scenario, buckets=8, spark=spark, plan="stateful").panes == core.panes


def test_the_driver_decides_a_table_panes_rows_once():
    # (no Spark session: the driver's decision over collected rows) a LATE pane of two rows, then
    # its retraction of two rows: each row of both LATE, the retraction's decision found once
    p = load_scenario({"pipeline": {**PIPELINE, "accumulation": "retracting"}, "timeline": []}).pipeline
    decide = OutputWatermarks(p).decide
    report = {KIND: "H", PART: 0, PART_WATERMARK: 30_000, PART_HOLDS: [10**12] * 4}

    def pane(pane_id: int, retraction: bool, order: int) -> dict:
        head = {"k": "k0", "window_start": 10_000, "window_end": 20_000, "pane_index": 0, "timing": "ON_TIME"}
        return {KIND: "P", PHASE: 2, ORDER: order, PROVISIONAL: 1, PANE_ID: pane_id, "retraction": retraction, **head}

    first = decide([report, pane(7, False, 0), pane(7, False, 0)])
    again = decide([report, pane(8, True, 0), pane(8, True, 0)])
    assert [r["timing"] for r in first + again] == ["LATE"] * 4
    assert {r[PROVISIONAL] for r in first + again} == {0}


@pytest.mark.parametrize("held", [True, False], ids=["held", "alone"])
def test_a_stage_of_a_multi_stage_pipeline_takes_its_timing_from_every_buckets_holds(spark, held):
    # issue 32, case 1, as one stage of a stage graph on 4 buckets: other buckets' unfired records
    # keep k0's late-created window ON_TIME (the driver decides it); without them it is LATE
    stage = {k: v for k, v in PIPELINE.items() if k != "event_time"}
    holders = _holders(spark, 4) if held else []
    timeline = [
        {"add": [{"k": k, "v": 1, "t": 5000} for k in holders]},
        {"watermark": 30_000},
        {"add": [{"k": "k0", "v": 2, "t": 12_000}, {"k": "k0", "v": 3, "t": 13_000}]},
        {"end": True},
    ]
    scenario = load_stage_scenario(
        {
            "pipeline": {
                "inputs": {"ev": {"event_time": "t", "watermark": {"punctuation": True}}},
                "stages": [{"name": "s", "from": "ev", **stage}],
                "output": "s",
            },
            "timeline": timeline if held else timeline[1:],
        }
    )
    core = replay_stages_core(scenario)
    assert core.panes[0]["k"] == "k0" and core.panes[0]["timing"] == ("ON_TIME" if held else "LATE")
    assert replay_stages_spark(scenario, buckets=4, spark=spark).panes == core.panes


RETRACTING = {**PIPELINE, "trigger": {"repeatedly": {"after_count": 2}}, "accumulation": "retracting"}
#: a record of k1 moves the watermark to 30 s; two of k0 make its window [10 s, 20 s) fire a LATE
#: pane (decided on the driver: its bucket alone cannot tell); two more retract it
STEPS = [
    [{"k": "k1", "v": 1, "t": 30_000}],
    [{"k": "k0", "v": 2, "t": 12_000}, {"k": "k0", "v": 3, "t": 13_000}],
    [{"k": "k0", "v": 4, "t": 14_000}, {"k": "k0", "v": 5, "t": 15_000}],
]


def _run_steps(spark, src, checkpoint, steps: range, seen: dict) -> int:
    """One query over the files of ``steps`` (written as it goes), k0's panes kept per micro-batch
    (a micro-batch run again replaces its own); the last micro-batch Spark committed."""
    df = spark.readStream.schema("k STRING, v LONG, t LONG").option("maxFilesPerTrigger", 1).json(str(src))
    result = panes.window(df, RETRACTING, buckets=8, plan="stateful")

    def keep(d, i):
        # (in the order the engine emits them: a retraction before its window's next pane)
        rows = [(r.timing, r.pane_index, r.retraction, r.s) for r in d.filter(F.col("k") == "k0").collect()]
        seen[i] = sorted(rows, key=lambda r: (r[1], not r[2]))

    q = result.write_stream(keep, lambda d, i: None, checkpoint=str(checkpoint))
    try:
        q.processAllAvailable()  # (what is there already: a micro-batch to run again)
        for n in steps:
            path = src / f"b{n}.json"
            path.write_text("\n".join(json.dumps(r) for r in STEPS[n]) + "\n")
            os.utime(path, (1_600_000_000 + n,) * 2)
            q.processAllAvailable()
    finally:
        q.stop()
    return max(int(f.name) for f in (checkpoint / "commits").iterdir() if f.name.isdigit())


def test_a_restarted_query_decides_a_late_panes_retraction_as_one_run_does(spark, tmp_path):
    # issue 32: the driver's decisions live in the checkpoint. The query stops between k0's LATE
    # pane and its retraction, and its last micro-batch is run again (its commit removed, as a kill
    # before Spark wrote it leaves it): the panes of one uninterrupted query
    whole: dict = {}
    (tmp_path / "a").mkdir()
    _run_steps(spark, tmp_path / "a", tmp_path / "ck-a", range(3), whole)
    assert [p for i in sorted(whole) for p in whole[i]] == [
        ("LATE", 0, False, 5),
        ("LATE", 0, True, 5),
        ("LATE", 1, False, 14),
    ]
    parts: dict = {}
    (tmp_path / "b").mkdir()
    last = _run_steps(spark, tmp_path / "b", tmp_path / "ck-b", range(2), parts)
    assert parts[last] == [("LATE", 0, False, 5)]
    for name in (str(last), f".{last}.crc"):
        (tmp_path / "ck-b" / "commits" / name).unlink()
    _run_steps(spark, tmp_path / "b", tmp_path / "ck-b", range(2, 3), parts)
    assert parts == whole


def test_a_stage_decides_from_its_checkpoint_not_from_driver_memory(spark, monkeypatch):
    # a multi-stage pipeline's stage: every micro-batch starts from a driver that forgot everything
    # (as after a restart); its LATE pane's retraction is still LATE, as in the core
    from panes.spark.stages.stream import StagesStream

    run = StagesStream.run

    def forgetful(self, *args, **kwargs):
        self.timings = {}
        return run(self, *args, **kwargs)

    monkeypatch.setattr(StagesStream, "run", forgetful)
    stage = {k: v for k, v in RETRACTING.items() if k != "event_time"}
    scenario = load_stage_scenario(
        {
            "pipeline": {
                "inputs": {"ev": {"event_time": "t", "watermark": {"punctuation": True}}},
                "stages": [{"name": "s", "from": "ev", **stage}],
                "output": "s",
            },
            "timeline": [
                {"watermark": 30_000},
                {"add": [{"k": "k0", "v": 2, "t": 12_000}, {"k": "k0", "v": 3, "t": 13_000}]},
                {"add": [{"k": "k0", "v": 4, "t": 14_000}, {"k": "k0", "v": 5, "t": 15_000}]},
                {"end": True},
            ],
        }
    )
    core = replay_stages_core(scenario)
    assert [(p["timing"], p["pane_index"], p["retraction"], p["s"]) for p in core.panes] == [
        ("LATE", 0, False, 5),
        ("LATE", 0, True, 5),
        ("LATE", 1, False, 14),
    ]
    assert replay_stages_spark(scenario, buckets=4, spark=spark).panes == core.panes


def test_a_micro_batch_run_again_reads_the_decisions_of_the_one_before(tmp_path):
    # (no Spark session) the store keeps a micro-batch's snapshot and the one before; a micro-batch
    # run again reads the one before its own, and drops what a run it replaces wrote after it
    from panes.spark.settling import DecisionStore

    store = DecisionStore(f"file://{tmp_path}")
    assert store.before(0) is None
    for batch_id in range(4):
        store.write(batch_id, {"batch": batch_id})
    assert store.versions() == [2, 3]
    assert store.before(3) == {"batch": 2} and store.before(9) == {"batch": 3}
    store.write(2, {"batch": "again"})
    assert store.versions() == [2] and store.before(3) == {"batch": "again"}
    assert DecisionStore("s3a://bucket/ck").root is None  # (another file system: kept in memory only)


#: 4 s windows, an EARLY pane at every second record, 10 s of allowed lateness (the two tests below)
EARLY_PIPELINE = {
    **PIPELINE,
    "window": {"tumbling": {"size": 4000}},
    "allowed_lateness": 10_000,
    "trigger": {"repeatedly": {"after_count": 2}},
}


def test_the_pane_rows_counted_are_those_written_not_an_empty_late_pane_the_driver_drops(spark, tmp_path):
    # issue 26: a's window [16 s, 20 s) fires an EARLY pane at its second record; when b's record
    # moves the watermark past its expiry its last pane is empty, its timing the driver's: LATE,
    # not written, nor counted (``on_counts``: the driver's counts, after it decided)
    from panes.spark.stateful_counts import add

    counts: dict = {}
    src = tmp_path / "in"
    src.mkdir()
    pipeline = EARLY_PIPELINE
    df = spark.readStream.schema("k STRING, v LONG, t LONG").option("maxFilesPerTrigger", 1).json(str(src))
    result = panes.window(df, pipeline, buckets=8, plan="stateful")
    written: list = []
    q = result.write_stream(
        lambda d, i: written.extend(r.asDict() for r in d.collect()),
        lambda d, i: None,
        str(tmp_path / "ck"),
        on_counts=lambda c, i: add(counts, c),
    )
    try:
        for n, (k, v, t) in enumerate([("a", 4, 18_464), ("a", 5, 19_902), ("b", 1, 40_000)]):
            path = src / f"b{n}.json"
            path.write_text(json.dumps({"k": k, "v": v, "t": t}) + "\n")
            os.utime(path, (1_600_000_000 + n,) * 2)
            q.processAllAvailable()
    finally:
        q.stop()
    assert [(r["k"], r["timing"], r["pane_index"], r["s"]) for r in written] == [("a", "EARLY", 0, 9)]
    assert counts["pane_rows"] == len(written) == 1
    assert (counts["records_in"], counts["counted"]) == (3, 3)


def test_the_panes_counted_are_the_rows_written_when_the_driver_writes_an_undecided_empty_pane(spark, tmp_path):
    # issue 26: as above, but a record of h (another bucket) came to its window [12 s, 16 s)
    # before the watermark passed it and holds the output watermark at 15.999 s; b's record
    # moves the watermark past both windows' expiry in one phase, where h's hold still holds it:
    # k0's empty last pane is ON_TIME, and the driver writes it: the pane rows written, three, are
    # what ``on_counts`` and panes run count
    from panes.runner import run_spec
    from panes.spark.stateful_counts import add
    from panes.spec import parse_run_spec
    from tests.chaos import sink_rows

    h = _holders(spark, 8)[0]
    src = tmp_path / "in"
    src.mkdir()
    pipeline = EARLY_PIPELINE
    for n, rows in enumerate([[("k0", 4, 18_464), (h, 1, 13_000)], [("k0", 5, 19_902)], [("b", 1, 40_000)]]):
        path = src / f"b{n}.json"
        path.write_text("".join(json.dumps({"k": k, "v": v, "t": t}) + "\n" for k, v, t in rows))
        os.utime(path, (1_600_000_000 + n,) * 2)
    df = spark.readStream.schema("k STRING, v LONG, t LONG").option("maxFilesPerTrigger", 1).json(str(src))
    written: list = []
    counts: dict = {}
    q = panes.window(df, pipeline, buckets=8, plan="stateful").write_stream(
        lambda d, i: written.extend(r.asDict() for r in d.collect()),
        lambda d, i: None,
        str(tmp_path / "ck"),
        on_counts=lambda c, i: add(counts, c),
    )
    try:
        q.processAllAvailable()
    finally:
        q.stop()
    expected = [("k0", "EARLY", 0, 9), (h, "ON_TIME", 0, 1), ("k0", "ON_TIME", 1, 0)]
    assert sorted((r["k"], r["timing"], r["pane_index"], r["s"]) for r in written) == sorted(expected)
    assert counts["pane_rows"] == len(written) == 3
    # panes run: its counts are the sink's
    spec = parse_run_spec(
        {
            **pipeline,
            "name": "undecided",
            "mode": "stream",
            "source": {
                "format": "json",
                "path": str(src),
                "max_files_per_trigger": 1,
                "schema": "k STRING, v LONG, t LONG",
            },
            "sink": {"format": "json", "path": str(tmp_path / "run" / "panes")},
            "dead_letter": {"format": "json", "path": str(tmp_path / "run" / "dead")},
            "checkpoint": str(tmp_path / "run" / "ck"),
            "spark": {"available_now": True, "plan": "stateful", "buckets": 8},
        }
    )
    result = run_spec(spec, spark=spark, progress=False)
    rows = [json.loads(r) for r in sink_rows(tmp_path / "run" / "panes").elements()]
    assert sorted((r["k"], r["timing"], r["pane_index"], r["s"]) for r in rows) == sorted(expected)
    assert result["panes"] == len(rows) == 3
