"""Where every record went. Each record a run reads is counted in windows, a dead letter (with its
reason), in no window (a hopping gap), or a watermark record (punctuation that only moves the
watermark): ``records_in = counted + dead letters + in no window + watermark records``. A record
late for some of its windows and counted in others (overlapping hopping, sliding windows) is a
dead letter here. A record counted in a window whose pipeline later fails
(``window_pipeline_failed``) was counted when it came: its dead letter is reported beside the sum,
not in it. The core's replay, the Spark plans' metrics and ``panes run`` report this."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

#: reasons a counted record gets later, after it was counted in its window
AFTER_COUNTING = frozenset({"window_pipeline_failed"})


@dataclass
class Accounting:
    records_in: int = 0
    counted: int = 0
    in_no_window: int = 0
    watermark_records: int = 0
    #: dead letters by reason
    reasons: Counter = field(default_factory=Counter)

    @property
    def dead_letters(self) -> int:
        """Dead letters of records as they came (not of counted ones, later: ``AFTER_COUNTING``)."""
        return sum(n for r, n in self.reasons.items() if r not in AFTER_COUNTING)

    @property
    def failed_later(self) -> int:
        """Counted records sent to the dead letters later (their window's pipeline failed)."""
        return sum(n for r, n in self.reasons.items() if r in AFTER_COUNTING)

    def add_dead_letters(self, reasons: Iterable[str]) -> None:
        self.reasons.update(str(r) for r in reasons)

    def add(self, other: Accounting) -> None:
        self.records_in += other.records_in
        self.counted += other.counted
        self.in_no_window += other.in_no_window
        self.watermark_records += other.watermark_records
        self.reasons.update(other.reasons)

    @property
    def unaccounted(self) -> int:
        """Records in minus where they went: 0 when every record is accounted for."""
        return self.records_in - self.counted - self.dead_letters - self.in_no_window - self.watermark_records

    def summary(self) -> str:
        """One line: ``records in 37 = 30 counted + 5 dead letters (late 1, malformed 4) + 2 in no window``."""
        reasons = ", ".join(f"{r} {n}" for r, n in sorted(self.reasons.items()) if n and r not in AFTER_COUNTING)
        parts = [
            f"{self.counted} counted",
            f"{self.dead_letters} dead letters" + (f" ({reasons})" if reasons else ""),
            f"{self.in_no_window} in no window",
        ]
        if self.watermark_records:
            parts.append(f"{self.watermark_records} watermark records")
        line = f"records in {self.records_in} = " + " + ".join(parts)
        if self.failed_later:
            line += f"; of the counted, {self.failed_later} went to the dead letters later (window_pipeline_failed)"
        if self.unaccounted:
            line += f" (does not add up: {self.unaccounted:+d} unaccounted)"
        return line

    def as_dict(self) -> dict:
        return {
            "records_in": self.records_in,
            "counted": self.counted,
            "dead_letters": self.dead_letters,
            "in_no_window": self.in_no_window,
            "watermark_records": self.watermark_records,
            "reasons": dict(sorted(self.reasons.items())),
        }
