"""Spark integration: per-key sliding windows with state in a shared store.

``sliding_window(df, key=..., time=..., value=..., aggs=[...], range=...)``
works on batch and streaming DataFrames; ``mta-spark`` is the command line.
"""

from .api import sliding_window
from .aggregations import READY
from .spec import SlidingWindowError, WindowSpec

__all__ = ["READY", "SlidingWindowError", "WindowSpec", "sliding_window"]
