"""Registries keyed by the core's classes (windows, aggregates): a class's entry, or its nearest
base class's. Pure Python."""

from __future__ import annotations

from typing import TypeVar

V = TypeVar("V")


def registered(registry: dict[type, V], obj: object) -> V | None:
    """The registry's entry for ``obj``'s class, or for the nearest base class that has one."""
    for cls in type(obj).__mro__:
        if cls in registry:
            return registry[cls]
    return None
