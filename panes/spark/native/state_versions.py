"""The versions of a stream's state under its checkpoint, as the native plans and the stages' plan
keep them: ``<root>/v<batch>/``, each committed by its ``meta.json``, written last and whole, so a
micro-batch that Spark runs again reads the version before it and writes its own anew. No Spark
import: the sink plan's tasks and commit read them too."""

from __future__ import annotations

import json
import os
from pathlib import Path

META = "meta.json"


def versions(root: Path) -> list[int]:
    """The committed versions, in order."""
    return sorted(int(d.name[1:]) for d in root.glob("v*") if d.name[1:].isdigit() and (d / META).exists())


def last_before(root: Path, batch_id: int) -> int | None:
    """The last committed version before ``batch_id`` (None: none)."""
    prior = [v for v in versions(root) if v < batch_id]
    return prior[-1] if prior else None


def read_meta(root: Path, version: int) -> dict:
    return json.loads((root / f"v{version}" / META).read_text())


def write_meta(root: Path, version: int, meta: dict) -> None:
    """Commits ``version``: whole or not at all (a process killed while writing it must not leave
    half a meta)."""
    path = root / f"v{version}" / META
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{META}.tmp")
    tmp.write_text(json.dumps(meta))
    os.replace(tmp, path)


def windows_meta(root: Path, version: int) -> dict:
    """A native windows store's meta (``store.NativeStream``, ``arrow_sink``): the watermark after
    the step and the tables that hold the open windows."""
    meta = read_meta(root, version)
    if "tables" not in meta:  # (a state written before the tables were listed: its own table)
        meta["tables"] = [{"path": f"v{version}/windows", "rows": None, "ends": None}]
    return meta
