"""A run spec checked against the machine before Spark starts: the source's path and files, the
columns the pipeline reads (against ``source.schema`` when one is declared, else against the
columns Spark inferred, before the query starts), where the sinks and the checkpoint write, and
the sinks' callbacks. Each problem is a ``FieldError`` naming the field."""

from __future__ import annotations

import glob
import os
import re
import uuid
from pathlib import Path

from .core.windows import Sessions
from .refs import load_callback
from .spec import FieldError, RunSpec, SourceSpec

FILE_FORMATS = ("json", "csv", "parquet")


def check_spec(spec: RunSpec) -> list[FieldError]:
    """What a spec gets wrong that needs no file: the columns the pipeline reads against a
    declared ``source.schema``, and the sinks' callbacks."""
    errors = []
    declared = schema_columns(spec.source.schema_) if spec.source.schema_ else None
    if declared is not None:
        errors += check_columns(spec, list(declared), "source.schema")
    for field, sink in (("sink", spec.sink), ("dead_letter", spec.dead_letter)):
        if sink is not None and sink.format == "callback" and sink.callback:
            try:
                load_callback(sink.callback, f"{field}.callback")
            except ValueError as e:
                f, _, reason = str(e).partition(": ")
                errors.append(FieldError(f, reason))
    return errors


def check_run(spec: RunSpec, create: bool = False) -> list[FieldError]:
    """Every problem of a run spec that shows before Spark starts: ``check_spec``'s, the source's
    files, where the sinks and the checkpoint write. ``create``: make the sinks' and the
    checkpoint's directories (a write is the only sure test that one can write there)."""
    return check_source(spec.source) + check_spec(spec) + check_outputs(spec, create)


def check_outputs(spec, create: bool = False) -> list[FieldError]:
    """Whether a run spec's file sinks (``sink``, ``dead_letter``) and its ``checkpoint`` can be
    written (a single-stage or a multi-stage run spec: both have these fields)."""
    errors = []
    if spec.sink.format == "stdout" and spec.dead_letter is not None and spec.dead_letter.format == "stdout":
        errors.append(
            FieldError(
                "dead_letter.format",
                "stdout carries the panes as JSON lines: write the dead letters to a file, or to the console "
                "(its tables then go to stderr)",
            )
        )
    for field, sink in (("sink", spec.sink), ("dead_letter", spec.dead_letter)):
        if sink is not None and sink.format in FILE_FORMATS and sink.path:
            problem = writable_directory(sink.path, create)
            if problem:
                errors.append(FieldError(f"{field}.path", problem))
    if spec.checkpoint:
        problem = writable_directory(spec.checkpoint, create)
        if problem:
            errors.append(FieldError("checkpoint", problem))
    return errors


def local_path(path: str) -> str | None:
    """The local file system path of a spec's path; None for another file system (``s3a://``...)."""
    if path.startswith("file:"):
        return re.sub(r"^file:(//)?", "", path)
    return None if "://" in path else path


def check_source(src: SourceSpec) -> list[FieldError]:
    if src.format not in FILE_FORMATS or not src.path:
        return []
    path = local_path(src.path)
    if path is None:
        return []
    if glob.has_magic(path):
        files = [f for f in glob.glob(path) if Path(f).is_file() or _data_files(Path(f))]
        if not files and not src.schema_:
            return [
                FieldError(
                    "source.path",
                    f"nothing matches {path}, and without source.schema panes cannot "
                    f"know the columns (declare source.schema to start on no files)",
                )
            ]
        return []
    p = Path(path)
    if not p.exists():
        return [FieldError("source.path", f"no such file or directory: {path}")]
    if p.is_dir() and not src.schema_ and not _data_files(p):
        return [
            FieldError(
                "source.path",
                f"{path} holds no files, and without source.schema panes cannot know "
                f"the columns (declare source.schema to start on an empty directory)",
            )
        ]
    return []


def _data_files(directory: Path) -> bool:
    """Whether a directory holds a file Spark's file source reads (not hidden, not _metadata)."""
    for _root, dirs, files in os.walk(directory):
        dirs[:] = [d for d in dirs if not d.startswith((".", "_"))]
        if any(not f.startswith((".", "_")) for f in files):
            return True
    return False


def check_columns(spec: RunSpec, columns: list[str], where: str) -> list[FieldError]:
    """The columns the pipeline reads that ``columns`` (the source's, as ``where`` names them) lacks."""
    have = set(columns)
    listed = ", ".join(columns)

    def missing(c: str) -> str:
        return f"no column {c!r} in {where} ({listed})"

    errors = []
    if spec.event_time_column and spec.event_time_column not in have:
        errors.append(FieldError("event_time", missing(spec.event_time_column)))
    errors += [FieldError("key", missing(k)) for k in spec.key if k not in have]
    for out in spec.aggregates or {}:  # (none: a window pipeline, which reads every column)
        c = spec.aggregate(out).fn.column
        if c not in (None, "*") and c not in have:
            errors.append(FieldError("aggregates", f"{out}: {missing(c)}"))
    w = spec.to_pipeline().window
    if isinstance(w, Sessions) and w.gap_column and w.gap_column not in have:
        errors.append(FieldError("window.session.gap_column", missing(w.gap_column)))
    return errors


def writable_directory(path: str, create: bool) -> str | None:
    """Why panes cannot write a directory at ``path`` (None: it can). ``create``: make it, and
    write and remove a file in it."""
    local = local_path(path)
    if local is None:
        return None
    p = Path(local)
    if p.exists() and not p.is_dir():
        return f"cannot write to {local}: it is a file, not a directory"
    ancestor = next(a for a in (p, *p.parents) if a.exists())
    if not ancestor.is_dir():
        return f"cannot write to {local}: {ancestor} is a file, not a directory"
    if not os.access(ancestor, os.W_OK | os.X_OK):
        return f"cannot write to {local}: {ancestor} is not writable"
    if create:
        try:
            p.mkdir(parents=True, exist_ok=True)
            probe = p / f".panes-probe-{uuid.uuid4().hex}"
            probe.write_text("")
            probe.unlink()
        except OSError as e:
            return f"cannot write to {local}: {e.strerror or e}"
    return None


_IDENT = re.compile(r"\s*(`(?:[^`]|``)+`|[^\s:`]+)\s*:?\s*(.*)$", re.S)


def schema_columns(ddl: str) -> dict[str, str] | None:
    """The top-level columns of a DDL schema (``"a STRING, `b c` STRUCT<x: INT, y: LONG>"``) as
    {name: type}; None when it cannot be read here (Spark reads it later and says what is wrong)."""
    parts, depth, cur, quoted = [], 0, "", False
    for ch in ddl:
        if ch == "`":
            quoted = not quoted
        elif not quoted and ch in "<(":
            depth += 1
        elif not quoted and ch in ">)":
            depth -= 1
        if ch == "," and depth == 0 and not quoted:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    out: dict[str, str] = {}
    for part in parts:
        m = _IDENT.match(part)
        if not m or not m.group(2).strip():
            return None
        name = m.group(1)
        if name.startswith("`"):
            name = name[1:-1].replace("``", "`")
        out[name] = m.group(2).strip()
    return out
