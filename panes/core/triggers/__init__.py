"""Triggers: when in processing time a window's panes are materialised.

Each trigger is a frozen dataclass that owns its state machine (``base.Trigger``); a
``TriggerMachine`` runs a tree of them over each window's ``TriggerState``; ``registry`` maps spec
names to classes. Default: ``Never`` — the window emits once, its final pane, when it expires at
watermark >= end + allowed lateness. Beam's own default (``Repeatedly(AfterWatermark())``) is
``BEAM_DEFAULT``.
"""

from .after_all import AfterAll
from .after_any import AfterAny
from .after_count import AfterCount
from .after_each import AfterEach
from .after_processing_time import AfterProcessingTime
from .after_watermark import AfterWatermark
from .base import Ctx, Node, Trigger, TriggerState
from .machine import TriggerMachine
from .never import Never
from .or_finally import OrFinally
from .registry import BEAM_DEFAULT, NAMED, TRIGGERS, SpecSite, parse_trigger
from .repeatedly import Repeatedly

__all__ = [
    "AfterAll",
    "AfterAny",
    "AfterCount",
    "AfterEach",
    "AfterProcessingTime",
    "AfterWatermark",
    "BEAM_DEFAULT",
    "Ctx",
    "NAMED",
    "Never",
    "Node",
    "OrFinally",
    "Repeatedly",
    "SpecSite",
    "TRIGGERS",
    "Trigger",
    "TriggerMachine",
    "TriggerState",
    "parse_trigger",
]
