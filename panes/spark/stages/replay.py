"""``panes replay --engine spark`` for multi-stage scenarios: the timeline on Structured Streaming,
one micro-batch per step, through the multi-stage plan (``stream.StagesStream``).

Each step is one JSON file of a streaming file source read one file per micro-batch: its records
tagged with their input, a control row per input it moves the watermark of (explicit values; the
end), and the scripted clock. The output stage's panes are collected per micro-batch and ordered
as the core emits them (phase, window end, start, key, place in the pane); the dead letters too.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField

from ...core.stages.accounts import GraphAccounting
from ...stage_scenario import StageReplayResult, StageScenario
from ..columns import CLOCK, MALFORMED, SPARK_END_MS
from ..session import get_spark
from .buckets import ROW, STAGE_INDEX, STEP_PHASE, SUB, WE, WS, stage_order
from .stream import StagesStream
from .transport import INPUT, input_rows

WM_STEP = "__panes_wm_step"
INGEST = "__panes_ingest"
LETTER_KEYS = ("reason", "record", "watermark", "window", "windows", "detail", "input", "stage")


def step_rows(step: dict, clock: int, inputs: list[str]) -> list[dict]:
    """A step's file: the clock row, the records of its input, its watermark and end rows."""
    rows: list[dict] = [{CLOCK: clock, INPUT: inputs[0]}]
    name = step.get("input")
    for r in step.get("add", []):
        rows.append(
            dict(r, **{INGEST: clock, INPUT: name})
            if isinstance(r, dict)
            else {"value": r, MALFORMED: "a record must be a JSON object", INPUT: name}
        )
    if "watermark" in step:
        rows.append({WM_STEP: step["watermark"], INPUT: name})
    if step.get("end"):
        rows += [{WM_STEP: SPARK_END_MS, INPUT: n} for n in ([name] if name else inputs)]
    return rows


def replay_stages_spark(scenario: StageScenario, buckets: int = 4, spark=None) -> StageReplayResult:
    spark = spark or get_spark()
    graph = scenario.graph
    names = list(graph.input_names)
    tmp = Path(tempfile.mkdtemp(prefix="panes-stages-replay-"))
    src, staging = tmp / "input", tmp / "staging"
    src.mkdir()
    staging.mkdir()
    try:
        clock, files = 0, []
        for i, step in enumerate(scenario.timeline):
            clock = max(clock, step.get("processing_time", clock))
            files.append(f"step-{i:05d}.json")
            (staging / files[-1]).write_text("\n".join(json.dumps(r) for r in step_rows(step, clock, names)) + "\n")
        schema = spark.read.json(str(staging)).schema
        for name in (CLOCK, WM_STEP, INGEST):
            if name not in schema.fieldNames():
                schema = schema.add(StructField(name, LongType(), True))
        stream = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).json(str(src))
        parts = [
            input_rows(stream.filter(F.col(INPUT) == n), n, graph.input(n), ingestion=F.col(INGEST), control_wm=WM_STEP)
            for n in names
        ]
        union = parts[0]
        for p in parts[1:]:
            union = union.unionByName(p)
        checkpoint = str(tmp / "checkpoint")
        plan = StagesStream(graph, {n: schema for n in names}, checkpoint, buckets, scripted_clock=True, account=True)
        collected: dict[int, tuple[list, list, GraphAccounting | None]] = {}

        def each(batch, batch_id):
            out = plan.run(batch, batch_id)
            panes = [r.asDict() for r in out.panes.select(ROW, STEP_PHASE, WE, WS, SUB).collect()]
            dead = [r.asDict() for r in out.dead_letters.select(ROW, STAGE_INDEX, SUB).collect()]
            collected[batch_id] = (panes, dead, out.accounting)
            out.release()

        q = union.writeStream.foreachBatch(each).option("checkpointLocation", str(tmp / "checkpoint")).start()
        try:
            base = time.time() - 10_000
            for n, name in enumerate(files):
                shutil.copy(staging / name, src / name)
                os.utime(src / name, (base + n, base + n))
                q.processAllAvailable()
        finally:
            q.stop()
        if q.exception():
            raise RuntimeError(str(q.exception()))
        return ordered(collected, graph.output_stage.key)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def ordered(collected: dict, key: tuple[str, ...]) -> StageReplayResult:
    """The panes and dead letters in the core's order."""
    panes, dead = [], []
    accounting = GraphAccounting()
    for bid in sorted(collected):
        rows, letters, account = collected[bid]
        if account is not None:
            accounting.add_graph(account)
        decoded = [(json.loads(r[ROW]), r) for r in rows]
        decoded.sort(key=lambda d: stage_order(d[0], key, d[1][STEP_PHASE], d[1][WE], d[1][WS], d[1][SUB]))
        panes += [d for d, _ in decoded]
        for r in sorted(letters, key=lambda r: (r[STAGE_INDEX], r[SUB])):
            d = json.loads(r[ROW])
            dead.append({k: d[k] for k in LETTER_KEYS if k in d and d[k] is not None})
    return StageReplayResult(panes, dead, {}, accounting)
