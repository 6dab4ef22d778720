"""``panes run ... --report report.html``: one self-contained HTML page per run (no script, no file
beside it; charts as inline SVG): throughput, watermark lag, panes and dead letters per micro-batch,
and the account of every record (``panes.core.accounting``), per micro-batch and for the run.

The runner hands each micro-batch's progress to ``batch_row`` (from its ``StreamingQueryListener``)
and the rows to ``write_report``. A multi-stage run (``panes.stage_runner``) hands its micro-batches
(``core.stages.accounts.StagesProgress``) to ``write_stages_report``: its page shows the counts per
input (each input's records and watermark, a table per input) and the watermarks per stage.
"""

from __future__ import annotations

import datetime as dt
import html
from dataclasses import dataclass
from pathlib import Path

from .core.accounting import Accounting
from .core.stages.accounts import GraphAccounting, StagesProgress
from .core.time import END_OF_INPUT, MIN_TIME, format_instant, parse_instant

COLOURS = {"records": "#1f5fa8", "lag": "#444444", "panes": "#2a9d3f", "dead": "#c62828"}
#: one colour per series where a chart has several (inputs, stages), in this order
PALETTE = ("#1f5fa8", "#e07b00", "#2a9d3f", "#8e44ad", "#c62828", "#00838f", "#444444")
#: a chart's size (px) and its margins for the axis labels
WIDTH, HEIGHT, LEFT, BOTTOM, TOP = 720, 200, 64, 28, 12


@dataclass
class BatchRow:
    """One micro-batch as the report shows it."""

    batch: int
    timestamp: int  # when it started (ms)
    seconds: float  # how long it took
    counts: Accounting
    panes: int
    watermark: int | None  # after it (ms; None: none yet)

    @property
    def records_per_second(self) -> float | None:
        return self.counts.records_in / self.seconds if self.seconds else None

    @property
    def watermark_lag(self) -> float | None:
        """How far the watermark is behind the micro-batch's processing time (s)."""
        if self.watermark is None or not MIN_TIME < self.watermark < END_OF_INPUT:
            return None
        return (self.timestamp - self.watermark) / 1000


def batch_row(progress, counts: Accounting, panes: int, watermark: int | str | None) -> BatchRow:
    """A micro-batch from its ``StreamingQueryProgress``, its account and panes, and the watermark
    after it (ms, or Spark's ISO-8601 text)."""
    wm = watermark
    if isinstance(wm, str):
        try:
            wm = parse_instant(wm)
        except ValueError:
            wm = None
    seconds = (progress.durationMs or {}).get("triggerExecution", 0) / 1000
    return BatchRow(progress.batchId, parse_instant(progress.timestamp), seconds, counts, panes, wm)


def write_report(path: str | Path, title: str, plan: str, rows: list[BatchRow], totals: Accounting) -> None:
    """Writes the run's page to ``path``."""
    Path(path).write_text(render(title, plan, rows, totals), encoding="utf-8")


def render(title: str, plan: str, rows: list[BatchRow], totals: Accounting) -> str:
    """The page: a summary, four charts over the micro-batches, the account table."""
    xs = [r.batch for r in rows]
    lags = [r.watermark_lag for r in rows]
    parts = [
        f"<h1>{_e(title)}</h1>",
        f"<p>{_e(plan)}</p>",
        f"<p class=sum>{len(rows)} micro-batches, {sum(r.panes for r in rows)} panes, "
        f"{totals.dead_letters} dead letters; {_e(totals.summary())}</p>",
        _chart(
            "Throughput (records in per second)", xs, [("records/s", [r.records_per_second for r in rows], "records")]
        ),
        _chart(f"Watermark lag ({_lag_unit(lags)[0]} behind processing time)", xs, [("lag", _in_unit(lags), "lag")]),
        _chart("Panes per micro-batch", xs, [("panes", [r.panes for r in rows], "panes")]),
        _chart("Dead letters per micro-batch", xs, [("dead letters", [r.counts.dead_letters for r in rows], "dead")]),
        "<h2>Where every record went</h2>",
        _account_table(rows, totals),
    ]
    return PAGE.format(title=_e(title), body="\n".join(parts))


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _lag_unit(lags: list[float | None]) -> tuple[str, float]:
    top = max((abs(v) for v in lags if v is not None), default=0)
    for unit, size in (("days", 86_400), ("hours", 3600), ("minutes", 60)):
        if top >= 2 * size:
            return unit, size
    return "seconds", 1


def _in_unit(lags: list[float | None]) -> list[float | None]:
    size = _lag_unit(lags)[1]
    return [None if v is None else v / size for v in lags]


def _chart(title: str, xs: list[int], series: list[tuple[str, list, str]]) -> str:
    """A bar chart per micro-batch (a missing value: no bar), as inline SVG."""
    values = [v for _, vs, _ in series for v in vs if v is not None]
    top = max([*values, 0]) or 1
    low = min([*values, 0])
    span = top - low
    plot_w, plot_h = WIDTH - LEFT - 8, HEIGHT - BOTTOM - TOP
    slot = plot_w / max(len(xs), 1)

    def y(v: float) -> float:
        return TOP + plot_h * (top - v) / span

    out = [f'<svg width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="{_e(title)}">']
    for tick in (low, (low + top) / 2, top):
        out.append(f'<line x1="{LEFT}" x2="{WIDTH - 8}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" class=grid />')
        out.append(f'<text x="{LEFT - 6}" y="{y(tick) + 4:.1f}" text-anchor="end">{_number(tick)}</text>')
    width = max(slot * 0.8 / len(series), 1)
    for s, (name, vs, colour) in enumerate(series):
        for i, v in enumerate(vs):
            if v is None:
                continue
            x = LEFT + i * slot + slot * 0.1 + s * width
            top_y, bottom_y = sorted((y(v), y(0)))
            out.append(
                f'<rect x="{x:.1f}" y="{top_y:.1f}" width="{width:.1f}" height="{max(bottom_y - top_y, 0.5):.1f}" '
                f'fill="{COLOURS.get(colour, colour)}"><title>batch {xs[i]}: {_e(name)} {_number(v)}</title></rect>'
            )
    step = max(1, len(xs) // 12)
    for i in range(0, len(xs), step):
        out.append(f'<text x="{LEFT + (i + 0.5) * slot:.1f}" y="{HEIGHT - 10}" text-anchor="middle">{xs[i]}</text>')
    out.append("</svg>")
    legend = ""
    if len(series) > 1:
        keys = [f'<span style="color:{COLOURS.get(c, c)}">&#9632;</span> {_e(name)}' for name, _, c in series]
        legend = ": " + ", ".join(keys)
    return f"<h2>{_e(title)}</h2>\n<figure>{''.join(out)}<figcaption>micro-batch{legend}</figcaption></figure>"


def _number(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 100 or float(v).is_integer() else f"{v:,.2f}"


def _account_table(rows: list[BatchRow], totals: Accounting) -> str:
    """Per micro-batch and for the run: records in = counted + dead letters + in no window +
    watermark records, with the dead letters' reasons and whether it adds up."""
    lines = [_account_head(True)]
    for r in rows:
        lines.append(_account_row(str(r.batch), _instant(r.timestamp), r.counts, r.panes, r.watermark))
    lines.append(_account_row("run", "", totals, sum(r.panes for r in rows), rows[-1].watermark if rows else None))
    lines.append("</table>")
    return "\n".join(lines)


def _account_head(panes: bool) -> str:
    head = ["micro-batch", "started", "records in", "counted", "dead letters", "in no window", "watermark records"]
    head += ["adds up", "panes", "watermark after"] if panes else ["adds up", "watermark after"]
    return "<table>\n<tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>"


def _account_row(name: str, started: str, c: Accounting, panes: int | None, watermark: int | None) -> str:
    """A row of an account table (``panes`` None: the table has no panes column)."""
    reasons = ", ".join(f"{r} {n}" for r, n in sorted(c.reasons.items()) if n)
    dead = f"{c.dead_letters}" + (f" <small>({_e(reasons)})</small>" if reasons else "")
    ok = "yes" if c.unaccounted == 0 else f"<b class=bad>no ({c.unaccounted:+d})</b>"
    cells = [_e(name), _e(started), c.records_in, c.counted, dead, c.in_no_window, c.watermark_records, ok]
    if panes is not None:
        cells.append(panes)
    cells.append(_e(_watermark_text(watermark)))
    return "<tr>" + "".join(f"<td>{v}</td>" for v in cells) + "</tr>"


def _watermark_text(wm: int | None) -> str:
    if wm is None or wm <= MIN_TIME:
        return "-"
    return "end of input" if wm >= END_OF_INPUT else format_instant(wm) or "-"


def _instant(ms: int) -> str:
    return (dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=ms)).strftime("%Y-%m-%d %H:%M:%S")


def write_stages_report(
    path: str | Path, title: str, plan: str, output: str, rows: list[StagesProgress], panes: list[int]
) -> None:
    """Writes a multi-stage run's page to ``path``: ``rows`` its micro-batches, ``panes`` the
    output stage's (``output``) panes each gave."""
    totals = GraphAccounting()
    for r in rows:
        totals.add_graph(r.accounting)
    Path(path).write_text(render_stages(title, plan, output, rows, panes, totals), encoding="utf-8")


def render_stages(
    title: str, plan: str, output: str, rows: list[StagesProgress], panes: list[int], totals: GraphAccounting
) -> str:
    """A multi-stage run's page: a summary; throughput and watermark lag per input, the output
    stages' watermark lag, the output stage's panes and the dead letters per micro-batch; where
    each input's records went; the watermarks after each micro-batch."""
    xs = [r.batch_id for r in rows]
    # (the graph's order: every micro-batch names each input's and stage's watermark)
    inputs = list(rows[-1].input_watermarks) if rows and rows[-1].input_watermarks else list(totals.inputs)
    stages = list(rows[-1].stage_watermarks) if rows else []

    def per_input(value) -> list[tuple[str, list, str]]:
        return [(n, [value(r, n) for r in rows], PALETTE[i % len(PALETTE)]) for i, n in enumerate(inputs)]

    def lags(marks: str, names: list[str]) -> list[tuple[str, list, str]]:
        return [
            (n, [_lag(r.started, getattr(r, marks).get(n)) for r in rows], PALETTE[i % len(PALETTE)])
            for i, n in enumerate(names)
        ]

    input_lags, stage_lags = lags("input_watermarks", inputs), lags("stage_watermarks", stages)
    unit, size = _lag_unit([v for _, vs, _ in input_lags + stage_lags for v in vs])
    dead = per_input(lambda r, n: r.accounting.inputs.get(n, Accounting()).dead_letters)
    dead.append(("panes between stages", [sum(r.accounting.pane_letters.values()) for r in rows], "dead"))
    parts = [
        f"<h1>{_e(title)}</h1>",
        f"<p>{_e(plan)}</p>",
        f"<p class=sum>{len(rows)} micro-batches, {sum(panes)} panes of {_e(output)}, "
        f"{totals.dead_letters + sum(totals.pane_letters.values())} dead letters; {_e(totals.summary())}</p>",
        _chart("Throughput per input (records in per second)", xs, per_input(_rate)),
        _chart(f"Watermark lag per input ({unit} behind processing time)", xs, _scaled(input_lags, size)),
        _chart(f"Output watermark lag per stage ({unit} behind processing time)", xs, _scaled(stage_lags, size)),
        _chart(f"Panes of {output} per micro-batch", xs, [("panes", panes, "panes")]),
        _chart("Dead letters per micro-batch", xs, dead),
    ]
    for name in inputs:
        parts += [f"<h2>Where every record of {_e(name)} went</h2>", _input_table(name, rows, totals)]
    parts += ["<h2>Watermarks after each micro-batch</h2>", _watermark_table(inputs, stages, rows)]
    return PAGE.format(title=_e(title), body="\n".join(parts))


def _rate(r: StagesProgress, name: str) -> float | None:
    return r.accounting.inputs.get(name, Accounting()).records_in / r.seconds if r.seconds else None


def _lag(started: int, watermark: int | None) -> float | None:
    if watermark is None or not MIN_TIME < watermark < END_OF_INPUT:
        return None
    return (started - watermark) / 1000


def _scaled(series: list[tuple[str, list, str]], size: float) -> list[tuple[str, list, str]]:
    return [(n, [None if v is None else v / size for v in vs], c) for n, vs, c in series]


def _input_table(name: str, rows: list[StagesProgress], totals: GraphAccounting) -> str:
    """An input's account per micro-batch and for the run, with its watermark after each."""
    lines = [_account_head(False)]
    for r in rows:
        counts = r.accounting.inputs.get(name, Accounting())
        lines.append(_account_row(str(r.batch_id), _instant(r.started), counts, None, r.input_watermarks.get(name)))
    last = rows[-1].input_watermarks.get(name) if rows else None
    lines.append(_account_row("run", "", totals.inputs.get(name, Accounting()), None, last))
    lines.append("</table>")
    return "\n".join(lines)


def _watermark_table(inputs: list[str], stages: list[str], rows: list[StagesProgress]) -> str:
    """Each input's watermark and each stage's output watermark after each micro-batch."""
    head = ["micro-batch", *[f"input {n}" for n in inputs], *[f"stage {n} (output)" for n in stages]]
    lines = ["<table class=marks>", "<tr>" + "".join(f"<th>{_e(h)}</th>" for h in head) + "</tr>"]
    for r in rows:
        marks = [r.input_watermarks.get(n) for n in inputs] + [r.stage_watermarks.get(n) for n in stages]
        cells = [str(r.batch_id), *[_watermark_text(m) for m in marks]]
        lines.append("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in cells) + "</tr>")
    lines.append("</table>")
    return "\n".join(lines)


PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; color: #222; max-width: 980px; }}
h2 {{ font-size: 1.05em; margin: 1.6em 0 0.3em; }}
svg text {{ font-size: 11px; fill: #444; }} svg .grid {{ stroke: #ddd; }}
figure {{ margin: 0; }} figcaption {{ font-size: 0.8em; color: #666; margin-left: 64px; }}
table {{ border-collapse: collapse; font-size: 0.85em; }}
td, th {{ border: 1px solid #ccc; padding: 3px 7px; text-align: right; }}
tr:last-child td {{ font-weight: bold; }} .marks tr:last-child td {{ font-weight: normal; }}
.bad {{ color: #c62828; }} .sum {{ font-size: 1.05em; }}
</style></head>
<body>
{body}
</body></html>
"""
