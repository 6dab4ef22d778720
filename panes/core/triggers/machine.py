"""``TriggerMachine``: runs one trigger tree over the per-window ``TriggerState``s of the engine.

It numbers the tree's nodes depth-first (node 0 is the root, each node one slot of a window's
state) and hands each trigger its ``Node``; the triggers' own classes hold the state machines.
"""

from __future__ import annotations

from collections.abc import Sequence

from .base import Ctx, Node, Trigger, TriggerState


class TriggerMachine:
    def __init__(self, root: Trigger):
        self.root = root
        self.nodes: list[Node] = []
        self.top = self._number(root)

    def _number(self, t: Trigger) -> Node:
        slot = len(self.nodes)
        self.nodes.append(None)  # type: ignore[arg-type]  # (the slot is taken before the children's)
        children = [None if c is None else self._number(c) for c in t.child_slots()]
        node = self.nodes[slot] = Node(t, slot, children)
        return node

    def new_state(self) -> TriggerState:
        return TriggerState(len(self.nodes))

    def on_element(self, st: TriggerState, n: int, ctx: Ctx) -> None:
        """``n`` elements arrived in the window (``ctx``: the input watermark and clock they came at)."""
        self.top.on_element(st, n, ctx)

    def should_fire(self, st: TriggerState, ctx: Ctx) -> bool:
        return self.top.should_fire(st, ctx)

    def on_fire(self, st: TriggerState, ctx: Ctx) -> None:
        self.top.on_fire(st, ctx)

    def is_finished(self, st: TriggerState) -> bool:
        """A finished root trigger closes its window."""
        return st.finished[0]

    def merge(self, states: Sequence[TriggerState], ctx: Ctx) -> TriggerState:
        """The trigger state of a window merged from windows with these states."""
        out = self.new_state()
        self.top.on_merge(states, out, ctx)
        return out
