"""``AfterAll``: fires when every one of its triggers has fired or is ready to; finishes then."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .base import Ctx, Node, Trigger, TriggerState

if TYPE_CHECKING:
    from .registry import SpecSite


@dataclass(frozen=True)
class AfterAll(Trigger):
    triggers: tuple[Trigger, ...]

    def children(self) -> tuple[Trigger, ...]:
        return self.triggers

    def describe(self) -> object:
        return {"after_all": [t.describe() for t in self.triggers]}

    @classmethod
    def from_spec(cls, name: str, arg: Any, site: SpecSite) -> Trigger:
        return cls(site.parse_list(arg, name, once=True))

    def can_finish(self) -> bool:
        return True

    def should_fire(self, node: Node, st: TriggerState, ctx: Ctx) -> bool:
        return all(k.is_finished(st) or k.should_fire(st, ctx) for k in node.kids)

    def on_fire(self, node: Node, st: TriggerState, ctx: Ctx) -> None:
        for k in node.kids:
            if not k.is_finished(st):
                k.on_fire(st, ctx)
        node.set_finished(st, True)
