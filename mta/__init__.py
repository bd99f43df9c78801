"""Monoid Tree Aggregator (MTA) sliding windows, after Villalba et al., TPDS 2019.

``Window(aggregator, policy)`` is the entry point; ``AmortizedMTA`` and
``LogMTA`` are the engines behind it, ``mta.baselines`` their peers.
"""

#: The version of the mta-windows distribution (pyproject.toml reads it from here).
__version__ = "0.1.0"

from . import aggregators, policies
from .amortized_mta import AmortizedMTA
from .engine import Engine
from .errors import (CountError, EmptyWindowError, EngineFailedError, MonoidLawError, MTAError, OperationRefused,
                     PolicyError)
from .level_queue import LevelQueue, MemoryLevelQueue
from .log_mta import LogMTA
from .monoid import Aggregator, CountingMonoid, Monoid, product, product_monoid
from .multi import Query, Result, SharedWindows
from .policies import SlidePolicy
from .window import LiftError, Window

__all__ = [
    "Aggregator",
    "AmortizedMTA",
    "CountError",
    "CountingMonoid",
    "EmptyWindowError",
    "Engine",
    "EngineFailedError",
    "LevelQueue",
    "LiftError",
    "LogMTA",
    "MemoryLevelQueue",
    "Monoid",
    "MonoidLawError",
    "MTAError",
    "OperationRefused",
    "PolicyError",
    "Query",
    "Result",
    "SharedWindows",
    "SlidePolicy",
    "Window",
    "aggregators",
    "policies",
    "product",
    "product_monoid",
]
