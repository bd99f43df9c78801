"""Spark integration: per-key sliding windows with state in a shared store.

``sliding_window(df, key=..., time=..., value=..., aggs=[...], range=...)``
works on batch and streaming DataFrames; ``mta-spark`` is the command line.

The names below load on first use, so that importing the package (as the
``mta-spark`` console script does) works before the ``spark`` extra's
packages are installed and can say which extra is missing.
"""

from . import _lazy

#: Each public name and the submodule it comes from.
_EXPORTS = {"READY": "aggregations", "SlidingWindowError": "spec", "WindowSpec": "spec", "sliding_window": "api"}

__all__ = ["READY", "SlidingWindowError", "WindowSpec", "sliding_window"]


__getattr__, __dir__ = _lazy.exports(__name__, _EXPORTS, __all__)
