"""Records as JSON lines, as panes prints and writes them: strict JSON (a NaN or an infinity is
null: JSON has neither), values JSON lacks as text (``default=str``)."""

from __future__ import annotations

import json
import math
from typing import Any


def finite(value: Any) -> Any:
    """``value`` with every NaN or infinite float (in lists and mappings too) made None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def dumps(record: Any) -> str:
    """One JSON line (no newline): ``{"a": 1, "b": null}``."""
    return json.dumps(finite(record), separators=(", ", ": "), default=str, allow_nan=False)
