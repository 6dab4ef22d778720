"""``Repeatedly``: runs its trigger again each time it finishes; never finishes itself."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .base import Ctx, Node, Trigger, TriggerState

if TYPE_CHECKING:
    from .registry import SpecSite


@dataclass(frozen=True)
class Repeatedly(Trigger):
    trigger: Trigger

    def children(self) -> tuple[Trigger, ...]:
        return (self.trigger,)

    def describe(self) -> object:
        return {"repeatedly": self.trigger.describe()}

    @classmethod
    def from_spec(cls, name: str, arg: Any, site: SpecSite) -> Trigger:
        return cls(site.parse(arg, name))

    def can_finish(self) -> bool:
        return False

    def should_fire(self, node: Node, st: TriggerState, ctx: Ctx) -> bool:
        return node.kids[0].should_fire(st, ctx)

    def on_fire(self, node: Node, st: TriggerState, ctx: Ctx) -> None:
        child = node.kids[0]
        child.on_fire(st, ctx)
        if child.is_finished(st):
            child.reset(st)

    def on_merge(self, node: Node, states: Sequence[TriggerState], out: TriggerState, ctx: Ctx) -> None:
        super().on_merge(node, states, out, ctx)
        node.set_finished(out, False)
