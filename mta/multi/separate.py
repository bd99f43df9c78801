"""The no-sharing baseline of ``plan="separate"``: every query on its own
Amortized MTA (mta-villalba-tpds2019 section 4.2, :mod:`mta.amortized_mta`),
as an engine per query would run it: the engine :class:`mta.Window` uses by
default, :func:`mta.native.amortized_engine` (the compiled core when it is
built, else the pure-Python one).

The MTA holds the elements of the query's current window.  A lag is a
delay line: elements wait in a queue until they are older than the window's
end, then enter the MTA; elements older than the window's start leave it by
one ``bulk_evict`` (O(log n) at worst, amortized O(1) per element).  A
lookup behind the state the MTA has moved to (``query(name)`` after a
flush reported later windows) folds the held elements instead: those a
window may still need.
"""

from __future__ import annotations

from collections import deque

from ..native import amortized_engine
from ..markers import EMPTY


class Separate:
    """One query's executor: the executor interface of
    :class:`mta.multi.tree.Tree` (``lift``, ``add``, ``window``,
    ``first_key``, ``evict``) over an Amortized MTA."""

    def __init__(self, query) -> None:
        """An empty Amortized MTA; O(1)."""
        self.queries = (query,)
        self.by_rows = query.by_rows
        self.lift = query.aggregator.lift
        self.monoid = query.aggregator.monoid
        self.engine = amortized_engine(self.monoid)
        self._keys: deque = deque()  # keys of the elements in the MTA
        self._pending: deque = deque()  # (key, value) not yet in the window
        self._held: deque = deque()  # (key, value) of every element a lookup may still need
        self._a = None
        self._b = None
        self._left_closed = True

    def add(self, key, v) -> None:
        """Into the delay line; O(1), no monoid call."""
        self._pending.append((key, v))
        self._held.append((key, v))

    def window(self, q, a, b, left_closed: bool):
        """Move the MTA's window to ``[a, b)`` (or ``(a, b]``); O(1)
        amortized engine calls when windows only move forward."""
        if self._a is not None and (a < self._a or b < self._b or left_closed != self._left_closed):
            return self._fold(a, b, left_closed)
        self._a, self._b, self._left_closed = a, b, left_closed
        pending, keys, engine = self._pending, self._keys, self.engine
        while pending and (pending[0][0] < b if left_closed else pending[0][0] <= b):
            key, v = pending.popleft()
            engine.insert(v)
            keys.append(key)
        gone = 0
        for key in keys:
            if (key < a) if left_closed else (key <= a):
                gone += 1
            else:
                break
        if gone:
            engine.bulk_evict(gone)
            for _ in range(gone):
                keys.popleft()
        return engine.query() if keys else EMPTY

    def _fold(self, a, b, left_closed: bool):
        """A lookup behind the MTA's window: O(held elements)."""
        combine = self.monoid.combine
        acc = EMPTY
        for key, v in self._held:
            if (a <= key < b) if left_closed else (a < key <= b):
                acc = v if acc is EMPTY else combine(acc, v)
        return acc

    def first_key(self, a):
        """The first held key at or after ``a``: O(1) after ``window``
        dropped the older ones."""
        for key in self._keys:
            if key >= a:
                return key
        for key, _ in self._pending:
            if key >= a:
                return key
        return None

    def evict(self, floor) -> None:
        """Forget the held elements below ``floor`` (the MTA's window moves
        with the lookups)."""
        held = self._held
        while held and held[0][0] < floor:
            held.popleft()

    def describe(self) -> str:
        """O(1)."""
        return "separate Amortized MTA"
