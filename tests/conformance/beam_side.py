"""Beam Python side of the differential check: replays neutral scenarios (JSON, one per line on stdin)
through Beam's DirectRunner with a TestStream and prints one JSON line per scenario with every pane.

Runs in any interpreter that has apache-beam (2.77.0); it never imports panes. Time unit: seconds.

A neutral scenario (see beam_diff.py) is::

    {"id": ..., "window": {"kind": "fixed"|"sliding"|"sessions", ...}, "trigger": [...],
     "accumulation": "accumulating"|"discarding", "lateness": seconds,
     "steps": [{"processing_time": s, "add": [[key, value, ts], ...], "watermark": s, "end": true}]}

Two harness devices, neither of which changes Beam's trigger semantics (both are listed in
KNOWN_DIFFERENCES.md):
- allowed lateness L is given to Beam as L - 1 microsecond, which turns Python's drop rule
  (watermark > end + L) into Java's (watermark >= end + L) for whole-second watermarks (K5);
- a pipeline whose only pending work is processing-time timers that the frozen test clock can
  never reach stops as a "stall" instead of spinning forever (K1).

Observation only: GeneralTriggerDriver._output is wrapped to record, for every pane, the watermark
Python labelled it with and whether a watermark timer produced it (for the timing items K6/K7).
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
import warnings

warnings.filterwarnings("ignore")
logging.disable(logging.CRITICAL)

import apache_beam as beam  # noqa: E402
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions, TypeOptions  # noqa: E402
from apache_beam.runners.direct import executor as _executor  # noqa: E402
from apache_beam.runners.direct import transform_evaluator as _te  # noqa: E402
from apache_beam.testing.test_stream import TestStream  # noqa: E402
from apache_beam.transforms import trigger as T  # noqa: E402
from apache_beam.transforms import window as W  # noqa: E402
from apache_beam.utils.timestamp import Duration  # noqa: E402

OUT: list = []  # panes captured by CapturePanes (same process: the DirectRunner runs in-process)
OBS: list = []  # (window start, end, key?, output watermark, maybe_ontime) per _output call
_LOCK = threading.Lock()
_CURRENT = threading.local()  # the key whose work item the GroupAlsoByWindow evaluator is processing


# -- observation of Python's pane labelling (no behaviour change) ----------------------------------
_orig_output = T.GeneralTriggerDriver._output


def _observed_output(self, window, finished, state, output_watermark, maybe_ontime):
    wv = _orig_output(self, window, finished, state, output_watermark, maybe_ontime)
    with _LOCK:
        OBS.append(
            {
                "key": getattr(_CURRENT, "key", None),
                "domain": getattr(_CURRENT, "domain", "element"),
                "start": float(window.start),
                "end": float(window.end),
                "label_wm": float(output_watermark),
                "timer": bool(maybe_ontime),
                "index": wv.pane_info.index,
            }
        )
    return wv


T.GeneralTriggerDriver._output = _observed_output

_orig_process_timer = T.GeneralTriggerDriver.process_timer


def _observed_process_timer(self, window_id, name, time_domain, timestamp, state, input_watermark=None):
    _CURRENT.domain = "watermark" if time_domain == T.TimeDomain.WATERMARK else "processing"
    try:
        yield from _orig_process_timer(self, window_id, name, time_domain, timestamp, state, input_watermark)
    finally:
        _CURRENT.domain = "element"


T.GeneralTriggerDriver.process_timer = _observed_process_timer

_GABW = _te._StreamingGroupAlsoByWindowEvaluator
_orig_process_element = _GABW.process_element


def _keyed_process_element(self, element):
    _CURRENT.key = self.key_coder.decode(element.value.encoded_key)
    try:
        return _orig_process_element(self, element)
    finally:
        _CURRENT.key = None


_GABW.process_element = _keyed_process_element


# -- a frozen test clock cannot fire processing-time timers once the stream is done ---------------
_Monitor = _executor._ExecutorServiceParallelExecutor._MonitorTask
_orig_should_shutdown = _Monitor._should_shutdown


def _should_shutdown(self):
    if self._is_executing():
        return False
    wm = self._executor.evaluation_context._watermark_manager
    fired, realtime = wm.extract_all_timers()  # read-only here (timers are not cleared)
    if realtime and not fired:
        # only processing-time timers the test clock will never reach: report a stall
        self._executor.visible_updates.offer(
            _executor._ExecutorServiceParallelExecutor._VisibleExecutorUpdate(
                (Exception("stall: processing-time timers pending"), None, None)
            )
        )
        self._executor.executor_service.shutdown()
        return True
    return _orig_should_shutdown(self)


_Monitor._should_shutdown = _should_shutdown


class CapturePanes(beam.DoFn):
    def process(self, kv, w=beam.DoFn.WindowParam, p=beam.DoFn.PaneInfoParam):
        k, vs = kv
        vs = sorted(vs)
        with _LOCK:
            OUT.append(
                {
                    "key": k,
                    "start": float(w.start),
                    "end": float(w.end),
                    "timing": ["EARLY", "ON_TIME", "LATE", "UNKNOWN"][p.timing],
                    "index": p.index,
                    "nonspec": p.nonspeculative_index,
                    "is_last": bool(p.is_last),
                    "values": vs,
                    "sum": sum(vs),
                }
            )


def trigger_of(t):
    kind = t[0]
    if kind == "default":
        return T.DefaultTrigger()
    if kind == "after_watermark":
        early = trigger_of(t[1]) if t[1] is not None else None
        late = trigger_of(t[2]) if t[2] is not None else None
        return T.AfterWatermark(early=early, late=late)
    if kind == "after_count":
        return T.AfterCount(t[1])
    if kind == "after_processing_time":
        return T.AfterProcessingTime(t[1])
    if kind == "repeatedly":
        return T.Repeatedly(trigger_of(t[1]))
    if kind == "after_any":
        return T.AfterAny(*[trigger_of(c) for c in t[1]])
    if kind == "after_all":
        return T.AfterAll(*[trigger_of(c) for c in t[1]])
    if kind == "after_each":
        return T.AfterEach(*[trigger_of(c) for c in t[1]])
    if kind == "or_finally":
        return T.OrFinally(trigger_of(t[1]), trigger_of(t[2]))
    raise ValueError(f"unknown trigger {t!r}")


def window_of(w):
    if w["kind"] == "fixed":
        return W.FixedWindows(w["size"])
    if w["kind"] == "sliding":
        return W.SlidingWindows(w["size"], w["period"])
    if w["kind"] == "sessions":
        return W.Sessions(w["gap"])
    raise ValueError(w)


def test_stream_of(steps):
    ts = TestStream()
    wm = None
    pt = 0
    for s in steps:
        if "processing_time" in s and s["processing_time"] > pt:
            # whole milliseconds (TestStream's proto carries them): the clock's fractions are ms
            advance_ms = round(s["processing_time"] * 1000) - round(pt * 1000)
            ts.advance_processing_time(Duration(micros=advance_ms * 1000))
            pt = s["processing_time"]
        if s.get("add"):
            ts.add_elements([W.TimestampedValue((k, v), t) for k, v, t in s["add"]])
        if "watermark" in s and (wm is None or s["watermark"] > wm):
            ts.advance_watermark_to(s["watermark"])
            wm = s["watermark"]
        if s.get("end"):
            ts.advance_watermark_to_infinity()
    return ts


def run_one(sc):
    OUT.clear()
    OBS.clear()
    opts = PipelineOptions()
    opts.view_as(StandardOptions).streaming = True
    opts.view_as(TypeOptions).allow_unsafe_triggers = True  # Python refuses "unsafe" triggers Java accepts
    lateness = Duration(micros=int(round(sc["lateness"] * 1_000_000)) - 1)  # K5: Java's drop rule
    status, error = "ok", None
    t0 = time.time()
    try:
        with beam.Pipeline(options=opts) as p:
            (
                p
                | test_stream_of(sc["steps"])
                | beam.WindowInto(
                    window_of(sc["window"]),
                    trigger=trigger_of(sc["trigger"]),
                    accumulation_mode=(
                        T.AccumulationMode.ACCUMULATING
                        if sc["accumulation"] == "accumulating"
                        else T.AccumulationMode.DISCARDING
                    ),
                    allowed_lateness=lateness,
                )
                | beam.GroupByKey()
                | beam.ParDo(CapturePanes())
            )
    except TypeError as e:
        # 2.77's stall report raises a tuple: "exceptions must derive from BaseException"
        if "derive from BaseException" in str(e):
            status = "stall"
        else:
            status, error = "error", f"{type(e).__name__}: {e}"
    except Exception as e:  # noqa: BLE001 - reported per scenario
        msg = str(e)
        status, error = ("stall", None) if "stall" in msg else ("error", f"{type(e).__name__}: {msg[:500]}")
    with _LOCK:
        panes = list(OUT)
        obs = list(OBS)
    # attach the observed label watermark to each pane (same window, same index)
    by = {(o["key"], o["start"], o["end"], o["index"]): o for o in obs}
    for pn in panes:
        o = by.get((pn["key"], pn["start"], pn["end"], pn["index"]))
        if o is not None:
            pn["label_wm"] = o["label_wm"]
            pn["timer"] = o["timer"]
            pn["domain"] = o["domain"]
    return {"id": sc["id"], "status": status, "error": error, "panes": panes, "seconds": round(time.time() - t0, 3)}


def main():
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        sc = json.loads(line)
        res = run_one(sc)
        sys.stdout.write(json.dumps(res) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    sys.exit("run beam_worker.py (DoFns defined in __main__ are pickled by value)")
