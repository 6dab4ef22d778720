"""The Python of Spark's Python workers in panes' session (``panes-spark-python`` on a local master):
PySpark imported from its installed package, not from the zip Spark puts first on their path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyspark
import pytest

from panes.spark.session import WORKER_PYTHON, worker_python
from panes_spark_python import zipped_copies

LAUNCHER = Path(sys.executable).parent / WORKER_PYTHON
PACKAGE = Path(pyspark.__file__).resolve().parent
#: the zips Spark puts first on a worker's path when PySpark is pip-installed (its SPARK_HOME is the package)
SPARK_PATH = [
    str(PACKAGE / "python" / "lib" / "pyspark.zip"),
    *map(str, (PACKAGE / "python" / "lib").glob("py4j-*.zip")),
]

PROBE = """
import sys
before = sorted(m for m in ("pyspark", "panes") if m in sys.modules)
import pyspark
print(repr((before, pyspark.__file__, sys.argv[1:], sys.path[0])))
"""


def _tree(root: Path, package: bool) -> Path:
    """``root/site/pyspark/python/lib/pyspark.zip`` (a package when ``package``)."""
    lib = root / "site" / "pyspark" / "python" / "lib"
    lib.mkdir(parents=True)
    (lib / "pyspark.zip").write_bytes(b"")
    if package:
        (root / "site" / "pyspark" / "__init__.py").write_text("")
    return lib / "pyspark.zip"


def test_only_the_zip_of_an_installed_package_whose_directory_is_on_the_path_is_dropped(tmp_path):
    wheel = _tree(tmp_path / "a", package=True)
    home = _tree(tmp_path / "b", package=False)  # a Spark distribution's python/lib: no package around it
    site = str(tmp_path / "a" / "site")
    assert zipped_copies([str(wheel), str(home), site]) == [str(wheel)]
    assert zipped_copies([str(wheel), str(home)]) == []  # the package itself would not be found
    py4j = wheel.with_name("py4j-0.10.9.9-src.zip")
    py4j.write_bytes(b"")
    assert zipped_copies([str(py4j), site]) == []


@pytest.mark.parametrize(
    "master, launcher",
    [
        ("local", True),
        ("local[2]", True),
        ("local[*]", True),
        ("spark://h:7077", False),
        ("yarn", False),
        (None, False),
    ],
)
def test_the_launcher_is_for_local_masters_only(master, launcher):
    assert worker_python(master) == (str(LAUNCHER) if launcher else sys.executable)


def _run(python: str, tmp_path: Path, *args: str) -> str:
    (tmp_path / "probe_mod.py").write_text(PROBE)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(SPARK_PATH)}
    done = subprocess.run([python, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_launcher_runs_a_module_as_python_m_with_pyspark_from_its_package(tmp_path):
    assert LAUNCHER.is_file(), "panes-spark-python is installed with panes (make setup)"
    before, origin, argv, first = eval(_run(str(LAUNCHER), tmp_path, "-m", "probe_mod", "a", "b"))
    assert (before, argv, first) == ([], ["a", "b"], str(tmp_path))
    assert Path(origin).resolve() == PACKAGE / "__init__.py"
    # as Spark starts its workers, ``python -m`` takes the zipped copy
    _, zipped, argv, first = eval(_run(sys.executable, tmp_path, "-m", "probe_mod", "a", "b"))
    assert (zipped, argv, first) == (
        str(PACKAGE / "python" / "lib" / "pyspark.zip" / "pyspark" / "__init__.py"),
        ["a", "b"],
        str(tmp_path),
    )
    # anything but ``-m``: this Python with the same arguments
    assert _run(str(LAUNCHER), tmp_path, "-c", "print(6 * 7)") == "42"


def test_the_sessions_workers_import_pyspark_from_its_package(spark):
    if os.environ.get("PYSPARK_PYTHON") not in (str(LAUNCHER), sys.executable):
        pytest.skip("PYSPARK_PYTHON names another Python: set before panes' session started")

    def origin(batches):
        import pandas as pd
        import pyspark as worker_pyspark

        for _ in batches:
            yield pd.DataFrame({"origin": [worker_pyspark.__file__]})

    got = spark.range(1).mapInPandas(origin, "origin STRING").collect()
    assert Path(got[0].origin).resolve() == PACKAGE / "__init__.py"
