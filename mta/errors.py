"""Exceptions raised by the engines, policies and checks."""


class MTAError(Exception):
    """Base class of every error this package raises on purpose."""


class OperationRefused(MTAError):
    """An operation refused before changing anything: the window is intact
    and stays usable."""


class EmptyWindowError(OperationRefused, IndexError):
    """``evict()`` on an empty window, or ``bulk_evict(k)`` / ``slide`` asking
    for more elements than the window holds (state is unchanged)."""


class CountError(OperationRefused, ValueError):
    """A ``bulk_evict`` or ``slide`` count that is not a non-negative integer,
    or ``slide`` counts that do not match its values (state is unchanged)."""


class EngineFailedError(MTAError, RuntimeError):
    """User code (combine, lift, a slide policy) raised in the middle of an
    operation, so the engine's state may be inconsistent.  Every later call
    raises this error instead of returning a possibly wrong result; rebuild
    the window, or resume it from its last checkpoint."""


class MonoidLawError(MTAError, ValueError):
    """The checking mode found a combine that is not associative or an
    identity that is not neutral."""


class PolicyError(MTAError, ValueError):
    """A slide policy is misconfigured or, in checking mode, not
    prefix-monotone."""
