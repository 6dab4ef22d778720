"""Processing-time triggers fire on Spark when no new data arrives.

Spark 4's transformWithState runs event-time timers only in micro-batches where the watermark
moved, and a ProcessingTime-mode operator sees no watermark. panes adds a heartbeat (a rate source
of clock rows delivered to every bucket), so the engine's processing-time triggers fire in
micro-batches that carry no records of the source."""

import json
import time

import pytest

import panes

pytestmark = pytest.mark.spark


def test_processing_time_trigger_fires_without_new_data(spark, tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    (src / "a.json").write_text(
        "\n".join(json.dumps({"k": "a", "v": v, "t": "2024-01-01T00:00:00Z"}) for v in (1, 2, 3)) + "\n"
    )
    df = spark.readStream.schema("k STRING, v LONG, t STRING").json(str(src))
    # global window: only processing time can make it fire before the input ends
    result = panes.window(
        df,
        {
            "event_time": "t",
            "key": "k",
            "window": "global",
            "trigger": {"repeatedly": {"after_processing_time": "2 seconds"}},
            "accumulation": "discarding",
            "aggregates": {"total": {"sum": "v"}},
        },
    )
    seen = []  # (batch id, panes, data rows of the file source in that batch)

    def on_panes(d, batch_id):
        seen.append((batch_id, [r.asDict() for r in d.collect()]))

    q = result.write_stream(
        on_panes, lambda d, i: None, checkpoint=str(tmp_path / "ck"), processingTime="500 milliseconds"
    )
    try:
        deadline = time.time() + 90
        while time.time() < deadline and not any(p for _, p in seen):
            time.sleep(0.5)
        # a batch's progress is reported once the batch has finished, after its sink ran
        fired_ids = [b for b, p in seen if p]
        while (
            fired_ids and time.time() < deadline + 30 and fired_ids[0] not in {p["batchId"] for p in q.recentProgress}
        ):
            time.sleep(0.5)
        progress = {p["batchId"]: p for p in q.recentProgress}
    finally:
        q.stop()
    fired = [(b, p) for b, p in seen if p]
    assert fired, "no pane within 90 s"
    batch_id, panes_ = fired[0]
    assert [(p["k"], p["total"], p["timing"], p["pane_index"]) for p in panes_] == [("a", 6, "EARLY", 0)]
    # the batch that fired read nothing from the file source: only the clock moved
    file_rows = [s["numInputRows"] for s in progress[batch_id]["sources"] if "FileStreamSource" in s["description"]]
    assert file_rows == [0]
