"""Differential check of panes' core engine against Apache Beam Python (DirectRunner + TestStream).

Random scenarios (windows, Java-valid triggers, accumulation, allowed lateness, out-of-order and late
data, processing time) are written twice: as a panes replay scenario (run with
``panes.scenario.replay_core``) and as a Beam TestStream (run by ``beam_worker.py`` in a subprocess,
many scenarios per process). Every pane is compared per key and window as the sequence of
(timing, index, is_last, values, sum). Differences that one of Beam Python's known deviations from
Beam Java explains (KNOWN_DIFFERENCES.md, items K1-K14) are accepted by a normalisation or a
predicate named after the item; everything else is reported as unexplained, and so is a dead letter
``late`` for a record that was not late by Java's rule.

Time unit of the neutral scenario: seconds. panes gets milliseconds, Beam seconds. Event
times are >= EVENT_BASE and processing times < EVENT_BASE, so a processing-time value that Beam
Python compares with a window end (K3) is always before the window.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from tests.conformance.beam_scenarios import (  # noqa: F401 - re-exported for the runner scripts
    EVENT_BASE,
    beam_python,
    generate,
    java_invalid_reason,
    panes_scenario,
    pt_under_composite,
    run_beam,
    run_panes,
    trigger_text,
    walk,
)
from tests.conformance.beam_scenarios import (
    seconds as _seconds,
)

# --------------------------------------------------------------------------------------------------
# comparison


@dataclass
class Diff:
    key: str
    start: float
    end: float
    what: str  # "timing", "index", "is_last", "values", "sum", "missing_in_beam", "extra_in_beam"
    panes: dict | None
    beam: dict | None
    accepted_by: str | None = None  # K-item that explains it
    note: str = ""


@dataclass
class Outcome:
    id: str
    diffs: list = field(default_factory=list)
    status: str = "ok"

    @property
    def unexplained(self):
        return [d for d in self.diffs if d.accepted_by is None]


def watermark_before(sc: dict) -> list:
    """Input watermark (s) before each step (None before the first watermark)."""
    wm = None
    out: list = []
    for s in sc["steps"]:
        out.append(wm)
        if "watermark" in s and (wm is None or s["watermark"] > wm):
            wm = s["watermark"]
        if s.get("end"):
            wm = float("inf")
    return out


def gc_step(sc: dict, end: float) -> int | None:
    """Index of the step at which the watermark reaches end + allowed lateness (Java's GC timer)."""
    wm = None
    for i, s in enumerate(sc["steps"]):
        if "watermark" in s and (wm is None or s["watermark"] > wm):
            wm = s["watermark"]
        if s.get("end"):
            wm = float("inf")
        if wm is not None and wm >= end + sc["lateness"]:
            return i
    return None


def watermark_after(sc: dict) -> list:
    """Input watermark (s) after each step (None before the first watermark)."""
    return watermark_before(sc)[1:] + [float("inf")]


def compare(sc: dict, pres: dict, bres: dict) -> Outcome:
    oc = Outcome(sc["id"])
    if pres["status"] != "ok":
        oc.status = "panes_refused"
        return oc
    if bres["status"] not in ("ok", "stall"):
        oc.status = "beam_" + bres["status"]
        oc.diffs.append(Diff("", 0, 0, "beam_error", None, {"error": bres.get("error")}))
        return oc
    groups: dict = {}
    for side, panes in ((0, pres["panes"]), (1, bres["panes"])):
        for w, run in incarnations(panes):
            groups.setdefault(w, [[], []])[side].extend(run)
    if sc["window"]["kind"] == "sessions":
        oc.diffs.extend(rename_resurrected_sessions(sc, groups))
    for (key, start, end, _), (P, B) in sorted(groups.items()):
        B = sorted(B, key=lambda b: b["index"])
        oc.diffs.extend(compare_window(sc, key, start, end, P, B, groups))
    oc.diffs.extend(dead_letters_not_late(sc, pres))
    return oc


def incarnations(panes: list) -> list:
    """A window's panes in emission order, cut where its pane index starts again at 0: a session
    merged away can come back with the same bounds later, a window of its own. Each run is keyed
    (key, start, end, n), n counting the window's earlier runs."""
    runs: dict = {}
    out = []
    for p in panes:
        w = (p["key"], p["start"], p["end"])
        n = runs.get(w, [0, None])
        if n[1] is not None and p["index"] == 0:
            n[0] += 1
        n[1] = p
        runs[w] = n
        out.append(((*w, n[0]), [p]))
    return out


def rename_resurrected_sessions(sc, groups) -> list:
    """K1 (no garbage collection at all): Beam Python keeps an expired session in its merge set, so a
    later session that overlaps it is reported as one window starting at the expired session's start.
    Map such a Beam window onto panes' window with the same key and end when panes expired a session
    starting there before."""
    out = []
    pw = {w: P for w, (P, B) in groups.items() if P}
    for (k, s, e, n), (P, B) in list(groups.items()):
        if P or not B:
            continue
        cands = [(k2, s2, e2, n2) for (k2, s2, e2, n2) in pw if k2 == k and e2 == e and s2 > s]
        expired = [
            (k2, s2, e2)
            for (k2, s2, e2, _), PP in pw.items()
            if k2 == k and s2 == s and gc_step(sc, e2) is not None and PP[-1]["step"] >= gc_step(sc, e2)
        ]
        if len(cands) == 1 and expired:
            tgt = cands[0]
            if not groups[tgt][1]:
                groups[tgt][1].extend(B)
                del groups[(k, s, e, n)]
                out.append(
                    Diff(
                        k,
                        s,
                        e,
                        "window",
                        None,
                        None,
                        "K1",
                        note=f"Beam's window [{s:g},{e:g}) is panes' [{tgt[1]:g},{e:g}) grown over an expired session",
                    )
                )
    return out


def normalise(sc, P, B, g, mk, diffs):
    """Pane-sequence normalisations of K8, K12 and K1 (each appends the accepted difference)."""
    # K8: Beam Python emits empty EARLY/LATE panes that Java suppresses (ReduceFnRunner.needToEmit) and
    # that consume an index (PaneInfoTracker only stores emitted panes). Drop them, renumber the rest.
    B2, shift = [], 0
    for j, b in enumerate(B):
        b = dict(b)
        # K12: Beam Python fires again for a second identical watermark timer set by another sub-trigger
        if (
            j > 0
            and b.get("domain") == "watermark"
            and B[j - 1].get("domain") == "watermark"
            and b.get("label_wm") == B[j - 1].get("label_wm")
            and (b["values"] == B[j - 1]["values"] if sc["accumulation"] == "accumulating" else not b["values"])
        ):
            diffs.append(mk("extra_in_beam", None, b, "K12"))
            shift += 1
            continue
        # an empty non-ON_TIME pane (or one labelled from a processing time, K3) that panes does not have
        empty_not_on_time = not b["values"] and (b["timing"] != "ON_TIME" or b.get("domain") == "processing")
        if empty_not_on_time and not any(p["values"] == [] and p["index"] == b["index"] - shift for p in P):
            diffs.append(mk("extra_in_beam", None, b, "K8"))
            shift += 1
            continue
        b["index"] -= shift
        B2.append(b)
    B = B2

    # K1: no garbage-collection flush in Beam Python: panes' final pane emitted at the GC step has no
    # counterpart in Beam when Beam has one pane fewer.
    if P and len(P) == len(B) + 1 and g is not None and P[-1]["step"] == g:
        diffs.append(mk("missing_in_beam", P[-1], None, "K1"))
        P = P[:-1]
    # K1 (b): windows never garbage-collected in Beam Python keep firing processing-time timers after GC
    if P and len(B) > len(P) and g is not None and P[-1]["step"] == g:
        for b in B[len(P) :]:
            if b.get("domain") == "processing":
                diffs.append(mk("extra_in_beam", None, b, "K1"))
        B = B[: len(P)] + [b for b in B[len(P) :] if b.get("domain") != "processing"]

    return P, B


def scenario_item(sc):
    """The scenario-level predicate K4 (an AfterProcessingTime under a composite): every
    difference in such a scenario is accepted, a blind spot the run reports the size of."""
    if pt_under_composite(sc["trigger"]):
        return "K4"
    return None


def compare_window(sc, key, start, end, P, B, groups) -> list:
    diffs: list = []
    g = gc_step(sc, end)
    scenario_k = scenario_item(sc)
    if sc["window"]["kind"] == "sessions" and P and not B:
        item, note = session_window_missing(sc, key, start, end, P, groups)
        if item:
            return [Diff(key, start, end, "missing_in_beam", p, None, item, note=note) for p in P]

    def mk(what, p, b, acc=None, note=""):
        return Diff(key, start, end, what, p, b, acc, note)

    P, B = normalise(sc, P, B, g, mk, diffs)
    prev_non_early = False
    for i in range(max(len(P), len(B))):
        p = P[i] if i < len(P) else None
        b = B[i] if i < len(B) else None
        if p is None:
            assert b is not None
            prev = B[i - 1] if i > 0 else None
            nothing_new = (not b["values"]) or (prev is not None and prev["values"] == b["values"])
            unarmed = b.get("domain") == "processing" and nothing_new
            note = "a processing-time callback fired an AfterProcessingTime that had no element" if unarmed else ""
            diffs.append(mk("extra_in_beam", None, b, "K4" if unarmed else scenario_k, note))
            continue
        if b is None:
            diffs.append(mk("missing_in_beam", p, None, scenario_k))
            continue
        if p["values"] != b["values"]:
            diffs.append(mk("values", p, b, scenario_k))
            continue
        if p["sum"] != b["sum"]:
            diffs.append(mk("sum", p, b, scenario_k))
        if p["timing"] != b["timing"]:
            acc, note = timing_explained(sc, p, b, end, prev_non_early)
            diffs.append(mk("timing", p, b, acc or scenario_k, note))
        if p["index"] != b["index"]:
            diffs.append(mk("index", p, b, scenario_k))
        if p["is_last"] != b["is_last"]:
            acc = "K2" if p["is_last"] and not b["is_last"] and p["step"] == g else scenario_k
            diffs.append(mk("is_last", p, b, acc))
        prev_non_early = prev_non_early or p["timing"] != "EARLY"
    return diffs


def timing_explained(sc, p, b, end, prev_non_early):
    """Which known item explains a timing difference, if any.

    Beam Python labels a pane from one watermark alone: the processing time of a processing-time
    callback (K3), else its output watermark, whose holds differ from Java's (K7), and it never
    labels an element-driven pane ON_TIME (K6). So it cannot decide Java's ON_TIME-or-LATE question,
    which hangs on the holds. What it can check is the half of ``PaneInfoTracker.describePane``
    that holds do not decide: a pane after a non-EARLY one is LATE; an EARLY pane's input
    watermark had not passed the window's end; a first non-EARLY pane's had. panes' label must obey
    that; then Beam Python's different label is its K3/K6 deviation."""
    step = p["step"]
    before, after = watermark_before(sc)[step], watermark_after(sc)[step]
    where = f"step {step}, input watermark {before} -> {after}"
    if prev_non_early and p["timing"] != "LATE":
        return None, f"{where}: a pane after a non-EARLY one must be LATE"
    if p["timing"] == "EARLY" and before is not None and before >= end:
        return None, f"{where}: EARLY although the input watermark had passed the end"
    if p["timing"] != "EARLY" and not prev_non_early and (after is None or after < end):
        return None, f"{where}: {p['timing']} although the input watermark had not passed the end"
    if b.get("domain") == "processing":
        return "K3", f"Beam labelled it from processing time {b.get('label_wm')}"
    if p["timing"] == "EARLY":
        return None, f"{where}: Beam {b['timing']} from its output watermark {b.get('label_wm')}"
    return "K6", f"{where}: Beam labelled it from its output watermark {b.get('label_wm')} ({b.get('domain')})"


def session_window_missing(sc, key, start, end, P, groups):
    """Known items that explain a session window of panes that Beam Python never emitted."""
    gap = sc["window"]["gap"]
    first = P[0]["step"]
    # K10: Python's AfterWatermark.on_merge keeps the late phase when any merged window was late
    if any(n[0] == "after_watermark" and n[2] is not None for n, _ in walk(sc["trigger"])):
        for (k, s2, e2, _), (P2, _B2) in groups.items():
            if (
                k == key
                and start <= s2
                and e2 <= end
                and (s2, e2) != (start, end)
                and any(p["timing"] != "EARLY" and p["step"] < first for p in P2)
            ):
                return "K10", f"merged from [{s2:g},{e2:g}), which was past its end: Python stays in the late phase"
    # K11: Python keeps a closed (tombstoned) session in its merge set: it absorbs and drops later sessions
    for (k, s2, e2, _), (_P2, B2) in groups.items():
        if k == key and any(b["is_last"] for b in B2) and s2 <= end and start <= e2 + gap:
            return "K11", f"near Beam's closed session [{s2:g},{e2:g}), which Python keeps as a tombstone"
    return None, ""


def dead_letters_not_late(sc, pres) -> list:
    """A dead letter ``late`` names the windows the record missed: one at least must have expired by the
    input watermark (LateDataUtils.canDropDueToExpiredWindow: watermark >= end + allowed lateness);
    one that had not is unexplained."""
    out = []
    wm_before = watermark_before(sc)
    for x in pres["dead"]:
        if x.get("reason") != "late":
            continue
        wm = wm_before[x["step"]]
        ends = [_seconds(w["end"]) for w in x.get("windows", [])]
        if not ends or wm is None or not any(wm >= e + sc["lateness"] for e in ends):
            out.append(
                Diff(
                    x["record"]["k"],
                    x["record"]["t"] / 1000,
                    0,
                    "dead_letter",
                    None,
                    None,
                    note=f"step {x['step']}: late, but none of the windows it names had expired: {x.get('windows')}",
                )
            )
    return out


def diff_text(d: Diff) -> str:
    def pane(x):
        if x is None:
            return "-"
        if "timing" not in x:
            return json.dumps(x)
        return f"{x['timing']} #{x['index']}{' last' if x['is_last'] else ''} {x['values']} sum={x['sum']}"

    step = f" step {d.panes['step']}" if d.panes else ""
    return (
        f"{d.key} [{d.start:g},{d.end:g}) {d.what}{step}: panes {pane(d.panes)} | beam {pane(d.beam)}"
        + (f" [{d.accepted_by}]" if d.accepted_by else "")
        + (f" ({d.note})" if d.note else "")
    )
