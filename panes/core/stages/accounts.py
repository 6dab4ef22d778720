"""Where every record of a stage graph's inputs went (``panes.core.accounting``, per input).

An input's record is a dead letter (of the input's own checks, or of a stage that reads the input,
once: its first), else counted when a stage reading the input put it in a window, else in no
window (a hopping gap at every stage that reads it), else a watermark record (punctuation):
``records in = counted + dead letters + in no window + watermark records`` for each input. The
panes a stage hands to the next are not input records: those a downstream stage dead-letters
(late there) are reported beside the sums.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..accounting import Accounting


@dataclass
class InputStep:
    """What one step did with an input's records: how many came, the watermark records, the
    reasons of the input's own dead letters, the arrival numbers of the valid ones."""

    records_in: int
    watermark_records: int
    reasons: list[str]
    valid: list[int]


def input_account(
    step: InputStep, letters: Iterable[tuple[int, str]], unwindowed: list[set[int]], readers: int
) -> Accounting:
    """An input's account of one step: ``letters`` (arrival number, reason) of its valid records
    dead-lettered by a stage (the first per record counts), ``unwindowed``: per stage that reads
    it, the arrival numbers it put in no window (``readers`` stages read it)."""
    out = Accounting(records_in=step.records_in, watermark_records=step.watermark_records)
    out.add_dead_letters(step.reasons)
    first: dict[int, str] = {}
    for seq, reason in letters:
        first.setdefault(seq, reason)
    out.add_dead_letters(first.values())
    nowhere = set.intersection(*unwindowed) if len(unwindowed) == readers and unwindowed else set()
    for seq in step.valid:
        if seq in first:
            continue
        if seq in nowhere:
            out.in_no_window += 1
        else:
            out.counted += 1
    return out


@dataclass
class GraphAccounting(Accounting):
    """The whole graph's account (the sum over its inputs) with each input's, and the dead letters
    of panes between stages (reported beside the sums)."""

    inputs: dict[str, Accounting] = field(default_factory=dict)
    pane_letters: Counter = field(default_factory=Counter)

    def add_input(self, name: str, account: Accounting) -> None:
        self.inputs.setdefault(name, Accounting()).add(account)
        self.add(account)

    def add_graph(self, other: GraphAccounting) -> None:
        for name, account in other.inputs.items():
            self.add_input(name, account)
        self.pane_letters.update(other.pane_letters)

    def summary(self) -> str:
        """Each input's line (``bids: records in 10 = 8 counted + ...``), then the panes between
        stages that went to the dead letters."""
        parts = [f"{name}: {account.summary()}" for name, account in self.inputs.items()]
        line = "; ".join(parts) if parts else super().summary()
        n = sum(self.pane_letters.values())
        if n:
            reasons = ", ".join(f"{r} {c}" for r, c in sorted(self.pane_letters.items()))
            line += f"; besides, {n} panes between stages went to the dead letters ({reasons})"
        return line

    def as_dict(self) -> dict:
        out = super().as_dict()
        out["inputs"] = {name: a.as_dict() for name, a in self.inputs.items()}
        out["pane_dead_letters"] = dict(sorted(self.pane_letters.items()))
        return out


@dataclass
class StagesProgress:
    """One micro-batch of a multi-stage stream as its run reports it: when it started (ms) and
    how long it took with its callbacks (s), where its input records went, and after it each
    input's watermark and each stage's output watermark (ms)."""

    batch_id: int
    started: int
    seconds: float
    accounting: GraphAccounting
    input_watermarks: dict[str, int] = field(default_factory=dict)
    stage_watermarks: dict[str, int] = field(default_factory=dict)
