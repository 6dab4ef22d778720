"""What a checkpoint remembers (panes.checkpoint), without Spark: a spec that changes what the state
means is refused, naming the field and the checkpoint; changes that leave the state alone pass; a
checkpoint whose input ended refuses more data but lets a run with nothing new finish; an ending
that was interrupted needs --end-input."""

from __future__ import annotations

import json
import os

import pytest

from panes import checkpoint as ck
from panes.spec import parse_run_spec

BASE = {
    "source": {"format": "json", "path": "data", "schema": "k STRING, t LONG, v LONG"},
    "event_time": "t",
    "key": "k",
    "window": {"tumbling": {"size": "1 hour"}},
    "aggregates": {"n": {"count": "*"}},
    "sink": {"format": "json", "path": "out/panes"},
}


def _meaning(plan="native", **changes):
    doc = {k: v for k, v in {**BASE, **changes}.items() if v is not None or k == "event_time"}
    return ck.state_meaning(parse_run_spec(doc), plan)


@pytest.fixture
def started(tmp_path):
    """A checkpoint started with BASE on the native plan."""
    path = str(tmp_path / "checkpoint")
    ck.record(path, _meaning())
    return path


@pytest.mark.parametrize(
    "changes, plan, fields",
    [
        ({"window": {"tumbling": {"size": "30 minutes"}}}, "native", ["window"]),
        (
            {"window": {"tumbling": {"size": "30 minutes"}}, "aggregates": {"n": {"count": "*"}, "s": {"sum": "v"}}},
            "native",
            ["window", "aggregates"],
        ),
        ({"key": ["k", "v"]}, "native", ["key"]),
        (
            {"aggregates": None, "window_pipeline": {"sql": "SELECT count(*) AS n FROM rows"}},
            "native",
            ["aggregates", "window_pipeline"],
        ),
        ({"trigger": {"after_watermark": {"early": {"count": 2}}}}, "native", ["trigger"]),
        ({"accumulation": "discarding"}, "native", ["accumulation"]),
        ({"allowed_lateness": "1 minute"}, "native", ["allowed_lateness"]),
        ({"event_time": {"column": "t", "unit": "s"}}, "native", ["event_time"]),
        ({"event_time": None}, "native", ["event_time"]),
        ({}, "stateful", ["plan", "spark.buckets"]),
    ],
)
def test_a_change_to_what_the_state_means_is_refused_naming_the_field(started, changes, plan, fields):
    errors = ck.check(started, _meaning(plan, **changes), end_input=False)
    assert [e.field for e in errors] == fields
    assert all(f"changed since checkpoint {started} was started" in e.reason for e in errors)
    assert all(e.reason.endswith(f"start afresh with a new checkpoint directory (or remove {started})") for e in errors)
    if fields == ["window"]:
        old, new = '{"tumbling": {"offset": 0, "size": 3600000}}', '{"tumbling": {"offset": 0, "size": 1800000}}'
        assert errors[0].reason.startswith(f"changed since checkpoint {started} was started ({old} -> {new})")


@pytest.mark.parametrize(
    "changes",
    [
        {"sink": {"format": "parquet", "path": "elsewhere"}},
        {"source": {"format": "json", "path": "other", "schema": "k STRING, t LONG, v LONG, w STRING"}},
        {"spark": {"trigger_interval": "10 seconds", "shuffle_partitions": 4}},
        {"watermark": {"max_delay": "5 minutes"}},
        {"spark": {"buckets": 16}},  # (the native plan keeps no buckets)
        {"name": "renamed", "timeout": "1 minute", "limits": {"windows_per_record": 5}},
    ],
)
def test_changes_that_leave_the_state_alone_pass(started, changes):
    assert ck.check(started, _meaning(**changes), end_input=False) == []


def test_buckets_shape_the_stateful_plans_state(tmp_path):
    path = str(tmp_path / "checkpoint")
    ck.record(path, _meaning("stateful"))
    assert [e.field for e in ck.check(path, _meaning("stateful", spark={"buckets": 16}), False)] == ["spark.buckets"]
    # recorded once: a later record does not overwrite what the checkpoint holds
    ck.record(path, _meaning("stateful", spark={"buckets": 16}))
    assert [e.field for e in ck.check(path, _meaning("stateful", spark={"buckets": 16}), False)] == ["spark.buckets"]
    # unset, the buckets follow the shuffle partitions (2 by default): the refusal names the number
    assert _meaning("stateful")["spark.buckets"] == 2
    errors = ck.check(path, _meaning("stateful", spark={"shuffle_partitions": 4}), False)
    assert [(e.field, e.reason) for e in errors] == [
        (
            "spark.buckets",
            f"checkpoint {path} keeps its state in 2 hash buckets, not 4 (a key's state is in its bucket of those "
            f"2): run with buckets=2 (spark.buckets: 2), or start afresh with a new checkpoint directory (or "
            f"remove {path})",
        )
    ]


def test_an_ended_input_refuses_new_files_and_lets_a_run_with_nothing_new_finish(tmp_path, started):
    data = tmp_path / "data"
    data.mkdir()
    (data / "part-0.json").write_text('{"k": "a", "t": 1, "v": 1}\n')
    (data / "_spark_metadata").mkdir()
    source = parse_run_spec({**BASE, "source": {**BASE["source"], "path": str(data)}}).source
    ck.mark_ended(started, source)
    assert ck.input_ended(started) and ck.finished(started, source)
    assert ck.check(started, _meaning(), end_input=False, source=source) == []
    assert ck.check(started, _meaning(), end_input=True, source=source) == []
    # a file Spark does not read (hidden, metadata) is nothing new
    (data / "_spark_metadata" / "0").write_text("x")
    (data / ".part-1.json.crc").write_text("x")
    assert ck.finished(started, source)
    (data / "part-1.json").write_text('{"k": "a", "t": 2, "v": 1}\n')
    os.utime(data / "part-1.json", (1_600_000_000, 1_600_000_000))
    assert not ck.finished(started, source)
    (error,) = ck.check(started, _meaning(), end_input=False, source=source)
    assert error.field == "checkpoint"
    assert error.reason.startswith(f"the input of {started} ended at ")
    assert "every window closed, and more data would all be late; start afresh" in error.reason


def test_an_interrupted_ending_is_finished_with_end_input(started):
    control = os.path.join(started, ck.CONTROL_DIR)
    os.makedirs(control)
    open(os.path.join(control, ck.END_FILES[0]), "w").close()
    assert ck.ending_begun(started)
    (error,) = ck.check(started, _meaning(), end_input=False)
    assert (error.field, error.reason) == (
        "checkpoint",
        f"an earlier run began ending the input of {started} and was stopped: run again with --end-input to finish it",
    )
    assert ck.check(started, _meaning(), end_input=True) == []


def test_a_new_checkpoint_has_nothing_to_check(tmp_path):
    assert ck.check(str(tmp_path / "new"), _meaning(), end_input=False) == []


@pytest.mark.parametrize(
    "field, value, reason",
    [
        (
            "state_format",
            "columnar-1",
            "checkpoint {path} holds its state in another layout (pickled, as panes before the columnar layout "
            "wrote it) than this panes reads (columnar-1); start afresh with a new checkpoint directory (or "
            "remove {path})",
        ),
        (
            "spark.bucket_layout",
            "spread-1",
            "checkpoint {path} numbers its hash buckets 0..n-1, as panes before the bucket layout spread-1 did: "
            "this panes would look for each key's state in another bucket; start afresh with a new checkpoint "
            "directory (or remove {path})",
        ),
    ],
)
def test_a_stateful_checkpoint_an_older_panes_laid_out_is_refused_in_one_line(tmp_path, field, value, reason):
    path = str(tmp_path / "checkpoint")
    meaning = _meaning("stateful")
    assert meaning[field] == value
    ck.record(path, {k: v for k, v in meaning.items() if k != field})  # as an older panes wrote it
    errors = ck.check(path, meaning, end_input=False)
    assert [(e.field, e.reason) for e in errors] == [(field, reason.format(path=path))]
    # the native plan keeps no such state; a native checkpoint of an older panes goes on
    assert _meaning()[field] is None
    native = str(tmp_path / "native")
    ck.record(native, {k: v for k, v in _meaning().items() if k != field})
    assert ck.check(native, _meaning(), end_input=False) == []


def test_panes_state_refuses_a_stateful_checkpoint_of_the_pickled_layout(tmp_path):
    from panes.spec import SpecError
    from panes.window_state import checkpoint_plan

    path = str(tmp_path / "checkpoint")
    spec = parse_run_spec({**BASE, "mode": "stream", "checkpoint": path})
    ck.record(path, {k: v for k, v in ck.state_meaning(spec, "stateful").items() if k != "state_format"})
    with pytest.raises(SpecError) as e:
        checkpoint_plan(spec)
    assert e.value.field == "state_format"
    assert str(e.value).endswith("than this panes reads (columnar-1); start afresh with a new checkpoint directory")


def _spark_checkpoint(root, offsets: list[list[str]], sources: dict[int, list[str]]) -> None:
    """A checkpoint's offsets log (per batch, one offset line per source) and file-source logs, in
    Spark's layout (``v1``, the batch's metadata, then the sources' offsets)."""
    (root / "offsets").mkdir(parents=True)
    for batch, lines in enumerate(offsets):
        (root / "offsets" / str(batch)).write_text("\n".join(["v1", '{"batchWatermarkMs":0}', *lines]))
        (root / "offsets" / f".{batch}.crc").write_bytes(b"crc")
    for source, entries in sources.items():
        d = root / "sources" / str(source)
        d.mkdir(parents=True)
        for name in entries:
            (d / name).write_text('v1\n{"path":"file:///in/x.json","timestamp":1,"batchId":0}')
            (d / f".{name}.crc").write_bytes(b"crc")


def test_the_file_source_entries_no_micro_batch_planned_are_dropped(tmp_path):
    # the data source listed micro-batch 2's file (entry 2) and the run was killed before Spark
    # wrote offsets/2; the control source (no offset yet) listed one too; a compaction whose
    # entries are not there (1 to 8) is kept
    _spark_checkpoint(
        tmp_path,
        [['{"logOffset":0}', "-"], ['{"logOffset":1}', "-"]],
        {0: ["0", "1", "2"], 1: ["0", "9.compact"]},
    )
    assert ck.drop_unplanned_files(str(tmp_path)) == ["sources/0/2", "sources/1/0"]
    assert sorted(f.name for f in (tmp_path / "sources" / "0").iterdir()) == [".0.crc", ".1.crc", "0", "1"]
    assert sorted(f.name for f in (tmp_path / "sources" / "1").iterdir()) == [".9.compact.crc", "9.compact"]
    assert ck.drop_unplanned_files(str(tmp_path)) == []


def test_entries_of_planned_micro_batches_and_of_other_sources_stay(tmp_path):
    # every entry planned; a Kafka source's offsets are no log offset; no offsets log: nothing planned
    _spark_checkpoint(tmp_path / "a", [['{"logOffset":1}', '{"topic":{"0":5}}']], {0: ["0", "1"], 1: ["0"]})
    assert ck.drop_unplanned_files(str(tmp_path / "a")) == []
    (tmp_path / "b" / "sources" / "0").mkdir(parents=True)
    (tmp_path / "b" / "sources" / "0" / "0").write_text("v1\n")
    assert ck.drop_unplanned_files(str(tmp_path / "b")) == ["sources/0/0"]
    assert ck.drop_unplanned_files(str(tmp_path / "missing")) == []


def _file_log(directory, interval: int, entries: int) -> None:
    """A file-source log as Spark writes it with ``compactInterval`` ``interval``: entry ``n`` lists
    file ``f<n>``; a compaction (``<n>.compact``, ``(n + 1) % interval == 0``) what the compaction
    before it and the entries since list (every file so far), then its own file."""
    directory.mkdir(parents=True)
    lines: list[str] = []
    for n in range(entries):
        line = json.dumps({"path": f"file:///in/f{n}.json", "timestamp": 1000 + n, "batchId": n})
        if (n + 1) % interval == 0:
            (directory / f"{n}.compact").write_text("\n".join(["v1", *lines, line]))
            (directory / f".{n}.compact.crc").write_bytes(b"crc")
            lines.append(line)
        else:
            (directory / str(n)).write_text("\n".join(["v1", line]))
            (directory / f".{n}.crc").write_bytes(b"crc")
            lines.append(line)


def _offsets(root, log_offset: int) -> None:
    (root / "offsets").mkdir(parents=True)
    (root / "offsets" / "0").write_text(f'v1\n{{"batchWatermarkMs":0}}\n{{"logOffset":{log_offset}}}')


def test_an_unplanned_compaction_goes_when_the_entries_it_compacts_are_there(tmp_path):
    # compactInterval 3: the run was killed after the source wrote 2.compact (entries 0, 1 and its
    # own file) and before offsets planned it; later, 5.compact after 2.compact, 3 and 4 (0 and 1
    # deleted by Spark as expired: spark.sql.streaming.minBatchesToRetain 1)
    for root, entries, planned, gone in [
        (tmp_path / "a", 3, 1, "2.compact"),
        (tmp_path / "b", 6, 4, "5.compact"),
    ]:
        _file_log(root / "sources" / "0", 3, entries)
        _offsets(root, planned)
        if entries == 6:
            for name in ("0", ".0.crc", "1", ".1.crc"):
                (root / "sources" / "0" / name).unlink()
        before = sorted(f.name for f in (root / "sources" / "0").iterdir())
        assert ck.drop_unplanned_files(str(root)) == [f"sources/0/{gone}"]
        after = sorted(f.name for f in (root / "sources" / "0").iterdir())
        assert after == [f for f in before if f not in (gone, f".{gone}.crc")]
        assert ck.drop_unplanned_files(str(root)) == []
    assert sorted(f.name for f in (tmp_path / "b" / "sources" / "0").glob("[0-9]*")) == ["2.compact", "3", "4"]


def test_an_unplanned_compaction_stays_when_the_entries_it_compacts_are_not_all_there(tmp_path):
    # entry 4 gone, or 3 holding another file than 5.compact says: 5.compact keeps them
    for name, change in [("4", None), ("3", '{"path": "file:///in/other.json", "timestamp": 1003, "batchId": 3}')]:
        root = tmp_path / name
        _file_log(root / "sources" / "0", 3, 6)
        _offsets(root, 4)
        if change is None:
            (root / "sources" / "0" / name).unlink()
        else:
            (root / "sources" / "0" / name).write_text("v1\n" + change)
        assert ck.drop_unplanned_files(str(root)) == []
        assert (root / "sources" / "0" / "5.compact").exists()


def test_a_planned_compaction_and_the_entries_before_it_stay(tmp_path):
    _file_log(tmp_path / "sources" / "0", 3, 7)
    _offsets(tmp_path, 5)
    assert ck.drop_unplanned_files(str(tmp_path)) == ["sources/0/6"]
    assert sorted(f.name for f in (tmp_path / "sources" / "0").glob("[0-9]*")) == [
        "0",
        "1",
        "2.compact",
        "3",
        "4",
        "5.compact",
    ]
