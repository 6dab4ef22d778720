"""What Spark pickles for the stateful plan (``deferred_processor.DeferredProcessor``) unpickles
without importing panes' engine, pandas or numpy: Spark's driver unpickles it at each query start
only to call ``init``, which declares the bucket's state. Its first call with rows loads the
processor inside and gives what the processor gives."""

from __future__ import annotations

import subprocess
import sys

from pyspark import cloudpickle

import panes
from panes.spark.deferred_processor import ENGINE_STATE, ENGINE_STATE_SCHEMA, DeferredProcessor
from panes.spark.stateful import KIND, BucketProcessor
from panes.spark.stateful_counts import COUNTS

SPEC = {"event_time": "t", "key": "k", "window": {"tumbling": {"size": 10_000}}, "aggregates": {"s": {"sum": "v"}}}

# (a fresh Python, as Spark's driver-side worker: unpickle, init on a handle that records what is
# declared, then the first call with rows)
SCRIPT = """
import pickle, sys

class Store:
    def __init__(self):
        self.stored = None
    def get(self):
        return self.stored
    def update(self, v):
        self.stored = v

class Handle:
    declared = []
    def getValueState(self, name, schema):
        self.declared.append((name, schema))
        return Store()
    def listTimers(self):
        return iter([])
    def registerTimer(self, t):
        pass

class Times:
    def getCurrentWatermarkInMs(self):
        return 0
    def getCurrentProcessingTimeInMs(self):
        return 0

processor = pickle.loads(sys.stdin.buffer.read())
processor.init(Handle())
print(Handle.declared, sorted(m for m in ("pandas", "numpy", "panes.core", "panes.spark.stateful") if m in sys.modules))
import pandas as pd
from panes.spark.columns import DETAIL, INVALID, TS
rows = pd.DataFrame({TS: [1_000, 12_000], INVALID: [None] * 2, DETAIL: [None] * 2, "k": ["a", "a"], "v": [2, 3]})
out = pd.concat(list(processor.handleInputRows(("0",), iter([rows]), Times())))
loaded = sorted(m for m in ("pandas", "numpy", "panes.core", "panes.spark.stateful") if m in sys.modules)
print(loaded, list(out["__panes_kind"]), list(out["__panes_counts"]))
"""


def test_the_pickled_processor_declares_its_state_without_importing_the_engine_then_runs_it():
    processor = BucketProcessor(panes.pipeline(SPEC), ["k", "v"], [KIND, COUNTS])
    blob = cloudpickle.dumps(DeferredProcessor(processor))
    out = subprocess.run([sys.executable, "-c", SCRIPT], input=blob, capture_output=True, check=True).stdout
    at_init, at_rows = out.decode().splitlines()
    assert at_init == f"[({ENGINE_STATE!r}, {ENGINE_STATE_SCHEMA!r})] []"
    counts = '{"records_in":2,"counted":2}'
    assert at_rows == f"['numpy', 'pandas', 'panes.core', 'panes.spark.stateful'] ['C'] [{counts!r}]"
