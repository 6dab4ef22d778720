"""``AfterEach``: its triggers one after another; finishes when the last one has."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .base import Ctx, Node, Trigger, TriggerState

if TYPE_CHECKING:
    from .registry import SpecSite


@dataclass(frozen=True)
class AfterEach(Trigger):
    triggers: tuple[Trigger, ...]

    def children(self) -> tuple[Trigger, ...]:
        return self.triggers

    def describe(self) -> object:
        return {"after_each": [t.describe() for t in self.triggers]}

    @classmethod
    def from_spec(cls, name: str, arg: Any, site: SpecSite) -> Trigger:
        return cls(site.parse_list(arg, name))

    def on_element(self, node: Node, st: TriggerState, n: int, ctx: Ctx) -> None:
        if ctx.merging:
            # windows can merge: every trigger sees the elements, since a merge can bring an
            # earlier one back (Beam's AfterEachStateMachine.onElement when isMerging())
            for k in node.kids:
                k.on_element(st, n, ctx)
            return
        # only the current trigger sees the elements
        current = node.first_unfinished(st)
        if current is not None:
            current.on_element(st, n, ctx)

    def should_fire(self, node: Node, st: TriggerState, ctx: Ctx) -> bool:
        current = node.first_unfinished(st)
        return current is not None and current.should_fire(st, ctx)

    def on_fire(self, node: Node, st: TriggerState, ctx: Ctx) -> None:
        current = node.first_unfinished(st)
        if current is not None:
            current.on_fire(st, ctx)
        if ctx.merging:
            # each pending pane starts every trigger afresh (they all ran in parallel)
            for k in node.kids:
                k.clear(st)
        node.set_finished(st, node.first_unfinished(st) is None)

    def on_merge(self, node: Node, states: Sequence[TriggerState], out: TriggerState, ctx: Ctx) -> None:
        super().on_merge(node, states, out, ctx)
        node.set_finished(out, node.first_unfinished(out) is None)
