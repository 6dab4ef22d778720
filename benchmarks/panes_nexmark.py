#!/usr/bin/env python3
"""The windowed stage of Nexmark q5/q7/q11 (and tw_agg) through panes, as a user runs it:
a spec with a file source, noop sinks, available_now and the end of the input (every window
closed: `panes run --end-input`), run by panes' own runner (what `panes run` does), in one
process after a warm-up. Prints one JSON line per query, like spark_nexmark.py. Run with the
project's interpreter: PROJECT/.venv/bin/python.

(A copy of the shared benchmark's /work/shared/bench/panes_nexmark.py, adapted as its README
allows: `available_now` now keeps the open windows for a next run, and ending the input is a
choice of its own, `end_input`, which this script makes. The queries and what is timed are the
original's.)

Comparable queries (the same windowed aggregation in every system):
  tw_agg: tumbling 10 s per auction, count + sum(price)
  q5a:    hopping 10 s / 2 s per auction, count (q5's first stage)
  q7a:    tumbling 10 s unkeyed, max(price) (q7's first stage)
  q11:    session gap 10 s per bidder, count
"""

import argparse
import json
import os
import shutil
import tempfile
import time
from typing import Any

T_PROC0 = time.time()

from panes.runner import run_spec  # noqa: E402
from panes.spark.session import get_spark  # noqa: E402
from panes.spec import parse_run_spec  # noqa: E402

QUERIES: dict[str, dict[str, Any]] = {  # spec documents (JSON-like)
    "tw_agg": {
        "key": "auction",
        "window": {"tumbling": {"size": "10 seconds"}},
        "aggregates": {"num": {"count": "*"}, "total": {"sum": "price"}},
    },
    "q5a": {
        "key": "auction",
        "window": {"hopping": {"size": "10 seconds", "hop": "2 seconds"}},
        "aggregates": {"num": {"count": "*"}},
    },
    "q7a": {"window": {"tumbling": {"size": "10 seconds"}}, "aggregates": {"maxprice": {"max": "price"}}},
    "q11": {"key": "bidder", "window": {"session": {"gap": "10 seconds"}}, "aggregates": {"bid_count": {"count": "*"}}},
}


def run_api(spark, q, data, fmt, delay, files_per_trigger):
    """panes.window(...).write_stream with noop callbacks, available_now, no end of input: what
    plain Spark's append-mode query does (its last windows stay open too)."""
    import panes

    ck = tempfile.mkdtemp(prefix="panes-nx-")
    path = os.path.join(data, fmt, "bid")
    r = spark.readStream.schema(spark.read.parquet(path).schema).option("maxFilesPerTrigger", files_per_trigger)
    df = r.parquet(path)
    res = panes.window(df, {"event_time": "dateTime", "watermark": {"max_delay": delay}, **QUERIES[q]})
    n = {"panes": 0, "dead_letters": 0, "batches": 0}

    def sink(kind):
        def f(d, i):
            d.write.format("noop").mode("overwrite").save()
            n["batches"] += kind == "panes"

        return f

    t0 = time.time()
    sq = res.write_stream(sink("panes"), sink("dead_letters"), ck, availableNow=True)
    sq.awaitTermination()
    secs = time.time() - t0
    shutil.rmtree(ck, ignore_errors=True)
    return secs, {"panes": None, "dead_letters": None, "batches": n["batches"]}


def run(spark, q, data, fmt, mode, delay, files_per_trigger, api=False, plan="auto"):
    if api:
        return run_api(spark, q, data, fmt, delay, files_per_trigger)
    ck = tempfile.mkdtemp(prefix="panes-nx-")
    doc = {
        "name": q,
        "mode": mode,
        "event_time": "dateTime",
        "watermark": {"max_delay": delay},
        "source": {"format": fmt, "path": os.path.join(data, fmt, "bid"), "max_files_per_trigger": files_per_trigger},
        "sink": {"format": "noop"},
        "dead_letter": {"format": "noop"},
        "checkpoint": ck,
        "spark": {"available_now": True, "end_input": True, "plan": plan},
        **QUERIES[q],
    }
    if fmt == "json":
        doc["source"]["schema"] = (
            "auction LONG, bidder LONG, price LONG, channel STRING, url STRING, dateTime TIMESTAMP, extra STRING"
        )
    spec = parse_run_spec(doc)
    t0 = time.time()
    counts = run_spec(spec, spark=spark, progress=False)
    secs = time.time() - t0
    shutil.rmtree(ck, ignore_errors=True)
    return secs, counts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--fmt", default="parquet")
    ap.add_argument("--mode", default="stream", choices=["stream", "batch"])
    ap.add_argument("--queries", default="tw_agg,q5a,q7a,q11")
    ap.add_argument("--warmup-data", default="")
    ap.add_argument("--delay", default="4 seconds")
    ap.add_argument("--files-per-trigger", type=int, default=1)
    ap.add_argument("--api", action="store_true", help="write_stream with noop callbacks, no end of input")
    ap.add_argument("--tag", default="")
    ap.add_argument("--plan", default="auto", help="spark.plan of the spec (auto, native, arrow, stateful)")
    a = ap.parse_args()
    t0 = time.time()
    spark = get_spark()
    spark.range(1).collect()
    startup = time.time() - t0
    tw = time.time()
    if a.warmup_data:
        for q in ("tw_agg", "q7a"):
            run(spark, q, a.warmup_data, a.fmt, a.mode, a.delay, a.files_per_trigger, a.api)
    print(
        json.dumps(
            {
                "system": "panes",
                "kind": "session",
                "mode": a.mode,
                "fmt": a.fmt,
                "startup_s": round(startup, 3),
                "warmup_s": round(time.time() - tw, 3),
                "tag": a.tag,
            }
        ),
        flush=True,
    )
    with open(os.path.join(a.data, "_meta.json")) as f:
        meta = json.load(f)
    for q in a.queries.split(","):
        secs, counts = run(spark, q, a.data, a.fmt, a.mode, a.delay, a.files_per_trigger, a.api, a.plan)
        n = meta["counts"]["bid"]
        print(
            json.dumps(
                {
                    "system": "panes-api" if a.api else "panes",
                    "mode": a.mode,
                    "fmt": a.fmt,
                    "query": q,
                    "seconds": round(secs, 3),
                    "input_events": n,
                    "events_per_s": round(n / secs),
                    "out_rows": counts["panes"],
                    "dead_letters": counts["dead_letters"],
                    "batches": counts["batches"],
                    "tag": a.tag,
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
