"""What a streaming checkpoint remembers beside Spark's own: what its state means, and where its input
stands. Both are checked before a run reads any data.

- ``<checkpoint>/panes/state.json``: the fields of the spec that shape the state (``STATE_FIELDS``:
  the windows, the key, the aggregates or window pipeline, the trigger, the accumulation mode, the
  lateness, the time column and unit, the plan, the buckets, and the stateful plan's state layout,
  ``state_format``, and its buckets' labels, ``spark.bucket_layout``). A run whose spec changes
  one of them (or a checkpoint whose state another panes laid out) is refused, naming the field;
  other changes (sinks, paths, the trigger interval, the watermark's delay) are allowed.
- The input's end: ending the input (every window closes) is a run's explicit choice
  (``--end-input``). It writes control records into the checkpoint's control stream
  (``<checkpoint>/control/end-<n>.json``), then, once every window closed, ``panes/ended.json``
  with the source's files as they were. A checkpoint whose input ended refuses more data; a run on
  it with nothing new to read (the same files: a run killed after the end, run again) has nothing
  to do; one whose ending was interrupted is finished by a run with ``--end-input``.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterable
from pathlib import Path

from .core.engine import columnar
from .core.engine.columnar import FORMAT as STATE_FORMAT
from .core.engine.columnar import start_afresh
from .preflight import FILE_FORMATS, local_path
from .spark import bucket_layout
from .spec import FieldError, RunSpec, SourceSpec

#: the spec's fields that shape a checkpoint's state, in the order they are reported
STATE_FIELDS = (
    "window",
    "key",
    "aggregates",
    "window_pipeline",
    "trigger",
    "accumulation",
    "allowed_lateness",
    "only_updated_panes",
    "event_time",
    "plan",
    "spark.buckets",
    "spark.bucket_layout",
    "state_format",
)
#: how the stateful plan lays its state out: checked only against a checkpoint of the same plan
LAYOUT_FIELDS = ("state_format", "spark.bucket_layout")
PANES_DIR = "panes"
CONTROL_DIR = "control"
#: the control files of the input's end, in the order the runner writes them
END_FILES = ("end-0.json", "end-1.json")

log = logging.getLogger(__name__)


def state_meaning(spec: RunSpec, plan: str) -> dict:
    """The spec's fields that shape the state of a stream on ``plan`` (native or stateful), as
    plain values (durations in ms)."""
    p = spec.to_pipeline()
    return {
        "window": p.window.describe(),
        "key": list(p.key),
        "aggregates": {a.output: a.fn.describe() for a in p.aggregates},
        # (a window's later panes and retractions restate what its earlier panes ran)
        "window_pipeline": p.window_pipeline.describe() if p.window_pipeline is not None else None,
        "trigger": p.trigger.describe(),
        "accumulation": p.accumulation,
        "allowed_lateness": p.allowed_lateness,
        "only_updated_panes": p.only_updated_panes,
        "event_time": {"column": p.event_time, "unit": p.time_unit} if p.event_time else None,
        "plan": plan,
        # (the native plan keeps no buckets: the number does not shape its state)
        "spark.buckets": spec.spark.bucket_count if plan == "stateful" else None,
        "spark.bucket_layout": bucket_layout.LAYOUT if plan == "stateful" else None,
        # how the stateful plan lays its state out (``core.engine.columnar``; none recorded: pickled)
        "state_format": STATE_FORMAT if plan == "stateful" else None,
    }


def text(value: object) -> str:
    """A recorded value as comparable text."""
    return json.dumps(value, sort_keys=True, separators=(", ", ": "), default=str)


def change_reason(checkpoint: str, field: str, old: object, new: object, afresh: str) -> str:
    """Why a run cannot go on from ``checkpoint`` whose ``field`` held ``old``, with ``new``
    (single-stage and multi-stage checkpoints alike)."""
    if field == "state_format":
        return columnar.refusal(checkpoint, old if isinstance(old, str) else None, afresh)
    if field == "spark.bucket_layout" and old is None:
        return bucket_layout.numbered_refusal(checkpoint, afresh)
    if field == "spark.buckets" and isinstance(old, int) and isinstance(new, int):
        # (unset, the number follows the shuffle partitions: say which number goes on)
        return bucket_layout.count_refusal(checkpoint, old, new, afresh)
    return (
        f"changed since checkpoint {checkpoint} was started ({text(old)} -> {text(new)}): "
        f"its state holds what the old spec made; {afresh}"
    )


def changed_fields(checkpoint: str, old: dict, meaning: dict, fields: Iterable[str]) -> list[FieldError]:
    """Each of ``fields`` whose recorded value (``old``) differs from ``meaning``'s, with why the run
    cannot go on (single-stage and multi-stage checkpoints alike). A checkpoint whose state an older
    layout holds cannot go on with any number of buckets: no line then says which number would."""
    afresh = start_afresh(checkpoint)
    changed = [f for f in fields if text(old.get(f)) != text(meaning.get(f))]
    if any(f in LAYOUT_FIELDS for f in changed):
        changed = [f for f in changed if f != "spark.buckets"]
    return [FieldError(f, change_reason(checkpoint, f, old.get(f), meaning.get(f), afresh)) for f in changed]


def check(checkpoint: str, meaning: dict, end_input: bool, source: SourceSpec | None = None) -> list[FieldError]:
    """Why a run with a spec of this ``meaning`` cannot go on from ``checkpoint`` (empty: it can).
    ``source``: the spec's; when the input ended and its files are those it ended with, a run may go
    on (``finished``: it has nothing to do)."""
    root = Path(checkpoint)
    afresh = start_afresh(checkpoint)
    errors = []
    saved = _read(root / PANES_DIR / "state.json")
    if saved is not None:
        old = saved.get("state", {})
        # (another plan: ``plan`` says so, not the layout of a state it does not keep)
        same_plan = old.get("plan") == meaning.get("plan")
        fields = [f for f in STATE_FIELDS if same_plan or f not in LAYOUT_FIELDS]
        errors += changed_fields(checkpoint, old, meaning, fields)
    ended = _read(root / PANES_DIR / "ended.json")
    if ended is not None:
        if source is None or not nothing_new(ended, source):
            errors.append(
                FieldError(
                    "checkpoint",
                    f"the input of {checkpoint} ended at {ended.get('at')} (a run "
                    f"with --end-input): every window closed, and more data would all "
                    f"be late; {afresh}",
                )
            )
    elif ending_begun(checkpoint) and not end_input:
        errors.append(
            FieldError(
                "checkpoint",
                f"an earlier run began ending the input of {checkpoint} and "
                f"was stopped: run again with --end-input to finish it",
            )
        )
    return errors


def record(checkpoint: str, meaning: dict) -> None:
    """Remember ``meaning`` in the checkpoint (once: a later run checks against it)."""
    path = Path(checkpoint) / PANES_DIR / "state.json"
    if not path.exists():
        _write(path, {"state": meaning, "since": _now()})


def ending_begun(checkpoint: str) -> bool:
    return (Path(checkpoint) / CONTROL_DIR / END_FILES[0]).exists()


def input_ended(checkpoint: str) -> bool:
    return (Path(checkpoint) / PANES_DIR / "ended.json").exists()


def finished(checkpoint: str, source: SourceSpec) -> bool:
    """Whether the input of ``checkpoint`` ended and ``source`` has nothing new since."""
    ended = _read(Path(checkpoint) / PANES_DIR / "ended.json")
    return ended is not None and nothing_new(ended, source)


def mark_ended(checkpoint: str, source: SourceSpec) -> None:
    _write(Path(checkpoint) / PANES_DIR / "ended.json", {"at": _now(), "files": source_files(source)})


def nothing_new(ended: dict, source: SourceSpec) -> bool:
    files = source_files(source)
    return files is not None and ended.get("files") == files


def source_files(source: SourceSpec) -> list | None:
    """A file source's files (path, size, modification time), sorted; None for another source."""
    path = local_path(source.path) if source.format in FILE_FORMATS and source.path else None
    if path is None:
        return None
    base = Path(path)
    found = [base] if base.is_file() else [f for f in base.rglob("*") if f.is_file()]
    files = (
        [f for f in found if not any(p.startswith((".", "_")) for p in f.relative_to(base).parts)]
        if base.is_dir()
        else found
    )
    return sorted([str(f), f.stat().st_size, f.stat().st_mtime_ns] for f in files)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _read(path: Path) -> dict | None:
    try:
        value = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise OSError(f"cannot read {path}: {e}") from None
    return value if isinstance(value, dict) else None


def _write(path: Path, value: dict) -> None:
    """Write a small JSON file whole or not at all (a run may be killed at any moment)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(value, indent=1) + "\n")
    os.replace(tmp, path)


def drop_unplanned_files(checkpoint: str) -> list[str]:
    """Removes the entries of Spark's file-source logs (``<checkpoint>/sources/<i>/<n>``) that no
    micro-batch planned: those past the source's offset in the last entry of the offsets log.
    Spark's file source writes the files of its next micro-batch into its log before Spark writes
    that micro-batch's offsets; a run killed between the two leaves an entry that a run again takes
    together with the next file into one micro-batch: with ``max_files_per_trigger: 1`` two files
    in one micro-batch, so the watermark moves once where it moved twice (a window's ON_TIME pane
    that stayed open becomes its last, other panes' timing may change). Without the entry, the run
    again lists those files anew, into micro-batches of the sizes asked for.

    An unplanned compaction (``<n>.compact``: every tenth entry by default,
    ``spark.sql.streaming.fileSource.log.compactInterval``) holds the entries since the compaction
    before it as well as its own files; it is removed when those entries are still there, holding
    what it holds (Spark deletes old entries only before the compaction that precedes the one it
    writes, so they are; a restarted query then reads its log up to entry ``n - 1``, and writes
    compaction ``n`` anew from them). Otherwise it is left, with a warning: its files then come in
    one micro-batch with the next ones, but nothing is lost. The names of the entries removed."""
    root = Path(checkpoint)
    batches = [int(f.name) for f in (root / "offsets").glob("*") if f.name.isdigit()]
    planned = _source_offsets(root / "offsets" / str(max(batches))) if batches else {}
    removed = []
    for source in sorted((root / "sources").glob("*")):
        if not source.name.isdigit():
            continue
        offset = planned.get(int(source.name), -1)
        if offset is None:  # (not a file source's offset)
            continue
        compactions = sorted(_compactions(source))
        for n in (n for n in compactions if n > offset):
            if _compacted_entries_kept(source, n, [m for m in compactions if m < n]):
                removed.append(_remove_entry(source, f"{n}{COMPACT}"))
            else:
                log.warning(
                    "%s: the file-source log's compaction %s%s was written for a micro-batch that was not "
                    "planned, and the entries it compacts are not all there: kept (its files come in one "
                    "micro-batch with the next ones)",
                    checkpoint,
                    n,
                    COMPACT,
                )
        for entry in source.glob("*"):
            if entry.name.isdigit() and int(entry.name) > offset:
                removed.append(_remove_entry(source, entry.name))
    return sorted(removed)


#: the suffix of a compaction of Spark's file-source log
COMPACT = ".compact"


def _compactions(source: Path) -> list[int]:
    names = (f.name[: -len(COMPACT)] for f in source.glob(f"*{COMPACT}"))
    return [int(n) for n in names if n.isdigit()]


def _remove_entry(source: Path, name: str) -> str:
    (source / name).unlink()
    (source / f".{name}.crc").unlink(missing_ok=True)
    return f"sources/{source.name}/{name}"


def _compacted_entries_kept(source: Path, n: int, earlier: list[int]) -> bool:
    """Whether the entries compaction ``n`` compacts (the compaction before it, else entry 0, up to
    entry ``n - 1``) are all in ``source`` and hold the files it holds before its own."""
    first = earlier[-1] if earlier else -1
    names = ([f"{first}{COMPACT}"] if first >= 0 else []) + [str(k) for k in range(first + 1, n)]
    if not all((source / name).is_file() for name in names):
        return False
    held = [e for e in _log_entries(source / f"{n}{COMPACT}") if e.get("batchId") != n]
    kept = [e for name in names for e in _log_entries(source / name)]
    return text(sorted(map(text, held))) == text(sorted(map(text, kept)))


def _log_entries(path: Path) -> list[dict]:
    """The file entries of an entry of a file-source log (``v1``, then one JSON object a line)."""
    return [json.loads(line) for line in path.read_text().splitlines()[1:] if line.strip()]


def _source_offsets(path: Path) -> dict[int, int | None]:
    """Each source's offset in an entry of Spark's offsets log (``v1``, the batch's metadata, then
    one line per source): a file source's log offset; -1 for a source without an offset yet
    (``-``); None for another kind of source."""
    lines = path.read_text().splitlines()[2:]
    out: dict[int, int | None] = {}
    for i, line in enumerate(lines):
        if line.strip() == "-":
            out[i] = -1
            continue
        try:
            value = json.loads(line)
        except ValueError:
            out[i] = None
            continue
        out[i] = value.get("logOffset") if isinstance(value, dict) and isinstance(value.get("logOffset"), int) else None
    return out
