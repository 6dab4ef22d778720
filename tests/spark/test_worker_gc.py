"""A Python worker of the stateful plan takes its modules out of the cyclic collector's reach once
(``stateful_store.freeze_once``): PySpark's worker collects after every task, which otherwise walks
them all. What a task makes afterwards stays the collector's."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import gc
from panes.spark.stateful_store import freeze_once

assert gc.get_freeze_count() == 0
freeze_once()
frozen = gc.get_freeze_count()
freeze_once()  # (a second task of the same worker)
assert gc.get_freeze_count() == frozen, (frozen, gc.get_freeze_count())

class Node:
    pass

a, b = Node(), Node()
a.other, b.other = b, a  # a cycle made after the freeze, then dropped
del a, b
print(frozen, gc.collect())
"""


def test_a_worker_freezes_its_modules_once_and_its_tasks_garbage_is_still_collected():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True).stdout.split()
    frozen, collected = int(out[0]), int(out[1])
    assert frozen > 10_000  # (PySpark, pandas, Arrow and panes: tens of thousands of objects)
    assert collected >= 2  # (the two nodes of the cycle, and their attribute dicts)
