"""``AfterAny``: fires when any of its triggers fires; finishes then."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .base import Ctx, Node, Trigger, TriggerState

if TYPE_CHECKING:
    from .registry import SpecSite


@dataclass(frozen=True)
class AfterAny(Trigger):
    triggers: tuple[Trigger, ...]

    def children(self) -> tuple[Trigger, ...]:
        return self.triggers

    def describe(self) -> object:
        return {"after_any": [t.describe() for t in self.triggers]}

    @classmethod
    def from_spec(cls, name: str, arg: Any, site: SpecSite) -> Trigger:
        return cls(site.parse_list(arg, name, once=True))

    def can_finish(self) -> bool:
        return True

    def should_fire(self, node: Node, st: TriggerState, ctx: Ctx) -> bool:
        return any(k.should_fire(st, ctx) for k in node.kids)

    def on_fire(self, node: Node, st: TriggerState, ctx: Ctx) -> None:
        for k in node.kids:
            if k.should_fire(st, ctx):
                k.on_fire(st, ctx)
            else:
                k.clear(st)
        node.set_finished(st, True)
