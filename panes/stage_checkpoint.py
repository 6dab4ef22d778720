"""What a multi-stage stream's checkpoint remembers, and what a run checks before Spark starts:
the single-stage rules of ``panes.checkpoint`` and ``panes.preflight`` over every input and stage.

- ``<checkpoint>/panes/state.json``: what the state means, one field per input and stage
  (``inputs.bids.event_time``, ``stages[1].window``, ...; ``stages``: their names in order;
  ``spark.buckets``). A run whose spec changes one is refused, naming the field; the sinks,
  sources' paths, the trigger interval, the watermarks' delays and the output stage may change.
- The inputs' end (``--end-input``): the control records of ``panes.checkpoint`` end every input;
  ``panes/ended.json`` then lists every input's files. A checkpoint whose inputs ended refuses
  more data; a run with nothing new has nothing to do; an interrupted ending asks for
  ``--end-input``.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from . import checkpoint as ck
from .core.engine.columnar import start_afresh
from .core.stages import StageGraph
from .preflight import check_outputs, check_source
from .spark import bucket_layout
from .spec import FieldError
from .stage_spec import StagesRunSpec

ENDED = "ended.json"


def stages_meaning(spec: StagesRunSpec, graph: StageGraph | None = None) -> dict:
    """The fields of a multi-stage spec that shape its stream's state, as plain values."""
    graph = graph or spec.to_graph()
    out: dict = {"stages": [s.name for s in graph.stages]}
    for name, inp in spec.inputs.items():
        out[f"inputs.{name}.event_time"] = inp.event_time
    for i, s in enumerate(graph.stages):
        at = f"stages[{i}]"
        out[f"{at}.from"] = list(s.sources)
        out[f"{at}.key"] = [list(k) for k in s.keys]
        out[f"{at}.window"] = graph.windows(s).describe()
        out[f"{at}.aggregates"] = {a.output: a.fn.describe() for a in s.aggregates}
        out[f"{at}.join"] = s.join if s.join is None or isinstance(s.join, str) else type(s.join).__name__
        out[f"{at}.trigger"] = s.trigger.describe()
        out[f"{at}.accumulation"] = s.accumulation
        out[f"{at}.allowed_lateness"] = s.allowed_lateness
        out[f"{at}.only_updated_panes"] = s.only_updated_panes
    out["spark.buckets"] = spec.spark.bucket_count
    out["spark.bucket_layout"] = bucket_layout.LAYOUT
    return out


def saved_meaning(checkpoint: str) -> dict | None:
    path = Path(checkpoint) / ck.PANES_DIR / "state.json"
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text()).get("state", {})
    except (OSError, ValueError) as e:
        raise OSError(f"cannot read {path}: {e}") from None


def meaning_errors(checkpoint: str, meaning: dict) -> list[FieldError]:
    """Each field whose meaning changed since the checkpoint was started."""
    old = saved_meaning(checkpoint)
    if old is None:
        return []
    return ck.changed_fields(checkpoint, old, meaning, dict.fromkeys([*meaning, *old]))


def input_files(spec: StagesRunSpec) -> dict[str, list | None]:
    return {name: ck.source_files(inp.source) for name, inp in spec.inputs.items()}


def ended(checkpoint: str) -> dict | None:
    path = Path(checkpoint) / ck.PANES_DIR / ENDED
    return json.loads(path.read_text()) if path.exists() else None


def finished(spec: StagesRunSpec) -> bool:
    """Whether the inputs of the spec's checkpoint ended and none has anything new since."""
    done = ended(spec.checkpoint) if spec.checkpoint else None
    files = input_files(spec)
    return done is not None and None not in files.values() and done.get("files") == files


def mark_ended(spec: StagesRunSpec) -> None:
    """Remember that the spec's inputs ended, with their files as they are now."""
    path = Path(str(spec.checkpoint)) / ck.PANES_DIR / ENDED
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{ENDED}.{os.getpid()}.tmp")
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    tmp.write_text(json.dumps({"at": at, "files": input_files(spec)}, indent=1) + "\n")
    os.replace(tmp, path)


def checkpoint_errors(spec: StagesRunSpec, end_input: bool) -> list[FieldError]:
    """Why a multi-stage stream cannot go on from its checkpoint (none for a batch)."""
    if spec.mode != "stream" or not spec.checkpoint:
        return []
    cp = spec.checkpoint
    errors = meaning_errors(cp, stages_meaning(spec))
    afresh = start_afresh(cp)
    done = ended(cp)
    if done is not None and not finished(spec):
        errors.append(
            FieldError(
                "checkpoint",
                f"the inputs of {cp} ended at {done.get('at')} (a run with --end-input): every window "
                f"closed, and more data would all be late; {afresh}",
            )
        )
    elif done is None and ck.ending_begun(cp) and not end_input:
        errors.append(
            FieldError(
                "checkpoint",
                f"an earlier run began ending the inputs of {cp} and was stopped: run again with "
                f"--end-input to finish it",
            )
        )
    return errors


def run_errors(spec: StagesRunSpec, create: bool = False) -> list[FieldError]:
    """What shows before Spark starts: each input's source, where the sinks and the checkpoint write."""
    errors = []
    for name, inp in spec.inputs.items():
        errors += [FieldError(f"inputs.{name}.{e.field}", e.reason) for e in check_source(inp.source)]
    return errors + check_outputs(spec, create)
