"""Replay Apache Beam's trigger transcripts (``beam_trigger_transcripts.yaml`` here) against the core engine.

One transcript unit is one second. Elements' values are their timestamps. Each ``expect`` is matched
one-to-one against the panes emitted since the previous one, on the fields it lists; leftovers
are errors ("Unmatched output" for an expected pane nobody emitted, "Unexpected output" for an
emitted pane nobody expected), as in Beam's TranscriptTest.

Not compared: ``timestamp`` (panes carry no output timestamp; timestamp combiners are not a panes
feature) and ``state`` actions (Beam ignores them too).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

import numpy as np
import pandas as pd
import yaml

from panes.core import triggers as T
from panes.core.aggregates import Aggregate, CollectList
from panes.core.engine import TS, Engine
from panes.core.pipeline import Pipeline, WatermarkStrategy
from panes.core.windows import GlobalWindows, Hopping, Sessions, Tumbling

UNIT = 1000
NOT_COMPARED = ("timestamp",)


class TranscriptMismatch(AssertionError):
    pass


def load_transcripts(path: str) -> list[dict]:
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def _call(expr: str):
    """'Name(arg, k=v)' -> (name, args, kwargs) with nested calls parsed too."""
    node = ast.parse(expr.strip(), mode="eval").body
    return _node(node)


def _node(node):
    if isinstance(node, ast.Name):
        return (node.id, [], {})
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return (node.func.id, [_node(a) for a in node.args], {k.arg: _node(k.value) for k in node.keywords})
    if isinstance(node, ast.Constant):
        return node.value
    raise ValueError(f"cannot read {ast.dump(node)}")


def window_fn(expr: str | None):
    if expr is None:
        return GlobalWindows()
    name, args, kw = _call(expr)
    if name in ("FixedWindows", "CustomTimestampingFixedWindowsWindowFn"):
        return Tumbling(args[0] * UNIT, (args[1] if len(args) > 1 else 0) * UNIT)
    if name == "SlidingWindows":
        return Hopping(args[0] * UNIT, args[1] * UNIT, (args[2] if len(args) > 2 else 0) * UNIT)
    if name == "Sessions":
        return Sessions(gap=args[0] * UNIT)
    if name == "GlobalWindows":
        return GlobalWindows()
    raise ValueError(f"unsupported window_fn {expr}")


def trigger_fn(expr: str | None) -> T.Trigger:
    if expr is None:
        return T.BEAM_DEFAULT
    return _trigger(_call(expr))


def _trigger(c) -> T.Trigger:
    name, args, kw = c
    if name == "Default":
        return T.BEAM_DEFAULT
    if name == "AfterWatermark":
        early = _trigger(kw["early"]) if "early" in kw else None
        late = _trigger(kw["late"]) if "late" in kw else None
        return T.AfterWatermark(early, late)
    if name == "AfterCount":
        return T.AfterCount(args[0])
    if name == "AfterProcessingTime":
        return T.AfterProcessingTime(args[0] * UNIT)
    if name == "Repeatedly":
        return T.Repeatedly(_trigger(args[0]))
    if name == "AfterAny":
        return T.AfterAny(tuple(_trigger(a) for a in args))
    if name == "AfterAll":
        return T.AfterAll(tuple(_trigger(a) for a in args))
    if name == "AfterEach":
        return T.AfterEach(tuple(_trigger(a) for a in args))
    if name == "OrFinally":
        return T.OrFinally(_trigger(args[0]), _trigger(args[1]))
    if name == "Always":
        return T.Repeatedly(T.AfterCount(1))
    raise ValueError(f"unsupported trigger {name}")


def pipeline_of(doc: dict) -> Pipeline:
    return Pipeline(
        window=window_fn(doc.get("window_fn")),
        aggregates=(Aggregate("values", CollectList("v")),),
        watermark=WatermarkStrategy(punctuation=True),
        allowed_lateness=int(doc.get("allowed_lateness", 0)) * UNIT,
        trigger=trigger_fn(doc.get("trigger_fn")),
        accumulation=str(doc.get("accumulation_mode", "accumulating")).lower(),
    )


@dataclass
class Emitted:
    window: list
    values: list
    index: int
    nonspeculative_index: int
    early: bool
    late: bool
    final: bool


def run_transcript(doc: dict) -> int:
    """Replay one transcript; raise TranscriptMismatch on a difference. Returns the number of
    panes checked."""
    pipe = pipeline_of(doc)
    engine = Engine(pipe)
    state = engine.new_state()
    pending: list[Emitted] = []
    nonspec: dict = {}
    checked = 0

    def collect(res):
        for p in res.panes:
            w = (p.window_start, p.window_end)
            if p.timing == "EARLY":
                ns = -1
            else:
                ns = nonspec.get(w, 0)
                nonspec[w] = ns + 1
            start = p.window_start // UNIT if p.window_start > -(2**61) else None
            end = (p.window_end - 1) // UNIT if p.window_end < 2**61 else None
            pending.append(
                Emitted(
                    [start, end],
                    sorted(p.values[0]),
                    p.pane_index,
                    ns,
                    p.timing == "EARLY",
                    p.timing == "LATE",
                    p.is_last,
                )
            )

    for action in doc["transcript"]:
        ((kind, arg),) = action.items()
        if kind == "input":
            ts = np.array([int(x) * UNIT for x in arg], dtype=np.int64)
            batch = pd.DataFrame({TS: ts, "v": np.array([int(x) for x in arg], dtype=np.int64)})
            collect(engine.step(state, batch))
        elif kind == "watermark":
            collect(engine.step(state, None, watermark=int(arg) * UNIT))
        elif kind == "clock":
            collect(engine.step(state, None, processing_time=state.processing_time + int(arg) * UNIT))
        elif kind == "expect":
            unmatched = list(pending)
            for exp in arg:
                match = next((e for e in unmatched if _matches(e, exp)), None)
                if match is None:
                    raise TranscriptMismatch(f"Unmatched output: expected {exp}, emitted {pending}")
                unmatched.remove(match)
                checked += 1
            if unmatched:
                raise TranscriptMismatch(f"Unexpected output: {unmatched}")
            pending.clear()
        elif kind == "state":
            continue
        else:
            raise ValueError(f"unknown transcript action {kind}")
    if pending:
        raise TranscriptMismatch(f"Unexpected output: {pending}")
    return checked


def _matches(e: Emitted, exp: dict) -> bool:
    for field, want in exp.items():
        if field in NOT_COMPARED:
            continue
        if field == "values":
            if e.values != sorted(want):
                return False
        elif getattr(e, field) != want:
            return False
    return True
