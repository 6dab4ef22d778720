"""The sinks of a ``panes run`` on a Spark Connect session.

There, the query's callbacks run in the server's ``foreachBatch`` worker, pickled, on a copy of
what they close over: what they count stays on the server, and what they print goes to the server's
log. So each callback writes, with Spark, what the run reports (the panes' count, the dead letters
by reason) under ``<checkpoint>/panes/sinks``, and for a sink that prints (``console``, ``stdout``)
the micro-batch's rows too; this process reads them back, through Spark, when the micro-batch's
progress event arrives, and prints them here. File and Kafka sinks are written by the server as on
a classic session. A multi-stage stream's micro-batch, with its account and watermarks
(``StagesProgress``), is a JSON file the server writes last (``progress_writer``) and this process
reads (``read_progress``): ``panes run`` has checked that the server shares this filesystem.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TypeVar

from .core.accounting import Accounting
from .core.stages.accounts import GraphAccounting, StagesProgress
from .io import write_batch
from .preflight import local_path
from .spec import RunSpec, SinkSpec
from .stage_spec import StagesRunSpec

AnyRunSpec = TypeVar("AnyRunSpec", RunSpec, StagesRunSpec)

#: the sinks whose output is printed: this process prints them (else the server's log would)
PRINTED = ("console", "stdout")
COUNTS = "counts"


def absolute(path: str | None) -> str | None:
    """A local path as the server must see it: absolute (a relative one would be the server's
    working directory's); another file system's URI as it is."""
    if path is None or local_path(path) is None:
        return path
    return str(Path(local_path(path) or path).resolve())


def with_absolute_paths(spec: AnyRunSpec) -> AnyRunSpec:
    """``spec`` (a ``RunSpec`` or a multi-stage ``StagesRunSpec``) with its sources, sinks and
    checkpoint as absolute paths (``absolute``)."""
    out = spec.model_copy(deep=True)
    for source in [i.source for i in out.inputs.values()] if isinstance(out, StagesRunSpec) else [out.source]:
        source.path = absolute(source.path)
    for sink in (out.sink, out.dead_letter):
        if sink is not None:
            sink.path = absolute(sink.path)
    out.checkpoint = absolute(out.checkpoint)
    return out


def _deliver(df, sink: SinkSpec, batch_id: int, where: str) -> None:
    if sink.format in PRINTED:
        df.write.mode("overwrite").parquet(f"{where}/batch={batch_id}")
    else:
        write_batch(df, sink, batch_id)


def _count(spark, where: str, batch_id: int, kind: str, counts: dict[str, int]) -> None:
    rows = [(name, int(n)) for name, n in counts.items()] or [("", 0)]
    # (the kind is the directory's: read back as a partition column)
    spark.createDataFrame(rows, "name STRING, n LONG").coalesce(1).write.mode("overwrite").json(
        f"{where}/{COUNTS}/batch={batch_id}/kind={kind}"
    )


@dataclass(frozen=True)
class ConnectSinks:
    """A run's sinks on Spark Connect: ``callbacks()`` for ``write_stream`` (they close over only
    this object, which pickles), ``received(spark, batch_id)`` for the progress line."""

    sink: SinkSpec
    dead_sink: SinkSpec
    where: str  # the directory the callbacks write under (the server's path)

    def callbacks(self, with_counts: bool = False) -> tuple:
        """``on_panes`` and ``on_dead_letters``; ``with_counts``: and the stateful plan's
        ``on_counts``, whose counts ``on_panes`` writes with its own (called after it, every
        micro-batch)."""
        sink, dead_sink, where = self.sink, self.dead_sink, self.where
        counted: dict[int, dict] = {}  # (pickled with the callbacks: one copy on the server)

        def on_counts(counts: dict, batch_id: int) -> None:
            counted[batch_id] = counts

        def on_panes(df, batch_id: int) -> None:
            df = df.cache()
            n = df.count()
            if n:
                _deliver(df, sink, batch_id, f"{where}/panes")
            _count(df.sparkSession, where, batch_id, "panes", {**counted.pop(batch_id, {}), "panes": n})
            df.unpersist()

        def on_dead_letters(df, batch_id: int) -> None:
            df = df.cache()
            reasons = {r["reason"]: r["count"] for r in df.groupBy("reason").count().collect()}
            if reasons:
                _deliver(df, dead_sink, batch_id, f"{where}/dead")
            _count(df.sparkSession, where, batch_id, "dead", reasons)
            df.unpersist()

        return (on_panes, on_dead_letters, on_counts) if with_counts else (on_panes, on_dead_letters)

    def received(self, spark, batch_id: int) -> dict:
        """What the callbacks of micro-batch ``batch_id`` received (``{"panes": n, "reasons":
        Counter}``, and the stateful plan's ``"counts"``); their printed sinks' rows printed here."""
        got: dict = {"panes": 0, "reasons": Counter()}
        for r in _read(spark, "json", f"{self.where}/{COUNTS}/batch={batch_id}"):
            if r["kind"] == "panes" and r["name"] != "panes":
                got.setdefault("counts", {})[r["name"]] = int(r["n"])
            elif r["kind"] == "panes":
                got["panes"] = int(r["n"])
            elif r["n"]:
                got["reasons"][r["name"]] = int(r["n"])
        for kind, sink, title in (("dead", self.dead_sink, "dead letters"), ("panes", self.sink, "panes")):
            n = got["panes"] if kind == "panes" else sum(got["reasons"].values())
            if sink.format in PRINTED and n:
                rows = spark.read.parquet(f"{self.where}/{kind}/batch={batch_id}")
                write_batch(rows, sink, batch_id, title=f"{title} (batch {batch_id})")
        return got


def _read(spark, fmt: str, path: str) -> list:
    """The rows of a table the callbacks wrote; none when they wrote none."""
    from pyspark.errors import AnalysisException

    try:
        return getattr(spark.read, fmt)(path).collect()
    except AnalysisException as e:
        if "PATH_NOT_FOUND" in str(e):
            return []
        raise


PROGRESS = "progress"


def progress_writer(where: str):
    """A multi-stage stream's ``on_progress`` that runs on the server: each micro-batch as
    ``<where>/progress/<batch>.json``, written whole (renamed into place) after its sinks."""

    def on_progress(p: StagesProgress) -> None:
        path = Path(where, PROGRESS, f"{p.batch_id}.json")
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        account = {
            "inputs": {name: {**asdict(a), "reasons": dict(a.reasons)} for name, a in p.accounting.inputs.items()},
            "pane_letters": dict(p.accounting.pane_letters),
        }
        tmp.write_text(json.dumps({**vars(p), "accounting": account}))
        tmp.replace(path)

    return on_progress


def read_progress(where: str, batch_id: int) -> StagesProgress | None:
    """Micro-batch ``batch_id`` as the server wrote it (``progress_writer``); None: not yet."""
    path = Path(where, PROGRESS, f"{batch_id}.json")
    if not path.exists():
        return None
    doc = json.loads(path.read_text())
    account = GraphAccounting(pane_letters=Counter(doc["accounting"]["pane_letters"]))
    for name, a in doc["accounting"]["inputs"].items():
        account.add_input(name, Accounting(**{**a, "reasons": Counter(a["reasons"])}))
    return StagesProgress(
        doc["batch_id"], doc["started"], doc["seconds"], account, doc["input_watermarks"], doc["stage_watermarks"]
    )
