"""The engine's state as columns, to store and load whole (the stateful Spark plan keeps one per
hash bucket and rewrites it every micro-batch).

A state is its windows (``WindowState`` and its ``TriggerState``) and a few values beside them.
Pickling the windows one object at a time costs a Python call per window each way; here each of
their fields is one column over every window of every key, in the state's order: a column of
plain integers or booleans (or integers and None) is one numpy buffer of the narrowest unsigned
type that holds its span, any other column (aggregates' accumulators that are lists or sets,
trigger data, pending retractions) a list in the same pickle. ``decode(encode(s))`` gives back
every value with its type and the order of every dict, so the engine's semantics are untouched.
"""

from __future__ import annotations

import dataclasses
import pickle
from itertools import chain
from operator import attrgetter
from typing import Any

import numpy as np

from ..triggers import TriggerState
from .state import EngineState, WindowState

#: the layout's name: a checkpoint's state written in another one cannot be read by this one
FORMAT = "columnar-1"
MAGIC = b"panes-state/" + FORMAT.encode()
#: a WindowState's fields stored as columns, in ``restore_window``'s order (``acc`` and ``trig``
#: are split further): taken from the slots, so a field added there is stored
WINDOW_FIELDS = tuple(f for f in WindowState.__slots__ if f not in ("acc", "trig"))
TRIGGER_FIELDS = tuple(TriggerState.__slots__)
STATE_FIELDS = tuple(f.name for f in dataclasses.fields(EngineState) if f.name != "keys")
INT64 = (-(2**63), 2**63 - 1)
#: the item types of a list that may be stored once for every window that holds an equal one
#: (not floats: 0.0 == -0.0)
FLAT = {bool, int, str, type(None)}


class StateFormatError(ValueError):
    """A stored state is not in this layout (an older panes wrote it)."""


def in_this_layout(blob: bytes) -> bool:
    """Whether a stored state is in this layout (its first bytes say which)."""
    return bytes(blob[: len(MAGIC)]) == MAGIC


def start_afresh(checkpoint: str) -> str:
    """What a run refused ``checkpoint`` can do (every refusal of a checkpoint ends with it)."""
    return f"start afresh with a new checkpoint directory (or remove {checkpoint})"


def refusal(checkpoint: str, held: str | None, afresh: str) -> str:
    """Why a checkpoint whose state another layout holds (``held``; None: pickled) cannot be read."""
    held = held or "pickled, as panes before the columnar layout wrote it"
    return (
        f"checkpoint {checkpoint} holds its state in another layout ({held}) than this panes reads ({FORMAT}); {afresh}"
    )


# -- one column -------------------------------------------------------------------------------------


def encode_column(values: list) -> tuple:
    """A column: ("n", len) all None; ("b", array) booleans; ("i", low, array) integers as
    offsets from ``low``; ("I", low, array, none_mask) integers and None; ("f", array) floats;
    ("r", list, len) equal lists of items of one plain type (equal values of another type, as
    1 and True, are not the same); ("o", list) anything else."""
    types = set(map(type, values))
    if types == {type(None)}:
        return ("n", len(values))
    if types == {bool}:
        return ("b", np.array(values, dtype=np.bool_))
    if types == {float}:
        return ("f", np.array(values, dtype=np.float64))
    if types == {int} or types == {int, type(None)}:
        nones = None
        ints = values
        if type(None) in types:
            nones = np.array([v is None for v in values], dtype=np.bool_)
            ints = [v for v in values if v is not None]
        low, high = min(ints), max(ints)
        if INT64[0] <= low and high <= INT64[1] and high - low <= INT64[1]:
            arr = np.array(ints, dtype=np.int64) - np.int64(low)
            arr = arr.astype(np.min_scalar_type(high - low))
            return ("i", low, arr) if nones is None else ("I", low, arr, nones)
    if types == {list} and len(values) > 1:
        # the same flat list in every window (a trigger's state, no pending retraction): once
        first = values[0]
        item_types = set(map(type, chain.from_iterable(values)))
        if len(item_types) <= 1 and item_types <= FLAT and values.count(first) == len(values):
            return ("r", first, len(values))
    return ("o", list(values))


def decode_column(col: tuple) -> list:
    kind = col[0]
    if kind == "n":
        return [None] * col[1]
    if kind in ("b", "f"):
        return col[1].tolist()
    if kind == "o":
        return col[1]
    if kind == "r":
        first = col[1]
        return [first.copy() for _ in range(col[2])]
    low = col[1]
    ints = (col[2].astype(np.int64) + np.int64(low)).tolist() if low else col[2].tolist()
    if kind == "i":
        return ints
    it = iter(ints)
    return [None if none else next(it) for none in col[3].tolist()]


# -- a state ----------------------------------------------------------------------------------------


def encode(state: EngineState) -> bytes:
    """The state as one value: its scalars, then its windows' fields as columns."""
    keys = list(state.keys)
    windows = [ws for wins in state.keys.values() for ws in wins.values()]
    bounds = [w for wins in state.keys.values() for w in wins]
    rows = list(map(attrgetter(*WINDOW_FIELDS), windows))
    columns: dict[str, Any] = {f: encode_column(list(c)) for f, c in zip(WINDOW_FIELDS, zip(*rows))} if rows else {}
    # a window's dict key is its bounds: stored only where it is not
    if any(w != (ws.start, ws.end) for w, ws in zip(bounds, windows)):
        columns["bounds"] = ("o", bounds)
    trigs = list(map(attrgetter(*TRIGGER_FIELDS), [ws.trig for ws in windows]))
    for f, c in zip(TRIGGER_FIELDS, zip(*trigs)):
        columns["trig." + f] = encode_column(list(c))
    accs = [ws.acc for ws in windows]
    present = [a for a in accs if a is not None]
    widths = {len(a) for a in present if type(a) is list}
    if len(widths) == 1 and all(type(a) is list for a in present):
        columns["acc.none"] = encode_column([a is None for a in accs])
        columns["acc"] = [encode_column([a[j] for a in present]) for j in range(widths.pop())]
    else:
        columns["acc.whole"] = ("o", accs)
    scalars = {f: getattr(state, f) for f in STATE_FIELDS}
    per_key = np.array([len(w) for w in state.keys.values()], dtype=np.int64)
    body = (scalars, keys, per_key, columns)
    return MAGIC + pickle.dumps(body, protocol=pickle.HIGHEST_PROTOCOL)


def decode(blob: bytes) -> EngineState:
    """The state ``encode`` stored."""
    if not in_this_layout(blob):
        raise StateFormatError(
            f"the stored engine state is not in panes' state layout {FORMAT} (an older panes wrote it): "
            "start afresh with a new checkpoint"
        )
    scalars, keys, per_key, columns = pickle.loads(blob[len(MAGIC) :])
    n = int(per_key.sum())
    if not n:
        state = EngineState(**scalars)
        state.keys = {key: {} for key in keys}
        return state
    fields = [decode_column(columns[f]) for f in WINDOW_FIELDS]
    trig_fields = [decode_column(columns["trig." + f]) for f in TRIGGER_FIELDS]
    if "acc.whole" in columns:
        accs = decode_column(columns["acc.whole"])
    else:
        accs = list(zip(*[decode_column(c) for c in columns["acc"]])) if columns["acc"] else [()] * n
        nones = decode_column(columns["acc.none"])
        if any(nones):
            it = iter(accs)
            accs = [None if none else next(it) for none in nones]
        accs = [None if a is None else list(a) for a in accs]
    windows = list(map(restore_window, *fields, accs, *trig_fields))
    state = EngineState(**scalars)
    bounds = decode_column(columns["bounds"]) if "bounds" in columns else [(ws.start, ws.end) for ws in windows]
    i = 0
    for key, count in zip(keys, per_key.tolist()):
        state.keys[key] = dict(zip(bounds[i : i + count], windows[i : i + count]))
        i += count
    return state


def restore_window(
    start,
    end,
    new_count,
    next_index,
    last_values,
    last_timing,
    last_provisional,
    nonearly,
    closed,
    hold,
    pending,
    acc,
    finished,
    data,
    eow,
    clock,
) -> WindowState:
    """A window from its fields' values (``WINDOW_FIELDS``, ``acc``, ``TRIGGER_FIELDS``)."""
    ws = WindowState.__new__(WindowState)
    ws.start = start
    ws.end = end
    ws.new_count = new_count
    ws.next_index = next_index
    ws.last_values = last_values
    ws.last_timing = last_timing
    ws.last_provisional = last_provisional
    ws.nonearly = nonearly
    ws.closed = closed
    ws.hold = hold
    ws.pending_retractions = pending
    ws.acc = acc
    t = TriggerState.__new__(TriggerState)
    t.finished = finished
    t.data = data
    t.eow = eow
    t.clock = clock
    ws.trig = t
    return ws
