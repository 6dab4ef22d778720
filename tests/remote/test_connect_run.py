"""``panes run`` on a Spark Connect server (``--remote sc://...``, or ``SPARK_REMOTE``): the bundled
traffic example as a stream on each plan, its input ended, prints on stdout the panes of the local
run (traffic_panes.jsonl, from ``panes run --stdout --end-input`` on local[2]), its dead letters
written by the server's callbacks, and the counts the callbacks saw on the last line."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from servers import worker_start_timed_out

ROOT = Path(__file__).resolve().parents[2]
EXPECTED = Path(__file__).with_name("traffic_panes.jsonl").read_text().splitlines()
DONE = (
    "9 panes, 3 dead letters; records in 108 = 105 counted + 3 dead letters (invalid_event_time 1, late 1, "
    "missing_key 1) + 0 in no window; input ended: every window closed"
)

pytestmark = [pytest.mark.spark, pytest.mark.remote]


def _spec(work: Path, plan: str) -> Path:
    data = work / "data"
    data.mkdir()
    for n, f in enumerate(sorted((ROOT / "examples" / "traffic" / "data").glob("part-*.json"))):
        (data / f.name).write_bytes(f.read_bytes())
        os.utime(data / f.name, (1_600_000_000 + n, 1_600_000_000 + n))  # (read in this order)
    spec = {
        "name": "traffic",
        "mode": "stream",
        "source": {
            "format": "json",
            "path": "data",
            "schema": "traffic_light STRING, created_at STRING, registration_plate STRING, passengers LONG",
            "max_files_per_trigger": 1,
        },
        "event_time": "created_at",
        "key": "traffic_light",
        "window": {"tumbling": {"size": "1 hour"}},
        "watermark": {"max_delay": "5 minutes"},
        "aggregates": {"total_cars": {"count_distinct": "registration_plate"}, "passengers": {"sum": "passengers"}},
        "dead_letter": {"format": "json", "path": "dead"},
        "checkpoint": "checkpoint",
        "spark": {"available_now": True, "plan": plan},
    }
    path = work / "spec.json"
    path.write_text(json.dumps(spec))
    return path


def _run(work: Path, args: list[str], env: dict) -> subprocess.CompletedProcess:
    full = {**os.environ, "PYTHONPATH": str(ROOT), "TZ": "UTC", **env}
    if "SPARK_REMOTE" not in env:
        full.pop("SPARK_REMOTE", None)
    panes = str(Path(sys.executable).with_name("panes"))
    return subprocess.run([panes, "run", *args], env=full, capture_output=True, text=True, timeout=900, cwd=work)


def _dead_reasons(work: Path) -> list[str]:
    files = sorted((work / "dead").glob("batch=*/part-*.json"))
    return sorted(json.loads(line)["reason"] for f in files for line in f.read_text().splitlines())


@pytest.mark.parametrize(
    ("plan", "how"), [pytest.param("native", "--remote", marks=pytest.mark.remote_quick), ("stateful", "SPARK_REMOTE")]
)
def test_panes_run_on_spark_connect_prints_the_local_runs_panes(connect_server, tmp_path, plan, how):
    extra, env = (
        (["--remote", connect_server.url], {}) if how == "--remote" else ([], {"SPARK_REMOTE": connect_server.url})
    )
    for attempt in (0, 1):  # (once more, afresh, when Spark's Python worker started too slowly)
        work = tmp_path / f"run-{attempt}"
        work.mkdir()
        done = _run(work, [str(_spec(work, plan)), "--stdout", "--end-input", *extra], env)
        if done.returncode == 0 or not worker_start_timed_out(done.stderr):
            break
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(done.stdout.splitlines()) == EXPECTED
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("done: ") and last.endswith(DONE), last
    if plan == "native":  # (its watermark is the step's, which the server ran: read from the state it wrote)
        batches = [ln for ln in done.stderr.splitlines() if ln.startswith("batch ")]
        assert "; watermark 2021-08-07T09:51:50.000Z;" in batches[0], batches[0]
        assert "; watermark end of input;" in batches[-1], batches[-1]
        assert not [ln for ln in batches if "; watermark -;" in ln], batches
    assert _dead_reasons(work) == ["invalid_event_time", "late", "missing_key"]


def test_a_run_on_spark_connect_that_names_a_master_too_is_refused(tmp_path):
    done = _run(tmp_path, [str(_spec(tmp_path, "native")), "--remote", "sc://x:1", "--master", "local[1]"], {})
    assert (done.returncode, done.stderr.strip()) == (
        2,
        "error: --remote: a run names a master (--master) or a Spark Connect server (--remote), not both",
    )
