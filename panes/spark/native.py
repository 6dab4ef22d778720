"""Native Spark plans: windows assigned, checked for lateness and aggregated with Spark SQL
expressions only (no Python per row, key or bucket).

One step does what the core's ``Engine.step`` does for the default trigger (one pane per window,
when the watermark passes the window's end + allowed lateness):

1. the step's rows are assigned to windows and checked against the watermark from *before* the
   step: a row whose window (or one of its hopping windows) has expired goes to the dead letters
   (once, naming the windows it missed) and counts in its other windows;
2. the on-time rows are combined into partial aggregates per (key, window), and merged with the
   open windows kept from the earlier steps (sessions: overlapping sessions merge, as in the core);
3. the watermark moves (max event time - max_delay, punctuation, explicit control values);
4. windows whose end + allowed lateness the watermark reached emit their pane and leave the state.

A bounded DataFrame is one step from an empty state, then the end of input (so no row is late).
A stream runs a step per micro-batch inside ``foreachBatch``; the open windows are kept in Parquet
tables versioned by batch id under the checkpoint (``<checkpoint>/panes_native/v<batch>``), with
the watermark and the list of tables beside them, so a micro-batch that Spark runs again after a
failure reads the same state and writes the same result (``NativeStream``).
"""

from __future__ import annotations

import functools
import json
import shutil
from pathlib import Path

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as ST
from pyspark.sql.window import Window

from ..core import aggregates as A
from ..core.time import END_OF_INPUT
from ..core.pipeline import Pipeline
from ..core.time import MAX_TIME, MIN_TIME
from ..core.triggers import AfterCount, AfterWatermark, Never, Repeatedly
from ..core.windows import GlobalWindows, Hopping, Sessions, Sliding, Tumbling
from .columns import (
    CLOCK, DETAIL, INVALID, NUM, PUNCT, SEQ, SPARK_END_MS, TS, WMARK,
    cast_to, numeric_string_columns, output_type, record_json,
)
from .session import plan_building

WS, WE, LATE_WIN = "__panes_ws", "__panes_we", "__panes_created_late"
OUT = "__panes_out"
PHASE_COL, SUB_COL = "__panes_phase", "__panes_sub"  # the engine's emission order (replay)
#: per window, for after_watermark: rows added this step, the phase's count, in the late phase,
#: elements since the last pane, the next pane index, the last pane (values, timing), a non-early
#: pane was emitted
K, CNT, PLATE, NEW, IDX, LASTV, LASTT, NONEARLY = (
    "__panes_k", "__panes_cnt", "__panes_plate", "__panes_new", "__panes_idx", "__panes_lastv",
    "__panes_lastt", "__panes_nonearly")
_TRIGGER_STATE = (CNT, PLATE, NEW, IDX, LASTV, LASTT, NONEARLY)
MISSED = "__panes_missed"
LT, _TIMINGS = "__panes_lt", ("EARLY", "ON_TIME", "LATE")  # the last pane's timing as a number: see _timing_code
#: a stream's step also reports, in the windows table it writes, the largest watermark value its
#: rows carried (ms) and whether some of them are dead letters: every row reaches the grouping,
#: those that count in no window in one group of their own (window bounds null)
GOT, DEAD, NONE = "__panes_got", "__panes_dead", "__panes_none"
#: a stream's columns per row that no watermark changes (``NativeStep.row_columns``): event time
#: (0 when missing), a data row that counts / is a dead letter, the row's window and when it
#: expires, in a window; the numbers a value column holds (NaN as null) under ROWV + its name
ROWT, ROWOK, ROWBAD, ROWWS, ROWWE, ROWEXP, ROWIN, ROWV = (
    "__panes_row_t", "__panes_row_ok", "__panes_row_bad", "__panes_row_ws", "__panes_row_we",
    "__panes_row_exp", "__panes_row_in", "__panes_row_v_")
#: the record of a malformed row as JSON, computed in the stream's own plan (``NativeStep.never_late``)
RECORD = "__panes_record"
#: a step's own values as columns (``constants``): the watermark before the step, after it, the
#: least ingestion stamp (``never_late``), the step's number (arrival order)
WMC, WMC2, FLOORC, STEPC = "__panes_wm", "__panes_wm2", "__panes_floor", "__panes_step"
STATE_DIR = "panes_native"
#: the windows table of a step is committed by its ``meta.json``, written after it (a step run
#: again starts from an empty directory): Hadoop's file committer need not move the files once
#: more at the job's end (algorithm 2: each task's files go to the table when the task ends) nor
#: mark the table done (``_SUCCESS``)
_WRITE_OPTIONS = {"mapreduce.fileoutputcommitter.algorithm.version": "2",
                  "mapreduce.fileoutputcommitter.marksuccessfuljobs": "false"}

#: aggregates whose partial results merge natively across micro-batches (user combine functions
#: need the engine)
_MERGEABLE = (A.Count, A.Sum, A.Min, A.Avg, A.First, A.Percentile, A.CollectList, A.CountDistinct, A.TopK)


# -- what the native plans cover ----------------------------------------------------------------------


def batch_unsupported(p: Pipeline) -> str | None:
    """Why a bounded pipeline cannot run on the native plan (None: it can)."""
    if not isinstance(p.window, (Tumbling, Hopping, GlobalWindows, Sessions, Sliding)):
        return f"{p.window.kind} windows"
    return _aggregates_unsupported(p)


def appends(p: Pipeline) -> bool:
    """Whether a stream step may add its rows' partials to the kept windows as a table of their
    own instead of rewriting them all (``NativeStream``): the default trigger on fixed windows,
    whose partials of a window merge whichever steps made them (sessions merge by overlap; the
    firing plans keep each window's trigger state)."""
    return isinstance(p.trigger, Never) and not isinstance(p.window, Sessions)


def _aggregates_unsupported(p: Pipeline) -> str | None:
    bad = [a.output for a in p.aggregates if not isinstance(a.fn, _MERGEABLE)]
    return f"aggregates {bad} have no native form" if bad else None


def _count_of(t) -> int | None:
    """n for after_count(n) (also under repeatedly), 0 for no trigger, None for anything else."""
    if t is None:
        return 0
    if isinstance(t, Repeatedly):
        t = t.trigger
    return t.count if isinstance(t, AfterCount) else None


def never_late(p: Pipeline) -> bool:
    """Whether no record of a stream can be late: ingestion time (stamps never go back, see
    ``NativeStep.on_time``) whose watermark follows the stamps alone (no punctuation). Its
    watermark is then the latest stamp - max_delay: a record's window ends after its stamp, which
    is at least the latest one, so no window of it has expired."""
    return p.event_time is None and not p.watermark.punctuation


def stream_unsupported(p: Pipeline) -> str | None:
    """Why a streaming pipeline cannot run on the native plan (None: it can). Natively: the default
    trigger, and after_watermark with early / late firings by count, in any accumulation mode."""
    t = p.trigger
    if not isinstance(t, Never):
        desc = t.describe()
        if not isinstance(t, AfterWatermark) or _count_of(t.early) is None or _count_of(t.late) is None:
            return f"trigger {desc} needs the engine (natively: after_watermark with counts)"
        if t.late is None and p.allowed_lateness > 0:
            return f"trigger {desc} closes windows before they expire, which needs the engine"
        if isinstance(p.window, Sessions):
            return f"trigger {desc} on merging sessions needs the engine"
        if p.only_updated_panes:
            return "only_updated_panes needs the engine"
    if not isinstance(p.window, (Tumbling, Hopping, GlobalWindows, Sessions)):
        return f"{p.window.kind} windows need the engine"
    if p.watermark.idle_timeout is not None:
        return "the idleness timeout needs the processing-time clock"
    return _aggregates_unsupported(p)


# A step's own values (its watermark, ...) are never literals in its plans: Spark writes a literal
# number into the code it generates for a stage, so with the watermark as a literal each
# micro-batch compiled its stages anew: on Nexmark q7's stream, two pieces of code per micro-batch
# (the step's, the panes'), each compiled twice, 20-100 ms each (CodeGenerator's log; tests in
# test_generated_code.py). A one-element array literal is handed to the generated code as an
# object instead: the code stays the same from one micro-batch to the next, and Spark's code
# cache serves it. Its values reach the rows as columns (``constants``, a Generate in the stage's
# code) or a filter's test reads them (``where``). (Columns with lambda functions are built once
# per step, ``NativeStep._memo``, for the same reason: the names Spark gives their variables are
# new each time, and are in the generated code.)


def _one_row(values: dict[str, int]) -> str:
    """The SQL of an array literal of one struct of ``values`` (longs)."""
    fields = ", ".join(f"'{n}', CAST({int(v)} AS BIGINT)" for n, v in values.items())
    return f"array(named_struct({fields}))"  # (SQL: one JVM round trip, where Columns made eight)


def constants(df: DataFrame, values: dict[str, int], *columns) -> DataFrame:
    """``df`` with a long column per name of ``values``, the same value on every row (see
    above). ``columns``: the others to keep (default: all), in the same step (each DataFrame step
    costs an analysis)."""
    generator = f"inline({_one_row(values)})"
    if not columns:
        return df.selectExpr("*", generator)
    return df.select(*columns, F.expr(generator))


def where(test: str, values: dict[str, int]) -> Column:
    """A generator for a select that keeps the rows for which ``test`` (SQL) holds and adds no
    column: a filter in the select's own step (each DataFrame step costs an analysis). ``test``
    reads ``values`` as fields of ``c`` (see above): Spark's higher-order functions evaluate it
    for the one element of their array, interpreted (~15 ns more per row than a filter, measured
    on 2M rows): for the windows tables, not the rows. (SQL: the same as Columns, with lambda
    functions, took ~10 ms more to build.)"""
    return F.expr(f"inline(transform(filter({_one_row(values)}, c -> {test}), c -> named_struct()))")


def _mapped(c: Column, pairs) -> Column:
    """``c``'s value mapped by ``(from, to)`` pairs (a when-chain; null for any other value)."""
    out = None
    for a, b in pairs:
        out = (F.when if out is None else out.when)(c == a, F.lit(b))
    return out


def _timing_code(timing: Column) -> Column:
    """A pane timing as its number in ``_TIMINGS`` (1-based; null for null)."""
    return _mapped(timing, [(t, i) for i, t in enumerate(_TIMINGS, 1)])


def _timing_of(code: Column) -> Column:
    """The pane timing of a number from ``_timing_code``. (Not element_at: on a null index,
    Spark 4.3 gave the array's last element after an aggregation, and failed to optimise a plan
    of its own.)"""
    return _mapped(code, [(i, t) for i, t in enumerate(_TIMINGS, 1)])


# -- window assignment ------------------------------------------------------------------------------------


def _since_offset(ts: Column, offset: int) -> Column:
    """The time since the windows' alignment (Spark's optimizer keeps a subtraction of 0)."""
    return ts - F.lit(offset) if offset else ts


def hopping_starts(w: Hopping, ts: Column) -> Column:
    """The starts of the hopping windows that hold a row at ``ts``, ascending (empty in a gap):
    the last start at or before ``ts`` and those one hop, two hops... before it."""
    last = ts - F.pmod(_since_offset(ts, w.offset), F.lit(w.hop))
    starts = F.array(*[last - F.lit(j * w.hop) for j in reversed(range(w.windows_per_record))])
    # (every start holds the row when the size is a multiple of the hop)
    return F.filter(starts, lambda s: s + F.lit(w.size) > ts) if w.size % w.hop else starts


def window_array(p: Pipeline, ts: Column) -> Column:
    """The windows of a row as an array of struct(s, e) (half-open [s, e)); empty in a hopping gap."""
    w = p.window
    one = row_window(p, ts)
    if one is None:
        return F.transform(hopping_starts(w, ts), lambda s: F.struct(s.alias("s"), (s + F.lit(w.size)).alias("e")))
    win = F.array(F.struct(one[WS].alias("s"), one[WE].alias("e")))
    return F.filter(win, lambda x: x["s"].isNotNull()) if isinstance(w, Hopping) and w.hop > w.size else win


def several_windows_per_row(p: Pipeline) -> bool:
    """Hopping windows with overlap; any other window holds a row alone, if any holds it."""
    return isinstance(p.window, Hopping) and p.window.hop < p.window.size


def row_window(p: Pipeline, ts: Column) -> dict[str, Column] | None:
    """The bounds (WS, WE: ms, half-open) of the one window of a row at ``ts``, null in a
    hopping gap; None when a row can be in several windows (hopping with overlap)."""
    w = p.window
    if several_windows_per_row(p):
        return None
    if isinstance(w, (Tumbling, Hopping)):  # hop >= size: at most one window per row
        period = w.size if isinstance(w, Tumbling) else w.hop
        start = ts - F.pmod(_since_offset(ts, w.offset), F.lit(period))
        end = start + F.lit(w.size)
        if period == w.size:
            return {WS: start, WE: end}
        inside = ts < end
        return {WS: F.when(inside, start), WE: F.when(inside, end)}
    if isinstance(w, GlobalWindows):
        return {WS: F.lit(MIN_TIME).cast("long"), WE: F.lit(MAX_TIME).cast("long")}
    if isinstance(w, Sessions):  # the proto-session [t, t + gap)
        gap = F.col(w.gap_column).cast("long") if w.gap_column else F.lit(w.gap)
        return {WS: ts, WE: ts + gap}
    if isinstance(w, Sliding):  # the window the record defines that holds it: [t - D, t]
        return {WS: ts - F.lit(w.time_difference), WE: ts + F.lit(1)}
    raise TypeError(w)


def assign(p: Pipeline, df: DataFrame, keep_all: bool = False, extra: dict | None = None,
           ts: Column | None = None, starts: Column | None = None) -> DataFrame:
    """Rows with their windows, a row per (row, window), bounds in WS / WE (ms, half-open).
    A row in a hopping gap has no window: dropped, or kept with null bounds (``keep_all``).
    ``extra``: more columns added in the same step (each DataFrame step costs an analysis);
    ``ts``: the event time's expression (default: the ``TS`` column); ``starts``: its
    ``hopping_starts``, when already built."""
    w = p.window
    ts = F.col(TS) if ts is None else ts
    extra = extra or {}
    one = row_window(p, ts)
    if one is None:
        # the starts of the row's windows, exploded: measured faster than Spark's own sliding
        # window() (an Expand) on Nexmark q5. Every row has one at least (the last start).
        starts = hopping_starts(w, ts) if starts is None else starts
        return df.withColumn(WS, F.explode(starts)).withColumns({WE: F.col(WS) + F.lit(w.size), **extra})
    out = df.withColumns({**one, **extra})
    if isinstance(w, Hopping) and w.hop > w.size and not keep_all:
        return out.filter(F.col(WE).isNotNull())
    return out


def expiry(p: Pipeline, end: Column | str) -> Column | str:
    """The watermark at which a window expires (end + allowed lateness; never for the global
    window). ``end`` as SQL: the expiry's SQL."""
    if isinstance(end, str):
        return f"CASE WHEN {end} >= {MAX_TIME} THEN {END_OF_INPUT} ELSE {end} + {p.allowed_lateness} END"
    return F.when(end >= F.lit(MAX_TIME), F.lit(END_OF_INPUT)).otherwise(end + F.lit(p.allowed_lateness))


# -- partial aggregates -------------------------------------------------------------------------------------


class _BuiltOnUse:
    """An attribute built by a zero-argument function (``obj._make[name]``) on first use, then kept."""

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        value = obj.__dict__[self.name] = obj._make[self.name]()
        return value


class Partial:
    """How one aggregate is kept between micro-batches: partial columns, their combination, the
    result. Each form is built when a plan first asks for it, then kept (each Column costs JVM
    round trips, and a plan reads only some of them: a batch plan neither ``merge`` nor
    ``one_row``)."""

    of_rows = _BuiltOnUse()   # tuple: partials from the rows of a group (unnamed: also used over frames)
    merge = _BuiltOnUse()     # tuple: partials from partials
    final = _BuiltOnUse()     # the result from the partials
    one_row = _BuiltOnUse()   # tuple: the partials of a single row (sessions merge rows and partials)
    #: tuple: the partials of no rows, which a discarding pane resets to: a value, None (null) or
    #: "array" (empty)
    empty = _BuiltOnUse()

    def __init__(self, names: tuple[str, ...], of_rows, merge, final, one_row, empty=lambda: ()):
        self.names = names
        self._make = {"of_rows": of_rows, "merge": merge, "final": final, "one_row": one_row, "empty": empty}


def partial(i: int, a: A.Aggregate, schema: ST.StructType) -> Partial:
    fn = a.fn
    c = F.col(fn.column) if fn.column not in (None, "*") else None
    n = f"__panes_p{i}"

    def col():
        return F.col(n)
    if isinstance(fn, A.Count):
        return Partial((n,), lambda: (F.count(F.lit(1)) if c is None else F.count(c),),
                       lambda: (F.sum(n).alias(n),), col,
                       lambda: ((F.lit(1) if c is None else F.when(c.isNotNull(), 1).otherwise(0)).cast("long").alias(n),),
                       lambda: (F.lit(0).cast("long"),))
    if isinstance(fn, A.Sum):
        t = output_type(fn, schema)
        return Partial((n,), lambda: (F.sum(cast_to(c, t)),), lambda: (cast_to(F.sum(n), t).alias(n),), col,
                       lambda: (cast_to(c, t).alias(n),), lambda: (None,))
    if isinstance(fn, A.Avg):
        s, k = n + "s", n + "n"
        # (Spark sums decimal(p, s) as decimal(p + 10, s): the total of totals kept at that type,
        # or each micro-batch's merge would widen it and the next one read its table wrong)
        ct = schema[fn.column].dataType
        total = (lambda e: e) if not isinstance(ct, ST.DecimalType) else \
            (lambda e: cast_to(e, ST.DecimalType(min(38, ct.precision + 10), ct.scale)))
        return Partial((s, k), lambda: (total(F.sum(c)), F.count(c)),
                       lambda: (total(F.sum(s)).alias(s), F.sum(k).alias(k)),
                       lambda: F.when(F.col(k) > 0, F.col(s).cast("double") / F.col(k)),
                       lambda: (total(c).alias(s), F.when(c.isNotNull(), 1).otherwise(0).cast("long").alias(k)),
                       lambda: (None, F.lit(0).cast("long")))
    if isinstance(fn, (A.Min, A.First)):  # Max, Last are subclasses
        # first / last: the value at the least / greatest (event time, arrival order)
        pick = F.max if isinstance(fn, (A.Max, A.Last)) else F.min
        item = functools.cache(lambda: c if isinstance(fn, A.Min) else
                               F.when(c.isNotNull(), F.struct(F.col(TS).alias("t"), F.col(SEQ).alias("q"), c.alias("v"))))
        return Partial((n,), lambda: (pick(item()),), lambda: (pick(n).alias(n),),
                       col if isinstance(fn, A.Min) else lambda: col()["v"], lambda: (item().alias(n),), lambda: (None,))
    # holistic: the values kept in an array (as the engine keeps them in a list)
    # (item: a row's value as kept; built once, as of_rows and one_row both read it)
    if isinstance(fn, A.CollectList):
        item = functools.cache(lambda: F.struct(F.col(TS).alias("t"), F.col(SEQ).alias("q"), c.alias("v")))
        final = lambda: F.transform(F.array_sort(col()), lambda x: x["v"])  # noqa: E731
    elif isinstance(fn, A.CountDistinct):
        item, final = (lambda: c), (lambda: F.size(F.array_distinct(col())))
    elif isinstance(fn, A.TopK):
        item, final = (lambda: c), (lambda: F.slice(F.sort_array(col(), asc=False), 1, fn.k))
    elif isinstance(fn, A.Percentile):
        item = functools.cache(lambda: c.cast("double"))
        final = lambda: _percentile(F.array_sort(col()), fn.p)  # noqa: E731
    else:
        raise TypeError(f"{fn!r} has no native partial form")

    def of_rows():
        return (F.collect_set(c) if isinstance(fn, A.CountDistinct) else F.collect_list(F.when(c.isNotNull(), item())),)
    return Partial((n,), of_rows, lambda: (F.flatten(F.collect_list(n)).alias(n),), final,
                   lambda: (F.filter(F.array(item()), lambda x: c.isNotNull()).alias(n),), lambda: ("array",))


def _percentile(values: Column, p: float) -> Column:
    """The exact percentile of a sorted array, interpolated linearly as numpy (and the core) do."""
    n = F.size(values)
    pos = (n - 1).cast("double") * F.lit(p * 100.0 / 100.0)  # the core hands numpy p * 100 percent
    lo = F.floor(pos)
    frac = pos - lo
    a = F.element_at(values, (lo + 1).cast("int"))
    b = F.element_at(values, F.least(lo + 2, n).cast("int"))
    return F.when(n > 0, F.when(frac >= 0.5, b - (b - a) * (1 - frac)).otherwise(a + (b - a) * frac))


def window_columns(p: Pipeline) -> list[Column]:
    """The key and the reported window bounds of a pane row (none for the global window)."""
    if isinstance(p.window, GlobalWindows):
        bounds = [F.lit(None).cast("timestamp").alias("window_start"), F.lit(None).cast("timestamp").alias("window_end")]
    else:
        bounds = [F.timestamp_millis(F.col(WS)).alias("window_start"),
                  F.timestamp_millis(p.window.report_end(F.col(WE))).alias("window_end")]
    return [*[F.col(k) for k in p.key], *bounds]


def pane_columns(p: Pipeline, schema: ST.StructType, finals: list[Column]) -> list[Column]:
    """The pane rows of closed windows (WS, WE, LATE_WIN and the aggregates' final values)."""
    return [
        *window_columns(p),
        F.when(F.col(LATE_WIN), F.lit("LATE")).otherwise(F.lit("ON_TIME")).alias("timing"),
        F.lit(0).cast("long").alias("pane_index"),
        F.lit(True).alias("is_last"),
        F.lit(False).alias("retraction"),
        *[cast_to(f, output_type(a.fn, schema)).alias(a.output) for a, f in zip(p.aggregates, finals)],
    ]


# -- one step ------------------------------------------------------------------------------------------------


class NativeStep:
    """The native plan of one pipeline: ``step(rows, state, watermark)`` on DataFrames."""

    def __init__(self, p: Pipeline, schema: ST.StructType, record_columns: list[str], never_late: bool = False):
        """``never_late``: the stream is ``never_late(p)`` and nothing else moves its watermark
        (no control column): stamps are clamped to the latest one (``on_time``), and the stream
        carries only the columns the windows read, with each malformed row's record (``RECORD``:
        the only dead letters; ``stream_columns``)."""
        self.p = p
        self.schema = schema
        self.record_columns = record_columns
        self.never_late = never_late
        self.parts = [partial(i, a, schema) for i, a in enumerate(p.aggregates)]
        self.delay = 0 if p.watermark.punctuation else p.watermark.max_delay
        self.ordered = any(isinstance(a.fn, (A.First, A.CollectList)) for a in p.aggregates)
        self.numeric_strings = numeric_string_columns(schema, p)
        self.float_values = [c for c in dict.fromkeys(p.value_columns) if c in schema.fieldNames()
                             and isinstance(schema[c].dataType, (ST.DoubleType, ST.FloatType))]
        self.read_values = [*self.numeric_strings, *self.float_values]  # (see _values)
        t = p.trigger
        self.fires = isinstance(t, AfterWatermark)  # else Never: one pane when the window expires
        self.early_n = _count_of(t.early) if self.fires else 0
        self.late_n = _count_of(t.late) if self.fires else 0
        # the last pane is kept only to retract it
        self.trigger_state = _TRIGGER_STATE if p.accumulation == "retracting" else \
            tuple(c for c in _TRIGGER_STATE if c not in (LASTV, LASTT))
        self._memos: dict = {}

    def _memo(self, key, build):
        """Columns that no watermark changes, built once per step and reused by every micro-batch
        (each Column costs JVM round trips: the firing plans made ~2,000 per micro-batch)."""
        if key not in self._memos:
            self._memos[key] = build()
        return self._memos[key]

    @property
    def partial_columns(self) -> list[str]:
        return [n for pt in self.parts for n in pt.names]

    @property
    def state_columns(self) -> list[str]:
        extra = list(self.trigger_state) if self.fires else []
        return [*self.p.key, WS, WE, LATE_WIN, *self.partial_columns, *extra]

    def watermark_after(self, got: int | None, wm: int) -> int:
        """The watermark after a step whose rows carried ``got`` at most (``GOT``). It never goes
        back: event time - max_delay, punctuation and explicit control values, +infinity at the
        end of the input."""
        if got is None:
            return wm
        if got >= SPARK_END_MS:
            return END_OF_INPUT
        return max(wm, got - self.delay)

    def _values(self, cols: dict[str, Column] | None = None) -> dict[str, Column]:
        """The value columns (``read_values``) as the aggregates read them: numbers read from
        strings (``NUM`` columns, or their expressions in ``cols``); NaN counts as no value, as
        null does in the core."""
        fixed = {c: (cols or {}).get(NUM + c, F.col(NUM + c)) for c in self.numeric_strings}
        fixed.update({c: F.col(c) for c in self.float_values})
        return {c: F.when(~F.isnan(v), v) for c, v in fixed.items()}

    def row_columns(self) -> dict[str, Column]:
        """The columns of a stream's prepared rows that no watermark changes (ROW*; GOT, the
        row's watermark value), added in the stream's own plan: Spark analyses that once, when
        the query starts, where each micro-batch's plan is analysed anew, at a cost that grows
        with its expressions (on_time's step took 19-54 ms per micro-batch on q7 with these
        computed in it). ``on_time`` reads them."""
        p = self.p
        data = F.col(PUNCT).isNull() & F.col(CLOCK).isNull()
        # (a row without event time is assigned at 0: Spark's window() drops null times)
        ts = F.coalesce(F.col(TS), F.lit(0).cast("long"))
        ok = data & F.col(INVALID).isNull()
        bad = data & F.col(INVALID).isNotNull()
        cols = {GOT: F.unix_millis(F.col(WMARK)), ROWT: ts, ROWOK: ok, ROWBAD: bad,
                **{ROWV + c: v for c, v in self._values().items()}}
        if self.never_late:
            cols[RECORD] = F.when(bad, self._record())
        one = row_window(p, ts)
        if one is not None:  # (several windows per row: exploded in each micro-batch)
            cols.update({ROWWS: one[WS], ROWWE: one[WE], ROWEXP: expiry(p, one[WE]), ROWIN: ok & one[WE].isNotNull()})
        return cols

    def _record(self) -> Column:
        """A row's record (its input columns) as JSON, for the dead letters."""
        return record_json(self.record_columns)

    def stream_columns(self, names: list[str]) -> list[str]:
        """The columns of the prepared stream (``names``) a step reads: the record's and panes'
        own (for a ``never_late`` stream, with ``RECORD``, only those of the record the pipeline
        reads: key, values, gap), but not those that ``row_columns()`` stand for (event time,
        punctuation, clock, Spark's watermark column, numbers read from strings). The rows reach
        ``run`` through foreachBatch as an RDD: every column of the stream's plan is computed and
        copied for every row, whichever the step reads (measured on Nexmark q12: 50-80 ms of a
        350-410 ms step for the 4 columns it does not read). The source's reader still reads
        what ``RECORD`` needs."""
        w = self.p.window
        read = {*self.p.key, *self.p.value_columns, *([w.gap_column] if isinstance(w, Sessions) and w.gap_column else [])}
        return [c for c in names if c not in (TS, PUNCT, CLOCK, WMARK) and not c.startswith(NUM)
                and (not self.never_late or c.startswith("__panes") or c in read)]

    def _seq(self, step: Column) -> dict[str, Column]:
        """A row's arrival order (``step``'s number, then position), for the aggregates that
        break event-time ties by it (first, last, collect_list); none for the others."""
        return {SEQ: F.struct(step.alias("b"), F.monotonically_increasing_id().alias("i"))} if self.ordered else {}

    def on_time(self, rows: DataFrame, wm: int, step: int = 0) -> DataFrame:
        """A stream step's prepared rows (with ``row_columns()``), a row per (row, window) for
        the windows they count in. ``step`` orders arrivals across steps. Every row stays, with
        ``GOT`` (its watermark value) and ``DEAD`` (1: a dead letter, malformed or late in that
        window); a row that counts in no window has null key and window bounds, so that the
        grouping collects the step's watermark and dead-letter flag in one more group, in the
        same pass over the rows (``combine(..., metrics=True)``); and ``WMC``, the watermark
        ``wm``. (Bounded input: ``on_time_bounded``.)"""
        p = self.p
        # never_late: a stamp before the latest one (the system clock set back) counts as that
        # one, as on the stateful plan and in the core's replay (whose clock never goes back);
        # its window then is the latest stamp's
        floor = wm + self.delay if self.never_late and MIN_TIME < wm < END_OF_INPUT else None
        # (the step's values as columns, not literals: see ``constants``)
        rows = constants(rows, {WMC: wm, **({FLOORC: floor} if floor is not None else {}),
                                **({STEPC: step} if self.ordered else {})})
        seq = self._seq(F.col(STEPC))
        # (the rows carry row_columns(): only what the watermark decides is computed here)
        ts = F.col(ROWT)
        if floor is not None:
            ts = F.greatest(ts, F.col(FLOORC))
        marks = {TS: ts, **seq}
        if several_windows_per_row(p):  # exploded, the marks added in the same step
            # (built once: the names Spark gives the variables of lambda functions are new each
            # time, and are in its generated code)
            starts = self._memo(("starts", floor is not None), lambda: hopping_starts(p.window, ts))
            good = assign(p, rows, keep_all=True, extra=marks, ts=ts, starts=starts)
            marks, in_window, ws, we, exp = {}, F.col(ROWOK), F.col(WS), F.col(WE), expiry(p, F.col(WE))
        else:  # one step (each costs an analysis)
            good = rows
            in_window, ws, we, exp = F.col(ROWIN), F.col(ROWWS), F.col(ROWWE), F.col(ROWEXP)
            if floor is not None:
                back, at = F.col(ROWT) < F.col(FLOORC), row_window(p, F.col(FLOORC))
                in_window = F.when(back, F.col(ROWOK) & at[WE].isNotNull()).otherwise(in_window)
                ws, we = F.when(back, at[WS]).otherwise(ws), F.when(back, at[WE]).otherwise(we)
                exp = F.when(back, expiry(p, at[WE])).otherwise(exp)
        expired = exp <= F.col(WMC) if wm > MIN_TIME else F.lit(False)
        late, keep = in_window & expired, in_window & ~expired
        cols = {**marks, **{k: F.when(keep, F.col(k)) for k in p.key}, WS: F.when(keep, ws), WE: F.when(keep, we)}
        cols.update({c: F.when(keep, F.col(ROWV + c)) if c in cols else F.col(ROWV + c) for c in self.read_values})
        return good.withColumns({**cols, DEAD: F.when(F.col(ROWBAD) | late, 1).otherwise(0)})

    def on_time_bounded(self, rows: DataFrame, cols: dict[str, Column], counts: Column) -> DataFrame:
        """``on_time`` of bounded input from an empty state, on the input's own rows: ``cols``
        and ``counts`` are the engine's columns as expressions and the test of a row that counts
        (``planner.engine_columns``), written into a filter and one projection (each DataFrame
        step costs an analysis of the plan, which grows with the columns added before it)."""
        p = self.p
        ts = cols[TS]
        new = {TS: ts, **self._seq(F.lit(0).cast("long")), **self._values(cols)}
        one = row_window(p, ts)
        if one is None:  # several windows per row: exploded in a step of their own
            return assign(p, rows.filter(counts), extra=new, ts=ts)
        if isinstance(p.window, Hopping) and p.window.hop > p.window.size:
            counts = counts & one[WE].isNotNull()  # (a row in a gap has no window)
        return rows.filter(counts).withColumns({**new, **one})

    def dead_letters(self, rows: DataFrame, wm: int, stream: bool = False) -> DataFrame:
        """The dead letters of a step's prepared rows: the malformed ones, and the late ones, each
        once, naming the windows that expired before it came (it counts in its other windows).
        ``stream``: the rows are a stream's (``stream_columns``, with ``row_columns()``)."""
        c = self._memo(("dead", wm > MIN_TIME, stream), lambda: self._dead_letter_columns(wm > MIN_TIME, stream))
        data = rows.filter(c["data"])
        if wm > MIN_TIME:  # (not a literal: see ``constants``)
            data = constants(data, {WMC: wm})
        if c["missed"] is not None:
            dead = data.withColumn(MISSED, c["missed"]).filter(c["dead"])
        else:
            dead = data.filter(c["dead"]).withColumn(MISSED, F.lit(None).cast("array<struct<s:long,e:long>>"))
        return dead.select(*c["out"])

    def _dead_letter_columns(self, moved: bool, stream: bool) -> dict:
        """The columns of ``dead_letters`` (see ``_memo``: the names Spark gives the variables of
        their lambda functions are new each time, and are in its generated code), ``moved``:
        the watermark has a value (``WMC``)."""
        p = self.p
        valid = F.col(INVALID).isNull()
        late = moved and not self.never_late  # (never_late: only malformed rows)
        report = p.window.report_end
        # (a valid row has its event time: ROWT is it)
        data, ts = (F.col(ROWOK) | F.col(ROWBAD), F.col(ROWT)) if stream else \
            (F.col(PUNCT).isNull() & F.col(CLOCK).isNull(), F.col(TS))
        return {
            "data": data,
            "missed": F.when(valid, F.filter(window_array(p, ts), lambda w: F.col(WMC) >= expiry(p, w["e"])))
            if late else None,
            "dead": ~valid | (F.size(MISSED) > 0) if late else ~valid,
            "out": [
                F.coalesce(F.col(INVALID), F.lit("late")).alias("reason"),
                (F.col(RECORD) if self.never_late else self._record()).alias("record"),
                (F.when(valid, F.timestamp_millis(F.col(WMC))) if moved else F.lit(None).cast("timestamp")).alias("watermark"),
                F.transform(MISSED, lambda w: F.struct(F.timestamp_millis(w["s"]).alias("start"),
                                                      F.timestamp_millis(report(w["e"])).alias("end"))).alias("windows"),
                F.when(~valid, F.col(DETAIL)).alias("detail"),
            ],
        }

    def combine(self, good: DataFrame, state: DataFrame | None, wm: int, metrics: bool = False) -> DataFrame:
        """The windows after the step: the state's open windows merged with the on-time rows
        (for after_watermark, with what the rows fired: ``OUT``; see ``watermark_moved``).
        ``metrics``: ``good`` is a stream step's ``on_time``; each window also has ``GOT`` and
        ``DEAD`` of its rows, and one more group (null bounds) those of the rows in no window.
        When ``wm`` is past MIN_TIME, ``good`` carries it as ``WMC`` (``on_time``)."""
        p = self.p
        key = list(p.key)
        mcols = [GOT, DEAD] if metrics else []
        # (each path names the columns it reads: no select of them first, which would cost an
        # analysis of the plan; Spark prunes the others)
        if isinstance(p.window, Sessions):
            return self._combine_sessions(good, state, wm, mcols)
        if isinstance(p.window, Sliding):
            if state is not None or metrics:
                raise ValueError("sliding windows run natively on bounded input only")
            return self._sliding(good)
        if self.fires:
            return self._combine_firing(good, state, wm, mcols)
        merge_metrics = [F.max(c).alias(c) for c in mcols]
        group, bounds = self._grouping(state is None and not metrics)
        if state is None:  # (the grouping's columns come out in the state's order)
            end = bounds[WE] if WE in bounds else F.col(WE)
            created_late = F.lit(False) if wm <= MIN_TIME else (end < F.lit(MAX_TIME)) & (F.max(WMC) >= end)
            return good.groupBy(*key, *group).agg(
                *[bounds[c].alias(c) for c in (WS, WE) if c in bounds], created_late.alias(LATE_WIN),
                *[e.alias(n) for pt in self.parts for n, e in zip(pt.names, pt.of_rows)], *merge_metrics)
        # one grouping for the kept windows and the rows (each row as its own partial), so one
        # shuffle: Spark combines the rows map-side before it. (The columns in the state's order:
        # each DataFrame step costs an analysis of the plan.)
        created_late = ((F.col(WE) < F.lit(MAX_TIME)) & (F.col(WMC) >= F.col(WE))).alias(LATE_WIN)
        rows = good.select(*key, WS, WE, created_late, *[c for pt in self.parts for c in pt.one_row], *mcols)
        return self._merged(state.unionByName(rows), merge_metrics)

    def _merged(self, partials: DataFrame, extra: list[Column] | None = None) -> DataFrame:
        """Windows whose partials are in several rows (kept windows and rows, or the tables of
        several steps: ``due``), merged per (key, window): created late when all were."""
        group, bounds = self._grouping(False)
        return partials.groupBy(*self.p.key, *group).agg(
            *[bounds[c].alias(c) for c in (WS, WE) if c in bounds],
            F.bool_and(LATE_WIN).alias(LATE_WIN), *[c for pt in self.parts for c in pt.merge], *(extra or []))

    def _grouping(self, constant_bounds: bool) -> tuple[list[str], dict[str, Column]]:
        """The window columns to group by, and the bounds that follow from them (computed after
        the grouping, not shuffled): a fixed-size window's end from its start; the global
        window's bounds when they are constants (``constant_bounds``: no group of rows in no
        window) and there is a key (grouping by nothing would make a group of no rows)."""
        w = self.p.window
        if isinstance(w, GlobalWindows):
            if constant_bounds and self.p.key:
                return [], {WS: F.lit(MIN_TIME).cast("long"), WE: F.lit(MAX_TIME).cast("long")}
            return [WS], {WE: F.when(F.col(WS).isNotNull(), F.lit(MAX_TIME).cast("long"))}
        if isinstance(w, (Tumbling, Hopping)):
            return [WS], {WE: F.col(WS) + F.lit(w.size)}
        return [WS, WE], {}

    def _sliding(self, rows: DataFrame) -> DataFrame:
        """KIP-450 windows of bounded input, with window functions over each key's records in
        event-time order: left(r) = [r - D, r] is the RANGE frame (-D, 0) of r; right(r) =
        [r + 1, r + 1 + D] the frame (1, D + 1), a window when it holds records. Windows are
        identified by their bounds: one row per distinct time, and a right window that is some
        record's left window (a record at r + 1 + D) is left to that one."""
        p = self.p
        d = p.window.time_difference
        order = Window.partitionBy(*p.key).orderBy(TS)
        frames = {"l": order.rangeBetween(-d, 0), "r": order.rangeBetween(1, d + 1)}
        cols = {side: [e.over(f).alias(f"{n}_{side}") for pt in self.parts for n, e in zip(pt.names, pt.of_rows)]
                for side, f in frames.items()}
        first_of_time = F.lag(TS).over(order).isNull() | (F.lag(TS).over(order) != F.col(TS))
        framed = rows.select(
            *p.key, TS, first_of_time.alias("__panes_first"), *cols["l"], *cols["r"],
            F.count(F.lit(1)).over(frames["r"]).alias("__panes_nr"),
            F.count(F.lit(1)).over(order.rangeBetween(d + 1, d + 1)).alias("__panes_nlast"),
        ).filter(F.col("__panes_first"))
        names = self.partial_columns
        left = framed.select(*p.key, (F.col(TS) - d).alias(WS), (F.col(TS) + 1).alias(WE),
                             *[F.col(f"{n}_l").alias(n) for n in names])
        right = framed.filter((F.col("__panes_nr") > 0) & (F.col("__panes_nlast") == 0)).select(
            *p.key, (F.col(TS) + 1).alias(WS), (F.col(TS) + d + 2).alias(WE), *[F.col(f"{n}_r").alias(n) for n in names])
        return left.unionByName(right).withColumn(LATE_WIN, F.lit(False)).select(*self.state_columns)

    def _combine_sessions(self, proto: DataFrame, state: DataFrame | None, wm: int, mcols: list[str]) -> DataFrame:
        """Sessions after the step: the kept sessions and the rows' proto-sessions [t, t + gap),
        merged per key while they overlap (touching ones stay apart, as in the core), as
        intervals in each key's order of starts: an interval starts a session when it begins at
        or after the greatest end before it; a running sum of those starts numbers the sessions,
        and the partials merge per (key, number). With a fixed gap, the rows are first combined
        per gap-long bucket of time (rows less than a gap apart are in one session): a hash
        aggregation, combined map-side, so that only the buckets are sorted. (Measured against
        Spark's ``session_window``, which sorts the rows before and after the shuffle: about
        3x faster on Nexmark q11, batch.) A kept session that comes out unchanged keeps its
        created-late flag."""
        p = self.p
        key = list(p.key)
        # (rows in no window, ``metrics``: a group of their own, not merged with any session)
        part = [*key, NONE] if mcols else key
        none = {NONE: F.col(WS).isNull()} if mcols else {}
        if p.window.gap_column:  # a gap per row: each row an interval of its own
            rows = proto.select(*key, *[c.alias(n) for n, c in none.items()], WS, WE,
                                *[c for pt in self.parts for c in pt.one_row], *mcols)
        else:
            bucket = F.col(WS) - F.pmod(F.col(WS), F.lit(p.window.gap))
            rows = proto.groupBy(*key, *[c.alias(n) for n, c in none.items()], bucket.alias("__panes_b")).agg(
                F.min(WS).alias(WS), F.max(WE).alias(WE),
                *[e.alias(n) for pt in self.parts for n, e in zip(pt.names, pt.of_rows)], *[F.max(c).alias(c) for c in mcols])
        kept = {}
        if state is not None:  # (``open`` gives it the same columns, ``metrics`` null)
            rows = state.withColumns({"__panes_kept": F.lit(True), **{n: F.lit(False) for n in none}}) \
                .unionByName(rows, allowMissingColumns=True)
            # the kept sessions a session holds, by their bounds and flag (one or none: then the
            # greatest of each is that session's; several: it is a new session, as the bounds
            # tell). (Maxima of numbers: a struct aggregate would make Spark sort the rows.)
            kept = {n: F.max(F.when(F.col("__panes_kept"), v)).alias(n) for n, v in
                    (("__panes_ks", F.col(WS)), ("__panes_ke", F.col(WE)), ("__panes_kl", F.col(LATE_WIN).cast("int")))}
        order = (Window.partitionBy(*part) if part else Window).orderBy(WS)
        before = F.max(WE).over(order.rowsBetween(Window.unboundedPreceding, -1))
        starts = F.when(before.isNull() | (F.col(WS) >= before), 1).otherwise(0)
        number = F.sum(starts).over(order.rowsBetween(Window.unboundedPreceding, 0))
        numbered = rows.withColumn("__panes_sid", F.when(F.col(NONE), 0).otherwise(number) if mcols else number)
        merged = numbered.groupBy(*part, "__panes_sid").agg(
            F.min(WS).alias(WS), F.max(WE).alias(WE), *kept.values(),
            *[c for pt in self.parts for c in pt.merge], *[F.max(c).alias(c) for c in mcols])
        late = F.lit(False)
        if wm > MIN_TIME:  # (see ``constants``)
            merged = constants(merged, {WMC: wm})
            late = F.col(WMC) >= F.col(WE)
        if kept:
            same = (F.col("__panes_ks") == F.col(WS)) & (F.col("__panes_ke") == F.col(WE))  # (null: none kept)
            late = F.when(same, F.col("__panes_kl") == 1).otherwise(late)
        return merged.select(*[late.alias(c) if c == LATE_WIN else F.col(c) for c in self.state_columns], *mcols)

    def _combine_firing(self, rows: DataFrame, state: DataFrame | None, wm: int, mcols: list[str]) -> DataFrame:
        """after_watermark(early: count, late: count) in the three accumulation modes, as the
        engine runs it, first half: the rows are added and the triggers of the windows that got
        some are evaluated (watermark before the step); their panes (retraction, pane) go to
        OUT. The second half, what the watermark's move fires, is ``watermark_moved``: it needs
        the watermark after the step, which the step's job itself collects (``GOT``), so it runs when the
        windows are read back (for the step's panes, and as the next step's state)."""
        c = self._memo(("firing", tuple(mcols)), lambda: self._firing_columns(mcols))
        # (the watermark as a column: see ``constants``; the rows carry it from ``on_time``)
        reached = c["finite"] & (F.col(WMC) >= F.col(WE))
        # (a row's window is created late when the watermark already reached its end)
        merged = rows.select(*c["rows_head"], reached.alias(LATE_WIN), *c["rows_tail"])
        if state is not None:
            merged = state.select(*c["old"]).unionByName(merged)
        w = constants(merged.groupBy(*c["group"]).agg(*c["agg"]), {WMC: wm}, *c["fresh"])
        w = w.withColumns(c["counted"])
        w = w.withColumn("__panes_fire1", c["touched"] & ((~F.col(PLATE) & (reached | c["early"])) | c["late"]))
        w = self._emit(w, "1", reached)
        # the firing's trigger transitions: the count restarts; the on-time firing ends the early phase
        plate = (F.col(PLATE) | (F.col("__panes_fire1") & reached)).alias(PLATE)
        return w.select(*[plate if col is None else col for col in c["final"]])

    def _firing_columns(self, mcols: list[str]) -> dict:
        """The columns of ``_combine_firing`` that no watermark changes (see ``_memo``)."""
        p = self.p
        key = list(p.key)
        # the last pane (kept to retract it) in columns of its own, its timing as a number: an
        # aggregate of a struct or a string would make Spark sort the rows before the shuffle
        # instead of hashing them. (A window has one kept row at most: first() takes its
        # values, of whatever type, max() would need an order.)
        counters = [c for c in self.trigger_state if c not in (LASTV, LASTT)]
        last = [(f"__panes_lv{i}", a.output, output_type(a.fn, self.schema)) for i, a in enumerate(p.aggregates)] \
            if LASTV in self.trigger_state else []
        lt = [LT] if last else []
        group, bounds = self._grouping(False)
        if last:
            lastv = F.when(F.col(LT).isNotNull(), F.struct(*[F.col(n).alias(o) for n, o, _ in last]))
            lastt = _timing_of(F.col(LT))
        else:
            lastv, lastt = F.lit(None), F.lit(None).cast("string")
        early_n, late_n = self.early_n, self.late_n
        touched = F.col(K) > 0
        # the rows: elements count for the trigger of the window's phase
        counts = (~F.col(PLATE) & F.lit(early_n > 0)) | (F.col(PLATE) & F.lit(late_n > 0))
        fired = F.col("__panes_fire1")
        final = {PLATE: None, CNT: F.when(fired, F.lit(0)).otherwise(F.col(CNT)).cast("long"),
                 OUT: F.filter(F.array(F.col("__panes_retr1"), F.col("__panes_pane1")), lambda x: x.isNotNull())}
        return {
            "finite": F.col(WE) < F.lit(MAX_TIME),
            # one grouping for the kept windows and the rows (each row its own partial): one shuffle
            "rows_head": [*key, WS, WE, *[c for pt in self.parts for c in pt.one_row], F.lit(1).cast("long").alias(K)],
            "rows_tail": [*[F.lit(None).alias(c) for c in counters],
                          *[F.lit(None).cast(t).alias(n) for n, _, t in last], *[F.lit(None).cast("int").alias(c) for c in lt],
                          *mcols],
            "old": [*key, WS, WE, LATE_WIN, *self.partial_columns, *counters,
                    *[F.col(LASTV)[o].alias(n) for n, o, _ in last], *[_timing_code(F.col(LASTT)).alias(c) for c in lt],
                    F.lit(0).cast("long").alias(K), *mcols],
            "group": [*key, *group],
            "agg": [*[bounds[c].alias(c) for c in (WS, WE) if c in bounds], F.bool_and(LATE_WIN).alias(LATE_WIN),
                    F.sum(K).alias(K), *[c for pt in self.parts for c in pt.merge],
                    *[F.max(c).alias(c) for c in [*counters, *lt, *mcols]],
                    *[F.first(n, ignorenulls=True).alias(n) for n, _, _ in last]],
            "fresh": [*key, WS, WE, LATE_WIN, K, *self.partial_columns, *mcols,
                      F.coalesce(F.col(CNT), F.lit(0)).cast("long").alias(CNT),
                      F.coalesce(F.col(PLATE), F.lit(False)).alias(PLATE),
                      F.coalesce(F.col(NEW), F.lit(0)).cast("long").alias(NEW),
                      F.coalesce(F.col(IDX), F.lit(0)).cast("long").alias(IDX),
                      lastv.alias(LASTV), lastt.alias(LASTT),
                      F.coalesce(F.col(NONEARLY), F.lit(False)).alias(NONEARLY)],
            # (withColumns per stage: each DataFrame call analyses the plan so far, and a chain of
            # one call per column made planning dominate the micro-batch)
            "counted": {CNT: F.when(touched & counts, F.col(CNT) + F.col(K)).otherwise(F.col(CNT)),
                        NEW: F.col(NEW) + F.col(K)},
            "touched": touched,
            "early": F.lit(early_n > 0) & (F.col(CNT) >= F.lit(max(early_n, 1))),
            "late": F.col(PLATE) & F.lit(late_n > 0) & (F.col(CNT) >= F.lit(max(late_n, 1))),
            # (None: the PLATE column, which the watermark decides)
            "final": [*[None if c == PLATE else final.get(c, F.col(c)).alias(c) for c in self.state_columns],
                      final[OUT].alias(OUT), *mcols],
        }

    def watermark_moved(self, windows: DataFrame, wm_after: int) -> DataFrame:
        """The second half of an after_watermark step (``_combine_firing``): the watermark moves to
        ``wm_after``; windows expire (their last pane) or fire ON_TIME. Their panes follow the
        step's others in OUT."""
        c = self._memo("moved", self._moved_columns)
        windows = constants(windows, {WMC: wm_after})  # (see ``constants``)
        wm2 = F.col(WMC)
        expired = wm2 >= c["expiry"]
        due = c["finite"] & (wm2 >= F.col(WE))
        reached = due | F.lit(wm_after >= END_OF_INPUT)
        ontime = ~expired & ~F.col(PLATE) & due
        w = windows.withColumns({"__panes_exp": expired, "__panes_fire2": expired | ontime, "__panes_ontime": ontime,
                                 **c["last"]})
        w = self._emit(w, "2", reached)
        return w.select(*c["final"])

    def _moved_columns(self) -> dict:
        """The columns of ``watermark_moved`` that no watermark changes (see ``_memo``)."""
        ontime = F.col("__panes_ontime")
        final = {PLATE: F.col(PLATE) | ontime, CNT: F.when(ontime, F.lit(0)).otherwise(F.col(CNT)).cast("long"),
                 OUT: F.concat(F.col(OUT), F.filter(F.array(F.col("__panes_retr2"), F.col("__panes_pane2")),
                                                    lambda x: x.isNotNull()))}
        return {
            "finite": F.col(WE) < F.lit(MAX_TIME),
            "expiry": expiry(self.p, F.col(WE)),
            # (the last pane is kept only to retract it)
            "last": {} if LASTV in self.trigger_state else {LASTV: F.lit(None), LASTT: F.lit(None).cast("string")},
            "final": [*[final.get(c, F.col(c)).alias(c) for c in self.state_columns], final[OUT].alias(OUT)],
        }

    def _emit(self, w: DataFrame, n: str, reached: Column) -> DataFrame:
        """A firing (``_emit`` of the engine) of the windows whose ``__panes_fire<n>`` is set: the
        pane unless it is empty and not ON_TIME, the retraction of the previous pane first
        (retracting mode), then the bookkeeping. ``n``: "1", the rows' firings (never the last
        pane), or "2", the watermark's (the last pane when ``__panes_exp``)."""
        timing = F.when(F.col(LATE_WIN) | F.col(NONEARLY), F.lit("LATE")).when(reached, F.lit("ON_TIME")) \
            .otherwise(F.lit("EARLY"))
        c = self._memo(("emit", n), lambda: self._emit_columns(n))
        w = w.withColumns({"__panes_t" + n: timing, "__panes_v" + n: c["values"]})
        w = w.withColumns({"__panes_e" + n: c["emit"]})
        return w.withColumns(c["after"])

    def _emit_columns(self, n: str) -> dict:
        """The columns of ``_emit`` that no watermark changes (see ``_memo``)."""
        p = self.p
        discarding, retracting = p.accumulation == "discarding", p.accumulation == "retracting"
        fire, final = F.col("__panes_fire" + n), F.lit(False) if n == "1" else F.col("__panes_exp")
        values = F.struct(*[cast_to(f, output_type(a.fn, self.schema)).alias(a.output)
                            for a, f in zip(p.aggregates, [pt.final for pt in self.parts])])
        emit = fire & ((F.col(NEW) > 0) | (F.col("__panes_t" + n) == "ON_TIME"))
        e = F.col("__panes_e" + n)

        phase = 2 if n == "1" else 3  # the rows' firings, then the watermark's

        def pane(vals, tm, idx, last, retraction):
            return F.struct(vals.alias("v"), tm.alias("timing"), idx.alias("pane_index"),
                            last.alias("is_last"), F.lit(retraction).alias("retraction"),
                            F.lit(phase).alias("phase"))

        r = F.when(e & F.lit(retracting) & F.col(LASTV).isNotNull(),
                   pane(F.col(LASTV), F.col(LASTT), F.col(IDX) - 1, F.lit(False), True))
        after = {
            "__panes_retr" + n: r,
            "__panes_pane" + n: F.when(e, pane(F.col("__panes_v" + n), F.col("__panes_t" + n), F.col(IDX), final, False)),
            IDX: F.col(IDX) + F.when(e, 1).otherwise(0),
            LASTV: F.when(e, F.col("__panes_v" + n)).otherwise(F.col(LASTV)),
            LASTT: F.when(e, F.col("__panes_t" + n)).otherwise(F.col(LASTT)),
            NONEARLY: F.col(NONEARLY) | (e & (F.col("__panes_t" + n) != "EARLY")),
            NEW: F.when(e, F.lit(0)).otherwise(F.col(NEW)).cast("long"),
        }
        if discarding:
            for pt in self.parts:
                for name, empty in zip(pt.names, pt.empty):
                    c = F.col(name)
                    if empty is None:
                        reset = F.when(~e, c)
                    elif isinstance(empty, str):
                        reset = F.when(e, F.filter(c, lambda x: F.lit(False))).otherwise(c)
                    else:
                        reset = F.when(e, empty).otherwise(c)
                    after[name] = reset
        return {"values": values, "emit": emit, "after": after}

    def closed(self, windows: DataFrame, wm: int, ordered: bool = False, table: bool = False) -> DataFrame:
        """The panes of the step: for the default trigger, of the windows the watermark closed;
        for after_watermark, what fired (``ordered``: with the engine's phase and order columns).
        ``table``: ``windows`` is a stream step's table, with its group of rows in no window
        (null bounds, see ``on_time``), left out here."""
        if not self.fires:
            panes = self._memo(("panes", ordered), lambda: self._pane_columns(ordered))
            # (at the end of the input every window is due: no filter to evaluate per row but
            # the one of the null bounds; the expiry test is null for them, so false)
            if wm >= END_OF_INPUT:
                return (windows.filter(F.col(WE).isNotNull()) if table else windows).select(*panes)
            # (the watermark not a literal: see ``where``)
            return windows.select(*panes, where(f"{expiry(self.p, WE)} <= c.{WMC}", {WMC: wm}))
        if table:
            windows = windows.filter(F.col(WE).isNotNull())
        c = self._memo(("fired", ordered), lambda: self._fired_columns(ordered))
        return self.watermark_moved(windows, wm).filter(c["any"]).select(*c["exploded"]).select(*c["panes"])

    @property
    def appends(self) -> bool:
        return appends(self.p)

    def expires_at(self, end: int) -> int:
        """``expiry`` of one window end (ms)."""
        return END_OF_INPUT if end >= MAX_TIME else end + self.p.allowed_lateness

    def due(self, windows: DataFrame, wm_before: int, wm: int, ordered: bool = False) -> DataFrame:
        """The panes of a step whose kept windows are in several tables (``appends``):
        ``windows``, their union, holds a window's partials in as many rows as tables. The
        windows that expire in this step (the watermark went from ``wm_before`` to ``wm``; the
        earlier ones gave their pane before) with their partials merged."""
        exp = self._expiry()
        due = constants(windows, {WMC: wm_before, WMC2: wm})  # (see ``constants``)
        merged = self._merged(due.filter((exp > F.col(WMC)) & (exp <= F.col(WMC2))))
        return merged.select(*self._memo(("panes", ordered), lambda: self._pane_columns(ordered)))

    def _expiry(self) -> Column:
        """``expiry`` of the ``WE`` column (see ``_memo``)."""
        return self._memo("expiry", lambda: expiry(self.p, F.col(WE)))

    def _pane_columns(self, ordered: bool) -> list[Column]:
        """The pane rows of the default trigger's closed windows (``closed``; see ``_memo``)."""
        cols = pane_columns(self.p, self.schema, [pt.final for pt in self.parts])
        return cols + [F.lit(3).alias(PHASE_COL), F.lit(0).alias(SUB_COL)] if ordered else cols

    def _fired_columns(self, ordered: bool) -> dict:
        """The pane rows of what fired, from OUT (``closed``; see ``_memo``)."""
        p = self.p
        cols = [*window_columns(p), F.col("__o.timing").alias("timing"), F.col("__o.pane_index").alias("pane_index"),
                F.col("__o.is_last").alias("is_last"), F.col("__o.retraction").alias("retraction"),
                *[F.col(f"__o.v.{a.output}").alias(a.output) for a in p.aggregates]]
        if ordered:
            cols += [F.col("__o.phase").alias(PHASE_COL), F.col("__panes_pos").alias(SUB_COL)]
        return {"any": F.size(OUT) > 0, "exploded": [*p.key, WS, WE, F.posexplode(OUT).alias("__panes_pos", "__o")],
                "panes": cols}

    def open(self, windows: DataFrame, wm: int, metrics: bool = False) -> DataFrame:
        """The windows a step leaves open, read back from its table with the watermark after it
        (the group of rows in no window left out: its expiry test is null; ``metrics``: with
        null ``GOT`` and ``DEAD``, to merge with ``on_time``)."""
        if self.fires:
            windows = self.watermark_moved(windows.filter(F.col(WE).isNotNull()), wm)
        extra = self._memo("no_metrics", lambda: [F.lit(None).cast("long").alias(GOT), F.lit(None).cast("int").alias(DEAD)]) \
            if metrics else []
        # (the watermark not a literal: see ``where``)
        return windows.select(*self.state_columns, *extra, where(f"{expiry(self.p, WE)} > c.{WMC}", {WMC: wm}))


# -- streaming: a step per micro-batch ----------------------------------------------------------------------


#: the kept windows of a stream are rewritten into one table (compacted) when they hold this many
#: rows at most (a small rewrite costs less than merging several tables when windows close), when
#: they are in this many tables, or when the tables added since the oldest hold as many rows as it
SMALL_STATE_ROWS = 20_000
MAX_TABLES = 8
#: ... and when a table holds a window that expires before the watermark has moved this many
#: times as far as in the step before (None: never for that reason; tests)
CLOSING_STEPS: int | None = 2
#: a step's table is collected to the driver and written there (no Spark write, whose commit
#: cost ~50 ms per micro-batch on Nexmark q7 and q12) when the step rewrites this many kept
#: rows at most and Spark estimates its micro-batch at this many bytes at most (a source without
#: an estimate: a write job), so that what the driver holds stays small
COLLECT_ROWS = 100_000
COLLECT_INPUT_BYTES = 32 << 20
#: a collected table of this many rows at most (all the open windows: ``_rewrites``) is handed to
#: Spark again as a local relation, for the step's panes and the next step's state: no file
#: listing, Parquet reader or broadcast Hadoop configuration in their jobs (measured ~35 ms less
#: per micro-batch on a callback's aggregate over 40 windows). Larger ones are read back from
#: their Parquet files (a local relation's rows travel inside each task)
LOCAL_ROWS = 20_000
#: the column types that a table collected as Arrow and written by pyarrow keeps as Spark reads
#: them (another type in the table, a map or an interval: a write job)
_LOCAL_TYPES = (ST.BooleanType, ST.ByteType, ST.ShortType, ST.IntegerType, ST.LongType, ST.FloatType,
                ST.DoubleType, ST.DecimalType, ST.StringType, ST.BinaryType, ST.DateType, ST.TimestampType,
                ST.TimestampNTZType)


def _nullable(f):
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


def _local_type(t: ST.DataType) -> bool:
    if isinstance(t, ST.ArrayType):
        return _local_type(t.elementType)
    if isinstance(t, ST.StructType):
        return all(_local_type(f.dataType) for f in t.fields)
    return isinstance(t, _LOCAL_TYPES)


class NativeStream:
    """Runs a ``NativeStep`` per micro-batch (``foreachBatch``), the open windows kept under
    ``<checkpoint>/panes_native``: ``v<batch>/windows``, the table a step wrote, and
    ``v<batch>/meta.json``, the watermark after it, how far it moved, and the tables that hold
    the windows still open (``tables``: path under the state directory, rows, smallest and
    largest window end).

    A step either rewrites the open windows merged with its rows into one table, or, when the
    step allows it (``NativeStep.appends``) and the open windows are many, writes only its rows'
    partials and adds that table to the others, as a log-structured store does: a step's cost then
    follows its rows, not everything kept (Nexmark q12's 10-second processing-time windows reach
    ~100k open windows, ~11k added per micro-batch). The closing windows merge their partials
    across the tables (``NativeStep.due``); a table leaves the list once all its windows expired;
    the next rewrite (``_rewrites``) drops the expired rows of the others. A step rewrites as soon
    as some kept windows are about to close, so the merge across tables stays the exception, for
    windows that stay open long (many keys, long windows or processing time).

    A small table (``COLLECT_ROWS``) is collected to the driver as Arrow and written there by
    pyarrow, without the file commit of a Spark write, and when smaller still (``LOCAL_ROWS``)
    handed back to Spark as a local relation for the panes and the next step (``_local_relation``);
    a step that closes no window reads no table and hands the panes callback an empty relation
    (``_no_panes``)."""

    def __init__(self, step: NativeStep, checkpoint: str, ordered: bool = False):
        self.step = step
        self.ordered = ordered
        self.root = Path(checkpoint) / STATE_DIR
        self.root.mkdir(parents=True, exist_ok=True)
        self._schema: ST.StructType | None = None
        self._local: bool | None = None  # the tables' types allow collecting them (``_collects``)
        self._last: tuple[tuple, DataFrame] | None = None  # the tables the last step left, read back
        self._empty: tuple | None = None  # (session, the panes of a step that closes no window)

    def _read(self, spark, paths: list[str], written: bool = False) -> DataFrame:
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

    def _no_panes(self, spark, paths: list[str]) -> DataFrame:
        """The panes of a step that closes no window: an empty relation, which Spark's optimizer
        knows as one, so the callback's job reads no table and shuffles nothing. Built once per
        session (a plan costs an analysis, ~10-20 ms per micro-batch on Nexmark q12), over an
        empty directory with the tables' schema (read from ``paths`` the first time)."""
        if self._schema is None:
            self._read(spark, paths, written=True)
        session = getattr(spark, "_jsparkSession", None)  # (none: Spark Connect; built each time)
        if self._empty is None or session is None or not self._empty[0].equals(session):
            empty = self.root / "empty"
            empty.mkdir(exist_ok=True)
            none = spark.read.schema(self._schema).parquet(str(empty)).limit(0)
            self._empty = (session, self.step.closed(none, MIN_TIME, self.ordered, table=True))
        return self._empty[1]

    def _versions(self) -> list[int]:
        return sorted(int(d.name[1:]) for d in self.root.glob("v*") if (d / "meta.json").exists())

    def _meta(self, version: int) -> dict:
        meta = json.loads((self.root / f"v{version}" / "meta.json").read_text())
        if "tables" not in meta:  # (a state written before the tables were listed: its own table)
            meta["tables"] = [{"path": f"v{version}/windows", "rows": None, "ends": None}]
        return meta

    @staticmethod
    def _metrics(spark, path: Path) -> tuple[int | None, int]:
        """The step's largest watermark value and dead-letter flag (``GOT``, ``DEAD``), the
        maxima of two columns of the windows table it wrote: read from the Parquet footers'
        statistics (no Spark job); a Spark aggregate over the table if a file has none."""
        got, dead, _, _ = NativeStream._statistics(spark, path, ends=False)
        return got, dead

    @staticmethod
    def _statistics(spark, path: Path, ends: bool = True) -> tuple[int | None, int, int | None, tuple | None]:
        """``_metrics``, and the table's rows and (``ends``) its windows' smallest and largest
        end (None: no window, or unknown), from the footers; rows and ends None when a file has
        none."""
        import pyarrow.parquet as pq

        best: dict[str, int | None] = {GOT: None, DEAD: None, **({WE: None} if ends else {})}
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
                            if c == WE:
                                least = st.min if least is None else min(least, st.min)
        except (LookupError, ValueError, OSError):
            row = spark.read.parquet(str(path)).agg(F.max(GOT).alias(GOT), F.max(DEAD).alias(DEAD)).first()
            best, rows = {GOT: row[GOT], DEAD: row[DEAD]}, None
        return best[GOT], int(best[DEAD] or 0), rows, None if best.get(WE) is None else (least, best[WE])

    def _rewrites(self, tables: list[dict], wm: int, advance: int) -> bool:
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
        return self._closing(tables, wm + CLOSING_STEPS * advance)

    def _write(self, table: DataFrame, path: Path, batch: DataFrame, kept: int | None):
        """Writes a step's windows ``table`` (``batch``: its micro-batch; ``kept``: the kept
        rows it rewrites): collected to the driver when ``_collects``, else by a Spark job. The
        collected table (pyarrow; None when a Spark job wrote it)."""
        if not self._collects(batch, kept):
            table.write.options(**_WRITE_OPTIONS).parquet(str(path))
            return None
        import pyarrow as pa
        import pyarrow.parquet as pq

        # (the batches as they come, every field made nullable: Spark's schema says a struct's
        # field is never null and leaves nulls in it where the struct is null, on which
        # PySpark's toArrow and pyarrow's Parquet writer fail; Spark reads a table with every
        # field nullable anyway)
        got = pa.Table.from_batches(table._collect_as_arrow(empty_list_if_zero_records=False))
        got = got.cast(pa.schema([_nullable(f) for f in got.schema]))
        path.mkdir(parents=True)
        pq.write_table(got, path / "part-00000.parquet")
        return got

    def _local_relation(self, spark, got) -> DataFrame | None:
        """The table a step collected (``got``) as a local relation in one partition (see
        ``LOCAL_ROWS``); None when there is none or it is too large. (One partition: an
        aggregate of all the panes then needs no shuffle; measured ~30 ms less per micro-batch
        than two partitions, on a callback's aggregate over 40 windows.)"""
        if got is None or got.num_rows > LOCAL_ROWS:
            return None
        return spark.createDataFrame(got, schema=self._schema).coalesce(1)

    def _collects(self, batch: DataFrame, kept: int | None) -> bool:
        """Whether the step collects its table to the driver (see ``COLLECT_ROWS``): it rewrites
        ``kept`` rows at most, the table's types are known (from an earlier table) to keep, and
        Spark's estimate of the micro-batch's size is small."""
        if kept is None or kept > COLLECT_ROWS or self._schema is None or not hasattr(batch, "_collect_as_arrow"):
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

    def _closing(self, tables: list[dict], wm: int) -> bool:
        """Whether a window of ``tables`` may give a pane at watermark ``wm``: for the default
        trigger, when one expires by then (the tables' smallest window ends; rows unknown: it
        may); after_watermark may fire at any step."""
        if self.step.fires:
            return True
        return any(t["rows"] is None or t["ends"] is not None and self.step.expires_at(t["ends"][0]) <= wm
                   for t in tables)

    def run(self, batch: DataFrame, batch_id: int, on_panes, on_dead_letters) -> None:
        """One micro-batch: ``batch``, the stream's rows prepared (``planner._prepare``) with the
        step's ``row_columns()``."""
        spark = batch.sparkSession
        step = self.step
        prior = [v for v in self._versions() if v < batch_id]
        here = self.root / f"v{batch_id}"
        shutil.rmtree(here, ignore_errors=True)
        with plan_building():
            if prior:
                meta = self._meta(prior[-1])
                wm, tables, advance = meta["watermark"], meta["tables"], meta.get("advance", 0)
            else:
                wm, tables, advance = MIN_TIME, [], 0
            rewrite = self._rewrites(tables, wm, advance)
            state = step.open(self._read(spark, [t["path"] for t in tables]), wm, metrics=True) \
                if rewrite and tables else None
            # one job, one pass over the rows: the windows table it writes also holds the step's
            # largest watermark value and whether it has dead letters (``on_time``).
            # The rows are not persisted: each job reads only the columns it needs (measured
            # faster than caching)
            good = step.on_time(batch, wm, batch_id)
            kept = _rows(tables) if rewrite else 0  # (the kept rows it rewrites)
            collected = self._write(step.combine(good, state, wm, metrics=True), here / "windows", batch, kept)
            got, dead, rows, ends = self._statistics(spark, here / "windows")
            new_wm = step.watermark_after(got, wm)
            table = {"path": f"v{batch_id}/windows", "rows": rows, "ends": ends}
            before = [table] if rewrite else [*tables, table]
            paths = [t["path"] for t in before]
            # (the step's table, when it is all the open windows, as a local relation: the next
            # step's state, as ``_read`` keeps it; else the next step lists its tables anew)
            local = self._local_relation(spark, collected) if rewrite else None
            self._last = None if local is None else (tuple(paths), local)
            if not self._closing(before, new_wm):
                # (no window closes: no table read, the same empty relation every time)
                panes = self._no_panes(spark, paths)
            else:
                windows = self._read(spark, paths, written=True) if local is None else local
                if rewrite:
                    panes = step.closed(windows, new_wm, self.ordered, table=True)
                else:
                    panes = step.due(windows, wm, new_wm, self.ordered)
        # a table leaves the list once all its windows expired (no statistics: it stays; no
        # window, only the group of rows in none: it goes)
        after = [t for t in before if t["rows"] is None
                 or t["ends"] is not None and step.expires_at(t["ends"][1]) > new_wm]
        # (how far the watermark moved: no history yet, or the end of the input, counts as 0)
        moved = new_wm - wm if MIN_TIME < wm and new_wm < END_OF_INPUT else 0
        # the version counts once its meta is written: a batch run again reads the one before
        (here / "meta.json").write_text(json.dumps({"watermark": new_wm, "tables": after, "advance": moved}))
        if dead:  # (a micro-batch without dead letters does not call the callback: no empty job)
            with plan_building():
                dead_letters = step.dead_letters(batch, wm, stream=True)
            on_dead_letters(dead_letters, batch_id)
        on_panes(panes, batch_id)
        self._clean(batch_id)

    def _clean(self, batch_id: int) -> None:
        """Removes the versions neither this step's nor the one before's meta needs (the one
        before: Spark may run this micro-batch again, from it)."""
        keep = {f"v{batch_id}", f"v{batch_id - 1}"}
        for v in (batch_id, batch_id - 1):
            try:
                keep.update(t["path"].split("/")[0] for t in self._meta(v)["tables"])
            except (OSError, ValueError, KeyError):
                pass
        for v in self._versions():
            if v < batch_id and f"v{v}" not in keep:
                shutil.rmtree(self.root / f"v{v}", ignore_errors=True)
