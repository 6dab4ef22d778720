"""Scenarios for the differential check against Beam Python: a neutral description (seconds), the
random generator, Java's trigger validity, the panes replay scenario, and how each engine runs it
(panes in-process through ``panes.scenario``; Beam in a ``beam_worker.py`` subprocess).

Event times, window sizes, gaps and allowed lateness are whole seconds; processing times carry a
millisecond fraction of their own (each clock step a different one), so that no processing-time
deadline (a clock value + a whole-second delay) falls exactly on a clock value: there Beam Java
fires strictly after the deadline and Beam Python at it (KNOWN_DIFFERENCES.md, K13)."""

from __future__ import annotations

import json
import os
import random
import subprocess
from datetime import datetime
from pathlib import Path

EVENT_BASE = 1000  # s: every generated event time is >= this; every processing time is below it
HERE = Path(__file__).resolve().parent
WORKER = HERE / "beam_worker.py"
#: the interpreter ``make conformance`` installs Beam into (never a dependency of panes itself)
CONFORMANCE_VENV_PYTHON = HERE.parents[1] / ".venv-conformance" / "bin" / "python"

# --------------------------------------------------------------------------------------------------
# triggers: a neutral tree, Java validity, and the panes spec


def is_once(t) -> bool:
    """Java's OnceTrigger: AfterPane, AfterProcessingTime, AfterWatermark.pastEndOfWindow() (without
    early/late), AfterAll, AfterFirst."""
    k = t[0]
    if k in ("after_count", "after_processing_time"):
        return True
    if k == "after_watermark":
        return t[1] is None and t[2] is None
    return k in ("after_any", "after_all")


def java_invalid_reason(t) -> str | None:
    """Why Beam Java's SDK refuses the trigger (types and checkArgument), or None."""
    k = t[0]
    if k == "after_watermark":
        for name, sub in (("early", t[1]), ("late", t[2])):
            if sub is not None:
                if not is_once(sub):
                    return f"AfterWatermark.with{name.title()}Firings takes a OnceTrigger, not {sub[0]}"
                r = java_invalid_reason(sub)
                if r:
                    return r
        return None
    if k in ("after_any", "after_all"):
        if len(t[1]) < 2:
            return f"{k} needs at least two sub-triggers"
        for c in t[1]:
            if not is_once(c):
                return f"{'AfterFirst' if k == 'after_any' else 'AfterAll'}.of takes OnceTriggers, not {c[0]}"
            r = java_invalid_reason(c)
            if r:
                return r
        return None
    if k == "after_each":
        if len(t[1]) < 2:
            return "after_each needs at least two sub-triggers"
        for c in t[1]:
            r = java_invalid_reason(c)
            if r:
                return r
        return None
    if k == "repeatedly":
        return java_invalid_reason(t[1])
    if k == "or_finally":
        if not is_once(t[2]):
            return f"orFinally takes a OnceTrigger, not {t[2][0]}"
        return java_invalid_reason(t[1]) or java_invalid_reason(t[2])
    return None


def panes_trigger(t):
    k = t[0]
    if k == "default":
        return "beam_default"
    if k == "after_watermark":
        d = {}
        if t[1] is not None:
            d["early"] = panes_trigger(t[1])
        if t[2] is not None:
            d["late"] = panes_trigger(t[2])
        return {"after_watermark": d}
    if k == "after_count":
        return {"after_count": t[1]}
    if k == "after_processing_time":
        return {"after_processing_time": t[1] * 1000}
    if k == "repeatedly":
        return {"repeatedly": panes_trigger(t[1])}
    if k in ("after_any", "after_all", "after_each"):
        return {k: [panes_trigger(c) for c in t[1]]}
    if k == "or_finally":
        return {"or_finally": {"trigger": panes_trigger(t[1]), "finally": panes_trigger(t[2])}}
    raise ValueError(t)


def walk(t, parents=()):
    yield t, parents
    k = t[0]
    if k == "after_watermark":
        for c in (t[1], t[2]):
            if c is not None:
                yield from walk(c, parents + (t,))
    elif k in ("repeatedly",):
        yield from walk(t[1], parents + (t,))
    elif k in ("after_any", "after_all", "after_each"):
        for c in t[1]:
            yield from walk(c, parents + (t,))
    elif k == "or_finally":
        yield from walk(t[1], parents + (t,))
        yield from walk(t[2], parents + (t,))


def uses_processing_time(t) -> bool:
    return any(n[0] == "after_processing_time" for n, _ in walk(t))


def pt_under_composite(t) -> bool:
    """K4: an AfterProcessingTime whose should_fire Beam Python consults outside its own timer."""
    return any(
        n[0] == "after_processing_time"
        and any(p[0] in ("after_any", "after_all", "after_each", "or_finally") for p in ps)
        for n, ps in walk(t)
    )


def composite_early_late(t) -> bool:
    """K9: a composite once-trigger (after_any / after_all) as AfterWatermark's early or late trigger."""
    return any(
        n[0] == "after_watermark" and any(c is not None and c[0] in ("after_any", "after_all") for c in (n[1], n[2]))
        for n, _ in walk(t)
    )


def trigger_text(t) -> str:
    k = t[0]
    if k == "default":
        return "Default"
    if k == "after_watermark":
        a = []
        if t[1] is not None:
            a.append("early=" + trigger_text(t[1]))
        if t[2] is not None:
            a.append("late=" + trigger_text(t[2]))
        return f"AfterWatermark({', '.join(a)})"
    if k == "after_count":
        return f"AfterCount({t[1]})"
    if k == "after_processing_time":
        return f"AfterProcessingTime({t[1]})"
    if k == "repeatedly":
        return f"Repeatedly({trigger_text(t[1])})"
    if k in ("after_any", "after_all", "after_each"):
        name = {"after_any": "AfterAny", "after_all": "AfterAll", "after_each": "AfterEach"}[k]
        return f"{name}({', '.join(trigger_text(c) for c in t[1])})"
    if k == "or_finally":
        return f"OrFinally({trigger_text(t[1])}, {trigger_text(t[2])})"
    return str(t)


# --------------------------------------------------------------------------------------------------
# the random scenario generator


class Gen:
    def __init__(self, rng: random.Random, pt: bool):
        self.r = rng
        self.pt = pt

    def once(self, depth=0, allow_wm=True):
        r = self.r
        opts = [("count", 5)]
        if self.pt:
            opts.append(("apt", 3))
        if allow_wm:
            opts.append(("wm", 1))
        if depth < 1:
            opts += [("any", 1), ("all", 1)]
        kind = _pick(r, opts)
        if kind == "count":
            return ["after_count", r.choice([1, 1, 2, 2, 3])]
        if kind == "apt":
            return ["after_processing_time", r.choice([1, 2, 3, 5])]
        if kind == "wm":
            return ["after_watermark", None, None]
        kids = [self.once(depth + 1, allow_wm) for _ in range(2)]
        return ["after_any" if kind == "any" else "after_all", kids]

    def top(self, depth=0):
        r = self.r
        opts = [("default", 2), ("aw", 5), ("once", 2), ("rep", 4)]
        if depth < 1:
            opts += [("each", 2), ("orf", 2)]
        kind = _pick(r, opts)
        if kind == "default":
            return ["default"]
        if kind == "aw":
            early = self.once(1, allow_wm=False) if r.random() < 0.7 else None
            late = self.once(1, allow_wm=False) if r.random() < 0.5 else None
            return ["after_watermark", early, late]
        if kind == "once":
            return self.once()
        if kind == "rep":
            return ["repeatedly", self.once()]
        if kind == "each":
            n = r.choice([2, 2, 3])
            kids = []
            for _ in range(n):
                kids.append(self.once() if r.random() < 0.7 else ["repeatedly", self.once()])
            return ["after_each", kids]
        main = r.choice([["repeatedly", self.once()], ["default"], ["after_watermark", self.once(1, False), None]])
        return ["or_finally", main, self.once()]


def _pick(r, weighted):
    total = sum(w for _, w in weighted)
    x = r.random() * total
    for k, w in weighted:
        x -= w
        if x < 0:
            return k
    return weighted[-1][0]


def window_spec(r):
    k = r.choice(["fixed", "fixed", "sliding", "sessions", "sessions"])
    if k == "fixed":
        return {"kind": "fixed", "size": r.choice([5, 10])}
    if k == "sliding":
        size = r.choice([6, 10])
        return {"kind": "sliding", "size": size, "period": size // 2}
    return {"kind": "sessions", "gap": r.choice([3, 5])}


def generate(seed: int) -> dict:
    r = random.Random(seed)
    pt = r.random() < 0.4
    g = Gen(r, pt)
    while True:
        trig = g.top()
        if java_invalid_reason(trig) is None:
            break
    keys = ["k0", "k1"][: r.choice([1, 2, 2])]
    lateness = r.choice([0, 0, 3, 5, 10, 100])
    steps: list[dict] = []
    wm = EVENT_BASE - 5
    clock = 0
    ticks = 0
    value = 0
    n = r.randint(4, 12)
    for _ in range(n):
        step: dict = {}
        if pt and r.random() < 0.45:
            clock += r.choice([1, 1, 2, 3, 4, 6])
            ticks += 1
            step["processing_time"] = clock + ticks / 1000  # a fraction of its own: no deadline lands on it
        x = r.random()
        if x < 0.6:
            recs = []
            for _ in range(r.choice([1, 1, 1, 2, 3])):
                value += 1
                y = r.random()
                if y < 0.65:
                    ts = wm + r.randint(0, 12)  # on time (or at the watermark)
                elif y < 0.9:
                    ts = wm - r.randint(1, 8)  # behind the watermark: late or within lateness
                else:
                    ts = wm - r.randint(9, 30)  # well behind
                ts = max(ts, EVENT_BASE)
                recs.append([r.choice(keys), value, ts])
            step["add"] = recs
        elif x < 0.9:
            step["watermark"] = wm = wm + r.choice([1, 2, 3, 5, 5, 8, 12])
        if step:
            steps.append(step)
    steps.append({"end": True})
    return {
        "id": f"s{seed}",
        "seed": seed,
        "window": window_spec(r),
        "trigger": trig,
        "accumulation": r.choice(["accumulating", "discarding"]),
        "lateness": lateness,
        "steps": steps,
    }


# --------------------------------------------------------------------------------------------------
# panes side


def panes_window(w):
    if w["kind"] == "fixed":
        return {"tumbling": {"size": w["size"] * 1000}}
    if w["kind"] == "sliding":
        return {"hopping": {"size": w["size"] * 1000, "hop": w["period"] * 1000}}
    return {"session": {"gap": w["gap"] * 1000}}


def panes_scenario(sc: dict, name: str | None = None) -> dict:
    timeline = []
    for s in sc["steps"]:
        st = {}
        if "processing_time" in s:
            st["processing_time"] = round(s["processing_time"] * 1000)
        if "add" in s:
            st["add"] = [{"k": k, "v": v, "t": t * 1000} for k, v, t in s["add"]]
        if "watermark" in s:
            st["watermark"] = s["watermark"] * 1000
        if s.get("end"):
            st["end"] = True
        timeline.append(st)
    doc = {
        "pipeline": {
            "event_time": "t",
            "key": "k",
            "window": panes_window(sc["window"]),
            "watermark": {"punctuation": True},
            "allowed_lateness": sc["lateness"] * 1000,
            "trigger": panes_trigger(sc["trigger"]),
            "accumulation": sc["accumulation"],
            "aggregates": {"sum": {"sum": "v"}, "values": {"collect_list": "v"}},
        },
        "timeline": timeline,
    }
    if name:
        doc = {"name": name, **doc}
    return doc


def seconds(iso: str | None) -> float | None:
    """An ISO-8601 instant as epoch seconds."""
    if iso is None:
        return None
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def run_panes(sc: dict) -> dict:
    """Every pane with the index of the step that emitted it (by replaying each prefix of the
    timeline: only the stable replay API is used)."""
    from panes.scenario import load_scenario, replay_core

    doc = panes_scenario(sc)
    try:
        load_scenario(doc)
    except Exception as e:  # noqa: BLE001 - a refused scenario is a result too
        return {"status": "refused", "error": f"{type(e).__name__}: {e}", "panes": [], "dead": []}
    panes: list[dict] = []
    dead: list[dict] = []
    seen = 0
    for i in range(len(doc["timeline"])):
        res = replay_core(load_scenario({**doc, "timeline": doc["timeline"][: i + 1]}))
        for p in res.panes[seen:]:
            if p.get("retraction"):
                continue
            vals = sorted(p["values"])
            panes.append(
                {
                    "key": p["k"],
                    "start": seconds(p["window_start"]),
                    "end": seconds(p["window_end"]),
                    "timing": p["timing"],
                    "index": p["pane_index"],
                    "is_last": p["is_last"],
                    "values": vals,
                    "sum": p["sum"],
                    "step": i,
                }
            )
        seen = len(res.panes)
        for d in res.dead_letters[len(dead) :]:
            dead.append({**d, "step": i})
    return {"status": "ok", "panes": panes, "dead": dead}


# --------------------------------------------------------------------------------------------------
# Beam side (subprocess)


def beam_python() -> str:
    """The interpreter for the Beam worker: $BEAM_PYTHON, else the repository's .venv-conformance
    (``make conformance`` creates it)."""
    env = os.environ.get("BEAM_PYTHON")
    if env:
        return env
    if CONFORMANCE_VENV_PYTHON.exists():
        return str(CONFORMANCE_VENV_PYTHON)
    raise SystemExit(
        "apache-beam not found: run `make conformance`, or set BEAM_PYTHON to an interpreter "
        "that has apache-beam 2.77.0"
    )


def run_beam(scenarios: list[dict], python: str | None = None, timeout: float = 900) -> dict:
    """Replay scenarios in one Beam worker process; returns {id: result}."""
    payload = "".join(
        json.dumps({k: sc[k] for k in ("id", "window", "trigger", "accumulation", "lateness", "steps")}) + "\n"
        for sc in scenarios
    )
    proc = subprocess.run(
        [python or beam_python(), str(WORKER)], input=payload, capture_output=True, text=True, timeout=timeout
    )
    out = {}
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            d = json.loads(line)
            out[d["id"]] = d
    for sc in scenarios:
        out.setdefault(sc["id"], {"id": sc["id"], "status": "crashed", "error": proc.stderr[-2000:], "panes": []})
    return out
