"""A hash bucket's state in the stateful plan (``stateful.BucketProcessor``): its engine state in
one value state, its windows' fields as columns (``core.engine.columnar``), and one event-time
timer at the earliest watermark at which one of its windows can fire or expire."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.sql.streaming.stateful_processor import StatefulProcessorHandle

from ..core.engine import Engine, EngineState, columnar
from ..core.time import END_OF_INPUT
from .columns import SPARK_END_MS


class BucketState:
    """``value``: the bucket's value state, as ``deferred_processor.engine_state`` declared it."""

    def __init__(self, handle: StatefulProcessorHandle, engine: Engine, value):
        self.handle = handle
        self.engine = engine
        self.value = value

    def load(self) -> EngineState:
        stored = self.value.get()  # (None: the bucket has no state yet, nor timers)
        if stored is None:
            st = self.engine.new_state()
            st.host_timers = []
            return st
        return columnar.decode(stored[0])

    def save(self, st: EngineState) -> None:
        """Store the bucket's state and keep one event-time timer at its next deadline. The timers
        set are stored with the state, which Spark commits with its timers, so a call does not ask
        Spark for them (``listTimers``: a round trip to its state server); a state stored without
        them (an older panes) asks once."""
        # the engine's wake mark is a lower bound of the next deadline, exact after a scan
        d = st.wake_event if st.wake_event > st.watermark else self.engine.next_event_deadline(st)
        want = [max(int(min(d, SPARK_END_MS)), 0)] if d is not None and d < END_OF_INPUT else []
        have = list(self.handle.listTimers()) if st.host_timers is None else st.host_timers
        st.host_timers = want
        self.value.update((columnar.encode(st),))
        if have != want:
            for t in have:
                self.handle.deleteTimer(t)
            for t in want:
                self.handle.registerTimer(t)


#: whether this process's long-lived objects are out of the cyclic collector's reach (``freeze_once``)
_frozen = False


def freeze_once() -> None:
    """The objects alive as a Python worker's first task begins (its modules: PySpark, pandas,
    Arrow, panes; about 90,000) moved out of the cyclic collector's reach, once per process:
    PySpark's worker runs a full ``gc.collect()`` after every task, which otherwise walks them all.
    What later tasks make stays the collector's (the first task's own objects alive then are
    frozen with the modules, once)."""
    global _frozen
    if not _frozen:
        _frozen = True
        gc.collect()
        gc.freeze()


@contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused for a callback: the bucket's state is tens of
    thousands of objects without cycles, made and dropped every micro-batch, which the collector
    would otherwise scan again and again as they age (reference counting frees them)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
