"""``panes run --report``: the run's HTML page from its micro-batches (``panes.report``), exact in what
it states, for a single-stage and a multi-stage run; real runs write it in
tests/spark/test_state_spark.py and tests/spark/test_stages_spark.py."""

from __future__ import annotations

import re
from collections import Counter
from types import SimpleNamespace

from panes.core.accounting import Accounting
from panes.core.stages.accounts import GraphAccounting, StagesProgress
from panes.core.time import END_OF_INPUT, MIN_TIME, parse_instant
from panes.report import BatchRow, batch_row, render, render_stages

T0 = parse_instant("2024-01-01T12:00:00Z")


def _rows() -> list[BatchRow]:
    first = Accounting(records_in=10, counted=8, reasons=Counter({"late": 1, "malformed": 1}))
    second = Accounting(records_in=5, counted=4, in_no_window=1)
    return [
        BatchRow(0, T0, 2.0, first, 0, T0 - 90_000),
        BatchRow(1, T0 + 60_000, 0.5, second, 3, T0 - 30_000),
        BatchRow(2, T0 + 120_000, 0.25, Accounting(), 2, END_OF_INPUT),
    ]


def test_each_micro_batch_gives_its_throughput_and_watermark_lag():
    rows = _rows()
    assert [r.records_per_second for r in rows] == [5.0, 10.0, 0.0]
    assert [r.watermark_lag for r in rows] == [90.0, 90.0, None]  # (the end of input: no lag)


def test_the_page_states_the_counts_per_micro_batch_and_for_the_run():
    rows = _rows()
    totals = Accounting()
    for r in rows:
        totals.add(r.counts)
    page = render("traffic <1>", "stream: native", rows, totals)
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page and "src=" not in page
    assert "<h1>traffic &lt;1&gt;</h1>" in page  # (escaped)
    assert (
        "3 micro-batches, 5 panes, 2 dead letters; records in 15 = 12 counted + 2 dead letters "
        "(late 1, malformed 1) + 1 in no window" in page
    )
    table = re.findall(r"<tr><td>(.*?)</td></tr>", page)
    assert [re.split(r"</td><td>", t) for t in table] == [
        ["0", "2024-01-01 12:00:00", "10", "8", "2 <small>(late 1, malformed 1)</small>", "0", "0", "yes", "0",
         "2024-01-01T11:58:30.000Z"],
        ["1", "2024-01-01 12:01:00", "5", "4", "0", "1", "0", "yes", "3", "2024-01-01T11:59:30.000Z"],
        ["2", "2024-01-01 12:02:00", "0", "0", "0", "0", "0", "yes", "2", "end of input"],
        ["run", "", "15", "12", "2 <small>(late 1, malformed 1)</small>", "1", "0", "yes", "5", "end of input"],
    ]  # fmt: skip
    # four charts; a bar per micro-batch with a value (the lag of the last: none), with its value
    assert page.count("<svg") == 4
    bars = re.findall(r"<title>batch (\d+): ([a-z/ ]+) ([\d.,]+)</title>", page)
    assert bars == [
        ("0", "records/s", "5"),
        ("1", "records/s", "10"),
        ("2", "records/s", "0"),
        ("0", "lag", "90"),
        ("1", "lag", "90"),
        ("0", "panes", "0"),
        ("1", "panes", "3"),
        ("2", "panes", "2"),
        ("0", "dead letters", "2"),
        ("1", "dead letters", "0"),
        ("2", "dead letters", "0"),
    ]
    assert "<h2>Watermark lag (seconds behind processing time)</h2>" in page


def test_a_lag_of_hours_is_shown_in_hours():
    row = BatchRow(0, T0, 1.0, Accounting(), 0, T0 - 3 * 3_600_000)
    page = render("x", "stream", [row], Accounting())
    assert "<h2>Watermark lag (hours behind processing time)</h2>" in page
    assert "<title>batch 0: lag 3</title>" in page


def test_a_run_that_does_not_add_up_says_so():
    off = Accounting(records_in=3, counted=1)
    page = render("x", "stream", [BatchRow(0, T0, 1.0, off, 0, None)], off)
    assert page.count("<b class=bad>no (+2)</b>") == 2


def test_a_progress_event_becomes_a_row():
    progress = SimpleNamespace(batchId=4, timestamp="2024-01-01T12:00:00.000Z", durationMs={"triggerExecution": 1500})
    counts = Accounting(records_in=3, counted=3)
    row = batch_row(progress, counts, 2, "2024-01-01T11:59:00.000Z")
    assert row == BatchRow(4, T0, 1.5, counts, 2, T0 - 60_000)
    assert batch_row(progress, counts, 2, None).watermark is None
    assert batch_row(progress, counts, 2, 5).watermark == 5


def _stage_rows() -> list[StagesProgress]:
    first = GraphAccounting()
    first.add_input("bids", Accounting(records_in=4, counted=3, reasons=Counter({"late": 1})))
    first.add_input("persons", Accounting(records_in=2, counted=1, watermark_records=1))
    second = GraphAccounting(pane_letters=Counter({"late": 2}))
    second.add_input("bids", Accounting(records_in=2, counted=1, in_no_window=1))
    second.add_input("persons", Accounting())
    return [
        StagesProgress(0, T0, 2.0, first, {"bids": T0 - 30_000, "persons": MIN_TIME}, {"per_seller": T0 - 30_000}),
        StagesProgress(1, T0 + 60_000, 0.5, second, {"bids": T0 + 30_000, "persons": END_OF_INPUT}, {"per_seller": T0}),
    ]


def test_a_multi_stage_page_states_each_inputs_counts_and_each_stages_watermark():
    rows = _stage_rows()
    totals = GraphAccounting()
    for r in rows:
        totals.add_graph(r.accounting)
    page = render_stages("q5", "stream: stages", "per_seller", rows, [0, 3], totals)
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page and "src=" not in page
    assert (
        "<p class=sum>2 micro-batches, 3 panes of per_seller, 3 dead letters; bids: records in 6 = 4 counted + "
        "1 dead letters (late 1) + 1 in no window; persons: records in 2 = 1 counted + 0 dead letters + 0 in no "
        "window + 1 watermark records; besides, 2 panes between stages went to the dead letters (late 2)</p>"
    ) in page
    tables = page.split("<h2>Watermarks after")[0].split("<h2>Where every record of ")[1:]
    assert [t.split("</h2>")[0] for t in tables] == ["bids went", "persons went"]
    cells = [[re.split(r"</td><td>", r) for r in re.findall(r"<tr><td>(.*?)</td></tr>", t)] for t in tables]
    late = "1 <small>(late 1)</small>"
    assert cells[0] == [
        ["0", "2024-01-01 12:00:00", "4", "3", late, "0", "0", "yes", "2024-01-01T11:59:30.000Z"],
        ["1", "2024-01-01 12:01:00", "2", "1", "0", "1", "0", "yes", "2024-01-01T12:00:30.000Z"],
        ["run", "", "6", "4", late, "1", "0", "yes", "2024-01-01T12:00:30.000Z"],
    ]  # fmt: skip
    assert cells[1][0] == ["0", "2024-01-01 12:00:00", "2", "1", "0", "0", "1", "yes", "-"]
    assert cells[1][1:] == [
        ["1", "2024-01-01 12:01:00", "0", "0", "0", "0", "0", "yes", "end of input"],
        ["run", "", "2", "1", "0", "0", "1", "yes", "end of input"],
    ]
    assert (
        "<tr><th>micro-batch</th><th>input bids</th><th>input persons</th><th>stage per_seller (output)</th></tr>\n"
        "<tr><td>0</td><td>2024-01-01T11:59:30.000Z</td><td>-</td><td>2024-01-01T11:59:30.000Z</td></tr>\n"
        "<tr><td>1</td><td>2024-01-01T12:00:30.000Z</td><td>end of input</td><td>2024-01-01T12:00:00.000Z</td></tr>"
    ) in page
    # five charts, a bar per micro-batch and series where there is a value, each with its value
    assert page.count("<svg") == 5
    bars = re.findall(r"<title>batch (\d+): ([a-z_/ ]+) ([\d.,]+)</title>", page)
    assert bars == [
        ("0", "bids", "2"),
        ("1", "bids", "4"),
        ("0", "persons", "1"),
        ("1", "persons", "0"),
        ("0", "bids", "30"),  # lag (s): the persons' watermark none yet, then at the end of input
        ("1", "bids", "30"),
        ("0", "per_seller", "30"),
        ("1", "per_seller", "60"),
        ("0", "panes", "0"),
        ("1", "panes", "3"),
        ("0", "bids", "1"),
        ("1", "bids", "0"),
        ("0", "persons", "0"),
        ("1", "persons", "0"),
        ("0", "panes between stages", "0"),
        ("1", "panes between stages", "2"),
    ]
    assert "<h2>Watermark lag per input (seconds behind processing time)</h2>" in page
    assert "<h2>Panes of per_seller per micro-batch</h2>" in page
    assert '<figcaption>micro-batch: <span style="color:#1f5fa8">&#9632;</span> bids, ' in page
