"""The multi-stage streaming plan: one ``foreachBatch`` that runs every stage's step, in order, on
each micro-batch.

The driver sees every micro-batch, so it keeps the watermarks: each input's (its strategy over its
rows' event times and punctuation, as a single-stage plan's), and each stage's output watermark,
the least over the stage's buckets of their watermark held by their windows' holds (one small
aggregate of the step's output). A stage's watermark is its source's: an input's, or the stage
upstream's output watermark; for a merge the earlier of the two. Each stage's step is the core's
``StageRunner`` over hash buckets of its key (``buckets.BucketStep``; inherited windows: of its key
and window, which are independent), its rows being the micro-batch's records of its inputs and the
panes the stages before it emitted in this micro-batch. Each bucket's state is a pickled
``EngineState`` in a Parquet table under the checkpoint, ``panes_stages/v<batch>/<stage>``, next to
``meta.json`` (the watermarks after the micro-batch and the stages' decisions, written last): a
micro-batch that Spark runs again after a failure reads the version before it, so it computes the
same panes and state.
"""

from __future__ import annotations

import functools
import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as ST

from ...core import rules
from ...core.engine.columnar import start_afresh
from ...core.stages import Stage, StageGraph
from ...core.stages.accounts import GraphAccounting
from ...core.time import END_OF_INPUT, MIN_TIME
from ...core.windows import Inherited
from .. import bucket_layout
from ..columns import BUCKET, CLOCK, DETAIL, INVALID, PUNCT, SPARK_END_MS, TS
from ..native.state_versions import read_meta, versions, write_meta
from .accounts import batch_accounting
from .buckets import (
    BLOB,
    CONTRIB,
    HIDDEN,
    HOLD,
    KIND,
    LATE,
    LETTER_INPUT,
    OUTPUT,
    ROW,
    SIDE,
    STAGE_INDEX,
    STATE,
    STEP_PHASE,
    SUB,
    WE,
    WS,
    BucketStep,
    decides_on_driver,
)
from .timing import StageTimings
from .transport import INPUT, RECORD, SEQ, bucket_of, data_rows, record_columns, typed_records

STATE_DIR = "panes_stages"


@dataclass
class Watermarks:
    """The driver's state after a micro-batch: each input's watermark and largest event time,
    each stage's watermark and output watermark, the clock, and what a stage that decides its
    provisional panes on the driver keeps (``StageWatermarks.snapshot``)."""

    inputs: dict[str, dict] = field(default_factory=dict)
    stages: dict[str, dict] = field(default_factory=dict)
    clock: int | None = None
    decisions: dict[str, dict] = field(default_factory=dict)

    @classmethod
    def first(cls, graph: StageGraph) -> Watermarks:
        return cls(
            {i.name: {"watermark": MIN_TIME, "max_event_time": MIN_TIME} for i in graph.inputs},
            {s.name: {"watermark": MIN_TIME, "output": MIN_TIME} for s in graph.stages},
        )

    def of(self, source: str) -> int:
        if source in self.inputs:
            return self.inputs[source]["watermark"]
        return self.stages[source]["output"]


@dataclass
class StepOutput:
    """What one micro-batch gave: the output stage's printed panes, every stage's rows and the
    dead letters, as DataFrames (cached until ``release``)."""

    panes: DataFrame
    rows: dict[str, DataFrame]
    dead_letters: DataFrame
    watermarks: Watermarks
    cached: list = field(default_factory=list)
    #: where the micro-batch's input records went (when the plan keeps the account)
    accounting: GraphAccounting | None = None

    def release(self) -> None:
        for df in self.cached:
            df.unpersist()


class StagesStream:
    def __init__(
        self,
        graph: StageGraph,
        schemas: dict[str, ST.StructType],
        checkpoint: str,
        buckets: int = 8,
        scripted_clock: bool = False,
        account: bool = False,
    ):
        """``account``: work out where each micro-batch's input records went (two small jobs)."""
        self.graph, self.schemas, self.buckets = graph, schemas, buckets
        self.scripted_clock, self.account = scripted_clock, account
        self.timings: dict[str, StageTimings] = {}  # a stage's provisional panes decided (with allowed lateness)
        self.root = Path(checkpoint) / STATE_DIR
        self.root.mkdir(parents=True, exist_ok=True)

    # -- versions ------------------------------------------------------------------------------------
    def versions(self) -> list[int]:
        return versions(self.root)

    def layout_refusal(self) -> str | None:
        """Why this plan cannot go on from its checkpoint's newest state (None: it can): the state
        was kept in another number of buckets or another labelling of them (``bucket_layout``)."""
        import pyarrow.parquet as pq

        versions = self.versions()
        files = sorted((self.root / f"v{versions[-1]}").glob("*/state.parquet")) if versions else []
        labels = pq.read_table(str(files[0]), columns=[BUCKET]).column(0).to_pylist() if files else []
        if not labels:
            return None
        checkpoint = str(self.root.parent)
        return bucket_layout.refusal(checkpoint, labels[0], self.buckets, start_afresh(checkpoint))

    def before(self, batch_id: int) -> tuple[Watermarks, int | None]:
        prior = [v for v in self.versions() if v < batch_id]
        if not prior:
            return Watermarks.first(self.graph), None
        meta = read_meta(self.root, prior[-1])
        return Watermarks(meta["inputs"], meta["stages"], meta.get("clock"), meta.get("decisions", {})), prior[-1]

    def clean(self, batch_id: int) -> None:
        """Keeps this version and the one before (Spark may run this micro-batch again)."""
        keep = [v for v in self.versions() if v <= batch_id][-2:]
        for d in self.root.glob("v*"):
            if int(d.name[1:]) not in keep and int(d.name[1:]) <= batch_id:
                shutil.rmtree(d, ignore_errors=True)
        for f in self.root.glob("clock-*.json"):
            if keep and int(f.stem.split("-")[1]) < keep[0]:
                f.unlink(missing_ok=True)

    # -- a micro-batch -------------------------------------------------------------------------------
    def run(self, batch: DataFrame, batch_id: int, on_panes=None, on_dead_letters=None) -> StepOutput:
        """One micro-batch (the stream's ``transport.COLUMNS``): every stage's step; the output
        stage's panes and the dead letters to the callbacks ``f(df, batch_id)``."""
        self.root.mkdir(parents=True, exist_ok=True)  # (on Spark Connect: on the server's filesystem)
        marks, prior = self.before(batch_id)
        here = self.root / f"v{batch_id}"
        shutil.rmtree(here, ignore_errors=True)
        batch = batch.withColumn(SEQ, F.monotonically_increasing_id()).persist()
        after, clock = self.input_watermarks(batch, marks, batch_id)
        stage_rows: dict[str, DataFrame] = {}
        letters = [self.input_letters(batch)]
        cached = [batch]
        for i, stage in enumerate(self.graph.stages):
            wm = min(after.of(src) for src in stage.sources)
            step = BucketStep(
                self.graph, stage.name, wm, marks.stages[stage.name]["watermark"], clock, self.raw_columns(stage)
            )
            rows, hold = self.step(stage, step, batch, stage_rows, prior, here)
            cached.append(rows)
            if decides_on_driver(stage):  # (from what the version before kept: a micro-batch run again decides alike)
                timings = self.timings.setdefault(stage.name, StageTimings(self.graph, stage))
                timings.restore(marks.decisions.get(stage.name))
                rows = timings.settle(rows, schema=OUTPUT)
                after.decisions[stage.name] = timings.watermarks.snapshot()
            after.stages[stage.name] = {"watermark": wm, "output": min(wm, wm if hold is None else hold)}
            stage_rows[stage.name] = rows
            letters.append(rows.filter(F.col(KIND) == "D").withColumn(STAGE_INDEX, F.lit(i)))
        panes = stage_rows[self.graph.output_stage.name].filter((F.col(KIND) == "P") & ~F.col(HIDDEN))
        out = StepOutput(panes, stage_rows, once(letters), after, cached)
        if self.account:
            out.accounting = batch_accounting(self.graph, batch, out.dead_letters, stage_rows)
        if on_dead_letters is not None:
            on_dead_letters(out.dead_letters, batch_id)
        if on_panes is not None:
            on_panes(out.panes, batch_id)
        meta = {"inputs": after.inputs, "stages": after.stages, "clock": clock, "decisions": after.decisions}
        write_meta(self.root, batch_id, meta)
        self.clean(batch_id)
        return out

    def input_watermarks(self, batch: DataFrame, marks: Watermarks, batch_id: int) -> tuple[Watermarks, int | None]:
        """Each input's watermark after the micro-batch, from its largest event time and
        punctuation (one small aggregate), and the clock."""
        valid = F.col(INVALID).isNull() & F.col(PUNCT).isNull() & F.col(CLOCK).isNull() & F.col(TS).isNotNull()
        stats = {
            r[INPUT]: r
            for r in batch.groupBy(INPUT)
            .agg(
                F.max(F.when(valid, F.col(TS))).alias("ts"),
                F.max(PUNCT).alias("punct"),
                F.max(CLOCK).alias("clock"),
            )
            .collect()
        }
        clocks = [r["clock"] for r in stats.values() if r["clock"] is not None]
        clock = (max(clocks) if clocks else marks.clock) if self.scripted_clock else self.clock_of(batch_id, marks)
        after = Watermarks({}, dict(marks.stages), clock)
        for inp in self.graph.inputs:
            was, r = marks.inputs[inp.name], stats.get(inp.name)
            max_et = (
                max(was["max_event_time"], r["ts"]) if r is not None and r["ts"] is not None else was["max_event_time"]
            )
            punct = r["punct"] if r is not None and r["punct"] is not None else MIN_TIME
            ended = punct >= SPARK_END_MS
            s = inp.watermark
            wm = rules.watermark_after(
                was["watermark"], max_et, s.max_delay, s.punctuation, MIN_TIME if ended else punct, ended
            )
            after.inputs[inp.name] = {"watermark": int(min(wm, END_OF_INPUT)), "max_event_time": int(max_et)}
        return after, clock

    def clock_of(self, batch_id: int, marks: Watermarks) -> int:
        """The micro-batch's processing time: the system clock when it first ran, never before the
        last micro-batch's, and the same when Spark runs it again (Apex's idempotency: the same
        tuples and watermarks in the same micro-batch), so processing-time triggers fire alike."""
        path = self.root / f"clock-{batch_id}.json"
        if path.exists():
            return int(json.loads(path.read_text()))
        clock = max(int(time.time() * 1000), marks.clock or MIN_TIME)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps(clock))
        tmp.replace(path)
        return clock

    def input_letters(self, batch: DataFrame) -> DataFrame:
        """The records an input's own checks refuse, as dead-letter rows (``ROW``: the record)."""
        bad = batch.filter(F.col(INVALID).isNotNull())
        head = F.to_json(
            F.struct(F.col(INVALID).alias("reason"), F.col(DETAIL).alias("detail"), F.col(INPUT).alias("input"))
        )
        # the record as it came (its JSON text), spliced in as an object
        row = F.concat(F.regexp_replace(head, "}$", ""), F.lit(', "record": '), F.col(RECORD), F.lit("}"))
        return bad.select(
            F.lit("D").alias(KIND),
            F.lit(-1).alias(STAGE_INDEX),
            F.col(SEQ).alias(SUB),
            row.alias(ROW),
            F.col(SEQ),
            F.col(INPUT).alias(LETTER_INPUT),
            F.lit(False).alias(LATE),
        )

    def raw_columns(self, stage: Stage) -> dict[int, tuple[list[str], list[str]]]:
        """An aggregating stage's input side: its typed record columns and the integral ones."""
        out = {}
        for j, src in enumerate(stage.sources):
            if self.graph.is_input(src) and not stage.is_merge:
                schema = self.schemas[src]
                cols = record_columns(schema, self.graph.input(src))
                out[j] = (cols, [c for c in cols if isinstance(schema[c].dataType, ST.IntegralType)])
        return out

    def side(self, stage: Stage, j: int, batch: DataFrame, rows: dict[str, DataFrame]) -> DataFrame:
        """Side j's rows of this micro-batch, with their bucket."""
        src, key = stage.sources[j], stage.keys[j]
        if self.graph.is_input(src):
            data = data_rows(batch, src)
            if stage.is_merge:
                data = data.withColumnRenamed(RECORD, ROW)
                values = [json_field(ROW, k) for k in key]
            else:
                schema = self.schemas[src]
                data = typed_records(data, schema, record_columns(schema, self.graph.input(src)))
                values = [F.col(f"`{k}`") for k in key]
            return data.select(bucket_of(values, self.buckets).alias(BUCKET), F.lit(j).alias(SIDE), "*")
        up = rows[src].filter(F.col(KIND) == "P")
        values = [json_field(ROW, k) for k in key]
        if isinstance(self.graph.windows(stage), Inherited):
            values.append(F.col(WS))  # inherited windows are independent: spread them over the buckets
        return up.select(
            bucket_of(values, self.buckets).alias(BUCKET),
            F.lit(j).alias(SIDE),
            TS,
            WS,
            WE,
            CONTRIB,
            STEP_PHASE,
            SUB,
            ROW,
        )

    def step(
        self, stage: Stage, fn: BucketStep, batch: DataFrame, rows: dict[str, DataFrame], prior: int | None, here: Path
    ) -> tuple[DataFrame, int | None]:
        """The stage's step over its buckets: its output rows (cached) and its output watermark's
        least hold; its state written. One Spark job: the buckets' states and holds are collected
        (one row per bucket) and the state written from the driver."""
        spark = batch.sparkSession
        sides = [self.side(stage, j, batch, rows) for j in range(len(stage.sources))]
        union = functools.reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), sides)
        state_dir = self.root / f"v{prior}" / stage.name if prior is not None else None
        if state_dir is not None and state_dir.exists():
            state = spark.read.schema(STATE).parquet(str(state_dir))
        else:
            state = spark.createDataFrame([], STATE)

        def bucket_step(key, rows, state):  # (PySpark reads the arguments of a plain function)
            return fn(key, rows, state)

        out = union.groupBy(BUCKET).cogroup(state.groupBy(BUCKET)).applyInPandas(bucket_step, OUTPUT).persist()
        kept = out.filter(F.col(KIND).isin("S", "H")).select(KIND, BUCKET, BLOB, HOLD).collect()
        write_state(here / stage.name, [(r[BUCKET], r[BLOB]) for r in kept if r[KIND] == "S"])
        holds = [r[HOLD] for r in kept if r[KIND] == "H" and r[HOLD] is not None]
        return out, min(holds) if holds else None


def write_state(path: Path, blobs: list[tuple[int, bytes]]) -> None:
    """A stage's state (one pickled engine state per bucket) as a Parquet table."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.mkdir(parents=True, exist_ok=True)
    table = pa.table(
        {BUCKET: pa.array([b for b, _ in blobs], pa.int32()), BLOB: pa.array([bytes(v) for _, v in blobs], pa.binary())}
    )
    pq.write_table(table, str(path / "state.parquet"))


def json_field(column: str, name: str):
    """A field of a JSON text column, as text."""
    return F.get_json_object(F.col(column), "$['" + name.replace("'", "\\'") + "']")


def once(letters: list[DataFrame]) -> DataFrame:
    """Every dead letter, a record dead-lettered at several stages that read its input (late, a
    missing key...) only at the first, the one its input's account counts (``accounts``)."""
    cols = [KIND, STAGE_INDEX, SUB, ROW, SEQ, LETTER_INPUT, LATE]
    union = functools.reduce(lambda a, b: a.unionByName(b), [d.select(*cols) for d in letters])
    of_record = F.col(SEQ).isNotNull()
    first = (
        union.filter(of_record)
        .groupBy(LETTER_INPUT, SEQ)
        .agg(F.min_by(F.struct(*[c for c in cols if c not in (LETTER_INPUT, SEQ)]), F.col(STAGE_INDEX)).alias("first"))
    )
    return union.filter(~of_record).unionByName(
        first.select(*[F.col("first")[c].alias(c) if c not in (LETTER_INPUT, SEQ) else F.col(c) for c in cols])
    )
