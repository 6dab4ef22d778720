"""A driver for the Python API on a Spark Connect session (``URL WORK_DIR``): what the server says
of its Python, a refusal, bounded input on both batch plans, a stream on both streaming plans
through ``write_stream``. Prints, on its last line, JSON of what it saw."""

import json
import os
import sys
import time
from pathlib import Path

import panes
from panes.spark.connect import ConnectRefusal, check_stream, server_python, ship_panes
from panes.spark.session import CHECKPOINT_FILE_MANAGER, get_spark, is_connect

SPEC = {
    "event_time": "t",
    "key": "k",
    "window": {"tumbling": {"size": 5000}},
    "aggregates": {"n": {"count": "*"}, "s": {"sum": "v"}},
}
ROWS = [("a", 1000, 2), ("a", 2000, 3), ("b", 7000, 4), ("b", None, 1), ("a", 12000, 5)]


def rows(df) -> list:
    return sorted([[str(v) for v in r] for r in df.collect()])


def bounded(spark) -> dict:
    df = spark.createDataFrame(ROWS, "k STRING, t LONG, v LONG")
    # (a user's combine function reaches the server's pandas workers as an artifact of the session)
    spark.addArtifacts(str(Path(__file__).resolve().parents[1] / "spark" / "combine_fns.py"), pyfile=True)
    native = panes.window(df, SPEC)
    combine = panes.window(
        df, {**SPEC, "aggregates": {"sq": {"combine": {"fn": "combine_fns:SumOfSquares", "column": "v"}}}}
    )
    return {
        "native_plan": native.plan.split(" (")[0],
        "native": rows(native.panes),
        "dead": rows(native.dead_letters),
        "engine_plan": combine.plan.split(" (")[0],
        "engine": rows(combine.panes),
    }


def stream(spark, work: Path, plan: str) -> dict:
    """The rows as three JSON files, one micro-batch each; panes and dead letters appended to Parquet
    by the callbacks (which run on the server)."""
    src = work / plan / "in"
    src.mkdir(parents=True)
    base = time.time() - 1000
    for i, chunk in enumerate((ROWS[:2], ROWS[2:4], ROWS[4:])):
        (src / f"{i}.json").write_text("".join(json.dumps(dict(zip("ktv", r))) + "\n" for r in chunk))
        os.utime(src / f"{i}.json", (base + i, base + i))  # (a file source reads in modification-time order)
    df = spark.readStream.schema("k STRING, t LONG, v LONG").option("maxFilesPerTrigger", 1).json(str(src))
    out = str(work / plan / "panes")
    dead = str(work / plan / "dead")
    result = panes.window(df, {**SPEC, "watermark": {"max_delay": 0}}, plan=plan)
    q = result.write_stream(
        lambda d, i: d.write.mode("append").parquet(out),
        lambda d, i: d.write.mode("append").parquet(dead),
        checkpoint=str(work / plan / "checkpoint"),
        availableNow=True,
    )
    q.awaitTermination()
    return {
        "panes": rows(spark.read.parquet(out)),
        "dead": sorted(r["reason"] for r in spark.read.parquet(dead).collect()),
    }


def main(url: str, work: str) -> dict:
    work_dir = Path(work)
    spark = get_spark(remote=url)
    out: dict = {"connect": is_connect(spark), "checkpoint_manager": spark.conf.get(CHECKPOINT_FILE_MANAGER, None)}
    server = server_python(spark, (str(work_dir), str(work_dir / "nowhere")))
    out["server"] = {"installed": server.installed, "shipped": server.shipped, "seen": server.seen}
    try:
        check_stream(spark, "native", str(work_dir / "checkpoint"), (str(work_dir / "nowhere"),))
        out["refused"] = None
    except ConnectRefusal as e:
        out["refused"] = str(e)
    out["bounded"] = bounded(spark)
    for plan in ("native", "stateful"):
        t0 = time.monotonic()
        try:
            out[plan] = stream(spark, work_dir, plan)
        except ConnectRefusal as e:  # (the stateful plan on a PySpark 4.0 client)
            out[plan] = {"refused": str(e)}
        out[plan]["seconds"] = round(time.monotonic() - t0, 1)
    ship_panes(spark)
    out["shipped_after"] = server_python(spark).shipped
    spark.stop()
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2])))
