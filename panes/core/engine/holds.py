"""Watermark holds and the output watermark (Beam Java's ``WatermarkHold`` and the direct runner's
``WatermarkManager``).

A window holds the stage's output watermark back while it may still emit a pane that a downstream
stage must not take for late: a record that came before the input watermark passed the window's
end holds it at the window's max timestamp (end - 1); a later one at the garbage-collection time
(max timestamp + allowed lateness). A firing releases the window's holds, whether its pane is
emitted or not; so does garbage collection. Pending event-time timers hold the output watermark
too: the end-of-window timer ``after_watermark`` sets, and each window's garbage-collection timer.

The output watermark is min(input watermark, every hold, every pending event-time timer) over every
window of every key. A firing reads it as it stood when the firing's phase began (a clock move,
a batch of records, a watermark move: one bundle each in Beam's direct runner), so the timers that
fire in that phase still hold it. Its pane is LATE when the output watermark has passed the
window (``rules.pane_timing``).
"""

from __future__ import annotations

from .. import rules
from ..time import END_OF_INPUT
from .state import EngineState, PhaseWatermark, WindowState


class Holds:
    def __init__(self, allowed_lateness: int):
        self.lateness = allowed_lateness

    def earliest(self, ws: WindowState) -> int:
        """The earliest instant a window holds the output watermark at: its hold, its pending
        end-of-window timer, its garbage-collection timer."""
        t = rules.gc_timer(ws.end, self.lateness)
        if ws.hold is not None and ws.hold < t:
            t = ws.hold
        if ws.trig.eow:
            t = min(t, rules.end_of_window_timer(ws.end))
        return t

    def add(self, ws: WindowState, watermark: int) -> None:
        """Records came to the window at this input watermark."""
        h = rules.element_hold(ws.end, self.lateness, watermark)
        if ws.hold is None or h < ws.hold:
            ws.hold = h

    def earliest_of_state(self, state: EngineState) -> int:
        """The earliest hold or pending event-time timer of every window: the least ``earliest``.
        Both timers' instants grow with the window's end, so one pass finds the earliest end, the
        earliest end with a pending end-of-window timer and the earliest hold, and the timers'
        rules are applied once (a call per window would cost several each scan)."""
        first_end = first_eow_end = first_hold = END_OF_INPUT
        for wins in state.keys.values():
            for ws in wins.values():
                end = ws.end
                if end < first_end:
                    first_end = end
                if ws.trig.eow and end < first_eow_end:
                    first_eow_end = end
                hold = ws.hold
                if hold is not None and hold < first_hold:
                    first_hold = hold
        best = first_hold
        if first_end < END_OF_INPUT:
            best = min(best, rules.gc_timer(first_end, self.lateness))
        if first_eow_end < END_OF_INPUT:
            best = min(best, rules.end_of_window_timer(first_eow_end))
        return best

    def output_watermark(self, state: EngineState) -> int:
        """The stage's output watermark now."""
        return rules.output_watermark(state.watermark, self.earliest_of_state(state))

    # -- a phase -----------------------------------------------------------------------------------
    def begin(self, state: EngineState) -> None:
        """A phase begins at the current input watermark."""
        state.phase = PhaseWatermark(state.watermark)

    def release(self, state: EngineState, ws: WindowState) -> None:
        """The window is about to fire, have a timer fire or be collected: what it holds now still
        holds the output watermark for the rest of the phase."""
        phase = state.phase
        if phase is not None and phase.output is None:
            t = self.earliest(ws)
            if t < phase.released:
                phase.released = t

    def passed(self, state: EngineState, ws: WindowState) -> bool:
        """Whether the output watermark, as the phase began, had passed the window (its pane is
        LATE). A window that holds it before its own end answers without looking at the others."""
        if self.earliest(ws) < ws.end:
            return False
        phase = state.phase
        if phase is None:
            return rules.on_time_reached(ws.end, self.output_watermark(state))
        if phase.output is None:
            earliest = min(self.earliest_of_state(state), phase.released)
            phase.output = rules.output_watermark(phase.watermark, earliest)
        return rules.on_time_reached(ws.end, phase.output)
