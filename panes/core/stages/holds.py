"""A stage's output watermark: how far the next stage's watermark may follow it.

A downstream stage judges lateness against its upstream stage's output watermark, which is held
back so that nothing the upstream stage will still emit on time is late downstream (Beam's
watermark holds; a pane's event time is its window's end minus 1 ms):

- a window that can still emit its on-time pane (no pane after its end yet, not created late)
  holds the output at its end - 1 ms;
- a window holding late records not yet emitted holds it at its end - 1 ms + allowed lateness.

The output watermark is the least of the stage's watermark and every hold, across all its keys.
"""

from __future__ import annotations

from ..engine import Engine, EngineState, WindowState


def window_hold(ws: WindowState, allowed_lateness: int) -> int | None:
    """The instant a window holds its stage's output watermark at (None: no hold)."""
    if ws.closed:
        return None
    if not (ws.created_late or ws.nonearly):
        return ws.end - 1
    if ws.new_count > 0:
        return ws.end - 1 + allowed_lateness
    return None


def output_watermark(engine: Engine, state: EngineState) -> int:
    """The stage's output watermark: its watermark, held back by its windows' holds."""
    out = state.watermark
    lateness = engine.p.allowed_lateness
    for wins in state.keys.values():
        for ws in wins.values():
            hold = window_hold(ws, lateness)
            if hold is not None and hold < out:
                out = hold
    return out
