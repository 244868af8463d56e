"""The daemon Spark forks its Python workers from (``spark.python.daemon.module``).

Spark starts the daemon with its own ``pyspark.zip`` first on ``PYTHONPATH``. Python cannot cache
compiled modules inside a zip, so every worker the daemon forks compiled PySpark's worker modules
from source again: about a second of CPU per new worker (and a task waits for it). The same
PySpark, installed as a package, has its compiled ``.pyc`` files. This module takes the zip off
``sys.path`` when that installed PySpark is the same version, then runs PySpark's own daemon;
the workers it forks inherit the path. Nothing else is imported before the fork (PySpark's
daemon imports a worker's modules after forking it: some start threads).
"""

from __future__ import annotations

import importlib.metadata
import sys


def _installed_pyspark_matches(zip_entries: list[str]) -> bool:
    """Whether an installed PySpark exists and has the version of every zip on the path."""
    import zipfile

    try:
        installed = importlib.metadata.version("pyspark")
    except importlib.metadata.PackageNotFoundError:
        return False
    for entry in zip_entries:
        try:
            with zipfile.ZipFile(entry) as z:
                text = z.read("pyspark/version.py").decode("utf-8", "replace")
        except (OSError, KeyError, zipfile.BadZipFile):
            return False
        if f"'{installed}'" not in text and f'"{installed}"' not in text:
            return False
    return True


def main() -> None:
    zips = [p for p in sys.path if p.endswith("pyspark.zip")]
    if zips and _installed_pyspark_matches(zips):
        sys.path[:] = [p for p in sys.path if p not in zips]
    from pyspark import daemon

    daemon.manager()


if __name__ == "__main__":
    main()
