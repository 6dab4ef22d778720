"""``window_pipeline: {fn: "module:function"}``: a pandas function per window, from a DataFrame of the
window's rows (every record column, ``window_start`` and ``window_end`` as UTC timestamps, in
event-time then arrival order) to a DataFrame, whose rows are the pane's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd

from ..refs import import_ref
from ..table import Table
from .base import WindowRows


def load_function(ref: str) -> Callable[[pd.DataFrame], Any]:
    """The function named ``'package.module:function'`` (or ``'package.module.function'``)."""
    if not isinstance(ref, str):
        raise ValueError(f"a window function is named 'module:function', got {ref!r}")
    obj = import_ref(ref, "window function")
    if not callable(obj):
        raise ValueError(f"window function {ref!r} is not callable")
    return obj


class FunctionTransform:
    """``{fn: "module:function"}``, with an optional ``schema`` (a Spark DDL string, e.g. ``"car
    STRING, n LONG"``): the function's output columns and their types, for a Spark DataFrame of
    panes. Without it the Spark plans give the function's columns as one JSON text column."""

    kind = "fn"
    options = ("schema",)

    def __init__(self, ref: str, schema: str | None = None):
        self.ref = ref
        self.fn = load_function(ref)
        if schema is not None and (not isinstance(schema, str) or not schema.strip()):
            raise ValueError(f"schema is a Spark DDL string such as 'car STRING, n LONG', got {schema!r}")
        self.schema = schema

    def run(self, rows: WindowRows) -> Table:
        out = self.fn(rows.frame())
        if not isinstance(out, pd.DataFrame):
            raise TypeError(f"{self.ref} returned {type(out).__name__}, not a pandas DataFrame")
        return Table.from_frame(out.reset_index(drop=True))

    def describe(self) -> str:
        return self.ref

    def describe_options(self) -> dict:
        return {"schema": self.schema} if self.schema is not None else {}
