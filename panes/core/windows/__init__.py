"""Window assigners: where in event time results are calculated.

Fixed assigners (tumbling, hopping, global) map event times to windows with numpy, a whole batch
at once. Sessions merge per key; sliding windows depend on the key's other records: the engine
keeps those per key (each kind's ``family`` names the engine's ingest strategy). ``registry``
maps spec kinds to classes.
"""

from .base import GLOBAL_WINDOW, Family, Window, WindowFn
from .global_window import GlobalWindows
from .hopping import Hopping
from .inherited import WINDOW_END, WINDOW_START, Inherited
from .registry import WINDOWS, parse_window
from .session import Sessions
from .sliding import Sliding
from .tumbling import Tumbling

__all__ = [
    "GLOBAL_WINDOW",
    "Family",
    "GlobalWindows",
    "Hopping",
    "Inherited",
    "Sessions",
    "Sliding",
    "Tumbling",
    "WINDOWS",
    "WINDOW_END",
    "WINDOW_START",
    "Window",
    "WindowFn",
    "parse_window",
]
