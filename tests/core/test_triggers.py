"""Each trigger's state machine, on its own: a TriggerMachine numbers the tree's nodes depth-first
(one slot each in a window's flat TriggerState) and each trigger class runs its own on_element,
should_fire, on_fire, on_merge, clear (pending counts and deadlines) and reset (the subtree back
to its start)."""

from __future__ import annotations

import pickle

from panes.core import triggers as T
from panes.core.triggers import Ctx, TriggerMachine

END = 100


def ctx(wm: int = 0, pt: int = 0, merging: bool = False) -> Ctx:
    return Ctx(watermark=wm, processing_time=pt, window_end=END, merging=merging)


def test_nodes_are_numbered_depth_first_with_absent_children_skipped():
    tree = T.OrFinally(T.Repeatedly(T.AfterWatermark(late=T.AfterCount(2))), T.AfterProcessingTime(50))
    m = TriggerMachine(tree)
    assert [type(n.trigger).__name__ for n in m.nodes] == [
        "OrFinally",
        "Repeatedly",
        "AfterWatermark",
        "AfterCount",
        "AfterProcessingTime",
    ]
    assert [n.slot for n in m.nodes] == [0, 1, 2, 3, 4]
    watermark = m.nodes[2]
    assert watermark.children == (None, m.nodes[3]) and watermark.kids == (m.nodes[3],)
    st = m.new_state()
    assert (st.finished, st.data, st.eow, st.clock) == ([False] * 5, [None] * 5, False, [])
    # the state is flat values (with the triggers' timers), and pickles as them
    assert pickle.loads(pickle.dumps(st)).__getstate__() == ([False] * 5, [None] * 5, False, [])


def test_after_count_and_repeatedly():
    m = TriggerMachine(T.AfterCount(3))
    st = m.new_state()
    m.on_element(st, 2, ctx(pt=0))
    assert not m.should_fire(st, ctx())
    m.on_element(st, 1, ctx(pt=0))
    assert m.should_fire(st, ctx())
    m.on_fire(st, ctx())
    assert m.is_finished(st) and st.data == [None]
    m.on_element(st, 5, ctx(pt=0))  # a finished trigger takes no more elements
    assert st.data == [None]

    m = TriggerMachine(T.Repeatedly(T.AfterCount(2)))
    st = m.new_state()
    m.on_element(st, 2, ctx(pt=0))
    m.on_fire(st, ctx())
    assert not m.is_finished(st) and st.finished == [False, False] and st.data == [None, None]


def test_after_processing_time_deadline_and_alignment():
    m = TriggerMachine(T.AfterProcessingTime(30, align=60))
    st = m.new_state()
    m.on_element(st, 1, ctx(pt=45))
    m.on_element(st, 1, ctx(pt=50))  # the pane's first element sets the deadline and its timer
    assert st.data == [120] and st.clock == [120]  # 45 + 30 rounded up to a multiple of 60
    # the deadline is reached when the clock is strictly after it (27.4)
    assert not m.should_fire(st, ctx(pt=120)) and m.should_fire(st, ctx(pt=121))
    assert st.due_clock_timers(120) == [] and st.due_clock_timers(121) == [120] and st.clock == []
    m.on_fire(st, ctx(pt=121))
    assert m.is_finished(st) and st.data == [None]


def test_after_watermark_phases_clear_and_reset():
    m = TriggerMachine(T.AfterWatermark(early=T.AfterCount(2), late=T.AfterCount(1)))
    root, early, late = m.nodes
    st = m.new_state()
    m.on_element(st, 2, ctx(pt=0))
    assert m.should_fire(st, ctx(wm=10))  # early by count
    m.on_fire(st, ctx(wm=10))
    assert st.data == [None, None, None] and not m.is_finished(st)  # the early trigger starts over
    m.on_element(st, 1, ctx(pt=0))
    assert st.data == [None, 1, None]
    assert m.should_fire(st, ctx(wm=END))  # on time
    m.on_fire(st, ctx(wm=END))
    assert st.data == ["late", None, None]
    m.on_element(st, 1, ctx(pt=0))  # late elements go to the late trigger only
    assert st.data == ["late", None, 1]
    root.clear(st)  # clear: pending counts go, the phase stays
    assert st.data == ["late", None, None]
    m.on_element(st, 1, ctx(pt=0))
    root.reset(st)  # reset: the whole subtree back to its start
    assert st.data == [None, None, None] and st.finished == [False, False, False]


def test_after_watermark_sets_its_end_of_window_timer_only_before_the_end():
    m = TriggerMachine(T.AfterWatermark())
    st = m.new_state()
    m.on_element(st, 1, ctx(wm=END))  # the watermark passed the end: no timer (it fires at once)
    assert not st.eow and m.should_fire(st, ctx(wm=END))
    m.on_element(st, 1, ctx(wm=END - 1))
    assert st.eow


def test_early_and_late_triggers_repeat_as_repeatedly_does():
    # after an early firing the early trigger starts over as a whole only once it finished; else
    # its pending state is cleared and its finished children stay finished (issue 27 point 2)
    m = TriggerMachine(T.AfterWatermark(early=T.AfterEach((T.AfterCount(2), T.AfterCount(1)))))
    root, each, two, one = m.nodes
    st = m.new_state()
    fired = []
    for _ in range(5):
        m.on_element(st, 1, ctx())
        if m.should_fire(st, ctx()):
            m.on_fire(st, ctx())
            fired.append(st.finished[:])
    # fires at the 2nd (count 2), the 3rd (count 1: after_each finished, reset) and the 5th element
    assert len(fired) == 3
    assert fired[0] == [False, False, True, False] and fired[1] == [False, False, False, False]


def test_after_each_passes_elements_only_to_its_current_trigger():
    m = TriggerMachine(T.AfterEach((T.AfterCount(1), T.AfterCount(2))))
    st = m.new_state()
    m.on_element(st, 1, ctx(pt=0))
    assert st.data == [None, 1, None]
    m.on_fire(st, ctx())
    assert st.finished == [False, True, False]
    m.on_element(st, 1, ctx(pt=0))
    assert st.data == [None, None, 1] and not m.should_fire(st, ctx())
    m.on_element(st, 1, ctx(pt=0))
    m.on_fire(st, ctx())
    assert m.is_finished(st)


def test_after_each_and_after_watermark_feed_every_trigger_when_windows_merge():
    m = TriggerMachine(T.AfterEach((T.AfterCount(1), T.AfterCount(2))))
    st = m.new_state()
    m.on_element(st, 1, ctx(merging=True))
    assert st.data == [None, 1, 1]  # every child sees the elements (Beam's isMerging())
    m.on_fire(st, ctx(merging=True))
    assert st.finished == [False, True, False] and st.data == [None, None, None]  # all cleared
    m = TriggerMachine(T.AfterWatermark(early=T.AfterCount(3), late=T.AfterCount(1)))
    st = m.new_state()
    m.on_element(st, 1, ctx(merging=True))
    assert st.data == [None, 1, 1] and st.eow


def test_after_any_fires_what_is_ready_and_clears_the_rest():
    m = TriggerMachine(T.AfterAny((T.AfterCount(1), T.AfterProcessingTime(10))))
    st = m.new_state()
    m.on_element(st, 1, ctx(pt=5))
    assert st.data == [None, 1, 15]
    m.on_fire(st, ctx(pt=6))
    assert st.finished == [True, True, False] and st.data == [None, None, None]


def test_after_all_and_or_finally():
    m = TriggerMachine(T.AfterAll((T.AfterCount(1), T.AfterProcessingTime(10))))
    st = m.new_state()
    m.on_element(st, 1, ctx(pt=0))
    assert not m.should_fire(st, ctx(pt=10)) and m.should_fire(st, ctx(pt=11))

    m = TriggerMachine(T.OrFinally(T.Repeatedly(T.AfterCount(1)), T.AfterCount(3)))
    st = m.new_state()
    m.on_element(st, 1, ctx(pt=0))
    m.on_fire(st, ctx())
    assert not m.is_finished(st)
    m.on_element(st, 2, ctx(pt=0))
    m.on_fire(st, ctx())
    assert m.is_finished(st) and st.data[2] is None  # finally fired: the main trigger cleared


def test_merge():
    m = TriggerMachine(T.AfterAny((T.AfterCount(5), T.AfterProcessingTime(10))))
    a, b = m.new_state(), m.new_state()
    m.on_element(a, 2, ctx(pt=30))
    m.on_element(b, 1, ctx(pt=20))
    merged = m.merge([a, b], ctx())
    assert merged.data == [None, 3, 30] and merged.finished == [False, False, False]

    m = TriggerMachine(T.AfterWatermark(late=T.AfterCount(1)))
    a, b = m.new_state(), m.new_state()
    m.on_fire(a, ctx(wm=END))
    m.on_fire(b, ctx(wm=END))
    assert m.merge([a, b], ctx(wm=END)).data == ["late", None]
    assert m.merge([a, m.new_state()], ctx(wm=END)).data == [None, None]  # one still early
    assert m.merge([a, b], ctx(wm=END - 1)).data == [None, None]  # the merged window ends later


def test_registry_names_and_shorthands():
    assert T.parse_trigger({"count": 2}) == T.Repeatedly(T.AfterCount(2))
    assert T.parse_trigger({"count": 2}, once=True) == T.AfterCount(2)
    assert T.parse_trigger({"every": 60}) == T.Repeatedly(T.AfterProcessingTime(0, 60))
    assert T.parse_trigger("beam_default") is T.BEAM_DEFAULT
    assert {
        "after_watermark",
        "after_count",
        "after_processing_time",
        "repeatedly",
        "after_any",
        "after_all",
        "after_each",
        "or_finally",
        "every",
        "count",
    } <= set(T.TRIGGERS)
