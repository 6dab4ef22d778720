"""The trigger base class, a window's trigger state, and the node through which a trigger reads it.

A trigger is a frozen value (its parameters) that owns its state machine, as Beam Java's
``TriggerStateMachine``: ``on_element`` after each bundle of elements, ``should_fire`` / ``on_fire``
when the engine evaluates a window (on the window's own records and timers only), ``on_merge`` when
session windows merge, ``clear`` (Beam's ``invokeClear``: pending counts and deadlines) and
``reset`` (Beam's ``resetTree``: the whole subtree back to its start). Triggers set timers in the
window's state: the end-of-window timer (``after_watermark``) and processing-time timers
(``after_processing_time``); a timer that fires makes the engine evaluate the window. A
``TriggerMachine`` numbers the nodes of one trigger tree; each state-machine method gets the
trigger's ``Node`` (its slot in the window's ``TriggerState`` and its child nodes) and the window's
``TriggerState``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..rules import end_passed, processing_timer_fires

if TYPE_CHECKING:
    from .registry import SpecSite


class TriggerState:
    """Per-window state of a trigger tree: a finished flag and one datum per node (a count, a
    processing-time deadline, or the watermark trigger's phase), and the timers the triggers set:
    whether the end-of-window timer is pending (``eow``) and the processing-time timers (``clock``,
    sorted instants; a timer stays after its trigger cleared its deadline, and fires anyway, as
    Beam's). Flat values: the stateful Spark plan pickles a whole hash bucket of windows every
    micro-batch."""

    __slots__ = ("finished", "data", "eow", "clock")

    def __init__(self, n: int):
        self.finished = [False] * n
        self.data: list = [None] * n
        self.eow = False
        self.clock: list[int] = []

    def __getstate__(self):
        return (self.finished, self.data, self.eow, self.clock)

    def __setstate__(self, st):
        self.finished, self.data, self.eow, self.clock = st

    def set_clock_timer(self, t: int) -> None:
        """A processing-time timer at ``t`` (one per instant)."""
        if t not in self.clock:
            self.clock.append(t)
            self.clock.sort()

    def due_clock_timers(self, processing_time: int) -> list[int]:
        """Remove and return the processing-time timers that fire at this clock."""
        due = [t for t in self.clock if processing_timer_fires(t, processing_time)]
        if due:
            self.clock = self.clock[len(due) :]
        return due


@dataclass
class Ctx:
    """What a trigger may look at: the input watermark, the processing time, the window's end, and
    whether windows can merge (then ``after_each`` and ``after_watermark`` run every sub-trigger,
    as Beam's ``isMerging()``)."""

    watermark: int
    processing_time: int
    window_end: int
    merging: bool = False

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
    def on_element(self, st: TriggerState, n: int, ctx: Ctx) -> None:
        if not st.finished[self.slot]:
            self.trigger.on_element(self, st, n, ctx)

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

    def repeat(self, st: TriggerState) -> None:
        """After a firing of a trigger that repeats (``repeatedly``'s, or ``after_watermark``'s
        early and late ones): a finished trigger starts over as a whole (Beam's ``resetTree``);
        an unfinished one loses its pending counts and deadlines, its finished children stay
        finished (Beam's ``invokeClear``), so ``after_each`` moves on to its next trigger."""
        if self.is_finished(st):
            self.reset(st)
        else:
            self.clear(st)


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

    def can_finish(self) -> bool:
        """Whether the trigger can finish, i.e. stop firing for good. Where Beam Java requires a
        ``OnceTrigger`` (early and late firings, ``or_finally``'s ``finally``, the triggers of
        ``after_any`` and ``after_all``), panes requires one that can finish."""
        return all(c.can_finish() for c in self.children())

    # -- the state machine (``node``: this trigger's place in a machine) ---------------------------
    def on_element(self, node: Node, st: TriggerState, n: int, ctx: Ctx) -> None:
        """``n`` elements arrived (only called while not finished); ``ctx.watermark``: the input
        watermark they came at."""
        for k in node.kids:
            k.on_element(st, n, ctx)

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
