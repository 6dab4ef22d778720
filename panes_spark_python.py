"""``panes-spark-python``: the Python that Spark's Python workers run in a session panes starts on a
local master (``panes.spark.session.worker_python``).

Spark starts a worker as ``<python> -m <module>`` with the copy of PySpark zipped inside the installed
package (``pyspark/python/lib/pyspark.zip``) first on its path. Python caches no bytecode for a
zipped module, so such a worker compiles all of PySpark's Python each time it starts, where the
installed package is imported from its cached bytecode: three to four times as long. The stateful
plan starts one at each query start (Spark's driver-side worker that learns the processor's state)
and a daemon per session. This runs the module as ``python -m`` would, without that zip on the path
when it is the zipped copy of the PySpark package the same path imports anyway: the same files.

Standard library only: it runs before anything else in the worker, and must not import PySpark.
"""

from __future__ import annotations

import os
import runpy
import sys


def zipped_copies(path: list[str]) -> list[str]:
    """The entries of ``path`` that are the zip of an installed PySpark package
    (``<dir>/pyspark/python/lib/pyspark.zip``) whose ``<dir>`` is on ``path`` too."""
    dirs = {os.path.realpath(p) for p in path if p and os.path.isdir(p)}
    found = []
    for p in path:
        if os.path.basename(p) != "pyspark.zip":
            continue
        package = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(p))))
        if (
            os.path.basename(package) == "pyspark"
            and os.path.isfile(os.path.join(package, "__init__.py"))
            and os.path.dirname(package) in dirs
        ):
            found.append(p)
    return found


def main() -> None:
    """``panes-spark-python -m <module> [args]``: the module as ``__main__`` (anything else: this
    Python with the same arguments)."""
    args = sys.argv[1:]
    if len(args) < 2 or args[0] != "-m":
        os.execv(sys.executable, [sys.executable, *args])
    drop = set(zipped_copies(sys.path))
    # (as ``python -m``: the working directory first on the path, not this script's)
    here = os.path.dirname(os.path.realpath(sys.argv[0]))
    path = [p for p in sys.path if p not in drop]
    if path and os.path.realpath(path[0] or ".") == here:
        path = path[1:]
    sys.path[:] = [os.getcwd(), *path]
    sys.argv = [args[1], *args[2:]]
    runpy.run_module(args[1], run_name="__main__", alter_sys=True)
