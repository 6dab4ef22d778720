"""``OrFinally``: fires as its trigger does, until its ``until`` trigger fires, which finishes it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .base import Ctx, Node, Trigger, TriggerState

if TYPE_CHECKING:
    from .registry import SpecSite


@dataclass(frozen=True)
class OrFinally(Trigger):
    trigger: Trigger
    until: Trigger

    def children(self) -> tuple[Trigger, ...]:
        return (self.trigger, self.until)

    def describe(self) -> object:
        return {"or_finally": {"trigger": self.trigger.describe(), "finally": self.until.describe()}}

    @classmethod
    def from_spec(cls, name: str, arg: Any, site: SpecSite) -> Trigger:
        if not isinstance(arg, dict) or set(arg) != {"trigger", "finally"}:
            raise ValueError(f"{site.path}.or_finally takes {{trigger: T, finally: T}}")
        return cls(
            site.parse(arg["trigger"], "or_finally.trigger"), site.parse_once(arg["finally"], "or_finally.finally")
        )

    def can_finish(self) -> bool:
        return True

    def should_fire(self, node: Node, st: TriggerState, ctx: Ctx) -> bool:
        main, until = node.kids
        return main.should_fire(st, ctx) or until.should_fire(st, ctx)

    def on_fire(self, node: Node, st: TriggerState, ctx: Ctx) -> None:
        main, until = node.kids
        if until.should_fire(st, ctx):
            until.on_fire(st, ctx)
            main.clear(st)
            node.set_finished(st, True)
        else:
            main.on_fire(st, ctx)
            node.set_finished(st, main.is_finished(st))

    def on_merge(self, node: Node, states: Sequence[TriggerState], out: TriggerState, ctx: Ctx) -> None:
        super().on_merge(node, states, out, ctx)
        main, until = node.kids
        node.set_finished(out, main.is_finished(out) or until.is_finished(out))
