"""Native Spark plans: windows assigned, checked for lateness and aggregated with Spark SQL
expressions only (no Python per row, key or bucket).

One step does what the core's ``Engine.step`` does:

1. the step's rows are assigned to windows and checked against the watermark from *before* the
   step: a row whose window (or one of its hopping windows) has expired goes to the dead letters
   (once, naming the windows it missed) and counts in its other windows (``late``);
2. the on-time rows are combined into partial aggregates (``partials``) per (key, window), and
   merged with the open windows kept from the earlier steps (``fixed``; ``sessions``: overlapping
   sessions merge, as in the core; ``sliding``: bounded input only);
3. the watermark moves (max event time - max_delay, punctuation, explicit control values);
4. windows whose end + allowed lateness the watermark reached emit their pane and leave the state
   (``output``); after_watermark with counts fires as the engine does (``firing``).

A bounded DataFrame is one step from an empty state, then the end of input (so no row is late).
A stream runs a step per micro-batch inside ``foreachBatch``; the open windows are kept in Parquet
tables versioned by batch id under the checkpoint (``<checkpoint>/panes_native/v<batch>``), with
the watermark and the list of tables beside them, so a micro-batch that Spark runs again after a
failure reads the same state and writes the same result (``store``).

The modules: ``capability`` (what the native plans cover; pure Python, importable before Spark
starts), ``names`` (the Spark columns), ``expressions``, ``windows`` (with ``fixed``, ``sessions``,
``sliding``), ``partials``, ``late``, ``firing``, ``output``, ``step`` (``NativeStep``) and
``store`` (``NativeStream``). This package imports Spark only when ``NativeStep`` or
``NativeStream`` is first asked for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .capability import appends, batch_unsupported, never_late, stream_unsupported
from .names import STATE_DIR

if TYPE_CHECKING:
    from .step import NativeStep
    from .store import NativeStream

__all__ = [
    "NativeStep",
    "NativeStream",
    "STATE_DIR",
    "appends",
    "batch_unsupported",
    "never_late",
    "stream_unsupported",
]

_LAZY = {"NativeStep": "step", "NativeStream": "store"}


def __getattr__(name: str) -> Any:
    """``NativeStep`` and ``NativeStream``, imported (with Spark) on first use."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
