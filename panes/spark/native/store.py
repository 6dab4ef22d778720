"""The window-table store of a native stream: a ``NativeStep`` per micro-batch (``foreachBatch``),
the open windows kept in Parquet tables under the checkpoint."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as ST

from ...core.time import END_OF_INPUT, MIN_TIME
from ..session import is_connect, plan_building
from .names import IS_DEAD_LETTER, ROW_WATERMARK, STATE_DIR, WINDOW_END
from .state_versions import versions, windows_meta, write_meta
from .step import NativeStep

#: the kept windows of a stream are rewritten into one table (compacted) when they hold this many
#: rows at most (a small rewrite costs less than merging several tables when windows close), when
#: they are in this many tables, or when the tables added since the oldest hold as many rows as it
SMALL_STATE_ROWS = 20_000
MAX_TABLES = 8
#: ... and when a table holds a window that expires before the watermark has moved this many
#: times as far as in the step before (None: never for that reason; tests)
CLOSING_STEPS: int | None = 2
#: a step's table is collected to the driver and written there (no Spark write and its commit)
#: when the step rewrites this many kept rows at most and Spark estimates its micro-batch at this
#: many bytes at most (a source without an estimate: a write job), so that what the driver holds
#: stays small
COLLECT_ROWS = 100_000
COLLECT_INPUT_BYTES = 32 << 20
#: a collected table of this many rows at most (all the open windows: ``rewrites``) is handed to
#: Spark again as a local relation, for the step's panes and the next step's state: no file
#: listing, Parquet reader or broadcast Hadoop configuration in their jobs. Larger ones are read
#: back from their Parquet files (a local relation's rows travel inside each task)
LOCAL_ROWS = 20_000
#: the column types that a table collected as Arrow and written by pyarrow keeps as Spark reads
#: them (another type in the table, a map or an interval: a write job)
_LOCAL_TYPES = (
    ST.BooleanType,
    ST.ByteType,
    ST.ShortType,
    ST.IntegerType,
    ST.LongType,
    ST.FloatType,
    ST.DoubleType,
    ST.DecimalType,
    ST.StringType,
    ST.BinaryType,
    ST.DateType,
    ST.TimestampType,
    ST.TimestampNTZType,
)
#: the windows table of a step is committed by its ``meta.json``, written after it (a step run
#: again starts from an empty directory): Hadoop's file committer need not move the files once
#: more at the job's end (algorithm 2: each task's files go to the table when the task ends) nor
#: mark the table done (``_SUCCESS``)
_WRITE_OPTIONS = {
    "mapreduce.fileoutputcommitter.algorithm.version": "2",
    "mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",
}

Callback = Callable[[DataFrame, int], Any]


def _nullable(f: Any) -> Any:
    """An Arrow field, and the fields inside it, made nullable."""
    import pyarrow as pa

    t = f.type
    if pa.types.is_struct(t):
        t = pa.struct([_nullable(t.field(i)) for i in range(t.num_fields)])
    elif pa.types.is_list(t):
        t = pa.list_(_nullable(t.value_field))
    elif pa.types.is_large_list(t):
        t = pa.large_list(_nullable(t.value_field))
    return f.with_type(t).with_nullable(True)


def _rows(tables: list[dict]) -> int | None:
    """The rows ``tables`` hold (None: a table's rows unknown)."""
    rows = [t["rows"] for t in tables]
    return None if any(r is None for r in rows) else sum(rows)


def _paths(tables: list[dict]) -> list[str]:
    return [t["path"] for t in tables]


def as_read(t: ST.DataType) -> ST.DataType:
    """``t`` as Spark reads it from Parquet: every field, element and value nullable."""
    if isinstance(t, ST.StructType):
        return ST.StructType([ST.StructField(f.name, as_read(f.dataType), True, f.metadata) for f in t.fields])
    if isinstance(t, ST.ArrayType):
        return ST.ArrayType(as_read(t.elementType), True)
    if isinstance(t, ST.MapType):
        return ST.MapType(as_read(t.keyType), as_read(t.valueType), True)
    return t


def _local_type(t: ST.DataType) -> bool:
    if isinstance(t, ST.ArrayType):
        return _local_type(t.elementType)
    if isinstance(t, ST.StructType):
        return all(_local_type(f.dataType) for f in t.fields)
    return isinstance(t, _LOCAL_TYPES)


@dataclass
class Kept:
    """What the step before left: the watermark after it, the tables that hold the open windows
    (path under the state directory, rows, smallest and largest window end), and how far the
    watermark moved in it."""

    watermark: int
    tables: list[dict]
    advance: int


@dataclass
class Stepped:
    """What a step made: the watermark after it, the tables that held open windows before it
    (its own with the kept ones, or alone when it rewrote them), whether it has dead letters, its
    panes."""

    watermark: int
    tables: list[dict]
    dead: bool
    panes: DataFrame


class NativeStream:
    """Runs a ``NativeStep`` per micro-batch (``foreachBatch``), the open windows kept under
    ``<checkpoint>/panes_native``: ``v<batch>/windows``, the table a step wrote, and
    ``v<batch>/meta.json``, the watermark after it, how far it moved, and the tables that hold
    the windows still open (``Kept``).

    A step either rewrites the open windows merged with its rows into one table, or, when the
    step allows it (``NativeStep.appends``) and the open windows are many, writes only its rows'
    partials and adds that table to the others, as a log-structured store does: a step's cost then
    follows its rows, not everything kept. The closing windows merge their partials across the
    tables (``NativeStep.due``); a table leaves the list once all its windows expired; the next
    rewrite (``rewrites``) drops the expired rows of the others. A step rewrites as soon as some
    kept windows are about to close, so the merge across tables stays the exception, for windows
    that stay open long (many keys, long windows or processing time).

    A small table (``COLLECT_ROWS``) is collected to the driver as Arrow and written there by
    pyarrow, without the file commit of a Spark write, and when smaller still (``LOCAL_ROWS``)
    handed back to Spark as a local relation for the panes and the next step
    (``local_relation``); a step that closes no window reads no table and hands the panes
    callback an empty relation (``_no_panes``)."""

    def __init__(self, step: NativeStep, checkpoint: str, ordered: bool = False):
        self.step = step
        self.ordered = ordered
        self.root = Path(checkpoint) / STATE_DIR
        self.root.mkdir(parents=True, exist_ok=True)
        self._schema: ST.StructType | None = None
        self._local: bool | None = None  # the tables' types allow collecting them (``collects``)
        self._last: tuple[tuple, DataFrame] | None = None  # the tables the last step left, read back
        self._empty: tuple | None = None  # (session, the panes of a step that closes no window)
        #: the watermark after the last micro-batch this stream ran (None: none yet), for progress
        self.watermark: int | None = None

    # -- one micro-batch ---------------------------------------------------------------------------

    def run(self, batch: DataFrame, batch_id: int, on_panes: Callback, on_dead_letters: Callback) -> None:
        """One micro-batch: ``batch``, the stream's rows prepared (``planner.prepare``) with the
        step's ``row_columns()``."""

        def dead(kept: Kept) -> None:
            with plan_building():
                dead_letters = self.step.dead_letters(batch, kept.watermark, stream=True)
            on_dead_letters(dead_letters, batch_id)

        self._version(batch_id, lambda kept: self.step_batch(batch, batch_id, kept), on_panes, dead)

    def _version(
        self, batch_id: int, make: Callable[[Kept], Stepped], on_panes: Callback, dead: Callable[[Kept], None]
    ) -> None:
        """Version ``batch_id`` of the store, from what the version before it kept: ``make``
        plans the step, its meta is committed, then its dead letters (``dead``, only when it has
        some: no empty job) and its panes go to the callbacks, and the versions no longer needed
        go."""
        shutil.rmtree(self.root / f"v{batch_id}", ignore_errors=True)
        with plan_building():
            kept = self.load(batch_id)
            stepped = make(kept)
        self.commit(batch_id, kept, stepped)
        self.watermark = stepped.watermark
        if stepped.dead:
            dead(kept)
        on_panes(stepped.panes, batch_id)
        self.clean(batch_id)

    def end(self, spark: Any, batch_id: int, on_panes: Callback) -> bool:
        """Ends the input as micro-batch ``batch_id``, the step ``run`` would make of one control
        row that moves the watermark to the end of time, for the default trigger without that row:
        the kept windows still open all close, their panes straight from the kept tables, and no
        window stays open (no table to write: no job but the panes'). Its meta, as that step's, is
        the version a micro-batch ``batch_id`` that Spark runs later rewrites. False, and nothing
        done, when the trigger fires (after_watermark: the step over the row decides its panes) or
        no step told the tables' schema."""
        if self.step.fires or self._schema is None:
            return False

        def ended(kept: Kept) -> Stepped:  # (no dead letters: the row is a control row)
            return Stepped(END_OF_INPUT, [], False, self._end_panes(spark, kept))

        self._version(batch_id, ended, on_panes, lambda kept: None)
        return True

    def _end_panes(self, spark: Any, kept: Kept) -> DataFrame:
        """The panes of the kept windows still open at ``kept.watermark`` (see ``end``): from one
        table, which holds a window in one row, those of its open windows; from several
        (``appends``), their windows' partials merged (``due``)."""
        paths, wm = _paths(kept.tables), kept.watermark
        if not self.closing(kept.tables, END_OF_INPUT):
            return self._no_panes(spark, paths)
        if len(paths) > 1:
            return self.step.due(self._read(spark, paths), wm, END_OF_INPUT, self.ordered)
        windows = self.step.open(self._read(spark, paths), wm, metrics=True)
        return self.step.closed(windows, END_OF_INPUT, self.ordered, table=True)

    def watermark_at(self, batch_id: int) -> int | None:
        """The watermark after micro-batch ``batch_id`` as the store keeps it (None: no step wrote
        one), for a process that did not run the step: on Spark Connect, the server's
        ``foreachBatch`` runs it on a copy of this object."""
        with contextlib.suppress(OSError, ValueError, KeyError):  # (a version cleaned meanwhile)
            prior = [v for v in self._versions() if v <= batch_id]
            return int(self._meta(prior[-1])["watermark"]) if prior else None
        return None

    def load(self, batch_id: int) -> Kept:
        """The state the last version before ``batch_id`` left (a batch run again reads the one
        before it)."""
        prior = [v for v in self._versions() if v < batch_id]
        if not prior:
            return Kept(MIN_TIME, [], 0)
        meta = self._meta(prior[-1])
        return Kept(meta["watermark"], meta["tables"], meta.get("advance", 0))

    def step_batch(self, batch: DataFrame, batch_id: int, kept: Kept) -> Stepped:
        """Writes the step's windows table and plans its panes. One job, one pass over the rows:
        the table it writes also holds the step's largest watermark value and whether it has dead
        letters (``LateSplit.on_time``). The rows are not persisted: each job reads only the
        columns it needs (measured faster than caching)."""
        spark, step, wm = batch.sparkSession, self.step, kept.watermark
        rewrite = self.rewrites(kept.tables, wm, kept.advance)
        state = step.open(self._read(spark, _paths(kept.tables)), wm, metrics=True) if rewrite and kept.tables else None
        windows = step.combine(step.on_time(batch, wm, batch_id), state, wm, metrics=True)
        here = self.root / f"v{batch_id}" / "windows"
        collected = self.write(windows, here, batch, _rows(kept.tables) if rewrite else 0)
        seen, dead, rows, ends = self.statistics(spark, here)
        new_wm = step.watermark_after(seen, wm)
        table = {"path": f"v{batch_id}/windows", "rows": rows, "ends": ends}
        tables = [table] if rewrite else [*kept.tables, table]
        # (the step's table, when it is all the open windows, as a local relation: the next
        # step's state, as ``_read`` keeps it; else the next step lists its tables anew)
        local = self.local_relation(spark, collected) if rewrite else None
        self._last = None if local is None else (tuple(_paths(tables)), local)
        return Stepped(new_wm, tables, bool(dead), self._panes(spark, tables, local, rewrite, wm, new_wm))

    def _panes(
        self, spark: Any, tables: list[dict], local: DataFrame | None, rewrite: bool, wm: int, new_wm: int
    ) -> DataFrame:
        if not self.closing(tables, new_wm):
            # (no window closes: no table read, the same empty relation every time)
            return self._no_panes(spark, _paths(tables))
        windows = self._read(spark, _paths(tables), written=True) if local is None else local
        if rewrite:
            return self.step.closed(windows, new_wm, self.ordered, table=True)
        return self.step.due(windows, wm, new_wm, self.ordered)

    def commit(self, batch_id: int, kept: Kept, stepped: Stepped) -> None:
        """Writes the step's meta: the version counts once it is written. A table leaves the list
        once all its windows expired (no statistics: it stays; no window, only the group of rows
        in none: it goes)."""
        new_wm = stepped.watermark
        after = [
            t
            for t in stepped.tables
            if t["rows"] is None or t["ends"] is not None and self.step.expires_at(t["ends"][1]) > new_wm
        ]
        # (how far the watermark moved: no history yet, or the end of the input, counts as 0)
        moved = new_wm - kept.watermark if kept.watermark > MIN_TIME and new_wm < END_OF_INPUT else 0
        meta = {"watermark": new_wm, "tables": after, "advance": moved}
        write_meta(self.root, batch_id, meta)

    def clean(self, batch_id: int) -> None:
        """Removes the versions neither this step's nor the one before's meta needs (the one
        before: Spark may run this micro-batch again, from it)."""
        keep = {f"v{batch_id}", f"v{batch_id - 1}"}
        for v in (batch_id, batch_id - 1):
            with contextlib.suppress(OSError, ValueError, KeyError):
                keep.update(t["path"].split("/")[0] for t in self._meta(v)["tables"])
        for v in self._versions():
            if v < batch_id and f"v{v}" not in keep:
                shutil.rmtree(self.root / f"v{v}", ignore_errors=True)

    # -- decisions ---------------------------------------------------------------------------------

    def rewrites(self, tables: list[dict], wm: int, advance: int) -> bool:
        """Whether a step rewrites the open windows into one table (see the class): always unless
        the step ``appends``; then when they are few, in many tables, when the tables added since
        the oldest hold as many rows as it, or when a table holds a window that expires by the
        time the watermark has moved ``CLOSING_STEPS`` times as far as in the step before (or
        expired already: the rewrite drops it), since the closing windows' partials merge across
        the tables (rows or ends unknown: a rewrite)."""
        if not self.step.appends or not tables or len(tables) >= MAX_TABLES:
            return True
        total = _rows(tables)
        if total is None or any(t["ends"] is None for t in tables):
            return True
        if total <= SMALL_STATE_ROWS or total - tables[0]["rows"] >= tables[0]["rows"]:
            return True
        if CLOSING_STEPS is None:
            return False
        return self.closing(tables, wm + CLOSING_STEPS * advance)

    def closing(self, tables: list[dict], wm: int) -> bool:
        """Whether a window of ``tables`` may give a pane at watermark ``wm``: for the default
        trigger, when one expires by then (the tables' smallest window ends; rows unknown: it
        may); after_watermark may fire at any step."""
        if self.step.fires:
            return True
        return any(
            t["rows"] is None or t["ends"] is not None and self.step.expires_at(t["ends"][0]) <= wm for t in tables
        )

    def collects(self, batch: DataFrame, kept: int | None) -> bool:
        """Whether the step collects its table to the driver (see ``COLLECT_ROWS``): it rewrites
        ``kept`` rows at most, the table's types are known to keep, and
        Spark's estimate of the micro-batch's size is small."""
        # (not on Spark Connect: no JVM plan to ask for the estimate, and a Connect DataFrame answers
        # any attribute, _collect_as_arrow too, with a Column)
        if kept is None or kept > COLLECT_ROWS or self._schema is None or is_connect(batch.sparkSession):
            return False
        if self._local is None:
            self._local = _local_type(self._schema)
        if not self._local:
            return False
        try:
            size = int(str(batch._jdf.queryExecution().optimizedPlan().stats().sizeInBytes()))
        except Exception:  # (no estimate, or no JVM plan to ask: Spark Connect)
            return False
        return size <= COLLECT_INPUT_BYTES

    # -- tables ------------------------------------------------------------------------------------

    def write(self, table: DataFrame, path: Path, batch: DataFrame, kept: int | None) -> Any:
        """Writes a step's windows ``table`` (``batch``: its micro-batch; ``kept``: the kept
        rows it rewrites): collected to the driver when ``collects``, else by a Spark job. The
        collected table (pyarrow; None when a Spark job wrote it)."""
        if self._schema is None and not is_connect(batch.sparkSession):
            # (known before any table is read back: the first step collects too)
            self._schema = cast(ST.StructType, as_read(table.schema))
        if not self.collects(batch, kept):
            table.write.options(**_WRITE_OPTIONS).parquet(str(path))
            return None
        import pyarrow as pa
        import pyarrow.parquet as pq

        # (the batches as they come, every field made nullable: Spark's schema says a struct's
        # field is never null and leaves nulls in it where the struct is null, on which
        # PySpark's toArrow and pyarrow's Parquet writer fail; Spark reads a table with every
        # field nullable anyway)
        # (PySpark's private _collect_as_arrow: the batches without toArrow's schema check; the classic
        # DataFrame's, which PySpark's DataFrame type lacks: its __getattr__ types the name as a Column)
        batches = table._collect_as_arrow(empty_list_if_zero_records=False)  # type: ignore[operator]
        got = pa.Table.from_batches(batches)
        got = got.cast(pa.schema([_nullable(f) for f in got.schema]))
        path.mkdir(parents=True)
        pq.write_table(got, path / "part-00000.parquet")
        return got

    def local_relation(self, spark: Any, got: Any) -> DataFrame | None:
        """The table a step collected (``got``) as a local relation in one partition (see
        ``LOCAL_ROWS``); None when there is none or it is too large. (One partition: an
        aggregate of all the panes then needs no shuffle.)"""
        if got is None or got.num_rows > LOCAL_ROWS:
            return None
        return spark.createDataFrame(got, schema=self._schema).coalesce(1)

    @staticmethod
    def metrics(spark: Any, path: Path) -> tuple[int | None, int]:
        """The step's largest watermark value and dead-letter flag (ROW_WATERMARK,
        IS_DEAD_LETTER), the maxima of two columns of the windows table it wrote: read from the
        Parquet footers' statistics (no Spark job); a Spark aggregate over the table if a file
        has none."""
        seen, dead, _, _ = NativeStream.statistics(spark, path, ends=False)
        return seen, dead

    @staticmethod
    def statistics(spark: Any, path: Path, ends: bool = True) -> tuple[int | None, int, int | None, tuple | None]:
        """``metrics``, and the table's rows and (``ends``) its windows' smallest and largest
        end (None: no window, or unknown), from the footers; rows and ends None when a file has
        none."""
        import pyarrow.parquet as pq

        best: dict[str, int | None] = {ROW_WATERMARK: None, IS_DEAD_LETTER: None}
        if ends:
            best[WINDOW_END] = None
        least: int | None = None
        rows: int | None = 0
        try:
            for f in path.glob("*.parquet"):
                md = pq.read_metadata(f)
                rows += md.num_rows
                names = md.schema.names
                for r in range(md.num_row_groups):
                    g = md.row_group(r)
                    for c in best:
                        st = g.column(names.index(c)).statistics
                        if st is None or not st.has_null_count or (not st.has_min_max and st.null_count != g.num_rows):
                            raise LookupError(c)
                        if st.has_min_max:
                            best[c] = st.max if best[c] is None else max(best[c], st.max)
                            if c == WINDOW_END:
                                least = st.min if least is None else min(least, st.min)
        except (LookupError, ValueError, OSError):
            row = (
                spark.read.parquet(str(path))
                .agg(F.max(ROW_WATERMARK).alias(ROW_WATERMARK), F.max(IS_DEAD_LETTER).alias(IS_DEAD_LETTER))
                .first()
            )
            best, rows = {ROW_WATERMARK: row[ROW_WATERMARK], IS_DEAD_LETTER: row[IS_DEAD_LETTER]}, None
        end = best.get(WINDOW_END)
        return best[ROW_WATERMARK], int(best[IS_DEAD_LETTER] or 0), rows, None if end is None else (least, end)

    def _read(self, spark: Any, paths: list[str], written: bool = False) -> DataFrame:
        """The windows tables at ``paths`` (under the state directory) as one DataFrame (the
        schema kept from the first read: no footer-reading job after), with the group of rows in
        no window (null bounds: ``open``, ``closed`` and ``due`` leave it out). The tables a step
        has just ``written`` are the next step's state: that DataFrame is kept for it (no second
        listing of their files; a step run again writes its table anew and reads it again)."""
        full = [str(self.root / p) for p in paths]
        if self._schema is None:
            self._schema = spark.read.parquet(full[-1]).schema
        if not written and self._last is not None and self._last[0] == tuple(paths):
            return self._last[1]
        df = spark.read.schema(self._schema).parquet(*full)
        if written:
            self._last = (tuple(paths), df)
        return df

    def _no_panes(self, spark: Any, paths: list[str]) -> DataFrame:
        """The panes of a step that closes no window: an empty relation, which Spark's optimizer
        knows as one, so the callback's job reads no table and shuffles nothing. Built once per
        session (a plan costs an analysis), over an empty directory with the tables' schema (read
        from ``paths`` the first time)."""
        if self._schema is None:
            self._read(spark, paths, written=True)
        session = getattr(spark, "_jsparkSession", None)  # (none: Spark Connect; built each time)
        if self._empty is None or session is None or not self._empty[0].equals(session):
            empty = self.root / "empty"
            empty.mkdir(exist_ok=True)
            none = spark.read.schema(self._schema).parquet(str(empty)).limit(0)
            self._empty = (session, self.step.closed(none, MIN_TIME, self.ordered, table=True))
        return self._empty[1]

    def empty_panes(self, spark: Any) -> DataFrame:
        """The panes of a step that closes no window (``_no_panes``), once the tables' schema is known."""
        return self._no_panes(spark, [])

    def knows_schema(self, schema: ST.StructType) -> None:
        """The windows tables' schema, known before any step wrote one (the sink plan's)."""
        self._schema = cast(ST.StructType, as_read(schema))

    def no_panes(self, panes: DataFrame) -> bool:
        """Whether ``panes`` are those of a step that closed no window (``_no_panes``): a
        callback need not count or write them."""
        return self._empty is not None and panes is self._empty[1]

    def _versions(self) -> list[int]:
        return versions(self.root)

    def _meta(self, version: int) -> dict:
        return windows_meta(self.root, version)
