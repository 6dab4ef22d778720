"""The open windows of a stream's checkpoint, read from its last committed version without changing
it (``panes state``; ``panes.core.open_windows`` says what a row holds).

- Native plan: the windows tables under ``<checkpoint>/panes_native``, as the last ``meta.json``
  lists them. The version's tables are first copied aside (a running query removes versions two
  micro-batches old), then read; each window's partial aggregates are finished as its pane would
  finish them (``Partial.final``), those of a window kept in several tables merged first.
- Stateful plan: each hash bucket's ``EngineState`` (``core.engine.columnar``), read through Spark's state data source
  (``format("statestore")``, the ``engine`` value state of the ``transformWithStateInPandas``
  operator) at the last batch in the checkpoint's commit log, and listed by the core.
"""

from __future__ import annotations

import atexit
import datetime as dt
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as ST

from ..core import rules
from ..core.engine import columnar
from ..core.open_windows import WindowQuery, columns, open_windows
from ..core.pipeline import Pipeline
from ..core.time import END_OF_INPUT, MIN_TIME
from . import bucket_layout
from .columns import SPARK_END_MS, cast_to, output_type, pane_schema
from .deferred_processor import ENGINE_STATE
from .native.fixed import FixedPlan
from .native.names import NEW_ELEMENTS, NEXT_PANE_INDEX, STATE_DIR, WINDOW_END, WINDOW_START
from .native.state_versions import read_meta, versions
from .native.step import NativeStep
from .ops import COLUMN

#: how many times a native version is looked for again when the running query removed it meanwhile
ATTEMPTS = 5


class NoState(Exception):
    """The checkpoint holds no committed state yet (no micro-batch ended)."""


def state_schema(p: Pipeline, schema: ST.StructType) -> ST.StructType:
    """An open window's row: the key columns, window bounds, aggregates (typed as in a pane), then
    ``panes_emitted``, ``pending_records``, ``closes_at`` and ``watermark``."""
    panes = pane_schema(p, schema)
    timestamps = {"window_start", "window_end", "closes_at", "watermark"}
    fields = []
    for name in columns(p):
        if name in timestamps:
            fields.append(ST.StructField(name, ST.TimestampType(), True))
        elif name in ("panes_emitted", "pending_records"):
            fields.append(ST.StructField(name, ST.LongType(), True))
        else:
            fields.append(ST.StructField(name, panes[name].dataType, True))
    return ST.StructType(fields)


def _instant(ms: int | None) -> dt.datetime | None:
    if ms is None or ms <= MIN_TIME or ms >= END_OF_INPUT:
        return None
    return dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=ms)


# -- the stateful plan ------------------------------------------------------------------------------


def last_commit(checkpoint: str) -> tuple[int, int]:
    """The last committed batch of a Spark checkpoint and the watermark its state was last advanced
    to, the batch's own (its offset log's; ms; MIN_TIME: none yet, END_OF_INPUT: the input ended).
    (The commit log's next watermark is not yet in the state: the next batch applies it.)"""
    commits = [int(f.name) for f in (Path(checkpoint) / "commits").glob("*") if f.name.isdigit()]
    if not commits:
        raise NoState(checkpoint)
    batch = max(commits)
    lines = (Path(checkpoint) / "offsets" / str(batch)).read_text().splitlines()
    wm = int(json.loads(lines[1]).get("batchWatermarkMs", 0)) if len(lines) > 1 else 0
    return batch, END_OF_INPUT if wm >= SPARK_END_MS else wm if wm > 0 else MIN_TIME


def layout_refusal(spark: Any, checkpoint: str, buckets: int) -> str | None:
    """Why the stateful plan over ``buckets`` buckets cannot go on from ``checkpoint`` (None: it
    can, or cannot tell): its buckets' state, at the last committed batch, is in another layout
    than this panes reads, or kept in another number of buckets or another labelling of them
    (``bucket_layout``). The driver reads one bucket's stored state (a small job), so that the
    query is refused before it starts rather than in a task. (``panes run`` refuses such a
    checkpoint earlier, by what its ``panes/state.json`` records; a checkpoint made through
    ``write_stream`` has none.)"""
    try:
        batch, _ = last_commit(checkpoint)
    except NoState:
        return None
    try:
        stored = (
            spark.read.format("statestore")
            .option("stateVarName", ENGINE_STATE)
            .option("batchId", batch)
            .load(checkpoint)
            .select(F.col("value").getField("blob").alias("blob"), "key.*")  # (the key: the bucket's label)
            .where(F.col("blob").isNotNull())
            .limit(1)
            .collect()
        )
    except Exception:  # (no such state: another plan's checkpoint; the query says what it finds)
        return None
    if not stored:
        return None
    afresh = columnar.start_afresh(checkpoint)
    if not columnar.in_this_layout(stored[0][0]):
        return columnar.refusal(checkpoint, None, afresh)
    return bucket_layout.refusal(checkpoint, stored[0][1], buckets, afresh)


def stateful_windows(spark: Any, checkpoint: str, p: Pipeline, schema: ST.StructType, query: WindowQuery) -> DataFrame:
    """The open windows of a stateful stream's checkpoint at its last committed batch."""
    batch, wm = last_commit(checkpoint)
    states = (
        spark.read.format("statestore")
        .option("stateVarName", ENGINE_STATE)
        .option("batchId", batch)
        .load(checkpoint)
        .select(F.col("value").getField("blob"))
        .collect()
    )
    rows = open_windows(p, (columnar.decode(r[0]) for r in states if r[0] is not None), wm, query)
    return spark.createDataFrame([_typed(p, r) for r in rows], state_schema(p, schema))


def _typed(p: Pipeline, row: dict) -> tuple:
    """A core row as the DataFrame's: instants as timestamps, numpy scalars as Python values."""
    out = []
    for name in columns(p):
        v = row[name]
        if name in ("window_start", "window_end", "closes_at", "watermark"):
            v = _instant(v)
        elif hasattr(v, "item"):
            v = v.item()
        elif isinstance(v, (set, frozenset)):
            v = sorted(v)
        out.append(v)
    return tuple(out)


# -- the native plan --------------------------------------------------------------------------------


def native_windows(spark: Any, checkpoint: str, p: Pipeline, schema: ST.StructType, query: WindowQuery) -> DataFrame:
    """The open windows of a native stream's checkpoint at its last committed micro-batch."""
    step = NativeStep(p, schema, [c for c in schema.fieldNames() if not c.startswith("__panes")])
    copy, meta = _snapshot(Path(checkpoint) / STATE_DIR)
    wm = int(meta["watermark"])
    if not meta["tables"]:
        return spark.createDataFrame([], state_schema(p, schema))
    windows = spark.read.parquet(*[str(copy / t["path"]) for t in meta["tables"]])
    if step.fires:
        # (a table holds its windows as the step's rows left them; what the watermark's move after
        # them fired, the next step works out first: so does this)
        windows = step.open(windows, wm)
    else:
        windows = windows.filter(F.col(WINDOW_END).isNotNull() & (step.expiry(F.col(WINDOW_END)) > F.lit(wm)))
        if len(meta["tables"]) > 1:  # (a window's partials in several tables: merged first)
            assert isinstance(step.windows, FixedPlan)  # (only fixed windows append tables)
            windows = step.windows.merged(step, windows)
    windows = windows.filter(_wanted(p, query))
    return windows.select(*_native_columns(step, wm)).orderBy(*p.key, "window_start")


def _native_columns(step: NativeStep, wm: int) -> list:
    p = step.p
    fires = step.fires
    return [
        *[F.col(k) for k in p.key],
        *step.windows.reported_bounds(),
        *[cast_to(pt.final, output_type(a.fn, step.schema)).alias(a.output) for a, pt in zip(p.aggregates, step.parts)],
        (F.col(NEXT_PANE_INDEX) if fires else F.lit(0)).cast("long").alias("panes_emitted"),
        (F.col(NEW_ELEMENTS) if fires else F.lit(None)).cast("long").alias("pending_records"),
        F.timestamp_millis(rules.expiry(F.col(WINDOW_END), p.allowed_lateness, COLUMN)).alias("closes_at"),
        F.lit(_instant(wm)).cast("timestamp").alias("watermark"),
    ]


def _wanted(p: Pipeline, query: WindowQuery) -> Any:
    """The query as a filter over a windows table (a key compared as the command line's text)."""
    cond = F.lit(True)
    if query.key is not None:
        for k, v in zip(p.key, query.key):
            cond = cond & (F.col(k).cast("string") == F.lit(v))
    if query.time_from is not None:
        cond = cond & (F.col(WINDOW_START) >= F.lit(query.time_from))
    if query.time_to is not None:
        cond = cond & (F.col(WINDOW_START) <= F.lit(query.time_to))
    return cond


def _snapshot(root: Path) -> tuple[Path, dict]:
    """A copy of the last committed version's meta and tables (a running query may remove them
    once two more micro-batches ended: on a table gone meanwhile, the newer version is copied)."""
    for _ in range(ATTEMPTS):
        committed = versions(root)
        if not committed:
            raise NoState(str(root))
        copy = Path(tempfile.mkdtemp(prefix="panes-state-"))
        atexit.register(shutil.rmtree, copy, True)
        try:
            meta = read_meta(root, committed[-1])
            for t in meta["tables"]:
                shutil.copytree(root / t["path"], copy / t["path"])
            return copy, meta
        except (FileNotFoundError, shutil.Error, ValueError):
            shutil.rmtree(copy, ignore_errors=True)
    raise OSError(f"the state under {root} changed {ATTEMPTS} times while it was read")
