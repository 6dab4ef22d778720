"""``panes state SPEC`` and ``panes.state(spec)``: the open windows of a stream's checkpoint, with their
current aggregates, the watermark and what no pane has shown yet (Kafka Streams' window-store
``fetch(key, from, to)``). It reads the last committed version and writes nothing: safe while the
query runs. The plan is the one the checkpoint was started on (``panes/state.json``); the readers
are in ``panes.spark.state_reader``, the rows' meaning in ``panes.core.open_windows``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from . import checkpoint as ck
from .core.engine import columnar
from .core.open_windows import WindowQuery
from .core.time import parse_instant
from .spec import RunSpec, SpecError, load_run_spec, parse_run_spec


def query_of(key: Any = None, time_from: Any = None, time_to: Any = None) -> WindowQuery:
    """A ``WindowQuery`` from a key (a value, or a sequence of values for a key of several
    columns) and two instants (ISO-8601 or epoch ms); ``SpecError`` names the one that is wrong."""
    keys = None if key is None else tuple(str(k) for k in (key if isinstance(key, (list, tuple)) else [key]))
    bounds = []
    for name, value in (("--from", time_from), ("--to", time_to)):
        try:
            bounds.append(None if value is None else parse_instant(value))
        except ValueError as e:
            raise SpecError(name, str(e)) from None
    return WindowQuery(keys, bounds[0], bounds[1])


def checkpoint_plan(spec: RunSpec) -> str:
    """The plan whose state the spec's checkpoint holds; ``SpecError`` when there is no such
    checkpoint or it was made by a spec whose state means something else."""
    if spec.mode != "stream" or not spec.checkpoint:
        raise SpecError("checkpoint", "panes state reads a stream's checkpoint: the spec names none")
    saved_path = Path(spec.checkpoint) / ck.PANES_DIR / "state.json"
    if not saved_path.exists():
        raise SpecError("checkpoint", f"{spec.checkpoint} holds no stream's state (no {saved_path})")
    saved = json.loads(saved_path.read_text()).get("state", {})
    plan = saved.get("plan")
    if plan not in ("native", "stateful"):
        raise SpecError("checkpoint", f"{saved_path}: unknown plan {plan!r}")
    meaning = ck.state_meaning(spec, plan)
    changed = [f for f in ck.STATE_FIELDS if _text(saved.get(f)) != _text(meaning.get(f))]
    if changed and changed[0] == "state_format":
        afresh = "start afresh with a new checkpoint directory"
        raise SpecError(changed[0], columnar.refusal(spec.checkpoint, saved.get(changed[0]), afresh))
    if changed:
        raise SpecError(
            changed[0],
            f"differs from what checkpoint {spec.checkpoint} was started with ({_text(saved.get(changed[0]))}): "
            "its state would be read with another meaning",
        )
    return plan


def _text(value: object) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def state(spec: str | Path | dict | RunSpec, key: Any = None, time_from: Any = None, time_to: Any = None, spark=None):
    """The open windows of the spec's checkpoint as a DataFrame: the key columns, ``window_start``,
    ``window_end``, one column per aggregate (its value now: what the window's next pane would
    carry), ``panes_emitted``, ``pending_records`` (records no pane has shown yet; null where the
    plan keeps no count: the native plan's default trigger), ``closes_at`` (the watermark at which the
    window gives its last pane and is dropped) and ``watermark``. ``key``, ``time_from``,
    ``time_to``: only the windows of that key whose start is in ``[time_from, time_to]``."""
    run = spec if isinstance(spec, RunSpec) else parse_run_spec(spec) if isinstance(spec, dict) else load_run_spec(spec)
    plan = checkpoint_plan(run)
    assert run.checkpoint is not None  # (checked by checkpoint_plan)
    query = query_of(key, time_from, time_to)
    pipeline = run.to_pipeline()
    why = query.check(pipeline)
    if why:
        raise SpecError("--key" if "key" in why else "--from", why)
    from .io import read_stream
    from .spark.session import get_spark
    from .spark.state_reader import NoState, native_windows, stateful_windows

    spark = spark or get_spark(run.spark.master, run.spark.shuffle_partitions, run.spark.conf)
    schema = read_stream(spark, run.source).schema
    read = native_windows if plan == "native" else stateful_windows
    try:
        return read(spark, run.checkpoint, pipeline, schema, query)
    except NoState:
        raise SpecError("checkpoint", f"{run.checkpoint} holds no committed micro-batch yet") from None
