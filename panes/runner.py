"""``panes run``: a spec from its source to its sinks, as a stream or a batch, with progress and the
account of every record (``panes.core.accounting``).

A stream's life on its checkpoint (``panes.checkpoint``): a run processes what is there (or runs
until stopped); with ``available_now`` it stops once it has, its open windows kept for the next run;
ending the input for good (``end_input``, ``panes run --end-input``) closes every window, after
which the checkpoint takes no more data. Before it reads anything, a run checks that the
checkpoint's state means what its spec says.

Progress comes from a ``StreamingQueryListener`` (``panes.spark.progress``): each micro-batch's counts
are the stateful plan's processor's (``write_stream``'s ``on_counts``: ``panes.spark.stateful_counts``)
or the native plan's observed metrics (``StreamingQueryProgress.observedMetrics``:
``panes.spark.metrics``), and what the sinks received.
"""

from __future__ import annotations

import json
import queue
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from pyspark.sql import functions as F

from . import checkpoint as ck
from .connect_sinks import ConnectSinks, with_absolute_paths
from .core.accounting import Accounting
from .core.records import unit_warning
from .core.rules import Reason
from .core.time import END_OF_INPUT, parse_instant, unit_hint
from .io import (
    OBSERVED_SINKS,
    WRITTEN_IN_ONE_JOB,
    check_kafka_sinks,
    observed_write,
    read_batch,
    read_stream,
    with_record_references,
    write_batch,
)
from .preflight import check_columns
from .report import BatchRow, write_report
from .spark import metrics
from .spark.columns import SPARK_END_MS
from .spark.connect import check_stream
from .spark.planner import window_batch, window_stream
from .spark.progress import ProgressListener
from .spark.results import NativeStreamResult, StatefulStreamResult
from .spark.session import get_spark, is_connect
from .spec import FieldError, RunSpec, SinkSpec, SpecError, dead_letter_sink

CONTROL = "__panes_wm_step"
#: how long a run waits at most for the listener's last progress event after its query stopped (s;
#: a loaded machine delivers it seconds late)
LAST_EVENT_WAIT = 60.0


def resolved_plan(spec: RunSpec) -> str:
    """The plan a stream runs on: the spec's, or with ``auto`` native where it can run the pipeline."""
    if spec.spark.plan != "auto":
        return spec.spark.plan
    from .spark.native import stream_unsupported

    return "native" if stream_unsupported(spec.to_pipeline()) is None else "stateful"


def checkpoint_problems(spec: RunSpec, end_input: bool) -> list[FieldError]:
    """Why a stream cannot go on from its checkpoint (``panes.checkpoint.check``); none for a batch."""
    if spec.mode != "stream" or not spec.checkpoint:
        return []
    return ck.check(spec.checkpoint, ck.state_meaning(spec, resolved_plan(spec)), end_input, spec.source)


#: the native plan's end of input as one step in the driver after the query's last micro-batch (one
#: query instead of two; ``StreamRun._end``)
DRIVER_SIDE_END = True


def run_spec(
    spec: RunSpec,
    master: str | None = None,
    progress: bool = True,
    spark=None,
    end_input: bool | None = None,
    report_path: str | None = None,
    remote: str | None = None,
) -> dict:
    """Run a validated spec. Returns the counts: panes, dead letters, batches, and the accounting
    (``records_in``, ``counted``, ...). ``end_input`` (default: the spec's ``spark.end_input``);
    ``master`` or ``remote`` (a Spark Connect URL) before the spec's; ``report_path``: write the
    run's page there (``panes.report``)."""
    end_input = spec.spark.end_input if end_input is None else end_input
    errors = checkpoint_problems(spec, end_input)
    if errors:
        raise SpecError.of(errors)
    spark = spark or session_for(spec, master, remote)
    if is_connect(spark):  # (the server resolves the paths: relative ones would be its own directory's)
        spec = with_absolute_paths(spec)
    check_kafka_sinks(spark, spec.sink, spec.dead_letter)
    report = Report(progress, report_path)
    if spec.mode == "batch":
        return _run_batch(spark, spec, report)
    return StreamRun(spark, spec, report, end_input).run()


def session_for(spec: RunSpec | Any, master: str | None = None, remote: str | None = None):
    """The session a run asks for: ``master`` or ``remote`` (the command line's), else the spec's
    ``spark.master`` or ``spark.remote``, else ``SPARK_REMOTE``, else ``PANES_MASTER`` (``get_spark``)."""
    s = spec.spark
    if master or remote:
        return get_spark(master, s.shuffle_partitions, s.conf, remote=remote)
    return get_spark(s.master, s.shuffle_partitions, s.conf, remote=getattr(s, "remote", None))


def _run_batch(spark, spec: RunSpec, report: Report) -> dict:
    started = time.time()
    pipe = spec.to_pipeline()
    df = read_batch(spark, spec.source)
    _check_source_columns(spec, df.columns)
    res = window_batch(df, pipe, buckets=spec.spark.bucket_count)
    report.line(f"[bold]panes[/bold] batch: {res.plan}")
    panes = res.panes.cache()
    dead = res.dead_letters.cache()
    n_panes = panes.count()
    reasons = Counter({r["reason"]: r["count"] for r in dead.groupBy("reason").count().collect()})
    n_dead = sum(reasons.values())
    write_batch(panes.orderBy(*[c for c in ("window_end", "window_start", *pipe.key)]), spec.sink, title="panes")
    if n_dead:
        write_batch(dead, dead_letter_sink(spec.sink, spec.dead_letter), title="dead letters")
    counts = {"panes": n_panes, "dead_letters": n_dead, "batches": 1}
    if report.enabled or report.path:  # (one more pass over the input: only to print it)
        totals = batch_accounting(metrics.bounded_counts(df, pipe), reasons)
        counts.update(totals.as_dict())
        report.line(f"[green]done[/green]: {n_panes} panes, {n_dead} dead letters; {totals.summary()}")
        row = BatchRow(0, int(started * 1000), time.time() - started, totals, n_panes, None)
        report.page(spec.name or "panes", str(res.plan), [row], totals)
    return counts


def _check_source_columns(spec: RunSpec, columns: list[str]) -> None:
    """The columns the pipeline reads must be in the source's (inferred: checked once they are known)."""
    if spec.source.schema_:
        return  # (a declared schema was checked before Spark started)
    errors = check_columns(spec, [c for c in columns if not c.startswith("__panes")], "the source's columns")
    if errors:
        raise SpecError.of(errors)


class Report:
    """Progress and results on stderr (rich), or nothing."""

    def __init__(self, enabled: bool, path: str | None = None):
        self.enabled = enabled
        self.path = path  # the run's page (``panes.report``), or None
        self._console: Any = None

    def page(self, title: str, plan: str, rows: list[BatchRow], totals: Accounting) -> None:
        if self.path:
            write_report(self.path, title, plan, rows, totals)

    def warn(self, text: str) -> None:
        """A warning, shown even without progress."""
        import sys

        print(f"warning: {text}", file=sys.stderr, flush=True)

    def line(self, text: str) -> None:
        if not self.enabled:
            return
        if self._console is None:
            from rich.console import Console

            self._console = Console(stderr=True, soft_wrap=True, highlight=False)
        self._console.print(text)


class StreamRun:
    """One ``panes run`` of a stream: the data pass, the input's end when asked, the counts."""

    def __init__(self, spark, spec: RunSpec, report: Report, end_input: bool):
        self.spark, self.spec, self.report, self.end_input = spark, spec, report, end_input
        self.checkpoint = spec.checkpoint or tempfile.mkdtemp(prefix="panes-checkpoint-")
        self.plan = resolved_plan(spec)
        self.dead_sink = dead_letter_sink(spec.sink, spec.dead_letter)
        self.control_dir = Path(self.checkpoint) / ck.CONTROL_DIR
        self.totals = Accounting()
        self.batches = 0
        self.panes = 0
        # what the sinks received per micro-batch, until its progress event is reported
        self.received: dict[int, dict] = {}
        self.events: queue.Queue = queue.Queue()
        self.history: list[BatchRow] = []  # each micro-batch reported, for the run's page
        #: on Spark Connect the callbacks run on the server: what they received comes back through Spark
        self.connect_sinks = (
            ConnectSinks(spec.sink, self.dead_sink, str(Path(self.checkpoint, ck.PANES_DIR, "sinks").resolve()))
            if is_connect(spark)
            else None
        )

    # -- the run -------------------------------------------------------------------------------------

    def run(self) -> dict:
        spec = self.spec
        if ck.finished(self.checkpoint, spec.source):
            self.report.line(
                f"[green]done[/green]: the input of {self.checkpoint} ended already, and nothing "
                f"new arrived since: nothing to do"
            )
            return {"panes": 0, "dead_letters": 0, "batches": 0, **self.totals.as_dict()}
        ck.record(self.checkpoint, ck.state_meaning(spec, self.plan))
        df = read_stream(self.spark, spec.source)
        _check_source_columns(spec, df.columns)
        df, records = with_record_references(df, spec.source)
        self.control_dir.mkdir(parents=True, exist_ok=True)
        # (on Spark Connect the server reads the control files this process writes)
        check_stream(self.spark, self.plan, self.checkpoint, (str(self.control_dir.resolve()),))
        # a control stream beside the source: panes writes watermark records there to end the input
        control = self.spark.readStream.schema(f"{CONTROL} LONG").json(str(self.control_dir))
        df = df.unionByName(control, allowMissingColumns=True)
        bounded = spec.spark.available_now or self.end_input
        self.result = window_stream(
            df,
            spec.to_pipeline(),
            buckets=spec.spark.bucket_count,
            control_wm=CONTROL,
            plan=spec.spark.plan,
            heartbeat=False if bounded else None,
            records=records,
        )
        self.report.line(f"[bold]panes[/bold] stream: {self.result.plan}; checkpoint {self.checkpoint}")
        # (a run killed while Spark planned a micro-batch: its files are listed anew, see there)
        ck.drop_unplanned_files(self.checkpoint)
        listener = self._listen()
        try:
            complete = self._pass(bounded)
            if self.end_input and complete:
                self._end()
            elif self.end_input:
                self.report.line("stopped before the source was read: the input was not ended")
        finally:
            self.spark.streams.removeListener(listener)
        self._done()
        self.report.page(self.spec.name or "panes", str(self.result.plan), self.history, self.totals)
        return {
            "panes": self.panes,
            "dead_letters": self.totals.dead_letters,
            "batches": self.batches,
            **self.totals.as_dict(),
        }

    def _start(self, bounded: bool):
        trigger: dict = {}
        if bounded:
            trigger = {"availableNow": True}
        elif self.spec.spark.trigger_interval:
            trigger = {"processingTime": f"{self.spec.spark.trigger_interval} milliseconds"}
        stateful = isinstance(self.result, StatefulStreamResult)
        if self.connect_sinks:
            on_panes, on_dead_letters, *on_counts = self.connect_sinks.callbacks(with_counts=stateful)
        else:
            on_panes, on_dead_letters, on_counts = self._on_panes, self._on_dead_letters, [self._on_counts]
        if stateful:  # (the stateful plan's processor counts: the native plan's counts are observed)
            trigger["on_counts"] = on_counts[0]
        return self.result.write_stream(
            on_panes, on_dead_letters, self.checkpoint, query_name=self.spec.name or "panes", **trigger
        )

    def _pass(self, bounded: bool) -> bool:
        """Run the query until it ends (bounded: what is there now), is stopped, or times out;
        whether it ended by itself."""
        q = self.query = self._start(bounded)
        self.query_id = str(q.id)
        t0 = time.time()
        complete = False
        try:
            while q.isActive:
                self._drain(timeout=1.0)
                if self.spec.timeout and (time.time() - t0) * 1000 >= self.spec.timeout:
                    break
            else:
                complete = True
        except KeyboardInterrupt:
            self.report.line("stopping (interrupted)")
        finally:
            q.stop()
        last = (q.lastProgress or {}).get("batchId")
        deadline = time.time() + LAST_EVENT_WAIT
        while last is not None and self.last_batch < last and time.time() < deadline:
            self._drain(timeout=0.2)
        self._drain(timeout=0)
        if q.exception():
            raise RuntimeError(str(q.exception()))
        return complete

    def _end(self) -> None:
        """End the input for good: a control record moves the watermark to +infinity, so every
        window closes. The native plan runs that micro-batch's step in this process, after the
        query's last (``NativeStreamResult.end_input``); the stateful plan passes the record
        through a query of its own, and a second pass lets Spark fire the timers that watermark
        made due. Each control file is written once: a run killed midway finishes the ending when
        run again with ``--end-input`` (its query reads the first file, which marks the ending
        begun, and ends the input as that micro-batch)."""
        result = self.result
        native_end = (
            DRIVER_SIDE_END
            and isinstance(result, NativeStreamResult)
            and result.end_rows is not None
            and not is_connect(self.spark)
        )
        for name in ck.END_FILES[:1] if native_end else ck.END_FILES:
            path = self.control_dir / name
            if not path.exists():
                tmp = path.with_name(f".{name}.tmp")  # (hidden: the file source skips it)
                tmp.write_text(json.dumps({CONTROL: SPARK_END_MS}) + "\n")
                tmp.replace(path)
            if not native_end:
                self._pass(bounded=True)
        if native_end:
            batch_id = self._last_committed() + 1
            t0 = time.time()
            assert isinstance(result, NativeStreamResult)
            result.end_input(self._on_panes, self._on_dead_letters, batch_id)
            self._account(batch_id, {}, (time.time() - t0) * 1000)
        ck.mark_ended(self.checkpoint, self.spec.source)

    def _last_committed(self) -> int:
        """The last micro-batch Spark committed in the checkpoint (-1: none)."""
        done = [int(f.name) for f in (Path(self.checkpoint) / "commits").glob("*") if f.name.isdigit()]
        return max(done, default=-1)

    # -- what the sinks receive ---------------------------------------------------------------------------

    def _on_panes(self, panes, batch_id: int) -> None:
        stream = getattr(self.result, "stream", None)
        if (stream is not None and stream.no_panes(panes)) or self.result.no_panes(panes):
            n = 0  # (the micro-batch closed no window: nothing to count or write)
        else:
            n = int(self._write(panes, self.spec.sink, batch_id, [F.count(F.lit(1)).alias("n")], "panes")["n"])
        self.received.setdefault(batch_id, {"panes": 0, "reasons": Counter()})["panes"] = n

    def _on_counts(self, counts: dict, batch_id: int) -> None:
        self.received.setdefault(batch_id, {"panes": 0, "reasons": Counter()})["counts"] = counts

    def _on_dead_letters(self, dead, batch_id: int) -> None:
        per_reason = [F.count_if(F.col("reason") == F.lit(r.value)).alias(r.value) for r in Reason]
        counted = self._write(dead, self.dead_sink, batch_id, per_reason, "dead letters")
        reasons = Counter({r: int(n) for r, n in counted.items() if n})
        self.received.setdefault(batch_id, {"panes": 0, "reasons": Counter()})["reasons"] = reasons

    def _write(self, df, sink: SinkSpec, batch_id: int, counts: list, what: str) -> dict:
        """Writes a micro-batch's ``df`` to ``sink`` unless it is empty; ``counts`` (aggregate
        Columns) of it. One job when Spark can observe them in the write (``observed_write``),
        else one to count the cached rows, and one to write them when there are some."""
        if sink.format in OBSERVED_SINKS or (sink.format in WRITTEN_IN_ONE_JOB and self.result.has_rows(df)):
            return observed_write(df, sink, batch_id, counts)
        df = df.cache()
        try:
            counted = df.agg(*counts).first().asDict()
            if any(counted.values()):
                write_batch(df, sink, batch_id, title=f"{what} (batch {batch_id})")
        finally:
            df.unpersist()
        return counted

    # -- progress -------------------------------------------------------------------------------------------

    last_batch = -1
    query_id = ""
    query = None

    def _listen(self):
        # (a query's end comes as its id: ``_drain`` returns at once rather than wait out its timeout)
        listener = ProgressListener(self.events.put, self.events.put)
        self.spark.streams.addListener(listener)
        return listener

    def _drain(self, timeout: float) -> None:
        """Report the progress events that arrived (waiting up to ``timeout`` for the first, or
        until the query ends)."""
        while True:
            try:
                p = self.events.get(timeout=timeout) if timeout else self.events.get_nowait()
            except queue.Empty:
                return
            timeout = 0
            if isinstance(p, str):  # (a query ended: its progress events came before)
                if p == self.query_id:
                    return
            elif str(p.id) == self.query_id and p.batchId > self.last_batch:
                self._progress(p)

    def _progress(self, p) -> None:
        self.last_batch = p.batchId
        deliver = getattr(self.query, "deliver", None)  # (the sink plan hands on its panes here, in order)
        if deliver is not None:
            deliver(p.batchId)
        observed = {name: row.asDict() for name, row in (p.observedMetrics or {}).items()}
        wm = (p.eventTime or {}).get("watermark")
        started = parse_instant(p.timestamp) if p.timestamp else None
        self._account(p.batchId, observed, (p.durationMs or {}).get("triggerExecution", 0), wm, started)

    def _account(
        self, batch_id: int, observed: dict, ms: float, wm: str | None = None, at_ms: int | None = None
    ) -> None:
        """A micro-batch's counts added to the run's, and its progress line."""
        got = (
            self.connect_sinks.received(self.spark, batch_id)
            if self.connect_sinks
            else self.received.pop(batch_id, {"panes": 0, "reasons": Counter()})
        )
        # (the stateful plan's processor counts; the native plan's counts are Spark's observed metrics)
        given = got.get("counts") or observed.get(metrics.INPUT) or {}
        self._unit_warning(given)
        counts = batch_accounting(given, got["reasons"])
        self.totals.add(counts)
        self.batches += 1
        self.panes += got["panes"]
        wm_ms = self._watermark_ms(wm, batch_id)
        wm = wm or self._native_watermark(batch_id)
        started = int(time.time() * 1000 - ms) if at_ms is None else at_ms
        self.history.append(BatchRow(batch_id, started, ms / 1000, counts, got["panes"], wm_ms))
        # (Spark's own rates count a row once per read of the micro-batch: the records in, timed)
        rate = f"{counts.records_in / (ms / 1000):.0f} records/s" if ms else "-"
        self.report.line(
            f"batch {batch_id:>4}: {counts.summary()}; watermark {wm}; {got['panes']} panes "
            f"({self.panes} so far); {rate}"
        )

    def _watermark_ms(self, text: str | None, batch_id: int) -> int | None:
        """The watermark after a micro-batch in ms (None: none yet): the native plan's own, or
        Spark's (``text``, from the progress)."""
        native = self._native_ms(batch_id)
        if native is not None:
            return native
        try:
            wm = parse_instant(text) if text else 0
        except ValueError:
            return None
        return END_OF_INPUT if wm >= SPARK_END_MS else wm if wm > 0 else None

    warned = False

    def _native_ms(self, batch_id: int) -> int | None:
        """The native plan's watermark after micro-batch ``batch_id`` (it keeps its own: Spark's
        progress has none): on Spark Connect, as the server's step left it in the store."""
        stream = getattr(self.result, "stream", None)
        if stream is None:
            return None
        return stream.watermark_at(batch_id) if self.connect_sinks else stream.watermark

    def _native_watermark(self, batch_id: int) -> str:
        """The native plan's watermark after micro-batch ``batch_id``, as the progress line says it."""
        from .core.time import END_OF_INPUT, format_instant

        wm = self._native_ms(batch_id)
        if wm is None:
            return "-"
        return "end of input" if wm >= END_OF_INPUT else format_instant(wm) or "-"

    def _unit_warning(self, counts: dict) -> None:
        """Say once when the event times look like another unit than the declared one."""
        pipe = self.spec.to_pipeline()
        for value in (counts.get("event_time_min"), counts.get("event_time_max")):
            if self.warned or value is None or value != value:
                continue
            unit = unit_hint(int(value), pipe.time_unit)
            if unit:
                self.warned = True
                self.report.warn(unit_warning(pipe, int(value), unit))

    def _done(self) -> None:
        state = (
            "input ended: every window closed"
            if ck.input_ended(self.checkpoint)
            else f"open windows kept in {self.checkpoint}"
        )
        self.report.line(
            f"[green]done[/green]: {self.batches} micro-batches, {self.panes} panes, "
            f"{self.totals.dead_letters} dead letters; {self.totals.summary()}; {state}"
        )


def batch_accounting(given: dict, reasons: Counter) -> Accounting:
    """A micro-batch's account: panes' counts (the stateful plan's processor's,
    ``panes.spark.stateful_counts``, or the native plan's observed metrics, ``panes.spark.metrics``)
    and the dead letters' reasons as the sink received them. On the native plan, the records
    counted are those in a window less the late ones."""
    out = Accounting(
        records_in=int(given.get("records_in") or 0), watermark_records=int(given.get("watermark_records") or 0)
    )
    out.reasons.update({str(r): int(n) for r, n in reasons.items()})
    if "in_window" not in given:  # (the engine counted them)
        out.counted, out.in_no_window = int(given.get("counted") or 0), int(given.get("in_no_window") or 0)
    else:
        out.counted = int(given.get("in_window") or 0) - out.reasons["late"]
        out.in_no_window = int(given.get("in_no_window") or 0)
    return out
