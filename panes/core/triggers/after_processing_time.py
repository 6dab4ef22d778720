"""``AfterProcessingTime``: fires once processing time is past a deadline set by the pane's first
element."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..rules import processing_timer_fires
from .base import Ctx, Node, Trigger, TriggerState

if TYPE_CHECKING:
    from .registry import SpecSite


@dataclass(frozen=True)
class AfterProcessingTime(Trigger):
    """Fires once processing time is past (first element of the pane) + delay, rounded up to the
    next multiple of ``align`` when given (Beam's ``alignedTo``: ``every: 1 minute`` fires at each
    minute boundary that follows data, as Streaming 102's AtPeriod). The deadline sets a
    processing-time timer, which fires when the clock is strictly after it."""

    delay: int
    align: int | None = None

    def uses_processing_time(self) -> bool:
        return True

    def can_finish(self) -> bool:
        return True

    def deadline(self, first_element_pt: int) -> int:
        t = first_element_pt + self.delay
        if self.align:
            r = t % self.align
            if r:
                t += self.align - r
        return t

    def describe(self) -> object:
        if self.align and not self.delay:
            return {"every": self.align}
        return {"after_processing_time": self.delay}

    @classmethod
    def from_spec(cls, name: str, arg: Any, site: SpecSite) -> Trigger:
        """``{after_processing_time: D}``; the shorthand ``{every: D}`` (aligned to multiples of
        D) repeats (one firing as an early or late trigger, which repeat by themselves)."""
        d = site.positive_duration(arg, name)
        return site.repeat(cls(0, d)) if name == "every" else cls(d)

    def on_element(self, node: Node, st: TriggerState, n: int, ctx: Ctx) -> None:
        if node.data(st) is None:
            deadline = self.deadline(ctx.processing_time)
            node.set_data(st, deadline)
            st.set_clock_timer(deadline)

    def should_fire(self, node: Node, st: TriggerState, ctx: Ctx) -> bool:
        deadline = node.data(st)
        return deadline is not None and processing_timer_fires(deadline, ctx.processing_time)

    def on_fire(self, node: Node, st: TriggerState, ctx: Ctx) -> None:
        node.set_data(st, None)
        node.set_finished(st, True)

    def on_merge(self, node: Node, states: Sequence[TriggerState], out: TriggerState, ctx: Ctx) -> None:
        i = node.slot
        any_finished = any(s.finished[i] for s in states)
        node.set_finished(out, any_finished)
        deadlines = [s.data[i] for s in states if s.data[i] is not None]
        node.set_data(out, None if any_finished or not deadlines else min(deadlines))
        if node.data(out) is not None:
            out.set_clock_timer(node.data(out))
