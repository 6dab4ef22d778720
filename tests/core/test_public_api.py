"""The public API: ``import panes`` gives the built-in window, trigger and aggregate classes (each the
one its spec name maps to), CombineFn, Pipeline, WatermarkStrategy, ``window()`` and ``pipeline()``,
with type hints; a pipeline built from the classes equals the one parsed from its spec."""

from __future__ import annotations

import inspect

import panes
from panes.core.aggregates import FUNCTIONS
from panes.core.triggers import TRIGGERS
from panes.core.windows import WINDOWS

BUILT_INS = [
    (
        WINDOWS,
        {
            "tumbling": "Tumbling",
            "hopping": "Hopping",
            "session": "Sessions",
            "sliding": "Sliding",
            "global": "GlobalWindows",
        },
    ),
    (
        TRIGGERS,
        {
            "after_watermark": "AfterWatermark",
            "after_count": "AfterCount",
            "count": "AfterCount",
            "after_processing_time": "AfterProcessingTime",
            "every": "AfterProcessingTime",
            "repeatedly": "Repeatedly",
            "after_any": "AfterAny",
            "after_all": "AfterAll",
            "after_each": "AfterEach",
            "or_finally": "OrFinally",
        },
    ),
    (
        FUNCTIONS,
        {
            "count": "Count",
            "sum": "Sum",
            "min": "Min",
            "max": "Max",
            "avg": "Avg",
            "mean": "Avg",
            "median": "Median",
            "percentile": "Percentile",
            "first": "First",
            "last": "Last",
            "collect_list": "CollectList",
            "count_distinct": "CountDistinct",
            "top_k": "TopK",
            "combine": "UserCombine",
        },
    ),
]


def test_the_built_in_classes_are_exported():
    for registry, names in BUILT_INS:
        for spec_name, class_name in names.items():
            assert class_name in panes.__all__
            assert getattr(panes, class_name) is registry[spec_name]
    for name in (
        "CombineFn",
        "Pipeline",
        "WatermarkStrategy",
        "Trigger",
        "Never",
        "WindowFn",
        "AggregateFn",
        "Aggregate",
        "window",
        "pipeline",
    ):
        assert name in panes.__all__ and hasattr(panes, name)


def test_public_functions_are_typed():
    for fn in (panes.window, panes.pipeline):
        sig = inspect.signature(fn)
        assert sig.return_annotation is not inspect.Signature.empty, fn.__name__
        assert all(p.annotation is not inspect.Parameter.empty for p in sig.parameters.values()), fn.__name__


def test_classes_and_spec_build_the_same_pipeline():
    built = panes.Pipeline(
        window=panes.Hopping(size=60_000, hop=10_000),
        aggregates=(panes.Aggregate("n", panes.Count("*")), panes.Aggregate("p90", panes.Percentile("v", 0.9))),
        key=("k",),
        event_time="t",
        watermark=panes.WatermarkStrategy(max_delay=5_000),
        trigger=panes.AfterWatermark(early=panes.AfterCount(10), late=panes.AfterProcessingTime(0, 60_000)),
        accumulation="discarding",
    )
    parsed = panes.pipeline(
        {
            "key": "k",
            "event_time": "t",
            "window": {"hopping": {"size": "1 minute", "hop": "10s"}},
            "watermark": {"max_delay": "5s"},
            "accumulation": "discarding",
            "trigger": {"after_watermark": {"early": {"count": 10}, "late": {"every": "1 minute"}}},
            "aggregates": {"n": {"count": "*"}, "p90": {"percentile": {"column": "v", "p": 0.9}}},
            "spark": {"plan": "auto"},  # a run field: ignored
        }
    )
    assert parsed == built
    assert panes.pipeline(built) is built
