"""What a Spark Connect session can carry of panes, asked of the server before a query starts.

On Spark Connect, panes' Python runs where Spark puts it, on the server:

- the native streaming plan's step runs in the server's ``foreachBatch`` worker, and keeps its open
  windows as files under the checkpoint (``native.store``): the server must see the checkpoint at
  the path the client gave, and import panes;
- the stateful plan runs the core engine in the server's ``transformWithStateInPandas`` workers:
  the server's Python must import panes;
- the multi-stage plan (``stages``) runs every stage's step in the server's ``foreachBatch``
  worker, and keeps their state as files under the checkpoint: the server's Python must import
  panes, and the checkpoint be a path of the server's filesystem;
- bounded input: the native batch plan is Spark SQL only (nothing of panes on the server); the
  engine's batch plan (user combine functions) runs panes in ``applyInPandas`` workers, which also
  see the files a session adds with ``addArtifacts`` (``ship_panes``).

PySpark does not hand a session's artifacts to the streaming workers (foreachBatch, the
transformWithState workers), so the streaming plans need panes installed in the server's Python
(the one ``spark.pyspark.python`` names). ``server_python`` asks the server, with one small
``applyInPandas`` job, which panes its Python imports on its own and whether it sees given paths;
``stream_refusal`` turns the answer into the reason a plan cannot run, or None.
"""

from __future__ import annotations

import re
import tempfile
import uuid
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from ..core.pipeline import Pipeline
from .session import is_connect

__all__ = [
    "ConnectRefusal",
    "ServerPython",
    "check_bounded",
    "check_in_process_replay",
    "check_stateful_client",
    "check_stream",
    "is_connect",
    "local_checkpoint_refusal",
    "server_python",
    "ship_panes",
    "stateful_client_refusal",
    "stream_refusal",
]


class ConnectRefusal(ValueError):
    """A plan this Spark Connect session cannot carry, with the reason."""


@dataclass
class ServerPython:
    """What the server's Python workers import and see: ``executable``; ``installed``: the version
    of the panes they import without the session's artifacts (None: none); ``shipped``: panes is
    among the session's artifacts (``ship_panes``); ``seen``: each asked path, whether it exists
    there; ``error``: the job failed (a server whose Python cannot run pandas functions)."""

    executable: str = ""
    installed: str | None = None
    shipped: bool = False
    seen: dict[str, bool] = field(default_factory=dict)
    error: str | None = None


def server_python(spark: Any, paths: tuple[str, ...] = ()) -> ServerPython:
    """Asks the server (one ``applyInPandas`` job; its function pickled by value, so that a server
    without panes can run it)."""
    import json

    def probe(pdf):  # (self-contained: no name of this module in it)
        import importlib.abc
        import importlib.machinery
        import json as json_
        import os
        import re as re_
        import sys
        import zipimport

        import pandas as pd

        artifacts = os.getcwd()  # (a Connect session's Python workers run in its artifact directory)
        own = [p for p in sys.path if p and not os.path.abspath(p).startswith(artifacts)]
        found = importlib.machinery.PathFinder.find_spec("panes", own)
        version = None
        if (
            found is not None
            and found.origin
            and isinstance(found.loader, (importlib.abc.ResourceLoader, zipimport.zipimporter))
        ):
            text = found.loader.get_data(found.origin).decode()
            m = re_.search(r"__version__\s*=\s*[\"']([^\"']+)", text)
            version = m.group(1) if m else "unknown"
        shipped = (
            importlib.machinery.PathFinder.find_spec(
                "panes", [artifacts, *[os.path.join(artifacts, f) for f in os.listdir(artifacts)]]
            )
            is not None
        )
        seen = {p: os.path.exists(p) for p in json_.loads(pdf["paths"].iloc[0])}
        return pd.DataFrame(
            {"executable": [sys.executable], "installed": [version], "shipped": [shipped], "seen": [json_.dumps(seen)]}
        )

    asked = spark.createDataFrame([(0, json.dumps(list(paths)))], "k INT, paths STRING")
    try:
        row = (
            asked.groupBy("k")
            .applyInPandas(probe, "executable STRING, installed STRING, shipped BOOLEAN, seen STRING")
            .first()
        )
    except Exception as e:  # (PySpark's error: its first line says why)
        return ServerPython(error=str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__)
    return ServerPython(row["executable"], row["installed"], bool(row["shipped"]), json.loads(row["seen"]))


def local_checkpoint_refusal(checkpoint: str) -> str | None:
    """The native streaming plan keeps its open windows with local file operations: its checkpoint
    is a path, not a URI of another filesystem."""
    scheme = urlparse(checkpoint).scheme
    if scheme and scheme != "file" and not re.fullmatch(r"[A-Za-z]", scheme):  # (C:\\ on Windows)
        return (
            f"the native streaming plan keeps its open windows as local files under the checkpoint, and "
            f"{checkpoint} is on {scheme}://: give a path that every node mounts (or use plan: stateful)"
        )
    return None


#: where each streaming plan runs panes' Python on a Connect server
RUNS = {
    "native": "its step in the server's foreachBatch worker",
    "stateful": "the core engine in the server's transformWithStateInPandas workers",
    "stages": "every stage's step in the server's foreachBatch worker",
}


def stateful_client_refusal() -> str | None:
    """Why this process's Spark Connect client cannot build the stateful plan (None: it can): the
    plan is a ``transformWithStateInPandas``, which PySpark's Connect ``GroupedData`` has from 4.1 on."""
    import pyspark
    from pyspark.sql.connect.group import GroupedData

    if hasattr(GroupedData, "transformWithStateInPandas"):
        return None
    return (
        f"the stateful plan runs the core engine in transformWithStateInPandas, which the Spark Connect client "
        f"of PySpark {pyspark.__version__} does not have (4.1 on does): use a classic session, PySpark 4.1 or "
        f"later, or plan: native where the pipeline allows it"
    )


def check_stateful_client(spark: Any) -> None:
    """Refuses (``ConnectRefusal``) the stateful streaming plan on a Connect session whose client
    cannot build it (``stateful_client_refusal``); nothing on a classic session."""
    why = stateful_client_refusal() if is_connect(spark) else None
    if why:
        raise ConnectRefusal(f"Spark Connect cannot run this stream: {why}")


def stream_refusal(spark: Any, plan: str, checkpoint: str, client_files: tuple[str, ...] = ()) -> str | None:
    """Why this Connect session cannot run a streaming ``plan`` ("native", "stateful" or
    "stages": the multi-stage plan) with ``checkpoint``; None when it can. ``client_files``: paths
    this process wrote that the server must read (the native plan's state directory, a replay's
    input, ``panes run``'s control files)."""
    from .. import __version__

    if plan == "stateful":
        why = stateful_client_refusal()
        if why:
            return why
    if plan == "native":
        why = local_checkpoint_refusal(checkpoint)
        if why:
            return why
    if plan == "stages" and local_checkpoint_refusal(checkpoint):
        return (
            f"the multi-stage plan keeps every stage's state as local files under the checkpoint, and "
            f"{checkpoint} is on {urlparse(checkpoint).scheme}://: give a path on the server's filesystem"
        )
    server = server_python(spark, client_files)
    if server.error:
        return f"the Spark Connect server's Python cannot run panes' Python functions: {server.error}"
    where = f"the Spark Connect server's Python ({server.executable})"
    runs = RUNS[plan]
    name, plan = plan, "multi-stage" if plan == "stages" else plan  # (as the refusals say it)
    if server.installed is None:
        shipped = " (files added with addArtifacts do not reach those workers)" if server.shipped else ""
        return (
            f"panes is not installed in {where}: the {plan} plan runs {runs}{shipped}; "
            f"install panes {__version__} there"
        )
    if server.installed != __version__:
        return (
            f"{where} has panes {server.installed}, this process {__version__}: the {plan} plan's objects "
            f"are pickled from one to the other; install panes {__version__} there"
        )
    unseen = [p for p, ok in server.seen.items() if not ok]
    if unseen:
        native = " (the native plan keeps its open windows there; or use plan: stateful)" if name == "native" else ""
        return (
            f"the Spark Connect server does not see {unseen[0]}, which this process wrote: the {plan} plan "
            f"needs the server to share this machine's filesystem at the same paths{native}"
        )
    return None


def check_stream(spark: Any, plan: str, checkpoint: str, client_files: tuple[str, ...] = ()) -> None:
    """Refuses (``ConnectRefusal``) a streaming plan a Connect session cannot carry, before its query
    starts; nothing on a classic session."""
    if not is_connect(spark):
        return
    why = stream_refusal(spark, plan, checkpoint, client_files)
    if why:
        raise ConnectRefusal(f"Spark Connect cannot run this stream: {why}")


def check_in_process_replay(spark: Any, p: Pipeline) -> None:
    """Refuses (``ConnectRefusal``) the replay of a window pipeline, whose foreachBatch keeps the
    rows in this process (on Spark Connect it runs on the server, on a copy of the closure);
    nothing on a classic session or for another pipeline."""
    if p.window_pipeline is not None and is_connect(spark):
        raise ConnectRefusal(
            "Spark Connect cannot replay a window pipeline: its panes are collected in this process's foreachBatch, "
            "which Spark Connect runs on the server; replay it on a classic session (a master, not spark.remote)"
        )


def check_bounded(spark: Any) -> None:
    """The engine's batch plan (user combine functions) on a Connect session: panes must import in
    the server's pandas workers, installed there or shipped with the session (``ship_panes``, done
    here when neither)."""
    if not is_connect(spark):
        return
    server = server_python(spark)
    if server.error:
        raise ConnectRefusal(f"the Spark Connect server's Python cannot run the engine's batch plan: {server.error}")
    if server.installed is None and not server.shipped:
        ship_panes(spark)


def ship_panes(spark: Any) -> Path:
    """Adds this process's panes to a Connect session as a Python artifact (a zip: the server's
    pandas and UDF workers import it; its streaming workers do not). The zip's path."""
    import panes

    root = Path(panes.__file__).resolve().parent
    out = Path(tempfile.mkdtemp(prefix="panes-ship-")) / f"panes-{uuid.uuid4().hex[:8]}.zip"
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for f in sorted(root.rglob("*")):
            if f.is_file() and f.suffix in (".py", ".typed") and "__pycache__" not in f.parts:
                z.write(f, Path("panes") / f.relative_to(root))
    spark.addArtifacts(str(out), pyfile=True)
    return out
