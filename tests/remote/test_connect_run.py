"""``panes run`` on a Spark Connect server (``--remote sc://...``, or ``SPARK_REMOTE``): the bundled
traffic example as a stream on each plan, its input ended, prints on stdout the panes of the local
run (traffic_panes.jsonl, from ``panes run --stdout --end-input`` on local[2]), its dead letters
written by the server's callbacks, and the counts the callbacks saw on the last line; and a
multi-stage spec (Nexmark q8), its panes, account and ``--report`` page from the server's run."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from servers import worker_start_timed_out

ROOT = Path(__file__).resolve().parents[2]
LIGHT = "cbf2eafc-806e-4067-9211-97be7e42cee3"
EXPECTED = Path(__file__).with_name("traffic_panes.jsonl").read_text().splitlines()
DONE = (
    "9 panes, 3 dead letters; records in 108 = 105 counted + 3 dead letters (invalid_event_time 1, late 1, "
    "missing_key 1) + 0 in no window; input ended: every window closed"
)

pytestmark = [pytest.mark.spark, pytest.mark.remote]


SCHEMA = "traffic_light STRING, created_at STRING, registration_plate STRING, passengers LONG"


def _spec(work: Path, plan: str, fmt: str = "json") -> Path:
    """The traffic example's spec and files (``fmt`` parquet: its files as Parquet, whose dead
    letters' records the native plan reads back from them: ``panes.spark.record_files``)."""
    data = work / "data"
    data.mkdir()
    for n, f in enumerate(sorted((ROOT / "examples" / "traffic" / "data").glob("part-*.json"))):
        out = data / f.with_suffix(f".{fmt}").name
        if fmt == "parquet":
            import pyarrow as pa
            import pyarrow.json as pj
            import pyarrow.parquet as pq

            types = {"traffic_light": pa.string(), "created_at": pa.string(), "registration_plate": pa.string()}
            schema = pa.schema([*types.items(), ("passengers", pa.int64())])
            pq.write_table(pj.read_json(f, parse_options=pj.ParseOptions(explicit_schema=schema)), out)
        else:
            out.write_bytes(f.read_bytes())
        os.utime(out, (1_600_000_000 + n, 1_600_000_000 + n))  # (read in this order)
    spec = {
        "name": "traffic",
        "mode": "stream",
        "source": {
            "format": fmt,
            "path": "data",
            "schema": SCHEMA,
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


def _dead_letters(work: Path) -> list[dict]:
    files = sorted((work / "dead").glob("batch=*/part-*.json"))
    return [json.loads(line) for f in files for line in f.read_text().splitlines()]


def _dead_reasons(work: Path) -> list[str]:
    return sorted(d["reason"] for d in _dead_letters(work))


@pytest.mark.parametrize(
    ("plan", "how", "fmt"),
    [
        pytest.param("native", "--remote", "json", marks=pytest.mark.remote_quick),
        pytest.param("native", "--remote", "parquet", marks=pytest.mark.remote_quick),
        ("stateful", "SPARK_REMOTE", "json"),
    ],
)
def test_panes_run_on_spark_connect_prints_the_local_runs_panes(connect_server, tmp_path, plan, how, fmt):
    extra, env = (
        (["--remote", connect_server.url], {}) if how == "--remote" else ([], {"SPARK_REMOTE": connect_server.url})
    )
    for attempt in (0, 1):  # (once more, afresh, when Spark's Python worker started too slowly)
        work = tmp_path / f"run-{attempt}"
        work.mkdir()
        done = _run(work, [str(_spec(work, plan, fmt)), "--stdout", "--end-input", *extra], env)
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
    late = next(json.loads(d["record"]) for d in _dead_letters(work) if d["reason"] == "late")
    assert late == {
        "traffic_light": LIGHT,
        "created_at": "2021-08-07T09:59:30Z",
        "registration_plate": "ZZ9 LATE",
        "passengers": 2,
    }


def test_a_run_on_spark_connect_that_names_a_master_too_is_refused(tmp_path):
    done = _run(tmp_path, [str(_spec(tmp_path, "native")), "--remote", "sc://x:1", "--master", "local[1]"], {})
    assert (done.returncode, done.stderr.strip()) == (
        2,
        "error: --remote: a run names a master (--master) or a Spark Connect server (--remote), not both",
    )


#: a multi-stage spec (Nexmark q8: the people who opened an auction in the window they joined)
STAGES = {
    "inputs": {
        "persons": {"event_time": "ts", "watermark": {"max_delay": "1 s"}},
        "auctions": {"event_time": "ts", "watermark": {"max_delay": "1 s"}},
    },
    "stages": [
        {"name": "new_people", "from": "persons", "key": "id", "window": {"tumbling": {"size": "10 s"}},
         "aggregates": {"name": {"first": "name"}}},
        {"name": "sellers", "from": "auctions", "key": "seller", "window": {"tumbling": {"size": "10 s"}},
         "aggregates": {"auctions": {"count": "*"}}},
        {"name": "q8", "from": ["new_people", "sellers"], "key": {"new_people": "id", "sellers": "seller"},
         "join": "inner"},
    ],
}  # fmt: skip
RECORDS = {
    "persons": [{"id": 1, "name": "ann", "ts": "2024-01-01T00:00:01Z"},
                {"id": 3, "name": "cid", "ts": "2024-01-01T00:00:14Z"}, {"id": 4, "ts": "not a time"}],
    "auctions": [{"id": 10, "seller": 1, "ts": "2024-01-01T00:00:03Z"},
                 {"id": 11, "seller": 1, "ts": "2024-01-01T00:00:04Z"},
                 {"id": 12, "seller": 3, "ts": "2024-01-01T00:00:15Z"}],
}  # fmt: skip


def test_a_multi_stage_spec_runs_on_spark_connect(connect_server, tmp_path):
    """Its step and sinks run in the server's foreachBatch worker; its panes, account and page here."""
    for attempt in (0, 1):  # (once more, afresh, when Spark's Python worker started too slowly)
        work = tmp_path / f"run-{attempt}"
        doc = {**STAGES, "inputs": {}, "dead_letter": {"format": "json", "path": "dead"}, "checkpoint": "checkpoint"}
        for name, records in RECORDS.items():
            (work / name).mkdir(parents=True)
            for i, r in enumerate(records):  # (one file per record, read in this order)
                (work / name / f"part-{i}.json").write_text(json.dumps(r) + "\n")
                os.utime(work / name / f"part-{i}.json", (1_600_000_000 + i, 1_600_000_000 + i))
            source = {"format": "json", "path": name, "max_files_per_trigger": 1,
                      "schema": "id LONG, name STRING, seller LONG, ts STRING"}  # fmt: skip
            doc["inputs"][name] = {**STAGES["inputs"][name], "source": source}
        (work / "spec.json").write_text(json.dumps(doc))
        args = ["spec.json", "--remote", connect_server.url, "--stdout", "--end-input", "--report", "page.html"]
        done = _run(work, args, {})
        if done.returncode == 0 or not worker_start_timed_out(done.stderr):
            break
    assert done.returncode == 0, done.stderr[-3000:]
    panes = sorted(
        (p["id"], p["window_start"], p["name"], p["auctions"]) for p in map(json.loads, done.stdout.splitlines())
    )
    assert panes == [(1, "2024-01-01T00:00:00.000Z", "ann", 2), (3, "2024-01-01T00:00:10.000Z", "cid", 1)]
    last = done.stderr.strip().splitlines()[-1]
    inputs = (
        "persons: records in 3 = 2 counted + 1 dead letters (invalid_event_time 1) + 0 in no window; auctions: "
        "records in 3 = 3 counted + 0 dead letters + 0 in no window"
    )
    summary = f"2 panes, 1 dead letters; {inputs}"
    assert last.startswith("done: ") and last.endswith(f"{summary}; inputs ended: every window closed"), last
    assert _dead_reasons(work) == ["invalid_event_time"]
    page = (work / "page.html").read_text()
    batches = int(last.split("done: ")[1].split(" micro-batches")[0])
    assert f"<p class=sum>{batches} micro-batches, 2 panes of q8, 1 dead letters; {inputs}</p>" in page
