"""The windowing engine (``engine.Engine``) and its parts: its values (``state``), the ingest
protocol (``ingest``) with one strategy per window family (``fixed``, ``merging``,
``record_defined``), what strategies do to windows (``window_ops``), firing (``firing``), and the
watermark holds and output watermark (``holds``)."""

from .engine import INGEST, Engine
from .firing import sort_key
from .ingest import BatchRows, Ingested, IngestStrategy
from .state import TS, DeadLetter, EngineState, Pane, StepResult, WindowState
from .window_ops import WindowOps

__all__ = [
    "BatchRows",
    "DeadLetter",
    "Engine",
    "EngineState",
    "INGEST",
    "IngestStrategy",
    "Ingested",
    "Pane",
    "StepResult",
    "TS",
    "WindowOps",
    "WindowState",
    "sort_key",
]
