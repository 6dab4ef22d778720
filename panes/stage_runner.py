"""``panes run`` for a multi-stage spec: each input read from its source, the stages run as a
stream (``panes.spark.stages``) or a batch, the output stage's panes to the sink.

A stream's life on its checkpoint is a single-stage stream's (``panes.runner``): before it reads
anything the run checks that the checkpoint's state means what the spec says
(``panes.stage_checkpoint``); with ``available_now`` it processes what is there and stops, the
open windows of every stage kept for the next run; ending the inputs (``--end-input``,
``spark.end_input``) is explicit, after which the checkpoint takes no more data. Each micro-batch
and the last line account for every input record (``core.stages.accounts``); ``report_path``
writes the run's page (``panes.report.write_stages_report``).

On Spark Connect the query's ``foreachBatch`` (every stage's step and the sinks) runs on the
server: the sinks are ``connect_sinks``', and each micro-batch's account comes back as a file the
server writes last (``connect_sinks.progress_writer``), read here while the query runs.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from pathlib import Path

from . import checkpoint as ck
from .connect_sinks import PROGRESS, ConnectSinks, progress_writer, read_progress, with_absolute_paths
from .core.stages.accounts import GraphAccounting, StagesProgress
from .core.time import END_OF_INPUT
from .io import read_batch, read_stream, write_batch
from .report import write_stages_report
from .runner import CONTROL, session_for
from .spark.columns import SPARK_END_MS
from .spark.session import is_connect
from .spark.stages.plan import stages_batch, stages_stream
from .spec import SinkSpec, SpecError, apply_run_options, dead_letter_sink
from .stage_checkpoint import checkpoint_errors, finished, mark_ended, run_errors, stages_meaning
from .stage_spec import StagesRunSpec


def console():
    from rich.console import Console

    return Console(stderr=True, soft_wrap=True, highlight=False)


def run_stages(
    spec: StagesRunSpec,
    master: str | None = None,
    progress: bool = True,
    spark=None,
    end_input: bool | None = None,
    report_path: str | None = None,
    remote: str | None = None,
) -> dict:
    """Run a validated multi-stage spec. Returns the counts: panes, dead letters, batches, and
    for a stream the account of its input records. ``end_input``: default ``spark.end_input``;
    ``report_path``: write the run's page there; ``master`` or ``remote`` (a Spark Connect URL)
    before the spec's."""
    end_input = spec.spark.end_input if end_input is None else end_input
    errors = checkpoint_errors(spec, end_input)
    if errors:
        raise SpecError.of(errors)
    spark = spark or session_for(spec, master, remote)
    if is_connect(spark):  # (the server resolves the paths: relative ones would be its own directory's)
        spec = with_absolute_paths(spec)
    dl_sink = dead_letter_sink(spec.sink, spec.dead_letter)
    con = console()
    if spec.mode == "batch":
        return run_batch(spark, spec, dl_sink, progress, con, report_path)
    return StagesRun(spark, spec, dl_sink, progress, con, end_input, report_path).run()


def run_stages_command(
    spec: StagesRunSpec,
    master: str | None,
    mode: str | None,
    to_stdout: bool,
    end_input: bool,
    quiet: bool,
    report_path: str | None = None,
    remote: str | None = None,
) -> dict:
    """``panes run`` of a multi-stage spec: its options applied, every check before Spark starts."""
    apply_run_options(spec, mode, to_stdout, end_input)
    errors = run_errors(spec, create=True) + checkpoint_errors(spec, spec.spark.end_input)
    if errors:
        raise SpecError.of(errors)
    return run_stages(spec, master=master, progress=not quiet, report_path=report_path, remote=remote)


def run_batch(spark, spec: StagesRunSpec, dl_sink: SinkSpec, progress: bool, con, report_path: str | None) -> dict:
    started = time.time()
    graph = spec.to_graph()
    res = stages_batch(
        {n: read_batch(spark, i.source) for n, i in spec.inputs.items()},
        graph,
        buckets=spec.spark.bucket_count,
        account=True,
    )
    if progress:
        con.print(f"[bold]panes[/bold] {res.plan}")
    panes, dead = res.panes, res.dead_letters
    n_panes, n_dead = panes.count(), dead.count()
    write_batch(panes.orderBy("window_end", "window_start", *graph.output_stage.key), spec.sink, title="panes")
    if n_dead:
        write_batch(dead, dl_sink, title="dead letters")
    res.unpersist()
    account = res.accounting or GraphAccounting()
    if progress:
        con.print(f"[green]done[/green]: {n_panes} panes, {n_dead} dead letters; {account.summary()}")
    if report_path:
        # (the batch plan ends every input after the rows: every watermark is at the end)
        ends = ({i.name: END_OF_INPUT for i in graph.inputs}, {s.name: END_OF_INPUT for s in graph.stages})
        row = StagesProgress(0, int(started * 1000), time.time() - started, account, *ends)
        write_stages_report(report_path, spec.name or "panes", str(res.plan), graph.output_stage.name, [row], [n_panes])
    return {**account.as_dict(), "panes": n_panes, "dead_letters": n_dead, "batches": 1}


def sink(target: SinkSpec, what: str, counts: dict):
    """A callback writing each micro-batch's panes (or dead letters) to a sink, counting them."""

    def write(df, batch_id):
        df = df.cache()
        n = df.count()
        if n:
            write_batch(df, target, batch_id, title=f"{what} (batch {batch_id})")
        counts["dead_letters" if what == "dead letters" else "panes"] += n
        counts["batches"] += what == "panes"
        df.unpersist()

    return write


class StagesRun:
    """One ``panes run`` of a multi-stage stream: the data pass, the inputs' end when asked."""

    def __init__(
        self,
        spark,
        spec: StagesRunSpec,
        dl_sink: SinkSpec,
        progress: bool,
        con,
        end_input: bool,
        report_path: str | None = None,
    ):
        self.spark, self.spec, self.dl_sink, self.progress, self.con = spark, spec, dl_sink, progress, con
        self.end_input, self.report_path = end_input, report_path
        self.checkpoint = spec.checkpoint or tempfile.mkdtemp(prefix="panes-checkpoint-")
        self.control_dir = Path(self.checkpoint) / ck.CONTROL_DIR
        self.counts = {"panes": 0, "dead_letters": 0, "batches": 0}
        self.totals = GraphAccounting()
        #: each micro-batch, and the output stage's panes it gave (for the run's page)
        self.history: list[StagesProgress] = []
        self.panes_of: list[int] = []
        #: on Spark Connect the callbacks run on the server: what they saw comes back through files
        self.where = str(Path(self.checkpoint, ck.PANES_DIR, "sinks").resolve())
        self.connect_sinks = ConnectSinks(spec.sink, dl_sink, self.where) if is_connect(spark) else None
        self.seen: set[int] = set()  # (on Spark Connect: the micro-batches read back)

    def say(self, text: str) -> None:
        if self.progress:
            self.con.print(text)

    def run(self) -> dict:
        spec = self.spec
        if spec.checkpoint and finished(spec):
            self.say(
                f"[green]done[/green]: the inputs of {self.checkpoint} ended already, and nothing new "
                f"arrived since: nothing to do"
            )
            return self.result_counts()
        ck.record(self.checkpoint, stages_meaning(spec))
        self.control_dir.mkdir(parents=True, exist_ok=True)
        # a control stream beside each source: panes writes a watermark record there to end the inputs
        frames = {}
        for name, inp in spec.inputs.items():
            control = self.spark.readStream.schema(f"{CONTROL} LONG").json(str(self.control_dir))
            frames[name] = read_stream(self.spark, inp.source).unionByName(control, allowMissingColumns=True)
        self.result = stages_stream(frames, spec.to_graph(), buckets=spec.spark.bucket_count, control_wm=CONTROL)
        self.say(f"[bold]panes[/bold] stream: {self.result.plan}; checkpoint {self.checkpoint}")
        # (a run killed while Spark planned a micro-batch: its files are listed anew, see there)
        ck.drop_unplanned_files(self.checkpoint)
        complete = self.one_pass(spec.spark.available_now or self.end_input)
        if self.end_input and complete:
            self.end()
        elif self.end_input:
            self.say("stopped before the sources were read: the inputs were not ended")
        self.done()
        if self.report_path:
            title, output = self.spec.name or "panes", self.spec.to_graph().output_stage.name
            write_stages_report(self.report_path, title, str(self.result.plan), output, self.history, self.panes_of)
        return self.result_counts()

    def result_counts(self) -> dict:
        """The panes, dead letters (as written) and micro-batches, and the account of the records."""
        return {**self.totals.as_dict(), **self.counts}

    def one_pass(self, bounded: bool) -> bool:
        """Run the query until it ends (bounded: what is there now), is stopped or times out;
        whether it ended by itself."""
        trigger: dict = {}
        if bounded:
            trigger = {"availableNow": True}
        elif self.spec.spark.trigger_interval:
            trigger = {"processingTime": f"{self.spec.spark.trigger_interval} milliseconds"}
        on_panes, on_dead_letters, extra = self.callbacks()
        q = self.result.write_stream(
            on_panes, on_dead_letters, self.checkpoint, query_name=self.spec.name or "panes", **extra, **trigger
        )
        t0, complete = time.time(), False
        try:
            while q.isActive:
                q.awaitTermination(1.0)
                self.from_server()
                if self.spec.timeout and (time.time() - t0) * 1000 >= self.spec.timeout:
                    break
            else:
                complete = True
        except KeyboardInterrupt:
            self.say("stopping (interrupted)")
        finally:
            q.stop()
        self.from_server()
        if q.exception():
            raise RuntimeError(str(q.exception()))
        return complete

    def callbacks(self) -> tuple:
        """The query's sinks (panes, dead letters) and its ``on_progress`` and ``client_files``;
        on Spark Connect self-contained ones, that run on the server (``connect_sinks``)."""
        if self.connect_sinks is None:
            panes, dead = sink(self.spec.sink, "panes", self.counts), sink(self.dl_sink, "dead letters", self.counts)
            return panes, dead, {"on_progress": self.accounted}
        shutil.rmtree(Path(self.where, PROGRESS), ignore_errors=True)  # (an earlier pass's)
        self.seen.clear()
        extra = {"on_progress": progress_writer(self.where), "client_files": (str(self.control_dir.resolve()),)}
        return (*self.connect_sinks.callbacks(), extra)

    def from_server(self) -> None:
        """On Spark Connect: the micro-batches the server finished since the last look, in order
        (this pass's: its directory is emptied when a pass starts)."""
        if self.connect_sinks is None:
            return
        done = Path(self.where, PROGRESS)
        ids = sorted(int(f.stem) for f in done.glob("*.json") if not f.name.startswith(".")) if done.is_dir() else []
        for batch_id in [i for i in ids if i not in self.seen]:
            batch = read_progress(self.where, batch_id)
            if batch is None:
                break
            got = self.connect_sinks.received(self.spark, batch_id)
            self.counts["panes"] += got["panes"]
            self.counts["dead_letters"] += sum(got["reasons"].values())
            self.counts["batches"] += 1
            self.accounted(batch)
            self.seen.add(batch_id)

    def accounted(self, batch: StagesProgress) -> None:
        """A micro-batch done (its sinks written): its account added to the run's, its line."""
        self.totals.add_graph(batch.accounting)
        self.history.append(batch)
        self.panes_of.append(self.counts["panes"] - sum(self.panes_of))
        self.say(f"batch {batch.batch_id:>4}: {batch.accounting.summary()}")

    def end(self) -> None:
        """End every input for good: a control record moves each input's watermark to +infinity,
        so every window of every stage closes. Each control file is written once: a run killed
        midway finishes the ending when run again with ``--end-input``."""
        for name in ck.END_FILES:
            path = self.control_dir / name
            if not path.exists():
                tmp = path.with_name(f".{name}.tmp")  # (hidden: the file source skips it)
                tmp.write_text(json.dumps({CONTROL: SPARK_END_MS}) + "\n")
                tmp.replace(path)
            self.one_pass(bounded=True)
        mark_ended(self.spec.model_copy(update={"checkpoint": self.checkpoint}))

    def done(self) -> None:
        state = (
            "inputs ended: every window closed"
            if ck.input_ended(self.checkpoint)
            else f"open windows kept in {self.checkpoint}"
        )
        c = self.counts
        self.say(
            f"[green]done[/green]: {c['batches']} micro-batches, {c['panes']} panes, {c['dead_letters']} dead "
            f"letters; {self.totals.summary()}; {state}"
        )
