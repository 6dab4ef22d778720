"""The sink plan of a native stream: the stream's prepared rows go straight into a streaming Python
data source's Arrow writer (``DataSourceStreamArrowWriter``, PySpark 4.1+), with no
``foreachBatch``: Spark analyses the query once, and each micro-batch is one job of one stage (no
shuffle, no state store, no plan built per micro-batch).

A task (``WindowsWriter.write``) reads the watermark the last committed step left, assigns its
rows' windows (the core's ``WindowFn.assign``) and splits them against it as ``late.LateSplit``
does, writes its dead letters' rows (malformed, late) to a file of the micro-batch, and
aggregates the on-time rows per (key, window) into each aggregate's partials
(``arrow_partials``). The commit (``WindowsWriter.commit``, a Python worker on the driver) merges
them with the open windows, moves the watermark (``rules.watermark_after_values``), and
writes the windows that close and those that stay open, in the windows tables' layout of
``store.NativeStream``, under the same versions (``v<batch>``, committed by its ``meta.json``):
a micro-batch that Spark runs again reads the version before it and writes its own anew. The
driver then hands each version's panes and dead letters to the callbacks (``arrow_stream``).

What it covers (``arrow_partials.sink_unsupported``, ``arrow_stream.arrow_unsupported``): the
default trigger on fixed windows (tumbling, hopping, global), the aggregates of ``arrow_partials``,
on a classic session (the tasks and the commit read the state's files where the driver wrote them).
"""

from __future__ import annotations

import base64
import json
import os
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...core import rules
from ...core.time import END_OF_INPUT, MIN_TIME
from ...core.windows import WindowFn
from .names import (
    CREATED_LATE,
    IS_DEAD_LETTER,
    ROW_COUNTS,
    ROW_MALFORMED,
    ROW_TIME,
    ROW_WATERMARK,
    WINDOW_END,
    WINDOW_START,
)
from .state_versions import last_before, windows_meta, write_meta

PLAN_TEXT = (
    "stream: native Spark rows into panes' Arrow sink (late split and partial aggregates per task with pyarrow, "
    "open windows merged at each commit and kept under the checkpoint; late rows to the dead letters)"
)
#: the data source's name (registered by ``arrow_stream`` before the query starts)
SINK_NAME = "panes_windows"
WINDOWS, CLOSED, DEAD, DELIVERED = "windows", "closed", "dead", "delivered"
_PART = "part-00000.parquet"


@dataclass(frozen=True)
class SinkPlan:
    """What the tasks and the commit need (pickled: it travels as the data source's option): the
    state's directory, the key, the windows (the core's ``WindowFn``: its ``assign`` is the rule
    the core applies), the partials (name, input column or None, hash aggregate of rows, of
    partials), the allowed lateness and the watermark's delay, and the windows tables' schema
    (Spark's JSON)."""

    root: str
    key: list[str]
    window: WindowFn
    partials: list[list]
    allowed_lateness: int
    delay: int
    state_schema: str

    def to_option(self) -> str:
        return base64.b64encode(pickle.dumps(self)).decode()

    @staticmethod
    def from_option(text: str) -> SinkPlan:
        plan = pickle.loads(base64.b64decode(text))
        assert isinstance(plan, SinkPlan)
        return plan

    @property
    def value_columns(self) -> list[str]:
        """The stream's columns the partials read."""
        return list(dict.fromkeys(p[1] for p in self.partials if p[1] is not None))

    @property
    def window_columns(self) -> list[str]:
        """The columns of a window (without the step's metrics)."""
        return [*self.key, WINDOW_START, WINDOW_END, CREATED_LATE, *(p[0] for p in self.partials)]

    def arrow_schema(self) -> Any:
        """The windows tables' Arrow schema, every field nullable (as Spark reads a table)."""
        import pyarrow as pa
        from pyspark.sql import types as ST
        from pyspark.sql.pandas.types import to_arrow_schema

        schema = to_arrow_schema(ST.StructType.fromJson(json.loads(self.state_schema)))
        return pa.schema([f.with_nullable(True) for f in schema])


# -- the versions of the state -------------------------------------------------------------------------


def kept_before(root: Path, batch_id: int) -> dict:
    """The meta of the last version before ``batch_id`` (none: the empty state's)."""
    prior = last_before(root, batch_id)
    return windows_meta(root, prior) if prior is not None else {"watermark": MIN_TIME, "tables": [], "advance": 0}


def _write_atomically(table: Any, path: Path) -> None:
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, path)


def to_ipc(t: Any) -> bytes:
    """An Arrow table as the bytes of an IPC stream (a task's partials in its commit message)."""
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, t.schema) as w:
        w.write_table(t)
    return sink.getvalue().to_pybytes()


def from_ipc(b: bytes) -> Any:
    import pyarrow as pa

    return pa.ipc.open_stream(b).read_all()


# -- the data source -----------------------------------------------------------------------------------


def writer_classes() -> tuple[type, type]:
    """The data source and its writer (PySpark 4.1+: ``DataSourceStreamArrowWriter``)."""
    from pyspark.sql.datasource import DataSource, DataSourceStreamArrowWriter, WriterCommitMessage

    class StepMessage(WriterCommitMessage):
        """A task's partials (Arrow IPC), its greatest watermark value, its dead letters."""

        def __init__(self, partials: bytes | None, seen: int | None, dead: int):
            self.partials, self.seen, self.dead = partials, seen, dead

    class WindowsWriter(DataSourceStreamArrowWriter):
        def __init__(self, plan: SinkPlan):
            self.plan = plan
            self.root = Path(plan.root)

        def write(self, iterator: Any) -> StepMessage:
            from pyspark import TaskContext

            ctx = TaskContext.get()
            assert ctx is not None  # (a task's)
            batch_id = int(str(ctx.getLocalProperty("streaming.sql.batchId")))
            rows = [b for b in iterator if b.num_rows]
            if not rows:
                return StepMessage(None, None, 0)
            return task_step(self.plan, rows, batch_id, ctx.partitionId(), StepMessage)

        def commit(self, messages: list, batchId: int) -> None:
            commit_step(self.plan, [m for m in messages if m is not None], batchId)

    class WindowsSink(DataSource):
        @classmethod
        def name(cls) -> str:
            return SINK_NAME

        def streamWriter(self, schema: Any, overwrite: bool) -> WindowsWriter:
            return WindowsWriter(SinkPlan.from_option(self.options["plan"]))

    return WindowsSink, WindowsWriter


def task_step(plan: SinkPlan, batches: list, batch_id: int, partition: int, message: type) -> Any:
    """A task's part of a step, as ``late.LateSplit.on_time`` does it: its rows' windows (the
    core's ``WindowFn.assign``), checked against the watermark before the step; a row in a
    window that expired is a dead letter (once) and counts in its other windows; the dead
    letters' rows (and the malformed ones) written; the on-time rows' partials per (key, window)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    t = pa.Table.from_batches(batches)
    wm = int(kept_before(Path(plan.root), batch_id)["watermark"])

    def flag(c: str) -> np.ndarray:
        return np.asarray(t[c].fill_null(False).to_numpy(zero_copy_only=False), dtype=bool)

    counts = flag(ROW_COUNTS)
    row, start, end = plan.window.assign(t[ROW_TIME].to_numpy(zero_copy_only=False))
    in_window = counts[row]
    row, start, end = row[in_window], start[in_window], end[in_window]
    expired = (
        np.asarray(rules.is_expired(end, plan.allowed_lateness, wm, rules.ARRAY), dtype=bool)
        if wm > MIN_TIME
        else np.zeros(len(end), dtype=bool)
    )
    dead = flag(ROW_MALFORMED)
    dead[row[expired]] = True
    n_dead = int(dead.sum())
    if n_dead:
        here = Path(plan.root) / f"v{batch_id}" / DEAD
        _write_atomically(t.filter(pa.array(dead)), here / f"part-{partition:05}.parquet")
    seen = pc.max(t[ROW_WATERMARK]).as_py()
    keep = ~expired
    if not keep.any():
        return message(None, seen, n_dead)
    row, start, end = row[keep], start[keep], end[keep]
    rows = t.select([*plan.key, *plan.value_columns])
    if not np.array_equal(row, np.arange(t.num_rows)):  # (else every row, once: no copy)
        rows = rows.take(pa.array(row))
    rows = rows.append_column(WINDOW_START, pa.array(start)).append_column(WINDOW_END, pa.array(end))
    aggs = [(WINDOW_END, "max"), *(([], op) if col is None else (col, op) for _, col, op, _ in plan.partials)]
    group = [*plan.key, WINDOW_START]
    got = rows.group_by(group, use_threads=False).aggregate(aggs)
    ends = got.column(len(group)).to_numpy(zero_copy_only=False)
    created_late = rules.end_passed(ends, wm) if wm > MIN_TIME else np.zeros(len(ends), dtype=bool)
    cols = [got.column(i) for i in range(len(group) + 1)] + [pa.array(created_late)]
    cols += [got.column(len(group) + 1 + i) for i in range(len(plan.partials))]
    return message(to_ipc(pa.table(cols, names=plan.window_columns)), seen, n_dead)


def commit_step(plan: SinkPlan, messages: list, batch_id: int) -> None:
    """The driver's part of a step: the tasks' partials merged with the open windows, the
    watermark moved, the windows that close and those that stay open written, and the version's
    meta (written last: the version counts once it is there)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = Path(plan.root)
    kept = kept_before(root, batch_id)
    wm = int(kept["watermark"])
    schema = plan.arrow_schema()
    cols = plan.window_columns
    windows_schema = pa.schema([schema.field(c) for c in cols])
    frames = [pq.read_table(root / t["path"], columns=cols).cast(windows_schema) for t in kept["tables"]]
    frames += [from_ipc(m.partials).cast(windows_schema) for m in messages if m.partials is not None]
    seen_all = [m.seen for m in messages if m.seen is not None]
    new_wm = rules.watermark_after_values(wm, max(seen_all) if seen_all else None, plan.delay)
    here = root / f"v{batch_id}"
    here.mkdir(parents=True, exist_ok=True)
    tables: list[dict] = []
    closed_rows = 0
    if frames:
        windows = merged(plan, pa.concat_tables(frames), windows_schema)
        end = windows[WINDOW_END].to_numpy(zero_copy_only=False)
        closes = np.asarray(rules.is_expired(end, plan.allowed_lateness, new_wm, rules.ARRAY), dtype=bool)
        closed_rows = int(closes.sum())
        nulls = {ROW_WATERMARK: pa.nulls(0, pa.int64()), IS_DEAD_LETTER: pa.nulls(0, pa.int32())}

        def table(mask: np.ndarray) -> Any:
            t = windows.filter(pa.array(mask))
            for name, none in nulls.items():
                t = t.append_column(name, pa.nulls(t.num_rows, none.type))
            return t.cast(schema)

        if closed_rows:
            _write_atomically(table(closes), here / CLOSED / _PART)
        stays = ~closes
        if stays.any():
            _write_atomically(table(stays), here / WINDOWS / _PART)
            ends = [int(end[stays].min()), int(end[stays].max())]
            tables = [{"path": f"v{batch_id}/{WINDOWS}", "rows": int(stays.sum()), "ends": ends}]
    moved = new_wm - wm if wm > MIN_TIME and new_wm < END_OF_INPUT else 0
    step = {
        "watermark": new_wm,
        "tables": tables,
        "advance": moved,
        "watermark_before": wm,
        "closed": closed_rows,
        "dead": sum(m.dead for m in messages),
    }
    write_meta(root, batch_id, step)


def merged(plan: SinkPlan, partials: Any, schema: Any) -> Any:
    """Windows whose partials are in several rows merged per (key, window), as
    ``FixedPlan.merged`` does: created late when all were."""
    import pyarrow as pa

    group = [*plan.key, WINDOW_START]
    aggs = [(WINDOW_END, "max"), (CREATED_LATE, "all"), *((name, merge) for name, _, _, merge in plan.partials)]
    got = partials.group_by(group, use_threads=False).aggregate(aggs)
    return pa.table([got.column(i) for i in range(got.num_columns)], names=plan.window_columns).cast(schema)
