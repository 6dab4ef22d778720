"""``AfterCount``: fires once the window has received ``count`` elements since it was last reset."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .base import Ctx, Node, Trigger, TriggerState

if TYPE_CHECKING:
    from .registry import SpecSite


@dataclass(frozen=True)
class AfterCount(Trigger):
    count: int

    def __post_init__(self) -> None:
        if self.count < 1:
            raise ValueError("after_count needs a count of at least 1")

    def describe(self) -> object:
        return {"after_count": self.count}

    @classmethod
    def from_spec(cls, name: str, arg: Any, site: SpecSite) -> Trigger:
        """``{after_count: N}``; the shorthand ``{count: N}`` repeats (one firing as an early or
        late trigger, which repeat by themselves)."""
        trigger = cls(site.positive_int(arg, name))
        return site.repeat(trigger) if name == "count" else trigger

    def can_finish(self) -> bool:
        return True

    def on_element(self, node: Node, st: TriggerState, n: int, ctx: Ctx) -> None:
        node.set_data(st, (node.data(st) or 0) + n)

    def should_fire(self, node: Node, st: TriggerState, ctx: Ctx) -> bool:
        return (node.data(st) or 0) >= self.count

    def on_fire(self, node: Node, st: TriggerState, ctx: Ctx) -> None:
        node.set_data(st, None)
        node.set_finished(st, True)

    def on_merge(self, node: Node, states: Sequence[TriggerState], out: TriggerState, ctx: Ctx) -> None:
        i = node.slot
        any_finished = any(s.finished[i] for s in states)
        node.set_finished(out, any_finished)
        node.set_data(out, None if any_finished else sum((s.data[i] or 0) for s in states) or None)
