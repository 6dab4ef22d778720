"""The window pipeline's spec forms: ``window_pipeline: {kind: argument}``. Adding one: its transform
class (``kind``, ``run``, ``describe``) and one line in ``TRANSFORMS``."""

from __future__ import annotations

from typing import Any

from .base import Transform, WindowPipeline
from .function import FunctionTransform
from .sql import SqlTransform

TRANSFORMS: dict[str, type] = {
    "sql": SqlTransform,
    "fn": FunctionTransform,
}


def parse_window_pipeline(spec: Any) -> WindowPipeline:
    """``{sql: "SELECT ..."}`` or ``{fn: "module:function"}``; raises ValueError with the reason."""
    if not isinstance(spec, dict) or len(spec) != 1:
        raise ValueError("window_pipeline is one of {sql: 'SELECT ... FROM rows'}, {fn: 'module:function'}")
    ((kind, argument),) = spec.items()
    cls = TRANSFORMS.get(kind)
    if cls is None:
        raise ValueError(f"unknown window_pipeline {kind!r}; one of {sorted(TRANSFORMS)}")
    try:
        transform: Transform = cls(argument)
    except ValueError as e:
        raise ValueError(f"{kind}: {e}") from None
    return WindowPipeline(transform)
