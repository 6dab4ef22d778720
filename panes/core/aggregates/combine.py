"""User aggregates: ``CombineFn`` (Beam's shape) and ``combine`` (``{fn: "module:Class", column}``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..refs import import_ref
from .base import AggregateFn, plain, split_options


class CombineFn:
    """A user aggregate, as Beam's CombineFn. Subclass it and define the four methods; define
    ``add_inputs`` too to add a whole group at once (it gets a numpy array)."""

    def create_accumulator(self) -> Any:
        raise NotImplementedError

    def add_input(self, accumulator: Any, value: Any) -> Any:
        raise NotImplementedError

    def merge_accumulators(self, accumulators: list) -> Any:
        raise NotImplementedError

    def extract_output(self, accumulator: Any) -> Any:
        raise NotImplementedError

    def add_inputs(self, accumulator: Any, values: np.ndarray) -> Any:
        for v in values:
            accumulator = self.add_input(accumulator, plain(v))
        return accumulator


class UserCombine(AggregateFn):
    """Wraps a CombineFn (an instance, or 'module:ClassName' / 'module.ClassName')."""

    name = "combine"

    def __init__(self, column: str | None, fn: CombineFn | str):
        super().__init__(column)
        self.fn_ref = fn if isinstance(fn, str) else f"{type(fn).__module__}:{type(fn).__qualname__}"
        self.fn = load_combine_fn(fn) if isinstance(fn, str) else fn

    @classmethod
    def from_spec(cls, function: str, argument: Any) -> AggregateFn:
        if not isinstance(argument, dict):
            raise ValueError("combine needs {fn: 'module:ClassName', column: COL}")
        column, options = split_options(argument)
        if "fn" not in options:
            raise ValueError("combine needs fn: 'module:ClassName'")
        return cls(column, options["fn"])

    def create(self) -> Any:
        return self.fn.create_accumulator()

    def add_group(self, acc: Any, values: Any, ts: np.ndarray, seq: np.ndarray) -> Any:
        if values is None:
            values = np.array([None] * len(ts), dtype=object)
        return self.fn.add_inputs(acc, values)

    def merge(self, a: Any, b: Any) -> Any:
        return self.fn.merge_accumulators([a, b])

    def extract(self, acc: Any) -> Any:
        return self.fn.extract_output(acc)

    def describe(self) -> dict:
        return {"combine": {"fn": self.fn_ref, "column": self.column}}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UserCombine) and (self.fn_ref, self.column) == (other.fn_ref, other.column)

    def __hash__(self) -> int:
        return hash(("combine", self.fn_ref, self.column))


def load_combine_fn(ref: str) -> CombineFn:
    """Import a CombineFn class or factory named 'package.module:Name' (or 'package.module.Name')."""
    obj = import_ref(ref, "combine function", "module:ClassName")
    fn: Any = obj
    if isinstance(obj, type) or callable(obj) and not hasattr(obj, "create_accumulator"):
        # a CombineFn class, or a factory of one: called with no arguments
        try:
            fn = obj()
        except Exception as e:
            raise ValueError(
                f"combine function {ref!r} is not a CombineFn class or a factory of one: {ref}() failed: {e}"
            ) from None
    for method in ("create_accumulator", "add_input", "merge_accumulators", "extract_output"):
        if not hasattr(fn, method):
            raise ValueError(f"combine function {ref!r} is not a CombineFn: it has no {method}() method")
    if not hasattr(fn, "add_inputs"):
        fn.add_inputs = lambda acc, values: CombineFn.add_inputs(fn, acc, values)
    return fn
