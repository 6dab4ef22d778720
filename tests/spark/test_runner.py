"""`panes run` end to end on the bundled traffic example: stream and batch from one spec, JSON
sinks, dead letters in their own sink, and a query restarted from its checkpoint (the input ended
explicitly, ``end_input``: ``available_now`` alone keeps the last windows open for a next run)."""

import json
import shutil
from pathlib import Path

import pytest

from panes.runner import run_spec
from panes.spark.native import NativeStream
from panes.spec import load_run_spec
from tests.spark.answers import record_answers

pytestmark = pytest.mark.spark
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "traffic"


def _spec(tmp_path, files, mode="stream", available_now=True, timeout=None, name="out"):
    src = tmp_path / "data"
    src.mkdir(exist_ok=True)
    for i, f in enumerate(files):
        shutil.copy(EXAMPLE / "data" / f, src / f)
        import os

        os.utime(src / f, (1_600_000_000 + i, 1_600_000_000 + i))
    spec = load_run_spec(EXAMPLE / "pipeline.yaml")
    spec.mode = mode
    spec.source.path = str(src)
    spec.sink.format, spec.sink.path = "json", str(tmp_path / name / "panes")
    spec.dead_letter.format, spec.dead_letter.path = "json", str(tmp_path / name / "dead")
    spec.checkpoint = str(tmp_path / "checkpoint")
    spec.spark.available_now = available_now
    spec.timeout = timeout
    return spec


def _read(spark, path):
    p = Path(path)
    if not p.exists():
        return []
    return [r.asDict() for r in spark.read.json(str(p)).collect()]


def _panes(rows):
    return sorted((r["traffic_light"], r["window_start"], r["total_cars"], r["passengers"]) for r in rows)


def test_stream_restart_and_batch(spark, tmp_path, monkeypatch):
    files = ["part-0.json", "part-1.json", "part-2.json"]
    # one run over all three files
    whole = tmp_path / "whole"
    whole.mkdir()
    collects = record_answers(monkeypatch, NativeStream, "collects")
    run_spec(_spec(whole, files), spark=spark, progress=False, end_input=True)
    # (the micro-batches collect their tables; the input's end writes none: NativeStream.end)
    assert collects == [True] * 3
    monkeypatch.undo()
    panes_whole = _read(spark, whole / "out" / "panes")
    dead_whole = _read(spark, whole / "out" / "dead")
    assert len(panes_whole) == 9  # 3 lights x 3 hours
    reasons = sorted(d["reason"] for d in dead_whole)
    assert reasons == ["invalid_event_time", "late", "missing_key"]
    late = next(d for d in dead_whole if d["reason"] == "late")
    assert json.loads(late["record"])["registration_plate"] == "ZZ9 LATE"

    # the same in two runs: the first stops after the first two files, the second resumes from
    # the checkpoint when the third arrives
    split = tmp_path / "split"
    split.mkdir()
    run_spec(_spec(split, files[:2], available_now=False, timeout=25_000), spark=spark, progress=False)
    first = _read(spark, split / "out" / "panes")
    assert 0 < len(first) < 9
    run_spec(_spec(split, files), spark=spark, progress=False, end_input=True)
    assert _panes(_read(spark, split / "out" / "panes")) == _panes(panes_whole)
    assert sorted(d["reason"] for d in _read(spark, split / "out" / "dead")) == reasons

    # batch: the final answer over every record, the late one included
    batch = tmp_path / "batch"
    batch.mkdir()
    run_spec(_spec(batch, files, mode="batch"), spark=spark, progress=False)
    panes_batch = _read(spark, batch / "out" / "panes")
    diff = {(a[0], a[1]): (a, b) for a, b in zip(_panes(panes_batch), _panes(panes_whole)) if a != b}
    # only the window the late record belongs to differs, by that record
    assert len(diff) == 1
    (light, start), (b, s) = next(iter(diff.items()))
    assert light == json.loads(late["record"])["traffic_light"] and start.startswith("2021-08-07T09:00")
    assert b[3] - s[3] == json.loads(late["record"])["passengers"]
    assert sorted(d["reason"] for d in _read(spark, batch / "out" / "dead")) == ["invalid_event_time", "missing_key"]
