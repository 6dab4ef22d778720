"""Window pipelines: a stage whose pane is a table, computed from the window's rows by a pandas
function (``function``). ``base`` holds the accumulator and the rows a transform gets; ``registry``
the spec forms."""

from .base import WINDOW_COLUMNS, PaneWindow, Transform, WindowPipeline, WindowPipelineFailed, WindowRows
from .function import FunctionTransform, load_function
from .registry import TRANSFORMS, parse_window_pipeline

__all__ = [
    "FunctionTransform", "PaneWindow", "TRANSFORMS", "Transform", "WINDOW_COLUMNS", "WindowPipeline",
    "WindowPipelineFailed", "WindowRows", "load_function", "parse_window_pipeline",
]
