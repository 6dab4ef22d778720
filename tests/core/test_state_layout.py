"""The engine's state as columns (``panes.core.engine.columnar``, the stateful Spark plan's stored
state): every value comes back with its type, every dict in its order, and a replay whose state
goes through it before every step prints what the plain replay prints."""

import copy
import math
import pickle
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from panes import CombineFn, pipeline
from panes.core.engine import TS, Engine, EngineState, WindowState, columnar
from panes.core.triggers import TriggerState
from panes.replay import replay

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml"))


def snapshot(o):
    """A value as nested tuples of type names and values (NaN equal to NaN; object identity aside)."""
    if isinstance(o, (WindowState, TriggerState)):
        return (type(o).__name__, tuple(snapshot(getattr(o, s)) for s in o.__slots__))
    if hasattr(o, "__dataclass_fields__"):
        return (type(o).__name__, tuple((f, snapshot(getattr(o, f))) for f in o.__dataclass_fields__))
    if isinstance(o, dict):
        return ("dict", tuple((snapshot(k), snapshot(v)) for k, v in o.items()))
    if isinstance(o, (set, frozenset)):
        return (type(o).__name__, tuple(sorted(repr(snapshot(x)) for x in o)))
    if isinstance(o, (list, tuple)):
        return (type(o).__name__, tuple(snapshot(x) for x in o))
    if isinstance(o, float) and math.isnan(o):
        return ("float", "nan")
    if isinstance(o, (type(None), bool, int, float, str, bytes)):
        return (type(o).__name__, repr(o))
    return (type(o).__name__, snapshot(o.__getstate__()))  # (an accumulator's own object)


def test_the_columns_are_every_field_of_a_window_and_its_trigger():
    assert set(columnar.WINDOW_FIELDS) | {"acc", "trig"} == set(WindowState.__slots__)
    assert len(columnar.WINDOW_FIELDS) + 2 == len(WindowState.__slots__)
    assert TriggerState.__slots__ == columnar.TRIGGER_FIELDS


scalars = hs.one_of(
    hs.none(),
    hs.booleans(),
    hs.integers(min_value=-(2**64), max_value=2**64),
    hs.sampled_from([-(2**63), 2**63 - 1, -(2**62), 2**62, 0, 1]),
    hs.floats(allow_nan=True),
    hs.text(max_size=3),
)
values = hs.one_of(
    scalars,
    hs.lists(hs.one_of(hs.none(), hs.booleans(), hs.integers(-3, 3), hs.sampled_from([0.0, -0.0])), max_size=2),
)


@settings(max_examples=300, deadline=None)
@given(hs.lists(values, max_size=8), hs.sampled_from([0, 1, 5]))
def test_a_column_comes_back_with_every_value_and_type(column, repeat):
    column = [copy.copy(v) for _ in range(repeat) for v in column]
    back = columnar.decode_column(pickle.loads(pickle.dumps(columnar.encode_column(column))))
    assert snapshot(back) == snapshot(column)
    lists = [v for v in back if isinstance(v, list)]
    assert len({id(v) for v in lists}) == len(lists)  # a window's list is its own


@pytest.mark.parametrize("column", [[[False], [0], [False]], [[0.0], [-0.0]], [[1], [1.0]]])
def test_equal_lists_of_other_values_are_kept_apart(column):
    assert snapshot(columnar.decode_column(columnar.encode_column(column))) == snapshot(column)


def test_a_state_without_windows_and_a_key_without_any():
    st = EngineState(watermark=5, seq=3)
    st.keys[("a",)] = {}
    back = columnar.decode(columnar.encode(st))
    assert snapshot(back) == snapshot(st)
    assert snapshot(columnar.decode(columnar.encode(EngineState()))) == snapshot(EngineState())


def test_a_state_pickled_by_an_older_panes_is_refused_in_one_line():
    with pytest.raises(columnar.StateFormatError) as e:
        columnar.decode(pickle.dumps(EngineState()))
    assert "\n" not in str(e.value) and columnar.FORMAT in str(e.value)


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_a_replay_through_the_stored_state_prints_the_same(path, monkeypatch):
    plain = replay(path)
    step = Engine.step

    def stored_step(self, state, *args, **kwargs):
        back = columnar.decode(columnar.encode(state))
        assert snapshot(back) == snapshot(state)
        state.__dict__.update(back.__dict__)
        return step(self, state, *args, **kwargs)

    monkeypatch.setattr(Engine, "step", stored_step)
    stored = replay(path)
    assert stored.panes == plain.panes and stored.dead_letters == plain.dead_letters


class MeanAccumulator:
    """A CombineFn's own accumulator object."""

    def __init__(self, total=0.0, n=0):
        self.total, self.n = total, n


class Mean(CombineFn):
    output_type = "double"

    def create_accumulator(self):
        return MeanAccumulator()

    def add_input(self, acc, value):
        return acc if value is None else MeanAccumulator(acc.total + value, acc.n + 1)

    def merge_accumulators(self, accs):
        accs = list(accs)
        return MeanAccumulator(sum(a.total for a in accs), sum(a.n for a in accs))

    def extract_output(self, acc):
        return acc.total / acc.n if acc.n else None


@pytest.mark.parametrize("accumulation", ["accumulating", "discarding", "retracting"])
def test_every_aggregate_comes_back_from_the_stored_state(accumulation):
    """A state holding every aggregate's accumulator (sets, lists, floats with NaN, a CombineFn's
    object), early panes pending, goes through the layout between steps and gives the same panes."""
    spec = {
        "key": ["k"],
        "event_time": "t",
        "window": {"tumbling": {"size": 10}},
        "allowed_lateness": 5,
        "accumulation": accumulation,
        "trigger": {"after_watermark": {"early": {"count": 2}, "late": {"count": 1}}},
        "aggregates": {
            "n": {"count": "*"},
            "s": {"sum": "v"},
            "lo": {"min": "v"},
            "mean": {"avg": "v"},
            "med": {"median": "v"},
            "p": {"percentile": {"column": "v", "p": 0.9}},
            "first": {"first": "v"},
            "all": {"collect_list": "v"},
            "kinds": {"count_distinct": "v"},
            "top": {"top_k": {"column": "v", "k": 2}},
            "own": {"combine": {"fn": f"{__name__}:Mean", "column": "v"}},
        },
    }
    values = [1.5, float("nan"), -0.0, 3.0, None, 2.0, 7.25, 1.5]
    steps = [
        [{"k": "a", "t": t, "v": v} for t, v in zip(range(i, i + 6), values[i % 3 :])]
        + [{"k": i, "t": i, "v": 1.0}, {"k": "a", "t": max(i - 6, 0), "v": 5.0}]
        for i in range(0, 30, 4)
    ]

    def run(stored: bool) -> list:
        engine = Engine(pipeline(spec))
        state = engine.new_state()
        out = []
        for i, rows in enumerate(steps):
            if stored:
                back = columnar.decode(columnar.encode(state))
                assert snapshot(back) == snapshot(state)
                state = back
            batch = pd.DataFrame(rows).rename(columns={"t": TS})
            batch["t"] = batch[TS]
            res = engine.step(state, batch, watermark=4 * i - 3)
            out += [snapshot(p) for p in res.panes]
        return out

    stored = run(stored=True)
    assert stored == run(stored=False)
    timings = {dict(p[1])["timing"][1] for p in stored}
    assert len(stored) >= 10 and timings == {"'EARLY'", "'ON_TIME'", "'LATE'"}
