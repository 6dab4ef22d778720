"""What the native plans cover is answered without Spark, and every window kind and aggregate the
registries name has its Spark form."""

import subprocess
import sys

import pytest

from panes import pipeline
from panes.core import aggregates as A
from panes.spark.native import capability
from panes.spark.native.partials import Partial, partial
from panes.spark.native.windows import WindowPlan, window_plan

BASE = {"event_time": "t", "key": "k", "aggregates": {"n": {"count": "*"}}}


def test_the_capability_checks_import_no_spark():
    code = (
        "import sys; from panes.spark.native import stream_unsupported, batch_unsupported; "
        "from panes.spark.native import capability; print(sorted(m for m in sys.modules if 'pyspark' in m))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(
    "window",
    [
        {"tumbling": {"size": 10}},
        {"hopping": {"size": 10, "hop": 4}},
        {"hopping": {"size": 4, "hop": 10}},
        "global",
        {"session": {"gap": 5}},
        {"session": {"gap_column": "g"}},
        {"sliding": {"time_difference": 5}},
    ],
)
def test_every_native_window_kind_has_its_plan(window):
    p = pipeline({**BASE, "window": window})
    plan = window_plan(p.window)
    assert isinstance(plan, WindowPlan) and plan.window == p.window
    assert capability.batch_unsupported(p) is None
    expected = None if "sliding" not in window else "sliding windows need the engine"
    assert capability.stream_unsupported(p) == expected


def test_every_native_aggregate_has_its_partial_form(spark):
    from pyspark.sql import types as ST

    schema = ST.StructType([ST.StructField("v", ST.LongType()), ST.StructField("d", ST.DecimalType(10, 2))])
    fns = [
        A.Count(None),
        A.Count("v"),
        A.Sum("v"),
        A.Avg("d"),
        A.Min("v"),
        A.Max("v"),
        A.First("v"),
        A.Last("v"),
        A.Percentile("v", 0.9),
        A.Median("v"),
        A.CollectList("v"),
        A.CountDistinct("v"),
        A.TopK("v", 2),
    ]
    assert {type(f) for f in fns} - {A.Median} == set(capability.NATIVE_AGGREGATES)
    ordered = []
    for i, fn in enumerate(fns):
        pt = partial(i, A.Aggregate(f"o{i}", fn), schema)
        assert isinstance(pt, Partial) and all(n.startswith(f"__panes_partial_{i}") for n in pt.names)
        ordered.append(pt.ordered)
    # (first, last and collect_list break event-time ties by arrival order)
    assert [type(f).__name__ for f, o in zip(fns, ordered) if o] == ["First", "Last", "CollectList"]


def test_what_needs_the_engine():
    def spec(**fields):
        return pipeline({**BASE, "window": {"tumbling": {"size": 10}}, **fields})

    early = {"after_watermark": {"early": {"count": 2}}}
    assert capability.stream_unsupported(spec()) is None
    both = {"after_watermark": {"early": {"count": 2}, "late": {"count": 1}}}
    assert capability.stream_unsupported(spec(trigger=both, allowed_lateness=5)) is None
    p = spec(trigger={"after_count": 3})
    assert (
        capability.stream_unsupported(p)
        == f"trigger {p.trigger.describe()} needs the engine (natively: after_watermark with counts)"
    )
    p = spec(trigger=early, allowed_lateness=5)
    assert (
        capability.stream_unsupported(p)
        == f"trigger {p.trigger.describe()} closes windows before they expire, which needs the engine"
    )
    assert (
        capability.stream_unsupported(spec(watermark={"idle_timeout": 1000}))
        == "the idleness timeout needs the processing-time clock"
    )
    p = pipeline({**BASE, "window": {"session": {"gap": 5}}, "trigger": early})
    assert capability.stream_unsupported(p) == f"trigger {p.trigger.describe()} on merging sessions needs the engine"
    user = spec(aggregates={"u": {"combine": {"fn": "combine_fns:SumOfSquares", "column": "v"}}})
    assert (
        capability.stream_unsupported(user)
        == capability.batch_unsupported(user)
        == "aggregates ['u'] have no native form"
    )
    assert capability.appends(spec())
    assert not capability.appends(spec(trigger=early))
    assert not capability.appends(pipeline({**BASE, "window": {"session": {"gap": 5}}}))
