"""The ``mta-spark`` console script.

It checks that the ``spark`` extra's packages are installed before it loads
the command (which imports NumPy at once and pyspark when a job starts), so
that a bare ``pip install mta-windows`` gives one line naming the extra to
install, status 2, instead of a traceback or a job failing halfway.
"""

from __future__ import annotations

import importlib.util
import logging
import sys

#: The modules of the ``spark`` extra (pyproject.toml) that the command imports.
SPARK_EXTRA_MODULES = ("pyspark", "py4j", "pandas", "pyarrow", "numpy", "matplotlib")
INSTALL = "pip install 'mta-windows[spark]'"


def missing_modules() -> list[str]:
    """The modules of :data:`SPARK_EXTRA_MODULES` that cannot be imported
    (found without importing them)."""
    missing = []
    for name in SPARK_EXTRA_MODULES:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):  # a broken install or a blocking import hook
            found = False
        if not found:
            missing.append(name)
    return missing


def main(argv=None) -> int:
    """Run ``mta-spark`` (see :func:`spark_ops.cli.main`); status 2 and one
    line naming the ``spark`` extra when its packages are missing."""
    missing = missing_modules()
    if missing:
        print(f"mta-spark: error: the spark extra is not installed (no module {', '.join(missing)}); "
              f"install it with: {INSTALL} (from a wheel: pip install 'dist/mta_windows-<version>-<tag>.whl[spark]')",
              file=sys.stderr)
        return 2
    # the project's warnings (store retries, fencing, rejected rows) as lines on stderr
    logging.basicConfig(level=logging.WARNING, format="mta-spark: %(levelname)s: %(name)s: %(message)s")
    from .app import main as run

    return run(argv)
