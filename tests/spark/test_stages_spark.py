"""Multi-stage pipelines on Spark: every scenario in ``tests/scenarios/stages`` replayed on
Structured Streaming (one micro-batch per step) prints the core's panes and dead letters, and
what its Spark golden files hold; the batch plan's answer equals the stream's final answer; the
same spec runs as a ``panes run`` stream and batch, and through the Python API."""

from __future__ import annotations

import json
import os
import re
from collections import Counter, defaultdict
from pathlib import Path

import pytest

import panes
from panes.scenario import dumps
from panes.spark.stages.replay import replay_stages_spark
from panes.spec import SpecError
from panes.stage_runner import run_stages
from panes.stage_scenario import load_stage_scenario, replay_stages_core
from panes.stage_spec import parse_stages_run_spec

pytestmark = pytest.mark.spark
ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = sorted((ROOT / "scenarios" / "stages").glob("*.yaml"))
META = ("window_start", "window_end", "timing", "pane_index", "is_last", "retraction")


def _dl(d):
    """A dead letter, its record's values as strings (Spark reads a JSON column of mixed types as
    strings), without the detail."""
    out = dict(d)
    out["record"] = {k: str(v).lower() for k, v in d["record"].items() if v is not None}
    out.pop("detail", None)
    return json.dumps(out, sort_keys=True)


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_spark_prints_the_core_panes(spark, path):
    scenario = load_stage_scenario(path)
    core = replay_stages_core(scenario)
    on_spark = replay_stages_spark(scenario, spark=spark)
    assert on_spark.panes == core.panes
    assert sorted(map(_dl, on_spark.dead_letters)) == sorted(map(_dl, core.dead_letters))
    assert on_spark.accounting.as_dict() == core.accounting.as_dict()
    golden = ROOT / "golden" / "stages"
    for what, rows in (("panes", on_spark.panes), ("dead", on_spark.dead_letters)):
        assert "".join(dumps(r) + "\n" for r in rows) == (golden / f"{path.stem}.spark.{what}.jsonl").read_text()


def _plain(v):
    if isinstance(v, list):
        return tuple(_plain(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _plain(x)) for k, x in v.items() if x is not None))
    if hasattr(v, "asDict"):
        return _plain(v.asDict(recursive=True))
    return v


def _final(records: list[dict], key: list[str]) -> Counter:
    """The stream's final answer: each key's last pane per window (all its rows), without metadata;
    retractions withdrawn."""
    last: dict = defaultdict(lambda: defaultdict(list))
    for r in records:
        if not r["retraction"]:
            last[(r["window_start"], r["window_end"], tuple(r[k] for k in key))][r["pane_index"]].append(r)
    out: Counter = Counter()
    for (s, e, _), panes_ in last.items():
        out.update((s, e, tuple((k, _plain(v)) for k, v in r.items() if k not in META)) for r in panes_[max(panes_)])
    return out


def _frames(spark, scenario, late: list[dict]):
    """Each input's records as a DataFrame, less those the stream dead-lettered as late."""
    out = {}
    for i in scenario.graph.inputs:
        records = [r for s in scenario.timeline if s.get("input", i.name) == i.name for r in s.get("add", [])]
        records = [r for r in records if r not in late]
        path = Path(spark.conf.get("spark.local.dir", "/tmp")) / f"panes-test-{scenario.raw['name']}-{i.name}.json"
        path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
        out[i.name] = spark.read.json(str(path)).select(*i.columns)
    return out


BATCH = ["nexmark_q5", "nexmark_q7", "nexmark_q8", "chained_accumulating", "cogroup", "user_merge", "late_data"]


@pytest.mark.parametrize("name", BATCH)
def test_batch_answer_is_the_stream_final_answer(spark, name):
    scenario = load_stage_scenario(ROOT / "scenarios" / "stages" / f"{name}.yaml")
    core = replay_stages_core(scenario)
    late = [d["record"] for d in core.dead_letters if d["reason"] == "late"]
    result = panes.stages(_frames(spark, scenario, late), scenario.raw["pipeline"])
    key = list(scenario.graph.output_stage.key)
    batch = [r.asDict(recursive=True) for r in result.panes.collect()]
    for r in batch:
        for w in ("window_start", "window_end"):
            r[w] = r[w].strftime("%Y-%m-%dT%H:%M:%S.") + f"{r[w].microsecond // 1000:03d}Z"
    assert {(r["timing"], r["pane_index"], r["is_last"]) for r in batch} == {("ON_TIME", 0, True)}
    assert _final(batch, key) == _final(core.panes, key)
    assert result.dead_letters.count() == 0


Q8 = {
    "inputs": {
        "persons": {"event_time": "ts", "watermark": {"max_delay": "1 s"}},
        "auctions": {"event_time": "ts", "watermark": {"max_delay": "1 s"}},
    },
    "stages": [
        {
            "name": "new_people",
            "from": "persons",
            "key": "id",
            "window": {"tumbling": {"size": "10 s"}},
            "aggregates": {"name": {"first": "name"}},
        },
        {
            "name": "sellers",
            "from": "auctions",
            "key": "seller",
            "window": {"tumbling": {"size": "10 s"}},
            "aggregates": {"auctions": {"count": "*"}},
        },
        {
            "name": "q8",
            "from": ["new_people", "sellers"],
            "key": {"new_people": "id", "sellers": "seller"},
            "join": "inner",
        },
    ],
}
PERSONS = [
    {"id": 1, "name": "ann", "ts": "2024-01-01T00:00:01Z"},
    {"id": 2, "name": "bob", "ts": "2024-01-01T00:00:12Z"},
    {"id": 3, "name": "cid", "ts": "2024-01-01T00:00:14Z"},
    {"id": 4, "ts": "not a time"},
]
AUCTIONS = [
    {"id": 10, "seller": 1, "ts": "2024-01-01T00:00:03Z"},
    {"id": 11, "seller": 1, "ts": "2024-01-01T00:00:04Z"},
    {"id": 12, "seller": 3, "ts": "2024-01-01T00:00:15Z"},
    {"id": 13, "seller": 2, "ts": "2024-01-01T00:00:25Z"},
]


def _run_spec(tmp_path, mode: str) -> dict:
    doc = dict(Q8)
    doc["inputs"] = {}
    for name, records in (("persons", PERSONS), ("auctions", AUCTIONS)):
        src = tmp_path / "data" / name
        src.mkdir(parents=True, exist_ok=True)
        for i, r in enumerate(records):  # one file per record, in this order: several micro-batches
            (src / f"part-{i}.json").write_text(json.dumps(r) + "\n")
            os.utime(src / f"part-{i}.json", (1_600_000_000 + i, 1_600_000_000 + i))
        doc["inputs"][name] = {
            **Q8["inputs"][name],
            "source": {
                "format": "json",
                "path": str(src),
                "max_files_per_trigger": 1,
                "schema": "id LONG, name STRING, seller LONG, ts STRING",
            },
        }
    out = tmp_path / mode
    doc.update(
        mode=mode,
        sink={"format": "json", "path": str(out / "panes")},
        dead_letter={"format": "json", "path": str(out / "dead")},
        checkpoint=str(tmp_path / "checkpoint"),
        spark={"end_input": True},
    )
    return doc


def _read(spark, path: Path) -> list[dict]:
    return [r.asDict() for r in spark.read.json(str(path)).collect()] if path.exists() else []


def test_panes_run_stream_and_batch_give_the_same_final_answer(spark, tmp_path, capsys):
    results = {}
    for mode in ("stream", "batch"):
        doc = _run_spec(tmp_path / mode, mode)
        page = tmp_path / f"{mode}.html"
        counts = run_stages(parse_stages_run_spec(doc), spark=spark, progress=mode == "batch", report_path=str(page))
        panes_ = _read(spark, Path(doc["sink"]["path"]))
        results[mode] = sorted((p["id"], p["window_start"], p["name"], p["auctions"]) for p in panes_)
        dead = _read(spark, Path(doc["dead_letter"]["path"]))
        assert [(d["reason"], d["input"]) for d in dead] == [("invalid_event_time", "persons")]
        assert counts["dead_letters"] == 1
        # every record accounted for, per input, in a stream and in a batch
        persons, auctions = counts["inputs"]["persons"], counts["inputs"]["auctions"]
        assert (persons["records_in"], persons["counted"], persons["reasons"]) == (
            4,
            3,
            {"invalid_event_time": 1},
        )
        assert (auctions["records_in"], auctions["counted"], auctions["dead_letters"]) == (4, 4, 0)
        _the_runs_page(page.read_text(), counts["batches"], mode)
    assert capsys.readouterr().err.splitlines()[-1] == (
        "done: 2 panes, 1 dead letters; persons: records in 4 = 3 counted + 1 dead letters (invalid_event_time 1) "
        "+ 0 in no window; auctions: records in 4 = 4 counted + 0 dead letters + 0 in no window"
    )
    assert (
        results["stream"]
        == results["batch"]
        == [(1, "2024-01-01T00:00:00.000Z", "ann", 2), (3, "2024-01-01T00:00:10.000Z", "cid", 1)]
    )


def _the_runs_page(page: str, batches: int, mode: str) -> None:
    """The ``--report`` page of a Q8 run: each input's records per micro-batch, the watermarks."""
    assert (
        f"<p class=sum>{batches} micro-batches, 2 panes of q8, 1 dead letters; persons: records in 4 = 3 counted + 1 "
        "dead letters (invalid_event_time 1) + 0 in no window; auctions: records in 4 = 4 counted + 0 dead letters "
        "+ 0 in no window</p>"
    ) in page
    body = page.split("<h2>Watermarks after")
    tables = {
        t.split(" went</h2>")[0]: re.findall(r"<tr><td>(\d+|run)</td><td>[^<]*</td><td>(\d+)</td>", t)
        for t in body[0].split("<h2>Where every record of ")[1:]
    }
    assert list(tables) == ["persons", "auctions"]
    for rows in tables.values():  # (one record file per input and micro-batch, up to four)
        assert len(rows) == batches + 1 and rows[-1] == ("run", "4")
        assert [int(n) for _, n in rows[:-1]] == ([1, 1, 1, 1] + [0] * (batches - 4) if mode == "stream" else [4])
    marks = [re.findall(r"<td>([^<]*)</td>", r) for r in re.findall(r"<tr><td>.*?</tr>", body[1])]
    assert len(marks) == batches
    if mode == "batch":  # (the batch plan ends every input after the rows)
        assert marks == [["0"] + ["end of input"] * 5]
    else:  # persons: 1 s after ann's; auctions: 1 s after the first auction's; all at the end of input at last
        assert marks[0][:3] == ["0", "2024-01-01T00:00:00.000Z", "2024-01-01T00:00:02.000Z"]
        assert marks[-1][1:] == ["end of input"] * 5
    assert page.count("<svg") == 5


def test_a_bounded_result_frees_its_cached_rows_and_still_answers(spark):
    persons = spark.createDataFrame([r for r in PERSONS if r["ts"] != "not a time"])
    auctions = spark.createDataFrame(AUCTIONS)
    result = panes.stages({"persons": persons, "auctions": auctions}, Q8)
    cached = list(result.cached)
    # the rows with the arrival numbers, then each of the three stages' rows
    assert len(cached) == 4 and all(df.is_cached for df in cached)
    assert sorted((r["id"], r["name"], r["auctions"]) for r in result.panes.collect()) == [(1, "ann", 2), (3, "cid", 1)]
    result.unpersist()
    assert result.cached == [] and not any(df.is_cached for df in cached)
    # (read again: every stage runs again, to the same answer)
    assert sorted((r["id"], r["name"], r["auctions"]) for r in result.panes.collect()) == [(1, "ann", 2), (3, "cid", 1)]


def test_python_api_builds_the_same_pipeline_from_one_dataframe_per_input(spark):
    persons = spark.createDataFrame([r for r in PERSONS if r["ts"] != "not a time"])
    auctions = spark.createDataFrame(AUCTIONS)
    by_stages = panes.stages({"persons": persons, "auctions": auctions}, Q8)
    by_window = panes.window({"persons": persons, "auctions": auctions}, Q8)
    rows = sorted((r["id"], r["name"], r["auctions"]) for r in by_stages.panes.collect())
    assert (
        rows
        == sorted((r["id"], r["name"], r["auctions"]) for r in by_window.panes.collect())
        == [(1, "ann", 2), (3, "cid", 1)]
    )
    assert [f.name for f in by_stages.panes.schema.fields] == [
        "id",
        "window_start",
        "window_end",
        "timing",
        "pane_index",
        "is_last",
        "retraction",
        "name",
        "auctions",
    ]
    sellers = sorted((r["seller"], r["auctions"]) for r in by_stages.stage("sellers").collect())
    assert sellers == [(1, 2), (2, 1), (3, 1)]


def test_panes_run_keeps_windows_open_until_the_inputs_end_explicitly(spark, tmp_path):
    doc = _run_spec(tmp_path, "stream")
    doc["spark"] = {"available_now": True}
    sink = Path(doc["sink"]["path"])

    def answer():
        return sorted((p["id"], p["name"], p["auctions"]) for p in _read(spark, sink))

    first = run_stages(parse_stages_run_spec(doc), spark=spark, progress=False)
    # the merge's watermark is the people's (13 s): the window [10 s, 20 s) stays open
    assert answer() == [(1, "ann", 2)]
    assert first["records_in"] == 8
    doc["spark"] = {"end_input": True}
    run_stages(parse_stages_run_spec(doc), spark=spark, progress=False)
    assert answer() == [(1, "ann", 2), (3, "cid", 1)]
    again = run_stages(parse_stages_run_spec(doc), spark=spark, progress=False)
    assert again["batches"] == 0
    (tmp_path / "data" / "persons" / "part-9.json").write_text(json.dumps({"id": 5, "ts": "2024-01-01T00:00:30Z"}))
    with pytest.raises(SpecError) as refused:
        run_stages(parse_stages_run_spec(doc), spark=spark, progress=False)
    assert [e.field for e in refused.value.errors] == ["checkpoint"]


def test_a_micro_batch_run_again_reads_the_clock_it_first_had(tmp_path):
    """Apex's idempotency: a micro-batch Spark runs again after a failure gets the processing time
    it first had (its processing-time triggers fire alike), and the clock never goes back."""
    from dataclasses import replace

    from panes.spark.stages.stream import StagesStream, Watermarks

    graph = load_stage_scenario(ROOT / "scenarios" / "stages" / "nexmark_q5.yaml").graph
    marks = Watermarks.first(graph)
    first = StagesStream(graph, {}, str(tmp_path)).clock_of(3, marks)
    assert StagesStream(graph, {}, str(tmp_path)).clock_of(3, replace(marks, clock=first + 5)) == first
    ahead = first + 10**9
    assert StagesStream(graph, {}, str(tmp_path)).clock_of(4, replace(marks, clock=ahead)) == ahead


CROSS_BUCKET = {
    "pipeline": {
        "inputs": {"e": {"event_time": "t", "watermark": {"punctuation": True}}},
        "stages": [
            {
                "name": "s",
                "from": "e",
                "key": "k",
                "window": {"tumbling": {"size": 10000}},
                "allowed_lateness": 600000,
                "trigger": {"after_count": 2},
                "accumulation": "discarding",
                "aggregates": {"sum": {"sum": "v"}},
            }
        ],
    },
    "timeline": [
        {"add": [{"k": "k1", "v": 1, "t": 5000}]},
        {"watermark": 30000},
        {"add": [{"k": "k0", "v": 2, "t": 12000}, {"k": "k0", "v": 3, "t": 13000}]},
        {"end": True},
    ],
}


def test_a_pane_kept_on_time_by_another_bucket_holds_is_on_time(spark):
    scenario = load_stage_scenario(CROSS_BUCKET)
    core = [(p["k"], p["timing"]) for p in replay_stages_core(scenario).panes]
    assert core == [("k0", "ON_TIME"), ("k1", "ON_TIME")]
    assert [(p["k"], p["timing"]) for p in replay_stages_spark(scenario, buckets=2, spark=spark).panes] == core


def test_a_record_dead_lettered_at_two_stages_is_one_dead_letter_on_spark(spark):
    # issue 28: a record without the key of the two stages that read it: one dead letter, the
    # first stage's, as the account counts it (as in the core)
    from tests.core.test_stages import TWO_KEYED_READERS

    scenario = load_stage_scenario(TWO_KEYED_READERS)
    core = replay_stages_core(scenario)
    on_spark = replay_stages_spark(scenario, spark=spark)
    assert [(d["reason"], d["stage"]) for d in on_spark.dead_letters] == [("missing_key", "per_k")]
    assert sorted(map(_dl, on_spark.dead_letters)) == sorted(map(_dl, core.dead_letters))
    assert on_spark.accounting.as_dict() == core.accounting.as_dict()
    assert on_spark.accounting.inputs["events"].dead_letters == 1
