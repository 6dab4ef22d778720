"""``panes run ... --report report.html``: one self-contained HTML page per run (no script, no file
beside it; charts as inline SVG): throughput, watermark lag, panes and dead letters per micro-batch,
and the account of every record (``panes.core.accounting``), per micro-batch and for the run.

The runner hands each micro-batch's progress to ``batch_row`` (from its ``StreamingQueryListener``)
and the rows to ``write_report``.
"""

from __future__ import annotations

import datetime as dt
import html
from dataclasses import dataclass
from pathlib import Path

from .core.accounting import Accounting
from .core.time import END_OF_INPUT, MIN_TIME, format_instant, parse_instant

COLOURS = {"records": "#1f5fa8", "lag": "#444444", "panes": "#2a9d3f", "dead": "#c62828"}
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
                f'fill="{COLOURS[colour]}"><title>batch {xs[i]}: {_e(name)} {_number(v)}</title></rect>'
            )
    step = max(1, len(xs) // 12)
    for i in range(0, len(xs), step):
        out.append(f'<text x="{LEFT + (i + 0.5) * slot:.1f}" y="{HEIGHT - 10}" text-anchor="middle">{xs[i]}</text>')
    out.append("</svg>")
    return f"<h2>{_e(title)}</h2>\n<figure>{''.join(out)}<figcaption>micro-batch</figcaption></figure>"


def _number(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 100 or float(v).is_integer() else f"{v:,.2f}"


def _account_table(rows: list[BatchRow], totals: Accounting) -> str:
    """Per micro-batch and for the run: records in = counted + dead letters + in no window +
    watermark records, with the dead letters' reasons and whether it adds up."""
    head = [
        "micro-batch",
        "started",
        "records in",
        "counted",
        "dead letters",
        "in no window",
        "watermark records",
        "adds up",
        "panes",
        "watermark after",
    ]
    lines = ["<table>", "<tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>"]
    for r in rows:
        lines.append(_account_row(str(r.batch), _instant(r.timestamp), r.counts, r.panes, r.watermark))
    lines.append(_account_row("run", "", totals, sum(r.panes for r in rows), rows[-1].watermark if rows else None))
    lines.append("</table>")
    return "\n".join(lines)


def _account_row(name: str, started: str, c: Accounting, panes: int, watermark: int | None) -> str:
    reasons = ", ".join(f"{r} {n}" for r, n in sorted(c.reasons.items()) if n)
    dead = f"{c.dead_letters}" + (f" <small>({_e(reasons)})</small>" if reasons else "")
    ok = "yes" if c.unaccounted == 0 else f"<b class=bad>no ({c.unaccounted:+d})</b>"
    cells = [_e(name), _e(started), c.records_in, c.counted, dead, c.in_no_window, c.watermark_records, ok, panes]
    cells.append(_e(_watermark_text(watermark)))
    return "<tr>" + "".join(f"<td>{v}</td>" for v in cells) + "</tr>"


def _watermark_text(wm: int | None) -> str:
    if wm is None or wm <= MIN_TIME:
        return "-"
    return "end of input" if wm >= END_OF_INPUT else format_instant(wm) or "-"


def _instant(ms: int) -> str:
    return (dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=ms)).strftime("%Y-%m-%d %H:%M:%S")


PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; color: #222; max-width: 980px; }}
h2 {{ font-size: 1.05em; margin: 1.6em 0 0.3em; }}
svg text {{ font-size: 11px; fill: #444; }} svg .grid {{ stroke: #ddd; }}
figure {{ margin: 0; }} figcaption {{ font-size: 0.8em; color: #666; margin-left: 64px; }}
table {{ border-collapse: collapse; font-size: 0.85em; }}
td, th {{ border: 1px solid #ccc; padding: 3px 7px; text-align: right; }}
tr:last-child td {{ font-weight: bold; }} .bad {{ color: #c62828; }} .sum {{ font-size: 1.05em; }}
</style></head>
<body>
{body}
</body></html>
"""
