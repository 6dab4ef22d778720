"""``Never``: the default trigger. The window emits once, its final pane, when it expires."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .base import Ctx, Node, Trigger, TriggerState

if TYPE_CHECKING:
    from .registry import SpecSite


@dataclass(frozen=True)
class Never(Trigger):
    """Fires only when the window expires at watermark >= end + allowed lateness (Atlas Stream
    Processing, Spark append mode, Kafka ``suppress``)."""

    def describe(self) -> object:
        return "at_close"

    @classmethod
    def from_spec(cls, name: str, arg: Any, site: SpecSite) -> Trigger:
        return cls()

    def can_finish(self) -> bool:
        return True

    def should_fire(self, node: Node, st: TriggerState, ctx: Ctx) -> bool:
        return False

    def on_fire(self, node: Node, st: TriggerState, ctx: Ctx) -> None:
        pass

    def on_merge(self, node: Node, states: Sequence[TriggerState], out: TriggerState, ctx: Ctx) -> None:
        node.set_finished(out, False)
