"""User code named in a spec: 'package.module:name' (or 'package.module.name'), imported by name.
One loader for callbacks, combine functions, merges and window functions, with one wording of
what went wrong."""

from __future__ import annotations

import importlib
from typing import Any


def import_ref(ref: str, what: str, form: str = "module:function") -> Any:
    """The object ``ref`` names; ValueError saying why it cannot be had (``what``: the kind of
    thing, for the message; ``form``: how such a name is written)."""
    mod, _, attr = ref.partition(":") if ":" in ref else ref.rpartition(".")
    if not mod or not attr:
        raise ValueError(f"a {what} is named '{form}', got {ref!r}")
    try:
        obj: Any = importlib.import_module(mod)
    except ImportError as e:
        raise ValueError(f"cannot import module {mod!r} for {what} {ref!r}: {e}") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"module {mod!r} has no {attr!r} ({what} {ref!r})")
        obj = getattr(obj, part)
    return obj
