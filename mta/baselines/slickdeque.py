"""SlickDeque (Shein, Chrysanthis and Labrinidis, EDBT 2018), single query.

``SlickDeque(monoid, wsp, variant="auto")`` builds one of two engines:

* ``"inv"`` -- :class:`SlickDequeInv`, Algorithm 1: a running aggregate,
  ``⊕`` the new value, ``⊖`` the expiring one.  With one query this *is*
  subtract-on-evict, so it reuses :class:`SubtractOnEvict`.  Needs
  ``monoid.inverse``.
* ``"noninv"`` -- :class:`SlickDequeNonInv`, Algorithm 2: a monotonic deque
  of ``(pos, val)`` nodes.  Needs ``monoid.selective``.
* ``"auto"`` -- ``"inv"`` if the monoid has an inverse, else ``"noninv"`` if
  it is selective, else :class:`TypeError`.
"""

from __future__ import annotations

from collections import deque

from ..monoid import Monoid
from ._enforce import SingleEvictionEnforce
from .subtract_on_evict import SubtractOnEvict

VARIANTS = ("auto", "inv", "noninv")


def _resolve(monoid, variant: str) -> type:
    if not isinstance(monoid, Monoid):
        raise TypeError(f"SlickDeque needs a Monoid, got {type(monoid).__name__}")
    if variant not in VARIANTS:
        raise ValueError(f"SlickDeque variant must be one of {VARIANTS}, got {variant!r}")
    if variant == "auto":
        if monoid.inverse is not None:
            return SlickDequeInv
        if monoid.selective:
            return SlickDequeNonInv
        raise TypeError(
            f"SlickDeque needs an invertible monoid (inverse=...) or a selective one "
            f"(selective=True, e.g. max/min); {monoid.name!r} is neither"
        )
    return SlickDequeInv if variant == "inv" else SlickDequeNonInv


class SlickDeque(SingleEvictionEnforce):
    """``SlickDeque(monoid, wsp=None, variant="auto")``: returns a
    :class:`SlickDequeInv` or a :class:`SlickDequeNonInv` (both subclasses)."""

    variant = "auto"

    def __new__(cls, monoid=None, wsp=None, variant: str = "auto"):
        if cls is SlickDeque:
            cls = _resolve(monoid, variant)
        elif variant not in ("auto", cls.variant):
            raise ValueError(f"{cls.__name__} is the {cls.variant!r} variant, not {variant!r}")
        return super().__new__(cls)


class SlickDequeInv(SlickDeque, SubtractOnEvict):
    """Algorithm 1 with one query: subtract-on-evict."""

    variant = "inv"

    def __init__(self, monoid, wsp=None, variant: str = "inv") -> None:
        SubtractOnEvict.__init__(self, monoid, wsp)


class SlickDequeNonInv(SlickDeque):
    """Algorithm 2 with one query, for selective monoids (``a ⊕ b`` is ``a`` or ``b``).

    Node ``(p, x)`` stands for the window positions after the previous node up
    to ``p``: the aggregate from any of them to the newest value is ``x``.
    Hence the answer is the head node's value.  Inserting ``v`` pops tail
    nodes while ``tail ⊕ v`` selects ``v`` (line 16; by associativity the
    first tail that survives proves every older one survives); evicting the
    oldest position pops the head node if it stands at that position (line
    13).

    Deviations: positions are unbounded integers instead of ``currPos``
    modulo ``wSize``, since the window size varies; the raw values are kept
    in a deque as well, because ``enforce`` reads the oldest value; and
    the paper's test ``tail ⊕ v == v`` looks at identity first (``r is v``;
    ``r == v`` only when ``r`` is neither operand), so the deque follows the
    operand ``combine`` actually returned -- ties between distinct values
    that compare equal (first-max keeps the older one, last-max the newer)
    and values such as NaN that are not equal to themselves.
    """

    variant = "noninv"

    def __init__(self, monoid, wsp=None, variant: str = "noninv") -> None:
        super().__init__(monoid, wsp)
        if not monoid.selective:
            raise TypeError(
                f"{type(self).__name__} needs a selective monoid (combine(a, b) is always a or b, "
                f"declared with selective=True); {monoid.name!r} is not"
            )
        self._vals: deque = deque()
        self._nodes: deque = deque()  # (pos, val), positions increasing
        self._start = 0  # position of the oldest value

    def insert(self, v) -> None:
        nodes, combine = self._nodes, self._combine
        while nodes:
            tail = nodes[-1][1]
            r = combine(tail, v)
            if r is v or (r is not tail and r == v):
                nodes.pop()
            else:
                break
        nodes.append((self._start + len(self._vals), v))
        self._vals.append(v)

    def _head(self):
        return self._vals[0]

    def _pop(self) -> None:
        if self._nodes[0][0] == self._start:
            self._nodes.popleft()
        self._vals.popleft()
        self._start += 1

    def query(self):
        return self._nodes[0][1] if self._nodes else self._identity

    def __len__(self) -> int:
        return len(self._vals)
