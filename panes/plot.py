"""The Streaming 102 picture of a replay scenario (``panes replay SCENARIO --plot timeline.png``; the
optional ``plot`` extra, matplotlib).

Event time runs along x, processing time up y (the step's number when the scenario keeps no clock).
Each record is a dot where it happened and when it arrived: on time, late (it arrived behind the
watermark and still counted: ringed) or a dead letter (crossed out; one without a usable event time
at the left edge). The watermark is the line of (watermark, processing time) after each step. Each
pane is a bar over its window at the processing time it was emitted, labelled with its value and
timing; a retraction is a dashed bar. One panel per key (``MAX_PANELS`` at most).

``scenario_timeline`` gathers the picture's parts from the core's replay (``replay_core``'s
``on_step``); ``draw_timeline`` draws them.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .core.time import END_OF_INPUT, MIN_TIME, parse_instant
from .scenario import Scenario, StepTrace, load_scenario, replay_core
from .spec import SpecError, load_document
from .stage_scenario import is_stage_scenario

MAX_PANELS = 9
#: the panel of a keyed pipeline's records that have no key (dead letters)
NO_KEY = "(no key)"
#: a pane's label shows its values (one per aggregate, " / " between them) up to this many characters
LABEL_CHARS = 24
#: pane colours by timing, and the records'
COLOURS = {
    "EARLY": "#d9a400",
    "ON_TIME": "#2a9d3f",
    "LATE": "#7b3fb5",
    "on_time": "#1f5fa8",
    "late": "#f28e2b",
    "dead": "#c62828",
    "watermark": "#444444",
}


def require_matplotlib() -> Any:
    """matplotlib (the ``plot`` extra), with a non-interactive backend; one line when it is missing."""
    try:
        import matplotlib
    except ImportError:
        raise SpecError("--plot", "pictures need matplotlib: pip install 'panes[plot]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


@dataclass
class Dot:
    """A record: its panel, event time (None: none usable), the step's y, and its fate (on_time,
    late, dead) with the dead letter's reason."""

    lane: str
    event_time: int | None
    y: float
    fate: str
    reason: str | None = None
    label: str = ""  # the record's value of the first aggregated column (Streaming 102's numbers)


@dataclass
class Bar:
    """A pane: its panel, window (None bounds: the global window), the y it was emitted at, its
    label and timing."""

    lane: str
    start: int | None
    end: int | None
    y: float
    label: str
    timing: str
    retraction: bool


@dataclass
class Timeline:
    title: str
    subtitle: str  # the pipeline's window, trigger, lateness and accumulation
    clock: bool  # y is processing time (else the step's number)
    lanes: list[str] = field(default_factory=list)
    dots: list[Dot] = field(default_factory=list)
    bars: list[Bar] = field(default_factory=list)
    watermark: list[tuple[float, int]] = field(default_factory=list)  # (y, watermark) after each step
    end_of_input: float | None = None  # the y of the step that ended the input


def scenario_timeline(scenario: Scenario) -> Timeline:
    """The picture's parts: the core replays the scenario, each step seen as it runs."""
    p = scenario.pipeline
    clock = "processing_time" in (scenario.timeline[0] if scenario.timeline else {})
    name = scenario.raw.get("name") or "scenario"
    raw = scenario.raw.get("pipeline") or {}
    parts = [f"{f} {json.dumps(raw[f])}" for f in ("window", "trigger", "allowed_lateness") if raw.get(f)]
    tl = Timeline(name, ", ".join([*parts, p.accumulation]), clock)
    before = [MIN_TIME]
    shown = next((c for c in (getattr(a.fn, "column", None) for a in p.aggregates) if c not in (None, "*")), None)

    def on_step(trace: StepTrace) -> None:
        y = float(trace.processing_time if clock else trace.index)
        _step_dots(tl, p, trace, y, before[0], shown)
        for pane in trace.panes:
            tl.bars.append(_bar(p, pane, y))
        if MIN_TIME < trace.watermark < END_OF_INPUT:
            tl.watermark.append((y, trace.watermark))
        elif trace.watermark >= END_OF_INPUT and tl.end_of_input is None:
            tl.end_of_input = y
        before[0] = trace.watermark

    replay_core(scenario, on_step)
    seen = dict.fromkeys(d.lane for d in tl.dots if d.lane != NO_KEY)
    seen.update(dict.fromkeys(b.lane for b in tl.bars))
    if any(d.lane == NO_KEY for d in tl.dots):
        seen[NO_KEY] = None
    tl.lanes = list(seen) or [""]
    return tl


def _lane(p: Any, record: Any) -> str:
    """The panel of a record or pane: its key ("" for an unkeyed pipeline, ``NO_KEY`` for a record
    without one)."""
    if not p.key:
        return ""
    if not isinstance(record, dict) or any(record.get(k) is None for k in p.key):
        return NO_KEY
    return ", ".join(str(record.get(k)) for k in p.key)


def _event_time(p: Any, record: Any, stamp: int) -> int | None:
    if p.event_time is None:
        return stamp  # (ingestion time: the clock as the step left it)
    try:
        return parse_instant(record.get(p.event_time)) if isinstance(record, dict) else None
    except ValueError:
        return None


def _step_dots(tl: Timeline, p: Any, trace: StepTrace, y: float, watermark_before: int, shown: str | None) -> None:
    """The step's records: a dead letter's record is crossed out (matched by its content, once)."""
    letters = list(trace.dead_letters)
    for record in trace.step.get("add", []):
        t = _event_time(p, record, trace.processing_time)
        match = next(
            (
                d
                for d in letters
                if d["record"] == record or not isinstance(record, dict) and d["record"].get("value") == record
            ),
            None,
        )
        if match is not None:
            letters.remove(match)
            tl.dots.append(Dot(_lane(p, record), t, y, "dead", match["reason"], _value(record, shown)))
        elif p.watermark.punctuation and isinstance(record, dict) and record.get(p.watermark.punctuation_column):
            continue  # (a punctuation record moves the watermark; it is no data)
        else:
            late = t is not None and t < watermark_before
            tl.dots.append(Dot(_lane(p, record), t, y, "late" if late else "on_time", None, _value(record, shown)))


def _value(record: Any, column: str | None) -> str:
    return _short(record.get(column), 8) if column and isinstance(record, dict) and column in record else ""


#: a pane record's own fields: the rest are its values (a window pipeline's row: its columns)
PANE_FIELDS = ("window_start", "window_end", "timing", "pane_index", "is_last", "retraction")


def _bar(p: Any, pane: dict, y: float) -> Bar:
    outputs = [a.output for a in p.aggregates] or [c for c in pane if c not in (*p.key, *PANE_FIELDS)]
    text = _short(" / ".join(_short(pane.get(c)) for c in outputs), LABEL_CHARS)
    timing = pane["timing"]
    label = f"{'retract ' if pane['retraction'] else ''}{text} · {timing.lower().replace('_', ' ')}"
    start = None if pane["window_start"] is None else parse_instant(pane["window_start"])
    end = None if pane["window_end"] is None else parse_instant(pane["window_end"])
    return Bar(_lane(p, pane), start, end, y, label, timing, bool(pane["retraction"]))


def _short(v: Any, chars: int = 16) -> str:
    text = f"{v:g}" if isinstance(v, float) else json.dumps(v) if v is None or isinstance(v, bool) else str(v)
    return text if len(text) <= chars else text[: chars - 1] + "…"


# -- drawing ----------------------------------------------------------------------------------------------


def draw_timeline(tl: Timeline, path: str | Path) -> None:
    """Draws the picture into ``path`` (PNG, SVG or PDF, by its suffix)."""
    plt = require_matplotlib()
    lanes = tl.lanes[:MAX_PANELS]
    cols = min(3, len(lanes))
    rows = -(-len(lanes) // cols)
    size = (8.0, 7.0) if cols == 1 else (6.4 * cols, 5.2 * rows + 1.2)
    fig, axes = plt.subplots(rows, cols, figsize=size, squeeze=False, sharey=True, layout="constrained")
    x_range = _x_range(tl)
    for i, ax in enumerate(axes.flat):
        if i >= len(lanes):
            ax.axis("off")
            continue
        _draw_lane(ax, tl, lanes[i], x_range)
        ax.set_title(lanes[i] or "all records", fontsize=10)
        ax.set_xlabel("event time")
        if i % cols == 0:
            ax.set_ylabel("processing time" if tl.clock else "step")
    more = len(tl.lanes) - len(lanes)
    lines = [tl.title, *textwrap.wrap(tl.subtitle, 90 * cols)] + ([f"({more} more keys not drawn)"] if more else [])
    fig.suptitle("\n".join(lines), fontsize=10)
    fig.legend(handles=_legend(tl), loc="outside lower center", ncol=4, fontsize=8, frameon=False)
    fig.savefig(str(path), dpi=110)
    plt.close(fig)


def _x_range(tl: Timeline) -> tuple[float, float]:
    xs = [d.event_time for d in tl.dots if d.event_time is not None]
    xs += [t for b in tl.bars for t in (b.start, b.end) if t is not None]
    xs += [w for _, w in tl.watermark]
    lo, hi = (min(xs), max(xs)) if xs else (0, 1000)
    pad = max((hi - lo) * 0.06, 500)
    return lo - pad, hi + pad


def bar_levels(bars: list[Bar]) -> list[int]:
    """Each bar's level: bars emitted at one time whose windows overlap are drawn one above the other."""
    placed: dict[float, list[tuple[float, float, int]]] = {}
    levels = []
    for b in bars:
        x0, x1 = (-math.inf if b.start is None else b.start), (math.inf if b.end is None else b.end)
        taken = {n for a0, a1, n in placed.get(b.y, []) if a0 < x1 and x0 < a1}
        level = min(set(range(len(taken) + 1)) - taken)
        placed.setdefault(b.y, []).append((x0, x1, level))
        levels.append(level)
    return levels


def _draw_lane(ax: Any, tl: Timeline, lane: str, x_range: tuple[float, float]) -> None:
    lo, hi = x_range
    ys = sorted({d.y for d in tl.dots} | {b.y for b in tl.bars} | {y for y, _ in tl.watermark})
    step = max((ys[-1] - ys[0]) * 0.045, 1e-9) if len(ys) > 1 else 0.1  # (a stacked bar's rise)
    _draw_watermark(ax, tl, hi)
    _draw_windows(ax, [b for b in tl.bars if b.lane == lane], lo, hi, step)
    _draw_dots(ax, [d for d in tl.dots if d.lane == lane], lo)
    ax.set_xlim(lo, hi)
    ax.margins(y=0.08)
    _time_axis(ax.xaxis, hi - lo)
    if tl.clock and ys:
        _time_axis(ax.yaxis, ys[-1] - ys[0])
    else:
        from matplotlib.ticker import MaxNLocator

        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(True, alpha=0.25)


def _draw_dots(ax: Any, dots: list[Dot], lo: float) -> None:
    """Records as dots labelled with their value; dead letters crossed out with their reason (those
    without a usable event time at the left edge)."""
    no_time: dict[float, list[str]] = {}
    for d in dots:
        x = lo if d.event_time is None else d.event_time
        if d.fate == "dead":
            ax.plot([x], [d.y], marker="x", markersize=9, markeredgewidth=2, color=COLOURS["dead"], zorder=3)
            if d.event_time is None:
                no_time.setdefault(d.y, []).append(str(d.reason))
            else:
                _note(ax, str(d.reason), x, d.y, COLOURS["dead"], 6)
            continue
        edge = "black" if d.fate == "late" else COLOURS[d.fate]
        ax.plot([x], [d.y], marker="o", markersize=7, color=COLOURS[d.fate], markeredgecolor=edge, zorder=3)
        if d.label:
            _note(ax, d.label, x, d.y, "black", 7)
    for y, reasons in no_time.items():
        _note(ax, ", ".join(reasons), lo, y, COLOURS["dead"], 6, above=True)


def _note(ax: Any, text: str, x: float, y: float, colour: str, size: float, above: bool = False) -> None:
    """A small text beside a dot: below it on the right (above: over it)."""
    where = {"xytext": (6, 4), "va": "bottom"} if above else {"xytext": (6, -3), "va": "top"}
    ax.annotate(text, (x, y), textcoords="offset points", fontsize=size, color=colour, **where)


def _draw_windows(ax: Any, bars: list[Bar], lo: float, hi: float, step: float) -> None:
    """Each pane's bar over its window, the windows' bounds as faint lines."""
    for edge in sorted({t for b in bars for t in (b.start, b.end) if t is not None}):
        ax.axvline(edge, color="#bbbbbb", linewidth=0.6, linestyle=":", zorder=0)
    for b, level in zip(bars, bar_levels(bars)):
        x0, x1 = (lo if b.start is None else b.start), (hi if b.end is None else b.end)
        y = b.y + level * step
        style = {"linestyle": (0, (3, 2)), "alpha": 0.6} if b.retraction else {"linestyle": "-", "alpha": 0.9}
        ax.plot([x0, x1], [y, y], color=COLOURS[b.timing], linewidth=4, solid_capstyle="butt", zorder=2, **style)
        ax.annotate(
            b.label,
            ((x0 + x1) / 2, y),
            xytext=(0, 2.5),
            textcoords="offset points",
            ha="center",
            va="bottom",
            fontsize=7,
            color=COLOURS[b.timing],
        )


def _draw_watermark(ax: Any, tl: Timeline, hi: float) -> None:
    """The watermark after each step: it holds until the next step moves it."""
    xs: list[float] = []
    ys: list[float] = []
    for y, w in tl.watermark:
        if xs:
            xs.append(xs[-1])
            ys.append(y)
        xs.append(w)
        ys.append(y)
    if tl.end_of_input is not None and xs:
        xs += [xs[-1], hi]
        ys += [tl.end_of_input, tl.end_of_input]
    ax.plot(xs, ys, color=COLOURS["watermark"], linewidth=1.4, linestyle="-", zorder=1)


#: tick steps of a time axis (ms): the first that gives at most 7 ticks
TICK_STEPS = (
    1,
    2,
    5,
    10,
    20,
    50,
    100,
    200,
    500,
    1000,
    2000,
    5000,
    10_000,
    15_000,
    30_000,
    60_000,
    120_000,
    300_000,
    600_000,
    900_000,
    1_800_000,
    3_600_000,
    7_200_000,
    21_600_000,
    43_200_000,
    86_400_000,
)


def _time_axis(axis: Any, span: float) -> None:
    """Ticks at round instants (UTC), labelled as clock times (with the date past a day)."""
    from matplotlib.ticker import FuncFormatter, MultipleLocator

    step = next((s for s in TICK_STEPS if span / s <= 7), TICK_STEPS[-1] * (1 + int(span // (7 * TICK_STEPS[-1]))))
    fmt = "%m-%d %H:%M" if step >= 3_600_000 and span > 86_400_000 else "%H:%M:%S" if step >= 1000 else "%H:%M:%S.%f"

    def label(v: float, _pos: Any) -> str:
        text = (dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=v)).strftime(fmt)
        return text[:-3] if fmt.endswith("%f") else text

    axis.set_major_locator(MultipleLocator(step))
    axis.set_major_formatter(FuncFormatter(label))


def _legend(tl: Timeline) -> list:
    """The legend of what the picture shows."""
    from matplotlib.lines import Line2D

    def dot(colour: str, label: str, edge: str | None = None, marker: str = "o") -> Line2D:
        width = 2 if marker == "x" else 1
        return Line2D(
            [],
            [],
            color=colour,
            marker=marker,
            linestyle="",
            markeredgecolor=edge or colour,
            markeredgewidth=width,
            label=label,
        )

    def line(colour: str, label: str, width: float = 4, style: Any = "-") -> Line2D:
        return Line2D([], [], color=colour, linewidth=width, linestyle=style, label=label)

    fates = {d.fate for d in tl.dots}
    timings = {b.timing for b in tl.bars}
    shown = [
        ("on_time" in fates, dot(COLOURS["on_time"], "record")),
        ("late" in fates, dot(COLOURS["late"], "late record (counted)", "black")),
        ("dead" in fates, dot(COLOURS["dead"], "dead letter", marker="x")),
        (bool(tl.watermark), line(COLOURS["watermark"], "watermark", 1.4)),
        ("EARLY" in timings, line(COLOURS["EARLY"], "early pane")),
        ("ON_TIME" in timings, line(COLOURS["ON_TIME"], "on-time pane")),
        ("LATE" in timings, line(COLOURS["LATE"], "late pane")),
        (any(b.retraction for b in tl.bars), line("#888888", "retraction", style=(0, (3, 2)))),
    ]
    return [handle for present, handle in shown if present]


def check_plot(source: str | Path | dict, path: str | Path, engine: str = "core") -> None:
    """What ``--plot PATH`` needs, checked before the replay runs: matplotlib, a single-stage scenario
    replayed on the core (the picture is the core's run), a directory to write into."""
    require_matplotlib()
    if engine != "core":
        raise SpecError("--plot", "the picture is drawn from the core's replay: use it with --engine core")
    doc = source if isinstance(source, dict) else load_document(source)
    if is_stage_scenario(doc):
        raise SpecError("--plot", "draws single-stage scenarios (this one has stages)")
    if Path(path).suffix.lower() not in (".png", ".svg", ".pdf"):
        raise SpecError("--plot", f"{path}: a .png, .svg or .pdf file")
    if not Path(path).absolute().parent.is_dir():
        raise SpecError("--plot", f"cannot write {path}: no such directory")


def plot_replay(source: str | Path | dict, path: str | Path) -> Timeline:
    """``panes replay SCENARIO --plot PATH``: the scenario's picture, drawn into ``path``."""
    tl = scenario_timeline(load_scenario(source))
    draw_timeline(tl, path)
    return tl
