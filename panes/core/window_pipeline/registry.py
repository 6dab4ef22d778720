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
    """``{sql: "SELECT ..."}`` or ``{fn: "module:function"}`` (with the transform's options, such as
    the function's ``schema``); raises ValueError with the reason."""
    kinds = [k for k in spec if k in TRANSFORMS] if isinstance(spec, dict) else []
    if not isinstance(spec, dict) or not spec or len(kinds) > 1:
        raise ValueError("window_pipeline is one of {sql: 'SELECT ... FROM rows'}, {fn: 'module:function'}")
    if not kinds:
        raise ValueError(f"unknown window_pipeline {sorted(spec)[0]!r}; one of {sorted(TRANSFORMS)}")
    kind = kinds[0]
    cls = TRANSFORMS[kind]
    options = {k: v for k, v in spec.items() if k != kind}
    unknown = sorted(set(options) - set(getattr(cls, "options", ())))
    if unknown:
        raise ValueError(f"{kind}: window_pipeline {kind} takes no option {unknown[0]!r}")
    try:
        transform: Transform = cls(spec[kind], **options)
    except ValueError as e:
        raise ValueError(f"{kind}: {e}") from None
    return WindowPipeline(transform)
