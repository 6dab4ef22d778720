"""``panes replay --engine spark``: the same timeline on Structured Streaming, one micro-batch per step.

Each step becomes one JSON file of a streaming file source read one file per micro-batch: its
records, plus control rows for watermark steps (explicit watermark values, which Spark's own
watermark then follows) and the scripted processing-time clock (which reaches every bucket).
A last file with no data lets Spark run the batch that fires what the final watermark made due.
Panes are collected per micro-batch and ordered as the engine emitted them (phase, then window
end, start and key, then emission order), which is the core's order.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.types import LongType, StructField

from ..core.engine import DeadLetter, Pane
from ..core.output import dead_letter_record, emission_order, pane_records
from ..core.pipeline import Pipeline
from ..core.time import MAX_TIME, MIN_TIME
from ..scenario import ReplayResult, Scenario
from .columns import ACTIVE, CLOCK, MALFORMED, SPARK_END_MS
from .connect import check_in_process_replay, check_stream
from .failed_rows import FailedRows
from .native import stream_unsupported
from .planner import window_stream
from .results import NativeStreamResult, StatefulStreamResult, WindowedResult
from .session import get_spark, is_connect
from .stateful import KIND, ORDER, PHASE, panes_of, sql_panes_of
from .stateful_timing import OutputWatermarks
from .window_pipeline import is_sql, replay_panes

WM_STEP = "__panes_wm_step"
INGEST = "__panes_ingest"
BATCH_ID, ROW = "__panes_batch_id", "__panes_row"  # (the rows collected on Spark Connect)


def _step_rows(step: dict, clock: int) -> list[dict]:
    rows: list[dict] = [{CLOCK: clock, ACTIVE: 1} if step.get("add") else {CLOCK: clock}]
    if "add" in step:
        rows += [
            dict(r, **{INGEST: clock})
            if isinstance(r, dict)
            else {"value": r, MALFORMED: "a record must be a JSON object"}
            for r in step["add"]
        ]
    if "watermark" in step:
        rows.append({WM_STEP: step["watermark"]})
    if step.get("end"):
        rows.append({WM_STEP: SPARK_END_MS})
    return rows


def replay_spark(scenario: Scenario, buckets: int = 4, spark=None, plan: str = "auto") -> ReplayResult:
    spark = spark or get_spark()
    p = scenario.pipeline
    check_in_process_replay(spark, p)
    tmp = Path(tempfile.mkdtemp(prefix="panes-replay-"))
    src = tmp / "input"
    src.mkdir()
    try:
        staging = tmp / "staging"
        staging.mkdir()
        files = _staged_steps(scenario, src, staging)
        # (on Spark Connect the server reads these files: refused here, with the reason, if it cannot)
        resolved = "native" if plan in ("auto", "native") and stream_unsupported(p) is None else "stateful"
        check_stream(spark, resolved, str(tmp / "checkpoint"), (str(staging),))
        stream = _step_stream(spark, staging, src)
        result = window_stream(
            stream, p, buckets=buckets, scripted_clock=True, ingestion=F.col(INGEST), control_wm=WM_STEP, plan=plan
        )
        collected = _Collected(spark, tmp / "collected")
        q = _start_collecting(result, collected, str(tmp / "checkpoint"))
        _run_steps(q, files, staging)
        # (stateful, lateness: panes decided as write_stream does; a window pipeline's in its callback)
        stateful = isinstance(result, StatefulStreamResult) and p.allowed_lateness > 0 and p.window_pipeline is None
        return _collect(collected.read(spark), p, OutputWatermarks(p) if stateful else None)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _staged_steps(scenario: Scenario, src: Path, staging: Path) -> list[tuple[Path, list[dict]]]:
    """The timeline's steps as JSON files written to ``staging``, each with its path in ``src``
    (where the stream reads it), and a last file with no data."""
    clock = 0
    files = []
    for i, step in enumerate(scenario.timeline):
        clock = max(clock, step.get("processing_time", clock))
        files.append((src / f"step-{i:05d}.json", _step_rows(step, clock)))
    files.append((src / f"step-{len(files):05d}.json", [{CLOCK: clock}]))
    for path, rows in files:
        (staging / path.name).write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return files


def _step_stream(spark, staging: Path, src: Path) -> DataFrame:
    """The stream of the steps' files, one per micro-batch, with the schema of all of them (a
    streaming source needs one up front)."""
    schema = spark.read.json(str(staging)).schema
    for name in (CLOCK, WM_STEP, INGEST, ACTIVE):
        if name not in schema.fieldNames():
            schema = schema.add(StructField(name, LongType(), True))
    stream = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).json(str(src))
    return stream.select(*[c for c in stream.columns if c not in (WM_STEP,)], F.col(WM_STEP))


def _start_collecting(result: WindowedResult, collected: _Collected, checkpoint: str) -> StreamingQuery:
    """The query that writes the plan's panes and dead letters to ``collected``."""
    if isinstance(result, NativeStreamResult):
        return result.write_stream(collected.callback("P"), collected.callback("D"), checkpoint, ordered=True)
    assert isinstance(result, StatefulStreamResult)
    # (a window pipeline's panes are its rows, its SQL run per micro-batch in the callback)
    collect = (
        collected.callback("S")
        if result.pipeline.window_pipeline is None
        else _stateful_collector(collected.batches, result)
    )
    return (
        result.combined.writeStream.foreachBatch(collect)
        .option("checkpointLocation", checkpoint)
        .outputMode("append")
        .start()
    )


def _run_steps(q: StreamingQuery, files: list[tuple[Path, list[dict]]], staging: Path) -> None:
    """Each step's file moved into the stream's input and processed, in order; the query stopped."""
    try:
        base = time.time() - 10_000
        for n, (path, _) in enumerate(files):
            shutil.copy(staging / path.name, path)
            os.utime(path, (base + n, base + n))
            q.processAllAvailable()
        # let a pending no-data batch (watermark moved) run
        q.processAllAvailable()
    finally:
        q.stop()
    if q.exception():
        raise RuntimeError(str(q.exception()))


def _stateful_collector(batches: dict, result: StatefulStreamResult):
    """A foreachBatch function that keeps a window pipeline's rows of each micro-batch: its panes
    as their rows (its SQL run over the micro-batch's panes, settled as ``write_stream`` settles
    them: the ``_collect`` of a window pipeline decides nothing), with their order."""
    p = result.pipeline
    watermarks = OutputWatermarks(p) if p.allowed_lateness > 0 else None
    failed_rows = FailedRows(result.input_schema, KIND)

    def collect_tables(df, batch_id):
        cached = df.cache()
        df = cached if watermarks is None else watermarks.settle(cached)
        rows = [r.asDict(recursive=True) for r in df.filter(F.col(KIND) == "D").collect()]
        failed = None
        if is_sql(p):
            panes, failed = sql_panes_of(failed_rows.without(df), p, result.input_schema, result.view, ordered=True)
            failed_rows.remember(failed, None)
        else:
            panes = panes_of(df, p, result.input_schema, result.view, ordered=True)
        rows += [dict(r.asDict(recursive=True), **{KIND: "P"}) for r in panes.collect()]
        if failed is not None:  # after the engine's dead letters of the micro-batch
            rows += [_letter_of(r.asDict(recursive=True), i) for i, r in enumerate(failed.collect())]
        batches[batch_id] = rows
        cached.unpersist()

    return collect_tables


def _letter_of(d: dict, i: int) -> dict:
    """A dead letter of a failed SQL pane as the stateful plan's dead-letter row."""
    wins = [{"start": _ms(w["start"]), "end": _ms(w["end"])} for w in d["windows"]] if d["windows"] else None
    return {
        KIND: "D",
        PHASE: 3,
        ORDER: i,
        "dl_reason": d["reason"],
        "dl_record": d["record"],
        "dl_watermark": None,
        "dl_windows": json.dumps(wins) if wins else None,
        "dl_detail": d["detail"],
    }


def _ms(t):
    return None if t is None else round(t.timestamp() * 1000)


class _Collected:
    """The rows the query's callbacks hand over, per micro-batch. A classic session runs the
    callbacks in this process: they keep the rows in a dict. On Spark Connect they run in a Python
    worker of the server, on a copy of the closure: they append the rows, numbered in the order
    they come, to a Parquet table per kind under ``where``, read back once the query has stopped."""

    def __init__(self, spark, where: Path):
        self.remote = is_connect(spark)
        self.where = str(where)
        self.batches: dict[int, list] = {}

    def callback(self, kind: str):
        """``f(df, batch_id)`` for the rows of ``kind``: P (native panes), D (native dead letters),
        S (the stateful plan's combined rows)."""
        if self.remote:
            path = f"{self.where}/{kind}"

            def append(df, batch_id):
                (
                    df.withColumn(BATCH_ID, F.lit(batch_id))
                    .withColumn(ROW, F.monotonically_increasing_id())
                    .write.mode("append")
                    .parquet(path)
                )

            return append
        batches = self.batches

        def keep(df, batch_id):
            batches.setdefault(batch_id, []).extend(_rows([r.asDict(recursive=True) for r in df.collect()], kind))

        return keep

    def read(self, spark) -> dict[int, list]:
        if not self.remote:
            return self.batches
        batches: dict[int, list] = {}
        for kind in ("D", "P", "S"):  # (the order the native plan calls back in: dead letters first)
            if not Path(self.where, kind).exists():
                continue
            rows = [r.asDict(recursive=True) for r in spark.read.parquet(f"{self.where}/{kind}").collect()]
            rows.sort(key=lambda r: (r[BATCH_ID], r[ROW]))
            by_batch: dict[int, list] = {}
            for r in rows:
                by_batch.setdefault(r.pop(BATCH_ID), []).append(r)
                r.pop(ROW)
            for batch_id, got in by_batch.items():
                batches.setdefault(batch_id, []).extend(_rows(got, kind))
        return batches


def _rows(rows: list[dict], kind: str) -> list[dict]:
    """A micro-batch's rows in the stateful plan's row format (epoch ms, JSON strings): the
    native plan's panes and dead letters converted, in the order they came (``ordered``)."""
    if kind == "S":
        return rows
    out = []
    for i, r in enumerate(rows):
        if kind == "P":
            r.update({KIND: "P", "window_start": _ms(r["window_start"]), "window_end": _ms(r["window_end"])})
        else:
            wins = [{"start": _ms(w["start"]), "end": _ms(w["end"])} for w in r["windows"]] if r["windows"] else None
            r = {
                KIND: "D",
                PHASE: 2,
                ORDER: i,
                "dl_reason": r["reason"],
                "dl_record": r["record"],
                "dl_watermark": _ms(r["watermark"]),
                "dl_windows": json.dumps(wins) if wins else None,
                "dl_detail": r["detail"],
            }
        out.append(r)
    return out


def _pane(r: dict, p: Pipeline) -> Pane:
    """A pane row as the engine's pane (the global window's bounds: null in the row)."""
    start = MIN_TIME if r["window_start"] is None else r["window_start"]
    end = MAX_TIME if r["window_end"] is None else r["window_end"]
    return Pane(
        tuple(r[k] for k in p.key),
        start,
        end,
        r["timing"],
        r["pane_index"],
        r["is_last"],
        r["retraction"],
        tuple(r[a.output] for a in p.aggregates),
    )


def _dead_letter(r: dict) -> DeadLetter:
    """A dead-letter row as the engine's dead letter (the record without panes' own columns)."""
    record = {k: v for k, v in json.loads(r["dl_record"]).items() if not k.startswith("__panes")}
    windows = tuple((w["start"], w["end"]) for w in json.loads(r["dl_windows"])) if r["dl_windows"] else ()
    return DeadLetter(r["dl_reason"], record, r["dl_watermark"], windows, r["dl_detail"])


def _collect(batches: dict, p: Pipeline, watermarks: OutputWatermarks | None = None) -> ReplayResult:
    """The panes and dead letters of every micro-batch, in the order the engine emits them:
    per micro-batch, by phase; within a phase, dead letters first, then panes in
    ``emission_order``, then in the order each firing gave them. ``watermarks``: the stateful
    plan's provisional panes decided (``stateful_timing.OutputWatermarks``)."""
    panes: list[dict] = []
    dead: list[dict] = []
    for bid in sorted(batches):
        rows = batches[bid] if watermarks is None else watermarks.decide(batches[bid])
        letters = sorted([r for r in rows if r[KIND] == "D"], key=lambda r: (r[PHASE], r[ORDER]))
        dead.extend(dead_letter_record(_dead_letter(r)) for r in letters)
        if p.window_pipeline is not None:
            fired = replay_panes([r for r in rows if r[KIND] == "P"], p, [PHASE, ORDER])
        else:
            fired = [(r[PHASE], _pane(r, p), r[ORDER]) for r in rows if r[KIND] == "P"]
        fired.sort(key=lambda f: (f[0], emission_order(f[1]), f[2]))
        panes.extend(record for _, pane, _ in fired for record in pane_records(pane, p))
    return ReplayResult(panes, dead, {})
