"""A stage run as parts (the stateful Spark plan's hash buckets, each an ``Engine(partial=True)``):
their stage's output watermark, and the timing of the panes a part could not decide.

A pane's timing hangs on the stage's output watermark (``holds``), the earliest hold of any window
of any key. A part sees its own windows only: when its own holds let the output watermark pass a
window, another part's may still hold it back, so it marks the pane provisional
(``Pane.provisional``). Each part reports, for a bundle it runs (a micro-batch), the earliest hold
of its windows as each phase began (phase 0: the watermark's move, 1: the clock's, 2: the records)
and after the last; a part that does not run keeps what it reported last. ``StageWatermarks``
combines the reports into the stage's output watermark of each phase, as the core computes it for
the whole stage, and decides the provisional panes.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass

from .. import rules
from ..time import END_OF_INPUT, MIN_TIME

#: the phases of a part's bundle, in order: the watermark's move, the clock's, the records
PHASES = 3


@dataclass(frozen=True)
class PartReport:
    """What one part reports for a bundle it ran: the bundle's input watermark and its windows'
    earliest hold as each phase began and after the last (``Engine.earliest_hold``)."""

    part: int
    watermark: int
    holds: tuple[int, ...]  # PHASES + 1 values


class StageWatermarks:
    """The stage's output watermark per phase of each bundle, from its parts' reports, and the
    timing of provisional panes. What it keeps from bundle to bundle (``snapshot``, ``restore``):
    each part's last hold, the input watermark, and in retracting mode the panes decided LATE."""

    def __init__(self, retracting: bool = False, allowed_lateness: int | None = None) -> None:
        self.last: dict[int, int] = {}  # part -> its earliest hold after its last bundle
        self.output: tuple[int, ...] = ()  # the current bundle's output watermark per phase
        self.watermark = MIN_TIME  # the input watermark of the last bundle
        #: retracting mode: the panes decided LATE (``timing``'s ``pane``), each with the expiry of
        #: its window (``rules.expiry``; ``allowed_lateness`` None: kept until their retraction)
        self.retracting = retracting
        self.allowed_lateness = allowed_lateness
        self.late_panes: dict[Hashable, int] = {}

    def snapshot(self) -> dict:
        """What the stage keeps between bundles, as JSON values (the panes as ``timing`` got them)."""
        return {
            "last": sorted(self.last.items()),
            "watermark": self.watermark,
            "late_panes": [[pane, end] for pane, end in self.late_panes.items()],
        }

    def restore(self, snapshot: dict) -> StageWatermarks:
        """This stage as it was when ``snapshot`` was taken (its panes' lists as tuples)."""
        self.last = {int(part): int(hold) for part, hold in snapshot["last"]}
        self.watermark = int(snapshot["watermark"])
        self.late_panes = {_hashable(pane): int(end) for pane, end in snapshot["late_panes"]}
        return self

    def bundle(self, reports: Iterable[PartReport]) -> tuple[int, ...]:
        """A bundle's reports in: the stage's output watermark of each of its phases."""
        reports = list(reports)
        if not reports:
            self.output = ()
            return self.output
        # a window's panes are retracted at the latest when it expires (its last pane), in the
        # bundle whose watermark reaches its expiry: a LATE pane of a window that expired before
        # this bundle has no retraction to come
        self.late_panes = {pane: end for pane, end in self.late_panes.items() if end >= self.watermark}
        ran = {r.part: r for r in reports}
        others = min((h for part, h in self.last.items() if part not in ran), default=END_OF_INPUT)
        watermark = max(r.watermark for r in reports)
        self.output = tuple(
            rules.output_watermark(watermark, min([others] + [r.holds[i] for r in reports])) for i in range(PHASES)
        )
        for r in reports:
            self.last[r.part] = r.holds[PHASES]
        self.watermark = max(self.watermark, watermark)
        return self.output

    def timing(
        self, provisional: int, timing: str, phase: int, window_end: int, pane: Hashable, retraction: bool
    ) -> str | None:
        """The timing of a pane of the current bundle (None: not emitted, an empty LATE pane).
        ``pane``: its identity (key, start, end, index), to find a retraction's decision again (a JSON
        value, with tuples for lists, for ``snapshot``)."""
        if not provisional:
            return timing
        if provisional == 3:  # a retraction that goes with the empty pane after it (``Pane.provisional``)
            return None if rules.on_time_reached(window_end, self.output[phase]) else timing
        if retraction:
            if pane in self.late_panes:
                del self.late_panes[pane]
                return rules.LATE
            return rules.ON_TIME
        if not rules.on_time_reached(window_end, self.output[phase]):
            return rules.ON_TIME
        if provisional == 2:
            return None
        if self.retracting:
            lateness = self.allowed_lateness
            self.late_panes[pane] = END_OF_INPUT if lateness is None else rules.expiry(window_end, lateness)
        return rules.LATE


def _hashable(value: object) -> Hashable:
    """A JSON value with its lists as tuples."""
    return tuple(_hashable(v) for v in value) if isinstance(value, list) else value
