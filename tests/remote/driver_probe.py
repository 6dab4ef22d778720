"""A driver for the server fixtures' own tests: connects to a Spark Connect server (``connect URL``)
or runs a classic session on a standalone master (``cluster URL``), and prints, on its last line,
JSON of what it saw."""

import json
import os
import sys
import time


def connect(url: str) -> dict:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    t0 = time.monotonic()
    spark = SparkSession.builder.remote(url).getOrCreate()
    connected = time.monotonic() - t0
    total = spark.range(4).selectExpr("sum(id) AS s").first()["s"]
    # a Python function on the server: the Python its workers run, and whether panes imports there
    df = spark.range(1).withColumn("k", F.lit(0))

    def where(pdf):
        import sys as s

        import pandas as pd

        try:
            import panes  # noqa: F401

            ok = True
        except ImportError:
            ok = False
        return pd.DataFrame({"python": [s.executable], "panes": [ok]})

    row = df.groupBy("k").applyInPandas(where, "python STRING, panes BOOLEAN").first()
    out = {
        "sum": total,
        "connect_seconds": round(connected, 2),
        "python": row["python"],
        "panes": row["panes"],
        "state_store": spark.conf.get("spark.sql.streaming.stateStore.providerClass"),
        "time_zone": spark.conf.get("spark.sql.session.timeZone"),
    }
    spark.stop()
    return out


def cluster(url: str) -> dict:
    from pyspark.sql import SparkSession

    conf = json.loads(os.environ.get("CLUSTER_APP_CONF", "{}"))
    b = SparkSession.builder.master(url).appName("panes-cluster-probe").config("spark.ui.enabled", "false")
    for k, v in conf.items():
        b = b.config(k, v)
    t0 = time.monotonic()
    spark = b.getOrCreate()
    started = time.monotonic() - t0
    sc = spark.sparkContext

    def where(_):
        import os as o
        import sys as s

        try:
            import panes  # noqa: F401

            ok = True
        except ImportError:
            ok = False
        # (an executor runs in <worker dir>/<application>/<executor id>, and its Python workers too)
        yield (o.path.basename(o.getcwd()), s.executable, ok)

    # (enough tasks that both one-core executors get some, once both have registered)
    deadline = time.monotonic() + 120
    while sc._jsc.sc().getExecutorMemoryStatus().size() < 3 and time.monotonic() < deadline:
        time.sleep(0.5)
    rows = sc.parallelize(range(8), 8).mapPartitions(where).collect()
    out = {
        "session_seconds": round(started, 2),
        "executors": sorted({r[0] for r in rows}),
        "python": sorted({r[1] for r in rows}),
        "panes": all(r[2] for r in rows),
        "master": sc.master,
    }
    spark.stop()
    return out


if __name__ == "__main__":
    what, url = sys.argv[1], sys.argv[2]
    print(json.dumps(connect(url) if what == "connect" else cluster(url)))
