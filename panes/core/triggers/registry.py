"""The trigger registry: spec names to trigger classes, and the parser of a trigger spec.

A trigger spec is ``{name: argument}`` (the class's ``from_spec`` reads the argument) or one of
the names of ``NAMED``. Adding a trigger: its module (a ``Trigger`` subclass with its state
machine, ``describe`` and ``from_spec``) and one line in ``TRIGGERS``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..time import parse_duration
from .after_all import AfterAll
from .after_any import AfterAny
from .after_count import AfterCount
from .after_each import AfterEach
from .after_processing_time import AfterProcessingTime
from .after_watermark import AfterWatermark
from .base import Trigger
from .never import Never
from .or_finally import OrFinally
from .repeatedly import Repeatedly

#: Beam's own default trigger (panes' default is ``Never``: one pane per window, at its close)
BEAM_DEFAULT = Repeatedly(AfterWatermark())

#: spec name -> class (its ``from_spec`` gets the name: ``every`` and ``count`` are shorthands)
TRIGGERS: dict[str, type[Trigger]] = {
    "after_watermark": AfterWatermark,
    "after_count": AfterCount,
    "after_processing_time": AfterProcessingTime,
    "repeatedly": Repeatedly,
    "after_any": AfterAny,
    "after_all": AfterAll,
    "after_each": AfterEach,
    "or_finally": OrFinally,
    "every": AfterProcessingTime,
    "count": AfterCount,
}

#: triggers named by a plain string
NAMED: dict[str, Callable[[], Trigger]] = {
    "default": Never,
    "at_close": Never,
    "never": Never,
    "after_watermark": AfterWatermark,
    "beam_default": lambda: BEAM_DEFAULT,
}


#: the Java classes whose constructors check what panes checks (Beam Java's SDK, ``sdk/transforms/windowing``)
JAVA_NAMES = {"after_any": "AfterFirst.of", "after_all": "AfterAll.of", "after_each": "AfterEach.inOrder"}
JAVA_ONCE_SITES = {
    "after_watermark.early": "AfterWatermark.withEarlyFirings(OnceTrigger)",
    "after_watermark.late": "AfterWatermark.withLateFirings(OnceTrigger)",
    "or_finally.finally": "Trigger.orFinally(OnceTrigger)",
    "after_any": "AfterFirst.of(OnceTrigger...)",
    "after_all": "AfterAll.of(OnceTrigger...)",
}


def describe_name(trigger: Trigger) -> str:
    """The spec name of a trigger (its ``describe``'s key)."""
    d = trigger.describe()
    return next(iter(d)) if isinstance(d, dict) else str(d)


def parse_trigger(spec: Any, where: str = "trigger", once: bool = False) -> Trigger:
    """Trigger spec -> trigger tree; ``where``: the spec's dotted path, for error messages
    (``ValueError``). ``once``: the shorthands {every: D} and {count: N} fire once (as early and
    late triggers of after_watermark) instead of repeating."""
    if spec is None:
        return Never()
    if isinstance(spec, str) and spec in NAMED:
        return NAMED[spec]()
    if not isinstance(spec, dict) or len(spec) != 1:
        raise ValueError(f"{where}: a trigger is a mapping with one key ({', '.join(TRIGGERS)}) or 'default'")
    ((name, arg),) = spec.items()
    cls = TRIGGERS.get(name)
    if cls is None:
        raise ValueError(f"{where}: unknown trigger {name!r}")
    return cls.from_spec(name, arg, SpecSite(where, once))


@dataclass(frozen=True)
class SpecSite:
    """Where in a spec a trigger is read: its dotted ``path`` (for error messages) and whether the
    shorthands fire ``once`` there. It parses sub-triggers and checks arguments."""

    path: str = "trigger"
    once: bool = False

    def parse(self, spec: Any, suffix: str, once: bool = False) -> Trigger:
        return parse_trigger(spec, f"{self.path}.{suffix}", once)

    def parse_list(self, spec: Any, name: str, once: bool = False) -> tuple[Trigger, ...]:
        """A composite's triggers: at least two, as Beam Java's ``AfterEach``, ``AfterFirst`` and
        ``AfterAll`` check (``subTriggers.size() > 1``); with ``once``, each one that can finish."""
        if not isinstance(spec, list) or not spec:
            raise ValueError(f"{self.path}.{name} takes a non-empty list of triggers")
        if len(spec) < 2:
            raise ValueError(f"{self.path}.{name} takes at least two triggers (as Beam Java's {JAVA_NAMES[name]})")
        parse = self.parse_once if once else self.parse
        return tuple(parse(s, f"{name}[{i}]") for i, s in enumerate(spec))

    def parse_once(self, spec: Any, suffix: str) -> Trigger:
        """A trigger where Beam Java requires a ``OnceTrigger`` (early and late firings,
        ``or_finally``'s ``finally``, the triggers of ``after_any`` and ``after_all``): the
        shorthands fire once there, and a trigger that can never finish is refused."""
        trigger = self.parse(spec, suffix, once=True)
        if not trigger.can_finish():
            raise ValueError(
                f"{self.path}.{suffix}: {describe_name(trigger)} never finishes; Beam Java takes only a "
                f"trigger that fires once here ({JAVA_ONCE_SITES[suffix.split('[')[0]]}), "
                "panes one that can finish"
            )
        return trigger

    def repeat(self, trigger: Trigger) -> Trigger:
        """A shorthand's trigger: once, or repeated."""
        return trigger if self.once else Repeatedly(trigger)

    def positive_int(self, v: Any, name: str) -> int:
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{self.path}.{name} must be a positive integer, got {v!r}")
        return v

    def positive_duration(self, v: Any, name: str) -> int:
        try:
            d = parse_duration(v)
        except ValueError as e:
            raise ValueError(f"{self.path}.{name}: {e}") from None
        if d <= 0:
            raise ValueError(f"{self.path}.{name} must be positive")
        return d
