"""Baseline sliding-window engines the MTAs are compared against.

One algorithm per module, each an :class:`mta.engine.Engine`; their
``enforce`` evicts one element at a time (:mod:`._enforce`), as in the MTA
paper's evaluation.
"""

from ._enforce import SingleEvictionEnforce
from .daba import DABA
from .flatfat import FlatFAT
from .flatfit import FlatFIT
from .recalc import Recalc
from .slickdeque import SlickDeque, SlickDequeInv, SlickDequeNonInv
from .subtract_on_evict import SubtractOnEvict
from .two_stacks import TwoStacks

__all__ = [
    "DABA",
    "FlatFAT",
    "FlatFIT",
    "Recalc",
    "SingleEvictionEnforce",
    "SlickDeque",
    "SlickDequeInv",
    "SlickDequeNonInv",
    "SubtractOnEvict",
    "TwoStacks",
]
