"""The window assigner base class.

A window is a pair ``(start, end)`` of epoch milliseconds, half-open ``[start, end)``; the global
window is ``(MIN_TIME, MAX_TIME)``. Record-defined sliding windows are inclusive at both ends and
are held internally as ``[start, last + 1)``; they report ``window_end`` as their last instant.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import numpy as np

from ..time import MAX_TIME, MIN_TIME, parse_duration

Window = tuple[int, int]
GLOBAL_WINDOW: Window = (MIN_TIME, MAX_TIME)

#: how the engine ingests a family's rows (``panes.core.engine``'s strategies): ``fixed``, each row's
#: windows follow from its event time alone (``assign``); ``merging``, windows of a key merge when
#: they overlap (sessions); ``record_defined``, a key's windows depend on its other records;
#: ``inherited``, each row names its window (a stage's panes feeding the next stage).
Family = Literal["fixed", "merging", "record_defined", "inherited"]


class WindowFn:
    """Base of the window assigners. A subclass is a frozen dataclass of its parameters with
    ``assign``, ``describe``, ``from_spec`` (its spec options: ``options``) and its checks."""

    kind: ClassVar[str] = "window"
    family: ClassVar[Family] = "fixed"
    merging: ClassVar[bool] = False
    #: the windows depend on the key's other records (sliding, sessions)
    record_defined: ClassVar[bool] = False
    #: the options of the spec form ``{kind: {option: value}}``, and those it must have
    options: ClassVar[frozenset[str]] = frozenset()
    required: ClassVar[tuple[str, ...]] = ()

    @property
    def windows_per_record(self) -> int:
        """How many windows one record is assigned to at most (``Pipeline.max_windows_per_record``)."""
        return 1

    def assign(self, ts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Rows' windows: (row index, window start, window end) arrays, one entry per (row,
        window); a row in no window (a hopping gap) has no entry."""
        raise NotImplementedError

    def report_end(self, end: Any) -> Any:
        """The ``window_end`` shown to users for an internal (exclusive) end."""
        return end

    def internal_end(self, reported: Any) -> Any:
        """The internal (exclusive) end of a window shown as ending at ``reported`` (the inverse
        of ``report_end``)."""
        return reported

    def describe(self) -> dict:
        raise NotImplementedError

    @classmethod
    def from_spec(cls, options: dict) -> WindowFn:
        """The window of the spec ``{kind: options}`` (options already checked against
        ``options``); raises ValueError with the reason."""
        raise NotImplementedError

    @classmethod
    def check_options(cls, options: dict) -> None:
        extra = set(options) - cls.options
        if extra:
            raise ValueError(f"{cls.kind} window has no option {sorted(extra)}; its options are {sorted(cls.options)}")
        for name in cls.required:
            if name not in options:
                raise ValueError(f"{cls.kind} window needs {name}")


def option_duration(options: dict, name: str, default: int = 0) -> int:
    """A duration option in milliseconds (``default`` when it is absent)."""
    return parse_duration(options[name]) if name in options else default
