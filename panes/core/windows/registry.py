"""The window registry: spec kinds to window classes, and the parser of a window spec.

A window spec is ``{kind: {option: value}}``, or ``global``. Adding a window kind: its module (a
``WindowFn`` subclass with ``assign``, ``describe``, ``from_spec`` and a ``family`` the engine
ingests) and one line in ``WINDOWS``.
"""

from __future__ import annotations

from typing import Any

from .base import WindowFn
from .global_window import GlobalWindows
from .hopping import Hopping
from .session import Sessions
from .sliding import Sliding
from .tumbling import Tumbling

WINDOWS: dict[str, type[WindowFn]] = {
    "tumbling": Tumbling,
    "hopping": Hopping,
    "session": Sessions,
    "sliding": Sliding,
    "global": GlobalWindows,
}


def parse_window(spec: Any) -> WindowFn:
    """Window spec -> window; raises ValueError with the reason."""
    if spec in ("global", None) or spec == {"global": None}:
        return GlobalWindows()
    if not isinstance(spec, dict) or len(spec) != 1:
        forms = [f"{{{k}: {{...}}}}" for k in WINDOWS if WINDOWS[k].options]
        forms += [k for k in WINDOWS if not WINDOWS[k].options]
        raise ValueError(f"window is one of {', '.join(forms)}")
    ((kind, options),) = spec.items()
    options = options or {}
    if not isinstance(options, dict):
        raise ValueError(f"{kind} options must be a mapping")
    cls = WINDOWS.get(kind)
    if cls is None:
        raise ValueError(f"unknown window type {kind!r}; one of {sorted(WINDOWS)}")
    cls.check_options(options)
    return cls.from_spec(options)
