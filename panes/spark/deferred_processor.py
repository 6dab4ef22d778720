"""The processor Spark pickles for the stateful plan: ``stateful.BucketProcessor`` pickled inside
it, loaded at its first call with rows or a timer.

At each query start Spark's driver runs a Python worker that unpickles the processor only to call
its ``init`` and learn the state it declares. Unpickling ``BucketProcessor`` imports panes' engine
with pandas and numpy, about half a second of that first micro-batch. This module is pickled by
value (cloudpickle), so unpickling a ``DeferredProcessor`` imports nothing of panes, and its
``init`` declares the bucket's state itself. Keep its imports to the standard library and PySpark's
processor API.
"""

from __future__ import annotations

import pickle
import sys
from typing import Any

from pyspark import cloudpickle
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle

#: the processor's value state that holds a bucket's engine state (``stateful_store.BucketState``)
ENGINE_STATE = "engine"
ENGINE_STATE_SCHEMA = "blob binary"


def engine_state(handle: StatefulProcessorHandle) -> Any:
    """The bucket's engine state, declared with ``handle``."""
    return handle.getValueState(ENGINE_STATE, ENGINE_STATE_SCHEMA)


class DeferredProcessor(StatefulProcessor):
    """``processor`` (a ``stateful.BucketProcessor``), unpickled at the first call of a task that
    has rows or a timer for it, then bound to the handle and the state ``init`` declared."""

    def __init__(self, processor: StatefulProcessor):
        self.payload = cloudpickle.dumps(processor)
        self.processor: Any = None

    def __getstate__(self) -> dict:
        return {"payload": self.payload, "processor": None}

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle, self.value = handle, engine_state(handle)

    def loaded(self) -> Any:
        if self.processor is None:
            self.processor = pickle.loads(self.payload)
            self.processor.bind(self.handle, self.value)
        return self.processor

    def handleInputRows(self, key, rows, timerValues):
        return self.loaded().handleInputRows(key, rows, timerValues)

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        return self.loaded().handleExpiredTimer(key, timerValues, expiredTimerInfo)

    def close(self) -> None:
        if self.processor is not None:
            self.processor.close()


cloudpickle.register_pickle_by_value(sys.modules[__name__])
