"""Window pipelines: a stage whose pane is a table, computed from the window's rows by SQL
(``sql``) or a pandas function (``function``). ``base`` holds the accumulator and the rows a
transform gets; ``sql_subset`` the SQL panes accepts, ``sql_rewrite`` its form over many panes at
once, ``embedded_sql`` the core's engine for it; ``registry`` the spec forms."""

from .base import WINDOW_COLUMNS, KeepRows, PaneWindow, Transform, WindowPipeline, WindowPipelineFailed, WindowRows
from .function import FunctionTransform, load_function
from .registry import TRANSFORMS, parse_window_pipeline
from .sql import SqlTransform
from .sql_rewrite import HIDDEN, PANE, ROW_ORDER, ROW_SEQ, ROW_TS, Rewritten
from .sql_subset import PANE_METADATA, SOURCE, SqlRefused, parse_sql

__all__ = [
    "FunctionTransform",
    "HIDDEN",
    "KeepRows",
    "ROW_ORDER",
    "PANE",
    "PANE_METADATA",
    "PaneWindow",
    "ROW_SEQ",
    "ROW_TS",
    "Rewritten",
    "SOURCE",
    "SqlRefused",
    "SqlTransform",
    "TRANSFORMS",
    "Transform",
    "WINDOW_COLUMNS",
    "WindowPipeline",
    "WindowPipelineFailed",
    "WindowRows",
    "load_function",
    "parse_sql",
    "parse_window_pipeline",
]
