"""Triggers: when in processing time a window's panes are materialised.

The trigger tree is a value (frozen dataclasses); its per-window state is a ``TriggerState``.
The state machines follow Beam Java's ``TriggerStateMachine`` family: ``on_element`` after each
bundle of elements, ``should_fire`` / ``on_fire`` when the engine evaluates a window (after a
bundle, after the watermark or the processing-time clock moves), ``merge`` when session windows
merge. A finished root trigger closes its window.

Default: ``Never`` — the window emits once, its final pane, when it expires at
watermark >= end + allowed lateness (Atlas Stream Processing, Spark append mode, Kafka
``suppress``). Beam's own default (``Repeatedly(AfterWatermark())``) is ``BEAM_DEFAULT``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from .rules import end_passed


class Trigger:
    """Base of the trigger tree."""

    def children(self) -> tuple["Trigger", ...]:
        return ()

    def describe(self) -> object:
        raise NotImplementedError

    #: whether the trigger needs processing time (timers in processing time)
    def uses_processing_time(self) -> bool:
        return any(c.uses_processing_time() for c in self.children())


@dataclass(frozen=True)
class Never(Trigger):
    """Fires only when the window expires (its final pane)."""

    def describe(self):
        return "at_close"


@dataclass(frozen=True)
class AfterWatermark(Trigger):
    """ON_TIME when the watermark passes the window end; optional EARLY firings before (``early``)
    and LATE firings after (``late``), each repeating by itself."""

    early: Trigger | None = None
    late: Trigger | None = None

    def children(self):
        return tuple(t for t in (self.early, self.late) if t is not None)

    def describe(self):
        d: dict = {}
        if self.early is not None:
            d["early"] = self.early.describe()
        if self.late is not None:
            d["late"] = self.late.describe()
        return {"after_watermark": d}


@dataclass(frozen=True)
class AfterCount(Trigger):
    count: int

    def __post_init__(self):
        if self.count < 1:
            raise ValueError("after_count needs a count of at least 1")

    def describe(self):
        return {"after_count": self.count}


@dataclass(frozen=True)
class AfterProcessingTime(Trigger):
    """Fires once processing time reaches (first element of the pane) + delay, rounded up to the
    next multiple of ``align`` when given (Beam's ``alignedTo``: ``every: 1 minute`` fires at each
    minute boundary that follows data, as Streaming 102's AtPeriod)."""

    delay: int
    align: int | None = None

    def uses_processing_time(self):
        return True

    def deadline(self, first_element_pt: int) -> int:
        t = first_element_pt + self.delay
        if self.align:
            r = t % self.align
            if r:
                t += self.align - r
        return t

    def describe(self):
        if self.align and not self.delay:
            return {"every": self.align}
        return {"after_processing_time": self.delay}


@dataclass(frozen=True)
class Repeatedly(Trigger):
    trigger: Trigger

    def children(self):
        return (self.trigger,)

    def describe(self):
        return {"repeatedly": self.trigger.describe()}


@dataclass(frozen=True)
class AfterAny(Trigger):
    triggers: tuple[Trigger, ...]

    def children(self):
        return self.triggers

    def describe(self):
        return {"after_any": [t.describe() for t in self.triggers]}


@dataclass(frozen=True)
class AfterAll(Trigger):
    triggers: tuple[Trigger, ...]

    def children(self):
        return self.triggers

    def describe(self):
        return {"after_all": [t.describe() for t in self.triggers]}


@dataclass(frozen=True)
class AfterEach(Trigger):
    triggers: tuple[Trigger, ...]

    def children(self):
        return self.triggers

    def describe(self):
        return {"after_each": [t.describe() for t in self.triggers]}


@dataclass(frozen=True)
class OrFinally(Trigger):
    trigger: Trigger
    until: Trigger

    def children(self):
        return (self.trigger, self.until)

    def describe(self):
        return {"or_finally": {"trigger": self.trigger.describe(), "finally": self.until.describe()}}


BEAM_DEFAULT = Repeatedly(AfterWatermark())


# --------------------------------------------------------------------------------------------
# runtime


class TriggerState:
    """Per-window state of a trigger tree: a finished flag and one datum per node (a count, a
    processing-time deadline, or the watermark trigger's phase)."""

    __slots__ = ("finished", "data")

    def __init__(self, n: int):
        self.finished = [False] * n
        self.data: list = [None] * n

    def copy(self) -> "TriggerState":
        s = TriggerState(0)
        s.finished = list(self.finished)
        s.data = list(self.data)
        return s

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


class TriggerMachine:
    """Runs one trigger tree. Nodes are numbered depth-first; node 0 is the root."""

    def __init__(self, root: Trigger):
        self.root = root
        self.nodes: list[Trigger] = []
        self.kids: list[list[int]] = []
        self._number(root)

    def _number(self, t: Trigger) -> int:
        i = len(self.nodes)
        self.nodes.append(t)
        self.kids.append([])
        if isinstance(t, AfterWatermark):
            # children slots: [early, late], None where absent
            ids = [self._number(t.early) if t.early is not None else -1,
                   self._number(t.late) if t.late is not None else -1]
            self.kids[i] = ids
        else:
            self.kids[i] = [self._number(c) for c in t.children()]
        return i

    def new_state(self) -> TriggerState:
        return TriggerState(len(self.nodes))

    # -- element -----------------------------------------------------------------------------
    def on_element(self, st: TriggerState, n: int, pt: int, i: int = 0) -> None:
        if st.finished[i]:
            return
        t = self.nodes[i]
        if isinstance(t, AfterCount):
            st.data[i] = (st.data[i] or 0) + n
        elif isinstance(t, AfterProcessingTime):
            if st.data[i] is None:
                st.data[i] = t.deadline(pt)
        elif isinstance(t, AfterWatermark):
            early, late = self.kids[i]
            if st.data[i] != "late":
                if early >= 0:
                    self.on_element(st, n, pt, early)
            elif late >= 0:
                self.on_element(st, n, pt, late)
        elif isinstance(t, AfterEach):
            cur = self._first_unfinished(st, i)
            if cur is not None:
                self.on_element(st, n, pt, cur)
        else:
            for k in self.kids[i]:
                self.on_element(st, n, pt, k)

    # -- should fire -------------------------------------------------------------------------
    def should_fire(self, st: TriggerState, ctx: Ctx, i: int = 0) -> bool:
        t = self.nodes[i]
        if isinstance(t, Never):
            return False
        if isinstance(t, AfterCount):
            return (st.data[i] or 0) >= t.count
        if isinstance(t, AfterProcessingTime):
            return st.data[i] is not None and ctx.processing_time >= st.data[i]
        if isinstance(t, AfterWatermark):
            early, late = self.kids[i]
            if st.data[i] != "late":
                return ctx.end_of_window_reached or (early >= 0 and self.should_fire(st, ctx, early))
            return late >= 0 and self.should_fire(st, ctx, late)
        if isinstance(t, Repeatedly):
            return self.should_fire(st, ctx, self.kids[i][0])
        if isinstance(t, AfterAny):
            return any(self.should_fire(st, ctx, k) for k in self.kids[i])
        if isinstance(t, AfterAll):
            return all(st.finished[k] or self.should_fire(st, ctx, k) for k in self.kids[i])
        if isinstance(t, AfterEach):
            cur = self._first_unfinished(st, i)
            return cur is not None and self.should_fire(st, ctx, cur)
        if isinstance(t, OrFinally):
            a, u = self.kids[i]
            return self.should_fire(st, ctx, a) or self.should_fire(st, ctx, u)
        raise TypeError(f"unknown trigger {t!r}")

    # -- fire --------------------------------------------------------------------------------
    def on_fire(self, st: TriggerState, ctx: Ctx, i: int = 0) -> None:
        t = self.nodes[i]
        if isinstance(t, (AfterCount, AfterProcessingTime)):
            st.data[i] = None
            st.finished[i] = True
        elif isinstance(t, Never):
            pass
        elif isinstance(t, AfterWatermark):
            early, late = self.kids[i]
            if st.data[i] != "late":
                if not ctx.end_of_window_reached:
                    # an early firing; the early trigger repeats by itself
                    self.on_fire(st, ctx, early)
                    self.reset(st, early)
                else:
                    # the on-time firing: leave the early phase for good
                    if early >= 0:
                        self.reset(st, early)
                    st.data[i] = "late"
                    if late >= 0:
                        self.reset(st, late)
                    else:
                        st.finished[i] = True
            elif late >= 0:
                self.on_fire(st, ctx, late)
                self.reset(st, late)
        elif isinstance(t, Repeatedly):
            k = self.kids[i][0]
            self.on_fire(st, ctx, k)
            if st.finished[k]:
                self.reset(st, k)
        elif isinstance(t, AfterAny):
            for k in self.kids[i]:
                if self.should_fire(st, ctx, k):
                    self.on_fire(st, ctx, k)
                else:
                    self.clear(st, k)
            st.finished[i] = True
        elif isinstance(t, AfterAll):
            for k in self.kids[i]:
                if not st.finished[k]:
                    self.on_fire(st, ctx, k)
            st.finished[i] = True
        elif isinstance(t, AfterEach):
            cur = self._first_unfinished(st, i)
            if cur is not None:
                self.on_fire(st, ctx, cur)
            st.finished[i] = self._first_unfinished(st, i) is None
        elif isinstance(t, OrFinally):
            a, u = self.kids[i]
            if self.should_fire(st, ctx, u):
                self.on_fire(st, ctx, u)
                self.clear(st, a)
                st.finished[i] = True
            else:
                self.on_fire(st, ctx, a)
                st.finished[i] = st.finished[a]
        else:
            raise TypeError(f"unknown trigger {t!r}")

    # -- housekeeping ------------------------------------------------------------------------
    def clear(self, st: TriggerState, i: int) -> None:
        """Forget the node's pending state (counts, deadlines), not its finished flags."""
        if i < 0:
            return
        if not isinstance(self.nodes[i], AfterWatermark):
            st.data[i] = None
        for k in self.kids[i]:
            self.clear(st, k)

    def reset(self, st: TriggerState, i: int) -> None:
        """Back to the start: no state, nothing finished (Beam's resetTree)."""
        if i < 0:
            return
        st.data[i] = None
        st.finished[i] = False
        for k in self.kids[i]:
            self.reset(st, k)

    def _first_unfinished(self, st: TriggerState, i: int) -> int | None:
        for k in self.kids[i]:
            if not st.finished[k]:
                return k
        return None

    def is_finished(self, st: TriggerState) -> bool:
        return st.finished[0]

    def next_processing_deadline(self, st: TriggerState, i: int = 0) -> int | None:
        """The earliest processing time at which an armed processing-time trigger can fire."""
        if i < 0 or st.finished[i]:
            return None
        t = self.nodes[i]
        if isinstance(t, AfterProcessingTime):
            return st.data[i]
        kids = self.kids[i]
        if isinstance(t, AfterWatermark):
            kids = [kids[0]] if st.data[i] != "late" else [kids[1]]
        elif isinstance(t, AfterEach):
            cur = self._first_unfinished(st, i)
            kids = [cur] if cur is not None else []
        found = [d for d in (self.next_processing_deadline(st, k) for k in kids if k >= 0) if d is not None]
        return min(found) if found else None

    def merge(self, states: Sequence[TriggerState], ctx: Ctx) -> TriggerState:
        """The trigger state of a window merged from windows with these states."""
        out = self.new_state()
        self._merge(states, out, ctx, 0)
        return out

    def _merge(self, states, out: TriggerState, ctx: Ctx, i: int) -> None:
        if i < 0:
            return
        t = self.nodes[i]
        any_finished = any(s.finished[i] for s in states)
        if isinstance(t, AfterCount):
            out.finished[i] = any_finished
            out.data[i] = None if any_finished else sum((s.data[i] or 0) for s in states) or None
        elif isinstance(t, AfterProcessingTime):
            out.finished[i] = any_finished
            ds = [s.data[i] for s in states if s.data[i] is not None]
            out.data[i] = None if any_finished or not ds else min(ds)
        elif isinstance(t, AfterWatermark):
            early, late = self.kids[i]
            all_late = all(s.data[i] == "late" for s in states)
            if not all_late or not ctx.end_of_window_reached:
                # still early somewhere (or the merged window ends later): early phase
                out.data[i] = None
                if early >= 0:
                    self._merge(states, out, ctx, early)
                if late >= 0:
                    self.reset(out, late)
            else:
                out.data[i] = "late"
                if late >= 0:
                    self._merge(states, out, ctx, late)
                else:
                    out.finished[i] = True
        else:
            for k in self.kids[i]:
                self._merge(states, out, ctx, k)
            if isinstance(t, Repeatedly):
                out.finished[i] = False
            elif isinstance(t, AfterEach):
                out.finished[i] = self._first_unfinished(out, i) is None
            elif isinstance(t, OrFinally):
                a, u = self.kids[i]
                out.finished[i] = out.finished[a] or out.finished[u]
            elif isinstance(t, Never):
                out.finished[i] = False
            else:
                out.finished[i] = any_finished
