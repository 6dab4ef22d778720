import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = sorted((ROOT / "tests" / "scenarios").glob("*.yaml"))
# user functions of the tests (combine_fns.py) must be importable by Spark's Python workers
_extra = str(ROOT / "tests" / "spark")
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (_extra, os.environ.get("PYTHONPATH", "")) if p)
sys.path.insert(0, _extra)
os.environ["TZ"] = "UTC"  # collected timestamps are naive local datetimes
import time  # noqa: E402

time.tzset()


@pytest.fixture(scope="session")
def spark():
    """One SparkSession for the whole test session (local[2], 2 shuffle partitions, UI off)."""
    from panes.spark.session import get_spark

    s = get_spark("local[2]", shuffle_partitions=2)
    yield s
    s.stop()
