"""``panes run``: a spec from its source to its sinks, as a stream or a batch, with progress."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from .io import read_batch, read_stream, write_batch
from .spark.columns import SPARK_END_MS
from .spark.planner import window_batch, window_stream
from .spark.session import get_spark
from .spec import RunSpec, SinkSpec

CONTROL = "__panes_wm_step"


def _console():
    from rich.console import Console

    return Console(stderr=True, soft_wrap=True)


def run_spec(spec: RunSpec, master: str | None = None, progress: bool = True, spark=None) -> dict:
    """Run a validated spec. Returns counts: panes, dead letters, batches."""
    spark = spark or get_spark(master or spec.spark.master, spec.spark.shuffle_partitions, spec.spark.conf)
    pipe = spec.to_pipeline()
    dl_sink = spec.dead_letter or SinkSpec(format="console")
    con = _console()
    if spec.mode == "batch":
        df = read_batch(spark, spec.source)
        res = window_batch(df, pipe, buckets=spec.spark.buckets)
        if progress:
            con.print(f"[bold]panes[/bold] batch: {res.plan}")
        panes = res.panes.cache()
        dead = res.dead_letters.cache()
        n_panes, n_dead = panes.count(), dead.count()
        write_batch(panes.orderBy(*[c for c in ("window_end", "window_start", *pipe.key)]), spec.sink, title="panes")
        if n_dead:
            write_batch(dead, dl_sink, title="dead letters")
        if progress:
            con.print(f"[green]done[/green]: {n_panes} panes, {n_dead} dead letters")
        return {"panes": n_panes, "dead_letters": n_dead, "batches": 1}
    return _run_stream(spark, spec, pipe, dl_sink, progress, con)


def _run_stream(spark, spec: RunSpec, pipe, dl_sink: SinkSpec, progress: bool, con) -> dict:
    checkpoint = spec.checkpoint or tempfile.mkdtemp(prefix="panes-checkpoint-")
    df = read_stream(spark, spec.source)
    control_dir = Path(checkpoint) / "control"
    control_dir.mkdir(parents=True, exist_ok=True)
    # a control stream beside the source: panes writes a watermark record there to end the input
    control = spark.readStream.schema(f"{CONTROL} LONG").json(str(control_dir))
    df = df.unionByName(control, allowMissingColumns=True)
    res = window_stream(df, pipe, buckets=spec.spark.buckets, control_wm=CONTROL, plan=spec.spark.plan,
                        heartbeat=False if spec.spark.available_now else None)
    counts = {"panes": 0, "dead_letters": 0, "batches": 0}

    def on_panes(panes, batch_id):
        panes = panes.cache()
        n = panes.count()
        if n:
            write_batch(panes, spec.sink, batch_id, title=f"panes (batch {batch_id})")
        counts["panes"] += n
        counts["batches"] += 1
        panes.unpersist()

    def on_dead_letters(dead, batch_id):
        dead = dead.cache()
        n = dead.count()
        if n:
            write_batch(dead, dl_sink, batch_id, title=f"dead letters (batch {batch_id})")
        counts["dead_letters"] += n
        dead.unpersist()

    def start():
        trigger = {}
        if spec.spark.available_now:
            trigger = {"availableNow": True}
        elif spec.spark.trigger_interval:
            trigger = {"processingTime": f"{spec.spark.trigger_interval} milliseconds"}
        return res.write_stream(on_panes, on_dead_letters, checkpoint, query_name=spec.name or "panes", **trigger)

    if progress:
        con.print(f"[bold]panes[/bold] stream: {res.plan}; checkpoint {checkpoint}")
    q = start()
    t0 = time.time()
    last = None
    try:
        while q.isActive:
            q.awaitTermination(1.0)
            last = _report(q, last, counts, progress, con, checkpoint)
            if spec.timeout and (time.time() - t0) * 1000 >= spec.timeout:
                break
        if spec.spark.available_now:
            # the input is complete: end it (watermark to +infinity) so every window closes,
            # then run once more so Spark fires the timers that watermark made due
            for n in range(2):
                (control_dir / f"end-{int(time.time() * 1000)}-{n}.json").write_text(
                    json.dumps({CONTROL: SPARK_END_MS}) + "\n")
                q.stop()
                q = start()
                while q.isActive:
                    q.awaitTermination(1.0)
                    last = _report(q, last, counts, progress, con, checkpoint)
    except KeyboardInterrupt:
        pass
    finally:
        q.stop()
    if q.exception():
        raise RuntimeError(str(q.exception()))
    if progress:
        con.print(f"[green]done[/green]: {counts['batches']} micro-batches, {counts['panes']} panes, "
                  f"{counts['dead_letters']} dead letters")
    return counts


def _native_watermark(checkpoint: str) -> str | None:
    """The native plan keeps its watermark beside its open windows (Spark's progress has none)."""
    from .core.time import END_OF_INPUT
    from .core.time import MIN_TIME, format_instant
    from .spark.native import STATE_DIR

    metas = sorted(Path(checkpoint, STATE_DIR).glob("v*/meta.json"), key=lambda m: int(m.parent.name[1:]))
    try:
        wm = json.loads(metas[-1].read_text())["watermark"] if metas else MIN_TIME
    except (OSError, ValueError, KeyError):  # a version being replaced or cleaned up
        return None
    if wm <= MIN_TIME:
        return None
    return "end of input" if wm >= END_OF_INPUT else format_instant(wm)


def _report(q, last, counts, progress, con, checkpoint=None):
    p = q.lastProgress
    if not p or p.get("batchId") == last:
        return last
    if progress:
        wm = (p.get("eventTime") or {}).get("watermark") or (checkpoint and _native_watermark(checkpoint)) or "-"
        con.print(f"batch {p['batchId']:>4}: {p.get('numInputRows', 0):>8} rows in, "
                  f"{p.get('processedRowsPerSecond', 0) or 0:>10.0f} rows/s, watermark {wm}, "
                  f"panes so far {counts['panes']}, dead letters {counts['dead_letters']}")
    return p.get("batchId")

