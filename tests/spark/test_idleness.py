"""The idleness timeout closes a window on Spark with no data arriving (an idle file directory).

Without it the window never closes: the watermark (max event time) stays inside the window."""

import json
import time

import pytest

import panes

pytestmark = pytest.mark.spark


def test_idle_source_closes_the_window(spark, tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    now = int(time.time() * 1000)
    size = 2000
    start = now - now % size
    t = start + 500
    (src / "a.json").write_text("\n".join(json.dumps({"k": "a", "v": v, "t": t}) for v in (1, 2)) + "\n")
    df = spark.readStream.schema("k STRING, v LONG, t LONG").json(str(src))
    result = panes.window(
        df,
        {
            "event_time": "t",
            "key": "k",
            "window": {"tumbling": {"size": size}},
            "watermark": {"idle_timeout": "1 second"},
            "aggregates": {"total": {"sum": "v"}},
        },
    )
    seen = []
    q = result.write_stream(
        lambda d, i: seen.extend(r.asDict() for r in d.collect()),
        lambda d, i: None,
        checkpoint=str(tmp_path / "ck"),
        processingTime="500 milliseconds",
    )
    try:
        deadline = time.time() + 90
        while time.time() < deadline and not seen:
            time.sleep(0.5)
    finally:
        q.stop()
    assert [(r["k"], r["total"], r["timing"], r["is_last"]) for r in seen] == [("a", 3, "ON_TIME", True)]
    assert int(seen[0]["window_end"].timestamp() * 1000) == start + size
    # it closed by the timeout: not before processing time passed the window end + 1 s
    assert time.time() * 1000 >= start + size + 1000
