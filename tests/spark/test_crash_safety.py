"""Crash safety (issue 26): a real ``panes run`` killed with SIGKILL at random moments (its whole process
group: Python, the JVM, Spark's workers) and run again gives exactly the panes and dead letters of an
uninterrupted run, each once in the file sinks, on the native and the stateful plan. Each run is a
Spark start (about a minute), so ``make test`` kills the native plan once over three micro-batches;
``make test-long`` each plan three times over four; ``make chaos`` twenty times (tests/chaos.py)."""

from __future__ import annotations

import os

import pytest

from tests.chaos import chaos
from tests.spark.session_conf import session_conf

pytestmark = pytest.mark.spark


@pytest.mark.parametrize(
    "plan, kills, files, seed",
    [
        # (seed 5 kills at 68% of the uninterrupted run's time: past the Spark start, in the micro-batches)
        ("native", 1, 3, 5),
        pytest.param("native", 3, 4, 3, marks=pytest.mark.long),
        pytest.param("stateful", 3, 4, 3, marks=pytest.mark.long),
    ],
)
def test_a_run_killed_and_run_again_writes_what_an_uninterrupted_run_writes(tmp_path, plan, kills, files, seed):
    result = chaos(tmp_path, plan, kills=kills, seed=seed, log=lambda message: None, files=files, budget=400)
    assert result["kills"] >= 1
    assert result["panes"] > 0 and result["dead_letters"] > 0
    assert result["missing"] == [] and result["extra"] == []
    assert result["identical"]


def test_a_run_killed_after_the_file_source_listed_a_micro_batch_that_spark_had_not_planned(spark, tmp_path):
    """The moment a kill once hit at random (the last of four files' windows: an ON_TIME pane that
    stays open came out as the window's last): Spark's file source writes the files of the next
    micro-batch into its log (``sources/0/<n>``) before Spark writes that micro-batch's offsets. A
    run killed between the two, run again, took that entry and the next file as one micro-batch;
    the run again must give the micro-batches, panes and dead letters of an uninterrupted run."""
    _killed_after_listing(spark, tmp_path, lambda log, listed: (log / "2").write_text("v1\n" + listed))


def test_a_run_killed_after_the_file_source_compacted_its_log_for_a_micro_batch_not_planned(spark, tmp_path):
    """The same moment when the entry is a compaction of the log (``compactInterval`` 3: entry 2 is
    ``2.compact``, holding entries 0 and 1 and its own file), as every tenth entry of a long-lived
    stream is by default: removed as well, the run again gives what an uninterrupted run gives."""
    from tests.chaos import COMPACT_INTERVAL

    def compaction(log, listed: str) -> None:
        compacted = [line for n in (0, 1) for line in (log / str(n)).read_text().splitlines()[1:]]
        (log / "2.compact").write_text("\n".join(["v1", *compacted, listed]))

    with session_conf(spark, COMPACT_INTERVAL, "3"):
        _killed_after_listing(spark, tmp_path, compaction)


def _killed_after_listing(spark, tmp_path, write_entry) -> None:
    """Four files; a run that planned micro-batches 0 and 1, then the entry of micro-batch 2's file
    (``write_entry(log directory, its JSON line)``) as a run killed before Spark wrote offsets/2
    leaves it; the run again ends the input: its outputs equal an uninterrupted run's."""
    import json

    from panes.runner import run_spec
    from panes.spec import load_run_spec
    from tests.chaos import outputs, spec, write_input

    write_input(tmp_path / "input", files=4)
    reference = spec(tmp_path / "reference", "native")
    run_spec(load_run_spec(reference), spark=spark, progress=False, end_input=True)
    # the killed run: micro-batches 0 and 1 done, micro-batch 2's file listed, not planned
    arriving = tmp_path / "arriving"
    arriving.mkdir()
    killed = spec(tmp_path / "killed", "native")
    doc = killed.read_text().replace(str(tmp_path / "input"), str(arriving))
    killed.write_text(doc)
    for f in range(2):
        (arriving / f"part-{f}.json").write_bytes((tmp_path / "input" / f"part-{f}.json").read_bytes())
        os.utime(arriving / f"part-{f}.json", (1_600_000_000 + f,) * 2)
    assert run_spec(load_run_spec(killed), spark=spark, progress=False)["batches"] == 2
    for f in range(2, 4):
        (arriving / f"part-{f}.json").write_bytes((tmp_path / "input" / f"part-{f}.json").read_bytes())
        os.utime(arriving / f"part-{f}.json", (1_600_000_000 + f,) * 2)
    listed = arriving / "part-2.json"
    entry = {"path": listed.resolve().as_uri(), "timestamp": listed.stat().st_mtime_ns // 1_000_000, "batchId": 2}
    write_entry(tmp_path / "killed" / "checkpoint" / "sources" / "0", json.dumps(entry))
    again = run_spec(load_run_spec(killed), spark=spark, progress=False, end_input=True)
    got, expected = outputs(tmp_path / "killed"), outputs(tmp_path / "reference")
    missing = [row for x, y in zip(expected, got) for row in (x - y).elements()]
    extra = [row for x, y in zip(expected, got) for row in (y - x).elements()]
    assert (missing, extra) == ([], [])
    assert again["batches"] == 3  # (files 2 and 3 one micro-batch each, then the end of the input)
