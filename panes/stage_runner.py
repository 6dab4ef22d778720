"""``panes run`` for a multi-stage spec: each input read from its source, the stages run as a
stream (``panes.spark.stages``) or a batch, the output stage's panes to the sink."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from .io import read_batch, read_stream, write_batch
from .runner import CONTROL
from .spark.columns import SPARK_END_MS
from .spark.session import get_spark
from .spark.stages.plan import stages_batch, stages_stream
from .spec import SinkSpec
from .stage_spec import StagesRunSpec


def console():
    from rich.console import Console

    return Console(stderr=True, soft_wrap=True)


def run_stages(spec: StagesRunSpec, master: str | None = None, progress: bool = True, spark=None) -> dict:
    """Run a validated multi-stage spec. Returns counts: panes, dead letters, batches."""
    spark = spark or get_spark(master or spec.spark.master, spec.spark.shuffle_partitions, spec.spark.conf)
    graph = spec.to_graph()
    dl_sink = spec.dead_letter or SinkSpec(format="console")
    con = console()
    if spec.mode == "batch":
        res = stages_batch(
            {n: read_batch(spark, i.source) for n, i in spec.inputs.items()}, graph, buckets=spec.spark.buckets
        )
        if progress:
            con.print(f"[bold]panes[/bold] {res.plan}")
        panes, dead = res.panes, res.dead_letters
        n_panes, n_dead = panes.count(), dead.count()
        write_batch(panes.orderBy("window_end", "window_start", *graph.output_stage.key), spec.sink, title="panes")
        if n_dead:
            write_batch(dead, dl_sink, title="dead letters")
        if progress:
            con.print(f"[green]done[/green]: {n_panes} panes, {n_dead} dead letters")
        return {"panes": n_panes, "dead_letters": n_dead, "batches": 1}
    return run_stream(spark, spec, dl_sink, progress, con)


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


def trigger_of(spec: StagesRunSpec) -> dict:
    if spec.spark.available_now:
        return {"availableNow": True}
    if spec.spark.trigger_interval:
        return {"processingTime": f"{spec.spark.trigger_interval} milliseconds"}
    return {}


def run_stream(spark, spec: StagesRunSpec, dl_sink: SinkSpec, progress: bool, con) -> dict:
    checkpoint = spec.checkpoint or tempfile.mkdtemp(prefix="panes-checkpoint-")
    control_dir = Path(checkpoint) / "control"
    control_dir.mkdir(parents=True, exist_ok=True)
    # a control stream beside each source: panes writes a watermark record there to end the inputs
    frames = {}
    for name, inp in spec.inputs.items():
        control = spark.readStream.schema(f"{CONTROL} LONG").json(str(control_dir))
        frames[name] = read_stream(spark, inp.source).unionByName(control, allowMissingColumns=True)
    res = stages_stream(frames, spec.to_graph(), buckets=spec.spark.buckets, control_wm=CONTROL)
    counts = {"panes": 0, "dead_letters": 0, "batches": 0}

    def start():
        return res.write_stream(
            sink(spec.sink, "panes", counts),
            sink(dl_sink, "dead letters", counts),
            checkpoint,
            query_name=spec.name or "panes",
            **trigger_of(spec),
        )

    if progress:
        con.print(f"[bold]panes[/bold] stream: {res.plan}; checkpoint {checkpoint}")
    q = start()
    t0 = time.time()
    try:
        while q.isActive:
            q.awaitTermination(1.0)
            if spec.timeout and (time.time() - t0) * 1000 >= spec.timeout:
                break
        if spec.spark.available_now:
            # the inputs are complete: end them, so every window of every stage closes
            (control_dir / f"end-{int(time.time() * 1000)}.json").write_text(json.dumps({CONTROL: SPARK_END_MS}) + "\n")
            q.stop()
            q = start()
            while q.isActive:
                q.awaitTermination(1.0)
    except KeyboardInterrupt:
        pass
    finally:
        q.stop()
    if q.exception():
        raise RuntimeError(str(q.exception()))
    if progress:
        con.print(
            f"[green]done[/green]: {counts['batches']} micro-batches, {counts['panes']} panes, "
            f"{counts['dead_letters']} dead letters"
        )
    return counts
