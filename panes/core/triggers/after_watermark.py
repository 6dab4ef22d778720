"""``AfterWatermark``: the ON_TIME firing when the watermark passes the window's end, with optional
EARLY firings before it and LATE firings after it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .base import Ctx, Node, Trigger, TriggerState

if TYPE_CHECKING:
    from .registry import SpecSite

#: the node's datum once the on-time firing happened (before it: None, the early phase)
LATE_PHASE = "late"


@dataclass(frozen=True)
class AfterWatermark(Trigger):
    """ON_TIME when the watermark passes the window end; optional EARLY firings before (``early``)
    and LATE firings after (``late``), each repeating by itself."""

    early: Trigger | None = None
    late: Trigger | None = None

    def children(self) -> tuple[Trigger, ...]:
        return tuple(t for t in (self.early, self.late) if t is not None)

    def child_slots(self) -> tuple[Trigger | None, ...]:
        return (self.early, self.late)

    def describe(self) -> object:
        d: dict = {}
        if self.early is not None:
            d["early"] = self.early.describe()
        if self.late is not None:
            d["late"] = self.late.describe()
        return {"after_watermark": d}

    @classmethod
    def from_spec(cls, name: str, arg: Any, site: SpecSite) -> Trigger:
        """``{after_watermark: {early: T, late: T}}``; in ``early`` and ``late`` the shorthands
        ``{every: D}`` and ``{count: N}`` mean one firing (they repeat by themselves), and a
        trigger that can never finish is refused."""
        arg = arg or {}
        if not isinstance(arg, dict) or set(arg) - {"early", "late"}:
            raise ValueError(f"{site.path}.after_watermark takes only early and late")
        early, late = (
            None if arg.get(phase) is None else site.parse_once(arg[phase], f"after_watermark.{phase}")
            for phase in ("early", "late")
        )
        return cls(early, late)

    def can_finish(self) -> bool:
        return self.late is None

    @staticmethod
    def in_late_phase(node: Node, st: TriggerState) -> bool:
        return node.data(st) == LATE_PHASE

    def on_element(self, node: Node, st: TriggerState, n: int, ctx: Ctx) -> None:
        # the end-of-window timer, set only while the watermark has not passed the window
        # (Beam's AfterWatermarkStateMachine.onElement)
        if not ctx.end_of_window_reached:
            st.eow = True
        early, late = node.children
        phases: tuple[Node | None, ...]
        if ctx.merging:
            # windows can merge: both phases see the elements (a merge can bring the early phase back)
            phases = (early, late)
        else:
            phases = (late if self.in_late_phase(node, st) else early,)
        for phase in phases:
            if phase is not None:
                phase.on_element(st, n, ctx)

    def should_fire(self, node: Node, st: TriggerState, ctx: Ctx) -> bool:
        early, late = node.children
        if not self.in_late_phase(node, st):
            return ctx.end_of_window_reached or (early is not None and early.should_fire(st, ctx))
        return late is not None and late.should_fire(st, ctx)

    def on_fire(self, node: Node, st: TriggerState, ctx: Ctx) -> None:
        early, late = node.children
        if self.in_late_phase(node, st):
            if late is not None:
                late.on_fire(st, ctx)
                late.repeat(st)
        elif not ctx.end_of_window_reached:
            # an early firing (only an early trigger makes one); it repeats by itself
            if early is not None:
                early.on_fire(st, ctx)
                early.repeat(st)
        else:
            # the on-time firing: leave the early phase for good (Beam's onNonLateFiring)
            if early is not None:
                if early.should_fire(st, ctx):
                    early.on_fire(st, ctx)
                early.reset(st)
            node.set_data(st, LATE_PHASE)
            if late is not None:
                late.clear(st)
            else:
                node.set_finished(st, True)

    def on_merge(self, node: Node, states: Sequence[TriggerState], out: TriggerState, ctx: Ctx) -> None:
        early, late = node.children
        all_late = all(s.data[node.slot] == LATE_PHASE for s in states)
        if not all_late or not ctx.end_of_window_reached:
            # still early somewhere (or the merged window ends later): early phase
            node.set_data(out, None)
            if early is not None:
                early.on_merge(states, out, ctx)
            if late is not None:
                late.reset(out)
        else:
            node.set_data(out, LATE_PHASE)
            if late is not None:
                late.on_merge(states, out, ctx)
            else:
                node.set_finished(out, True)

    def clear(self, node: Node, st: TriggerState) -> None:
        # the phase is not pending state: only the sub-triggers' counts and deadlines go
        for k in node.kids:
            k.clear(st)
