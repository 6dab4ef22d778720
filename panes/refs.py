"""User code named in a spec (``module:function``), imported without Spark: a sink's callback."""

from __future__ import annotations

from collections.abc import Callable

from .core.refs import import_ref


def load_callback(ref: str, field: str = "sink.callback") -> Callable:
    """The function ``ref`` names ('module:function' or 'module.function'); ValueError naming
    ``field`` and the reason when it cannot be imported or is not callable."""
    try:
        obj = import_ref(ref, "callback")
    except ValueError as e:
        raise ValueError(f"{field}: {e}") from None
    if not callable(obj):
        raise ValueError(f"{field}: {ref} is not callable")
    return obj
