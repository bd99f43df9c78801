"""Names of a package that load on first use (PEP 562).

``spark_ops`` and ``spark_ops.cli`` import nothing heavy when imported, so
that the ``mta-spark`` console script can say which extra is missing
before pyspark, pandas or pyarrow is needed.
"""

from __future__ import annotations

import importlib


def exports(package: str, names: dict[str, str], public: list[str]):
    """The module ``__getattr__`` and ``__dir__`` of ``package``: each of
    ``names`` (name -> submodule) is imported from its submodule the first
    time it is asked for, then kept in the package's namespace."""
    import sys

    def __getattr__(name: str):
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{names[name]}", package), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__():
        return sorted(set(vars(sys.modules[package])) | set(public))

    return __getattr__, __dir__
