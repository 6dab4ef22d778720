"""User code named in a spec (``module:function``), imported without Spark: a sink's callback."""

from __future__ import annotations

import importlib
from collections.abc import Callable


def load_callback(ref: str, field: str = "sink.callback") -> Callable:
    """The function ``ref`` names ('module:function' or 'module.function'); ValueError naming
    ``field`` and the reason when it cannot be imported or is not callable."""
    mod, _, attr = ref.partition(":") if ":" in ref else ref.rpartition(".")
    if not mod or not attr:
        raise ValueError(f"{field}: a callback is named 'module:function', got {ref!r}")
    try:
        obj = importlib.import_module(mod)
    except ImportError as e:
        raise ValueError(f"{field}: cannot import module {mod!r} for {ref!r}: {e}") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"{field}: module {mod!r} has no {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ValueError(f"{field}: {ref} is not callable")
    return obj
