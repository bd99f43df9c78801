"""What every baseline shares: ``evict`` and the pop-one-at-a-time ``enforce``.

The baselines have no bulk eviction, so -- as in the MTA paper's evaluation
(section 5: "DABA and Naive aggregation WSP enforcement check the first
elements in the window, one by one") -- ``enforce`` grows the candidate
prefix one element at a time and evicts each element as soon as the policy
accepts the prefix ending with it.
"""

from __future__ import annotations

from ..engine import Engine
from ..errors import EmptyWindowError
from ..markers import EMPTY




class SingleEvictionEnforce(Engine):
    """Base of the baselines.

    A subclass implements ``insert``, ``query``, ``__len__`` and two private
    hooks, both only called on a non-empty window:

    * ``_head()`` -- the oldest element;
    * ``_pop()``  -- remove the oldest element.
    """

    def __init__(self, monoid, wsp=None) -> None:
        super().__init__(monoid, wsp)
        self._combine = monoid.combine
        self._identity = monoid.identity

    def _head(self):  # pragma: no cover - abstract
        raise NotImplementedError

    def _pop(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def evict(self) -> None:
        """Remove the oldest element; :class:`EmptyWindowError` if there is none."""
        if not len(self):
            raise EmptyWindowError(f"evict() on an empty {type(self).__name__} window")
        self._pop()

    def enforce(self) -> int:
        """Evict the longest prefix ``P`` with ``wsp(total, aggregate(P))``, one by one."""
        wsp = self.wsp
        if wsp is None or not len(self):
            return 0
        total = self._raw_query()
        combine, head, pop = self._combine, self._head, self._pop
        acc = EMPTY
        evicted = 0
        while len(self):
            value = head()
            candidate = value if acc is EMPTY else combine(acc, value)
            if not wsp(total, candidate):
                break
            acc = candidate
            pop()
            evicted += 1
        return evicted
