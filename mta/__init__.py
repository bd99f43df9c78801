"""Monoid Tree Aggregator (MTA) sliding windows, after Villalba et al., TPDS 2019."""

from .engine import Engine
from .errors import EmptyWindowError, EngineFailedError, MonoidLawError, MTAError, PolicyError
from .level_queue import LevelQueue, MemoryLevelQueue
from .monoid import Aggregator, CountingMonoid, Monoid, product, product_monoid

__all__ = [
    "Aggregator",
    "CountingMonoid",
    "EmptyWindowError",
    "Engine",
    "EngineFailedError",
    "LevelQueue",
    "MemoryLevelQueue",
    "Monoid",
    "MonoidLawError",
    "MTAError",
    "PolicyError",
    "product",
    "product_monoid",
]
