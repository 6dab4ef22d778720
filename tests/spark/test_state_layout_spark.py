"""A stateful checkpoint made through the Python API (``write_stream``: no ``panes/state.json``)
whose buckets' state an older panes laid out (pickled) is refused by ``write_stream`` in one line,
before the query starts (the driver reads one bucket's stored state), not inside a Spark task."""

from __future__ import annotations

import json
import os
import pickle
import sys

import pytest
from pyspark import cloudpickle

import panes
from panes.core.engine.columnar import StateFormatError
from panes.spark.stateful import BucketProcessor
from panes.spark.stateful_store import BucketState

pytestmark = pytest.mark.spark

PIPELINE = {
    "event_time": "t",
    "key": "k",
    "window": {"tumbling": {"size": 10_000}},
    "aggregates": {"s": {"sum": "v"}},
}


class PickledBucketState(BucketState):
    """A bucket's state as panes before the columnar layout stored it: the engine state pickled."""

    def load(self):
        stored = self.value.get()
        return self.engine.new_state() if stored is None else pickle.loads(stored[0])

    def save(self, st) -> None:
        super().save(st)  # (its timer)
        self.value.update((pickle.dumps(st),))


class OlderPanesProcessor(BucketProcessor):
    def bind(self, handle, value) -> None:
        self.state = PickledBucketState(handle, self.engine, value)


# (these classes go to Spark's Python workers whole, as an older panes' code would be there)
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def _stream(spark, src):
    df = spark.readStream.schema("k STRING, v LONG, t LONG").option("maxFilesPerTrigger", 1).json(str(src))
    return panes.window(df, PIPELINE, buckets=2, plan="stateful")


def _consume(df, batch_id) -> None:
    df.collect()  # (Spark checks that a micro-batch's state stores all committed: read it whole)


def test_an_api_checkpoint_of_the_pickled_layout_is_refused_before_the_query_starts(spark, tmp_path, monkeypatch):
    src, checkpoint = tmp_path / "in", str(tmp_path / "ck")
    src.mkdir()
    (src / "a.json").write_text(json.dumps({"k": "a", "v": 1, "t": 1_000}) + "\n")
    os.utime(src / "a.json", (1_600_000_000,) * 2)
    written: list = []
    with monkeypatch.context() as m:
        m.setattr("panes.spark.planner.BucketProcessor", OlderPanesProcessor)
        older = _stream(spark, src).write_stream(
            lambda d, i: written.extend(d.collect()), lambda d, i: None, checkpoint
        )
        try:
            older.processAllAvailable()
        finally:
            older.stop()
    assert written == [] and (tmp_path / "ck" / "commits" / "0").exists()
    active = len(spark.streams.active)
    with pytest.raises(StateFormatError) as e:
        _stream(spark, src).write_stream(_consume, _consume, checkpoint)
    assert str(e.value) == (
        f"checkpoint {checkpoint} holds its state in another layout (pickled, as panes before the columnar layout "
        f"wrote it) than this panes reads (columnar-1); start afresh with a new checkpoint directory (or remove "
        f"{checkpoint})"
    )
    assert len(spark.streams.active) == active  # (no query started)
    # a checkpoint of this layout goes on
    fresh = str(tmp_path / "fresh")
    q = _stream(spark, src).write_stream(_consume, _consume, fresh)
    q.processAllAvailable()
    q.stop()
    again = _stream(spark, src).write_stream(_consume, _consume, fresh)
    again.processAllAvailable()
    again.stop()
