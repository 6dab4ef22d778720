"""A Parquet source's dead letters on the native plan: the stream carries each row's reference in
its file in place of the record columns no window reads, and the records are read back from the
files (``panes.spark.record_files``). The dead letters are those of a stream that carries every
record column, field by field."""

import json
import os
import shutil
from pathlib import Path

import pytest

from panes import runner
from panes.runner import run_spec
from panes.spark.native.step import NativeStep
from panes.spec import load_run_spec
from tests.spark.answers import record_answers

pytestmark = pytest.mark.spark
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "traffic"
SCHEMA = "traffic_light STRING, created_at STRING, registration_plate STRING, passengers LONG"


def _parquet_files(spark, tmp_path, partitioned: bool) -> Path:
    """The traffic example's three files as Parquet, one file each, in the same order
    (``partitioned``: each in a directory ``part=<i>``, a column of its records)."""
    src = tmp_path / "data"
    for i in range(3):
        out = tmp_path / f"tmp{i}"
        spark.read.schema(SCHEMA).json(str(EXAMPLE / "data" / f"part-{i}.json")).coalesce(1).write.parquet(str(out))
        (part,) = out.glob("part-*.parquet")
        into = src / f"part={i}" if partitioned else src
        into.mkdir(parents=True, exist_ok=True)
        shutil.move(part, into / f"part-{i}.parquet")
        os.utime(into / f"part-{i}.parquet", (1_600_000_000 + i, 1_600_000_000 + i))
    return src


def _run(spark, tmp_path, src: Path, name: str) -> tuple[list, list]:
    spec = load_run_spec(EXAMPLE / "pipeline.yaml")
    spec.source.format, spec.source.path, spec.source.schema_ = "parquet", str(src), None
    # (the windows read no registration plate: the late record's comes from its file)
    spec.aggregates = {k: v for k, v in spec.aggregates.items() if k == "passengers"}
    spec.sink.format, spec.sink.path = "json", str(tmp_path / name / "panes")
    spec.dead_letter.format, spec.dead_letter.path = "json", str(tmp_path / name / "dead")
    spec.checkpoint = str(tmp_path / name / "checkpoint")
    run_spec(spec, spark=spark, progress=False, end_input=True)
    got = spark.read.json(spec.sink.path).collect()
    dead = [r.asDict(recursive=True) for r in spark.read.json(spec.dead_letter.path).collect()]
    return sorted(json.dumps(r.asDict(recursive=True), sort_keys=True) for r in got), sorted(
        dead, key=lambda d: d["reason"]
    )


@pytest.mark.parametrize("partitioned", [False, True])
def test_dead_letters_read_back_from_their_files(spark, tmp_path, monkeypatch, partitioned):
    src = _parquet_files(spark, tmp_path, partitioned)
    columns = record_answers(monkeypatch, NativeStep, "stream_columns")
    got, dead = _run(spark, tmp_path, src, "referenced")
    # the stream's columns: the references, no registration plate
    assert columns and all("registration_plate" not in c and "__panes_record_row" in c for c in columns)
    monkeypatch.undo()
    # the same run with the stream carrying every record column
    monkeypatch.setattr(runner, "with_record_references", lambda df, src: (df, None))
    whole, whole_dead = _run(spark, tmp_path, src, "whole")
    assert got == whole and len(got) == 9
    assert [d["reason"] for d in dead] == ["invalid_event_time", "late", "missing_key"]
    assert dead == whole_dead
    late = json.loads(dead[1]["record"])
    assert late["registration_plate"] == "ZZ9 LATE" and late["passengers"] == 2
    assert late.get("part") == (2 if partitioned else None)


def test_a_source_with_its_own_metadata_column_keeps_its_records(spark, tmp_path):
    """A Parquet source whose records have a column ``_metadata`` (which hides Spark's) and a glob
    path carry their records whole."""
    from panes.io import read_stream, with_record_references
    from panes.spec import SourceSpec

    src = tmp_path / "own"
    spark.createDataFrame([(1, "x")], "k LONG, _metadata STRING").write.parquet(str(src))
    for path, referenced in ((src, False), (_parquet_files(spark, tmp_path, False), True)):
        for glob in (False, True):
            spec = SourceSpec(format="parquet", path=f"{path}/*.parquet" if glob else str(path))
            df, records = with_record_references(read_stream(spark, spec), spec)
            assert (records is not None) == (referenced and not glob)
            assert ("__panes_record_row" in df.columns) == (records is not None)
