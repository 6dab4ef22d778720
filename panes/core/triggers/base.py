"""The trigger base class, a window's trigger state, and the node through which a trigger reads it.

A trigger is a frozen value (its parameters) that owns its state machine, as Beam Java's
``TriggerStateMachine``: ``on_element`` after each bundle of elements, ``should_fire`` / ``on_fire``
when the engine evaluates a window, ``on_merge`` when session windows merge, ``clear`` (Beam's
``invokeClear``: pending counts and deadlines) and ``reset`` (Beam's ``resetTree``: the whole
subtree back to its start). A ``TriggerMachine`` numbers the nodes of one trigger tree; each
state-machine method gets the trigger's ``Node`` (its slot in the window's ``TriggerState`` and its
child nodes) and the window's ``TriggerState``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from ..rules import end_passed

if TYPE_CHECKING:
    from .registry import SpecSite


class TriggerState:
    """Per-window state of a trigger tree: a finished flag and one datum per node (a count, a
    processing-time deadline, or the watermark trigger's phase). Two flat lists: the stateful
    Spark plan pickles a whole hash bucket of windows every micro-batch."""

    __slots__ = ("finished", "data")

    def __init__(self, n: int):
        self.finished = [False] * n
        self.data: list = [None] * n

    def __getstate__(self):
        return (self.finished, self.data)

    def __setstate__(self, st):
        self.finished, self.data = st


@dataclass
class Ctx:
    """What a trigger may look at: the watermark, the processing time, the window's end."""

    watermark: int
    processing_time: int
    window_end: int

    @property
    def end_of_window_reached(self) -> bool:
        return end_passed(self.window_end, self.watermark)


class Node:
    """One trigger of a tree inside a ``TriggerMachine``: its slot in a window's ``TriggerState``
    and its child nodes (``children`` by position, None where a trigger's optional child is
    absent; ``kids``: the present ones). Its methods run the trigger's state machine."""

    __slots__ = ("trigger", "slot", "children", "kids")

    def __init__(self, trigger: Trigger, slot: int, children: Sequence[Node | None]):
        self.trigger = trigger
        self.slot = slot
        self.children = tuple(children)
        self.kids = tuple(c for c in self.children if c is not None)

    # -- the node's own state ----------------------------------------------------------------------
    def data(self, st: TriggerState) -> Any:
        return st.data[self.slot]

    def set_data(self, st: TriggerState, value: Any) -> None:
        st.data[self.slot] = value

    def is_finished(self, st: TriggerState) -> bool:
        return st.finished[self.slot]

    def set_finished(self, st: TriggerState, value: bool) -> None:
        st.finished[self.slot] = value

    def first_unfinished(self, st: TriggerState) -> Node | None:
        for k in self.kids:
            if not st.finished[k.slot]:
                return k
        return None

    # -- the state machine -------------------------------------------------------------------------
    def on_element(self, st: TriggerState, n: int, pt: int) -> None:
        if not st.finished[self.slot]:
            self.trigger.on_element(self, st, n, pt)

    def should_fire(self, st: TriggerState, ctx: Ctx) -> bool:
        return self.trigger.should_fire(self, st, ctx)

    def on_fire(self, st: TriggerState, ctx: Ctx) -> None:
        self.trigger.on_fire(self, st, ctx)

    def on_merge(self, states: Sequence[TriggerState], out: TriggerState, ctx: Ctx) -> None:
        self.trigger.on_merge(self, states, out, ctx)

    def clear(self, st: TriggerState) -> None:
        self.trigger.clear(self, st)

    def reset(self, st: TriggerState) -> None:
        self.trigger.reset(self, st)

    def next_processing_deadline(self, st: TriggerState) -> int | None:
        if st.finished[self.slot]:
            return None
        return self.trigger.next_processing_deadline(self, st)


class Trigger:
    """Base of the trigger tree. A subclass defines its parameters (a frozen dataclass),
    ``describe`` / ``from_spec`` (its spec form both ways), and the state-machine methods it
    does not inherit: the defaults pass elements to every child, clear and reset the subtree,
    merge the children and take the deadline of the earliest child."""

    def children(self) -> tuple[Trigger, ...]:
        return ()

    def child_slots(self) -> tuple[Trigger | None, ...]:
        """The children by position, None for an absent optional one (a node's ``children``)."""
        return self.children()

    def describe(self) -> object:
        raise NotImplementedError

    @classmethod
    def from_spec(cls, name: str, arg: Any, site: SpecSite) -> Trigger:
        """The trigger of the spec ``{name: arg}`` (``name``: one of the registry's names for
        this class); ``site`` says where in the spec it is and parses sub-triggers."""
        raise NotImplementedError

    def uses_processing_time(self) -> bool:
        """Whether the trigger needs processing time (timers in processing time)."""
        return any(c.uses_processing_time() for c in self.children())

    # -- the state machine (``node``: this trigger's place in a machine) ---------------------------
    def on_element(self, node: Node, st: TriggerState, n: int, pt: int) -> None:
        """``n`` elements arrived at processing time ``pt`` (only called while not finished)."""
        for k in node.kids:
            k.on_element(st, n, pt)

    def should_fire(self, node: Node, st: TriggerState, ctx: Ctx) -> bool:
        raise NotImplementedError

    def on_fire(self, node: Node, st: TriggerState, ctx: Ctx) -> None:
        raise NotImplementedError

    def on_merge(self, node: Node, states: Sequence[TriggerState], out: TriggerState, ctx: Ctx) -> None:
        """Fill ``out`` (a fresh state) for a window merged from windows with ``states``."""
        for k in node.kids:
            k.on_merge(states, out, ctx)
        node.set_finished(out, any(s.finished[node.slot] for s in states))

    def clear(self, node: Node, st: TriggerState) -> None:
        """Forget pending state (counts, deadlines) in the subtree, not its finished flags."""
        node.set_data(st, None)
        for k in node.kids:
            k.clear(st)

    def reset(self, node: Node, st: TriggerState) -> None:
        """The subtree back to its start: no state, nothing finished."""
        node.set_data(st, None)
        node.set_finished(st, False)
        for k in node.kids:
            k.reset(st)

    def next_processing_deadline(self, node: Node, st: TriggerState) -> int | None:
        """The earliest processing time at which an armed processing-time trigger can fire
        (only called while not finished)."""
        found = [d for d in (k.next_processing_deadline(st) for k in node.kids) if d is not None]
        return min(found) if found else None
