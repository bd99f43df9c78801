"""L-Int, landmark intervals (arasu-widom-vldb2004 section 3.1.2,
Definition 3.2, Theorem 3.3, Fig. 5).

Landmarks are the positions ``alpha * W_min``.  For every live landmark
``lam`` the structure keeps the landmark intervals that end just before it,
``f(j .. lam - 1)`` for the live ``j < lam``, and those that start at it,
``f(lam .. lam + d)`` for ``d < W_min``.  Any range ``[lo, hi)`` holding a
landmark is the disjoint union of at most two of them (Theorem 3.3): with
``lam`` the last landmark before ``hi``, ``f(lo .. lam - 1) + f(lam .. hi -
1)``, so a lookup costs one combine whatever the width.

Deviations: the window widths of a tree are not known in partials (a time
window holds as many partials as there were slices with elements), so
``W_min`` is a parameter (default 8) and a range narrower than that, holding
no landmark, is folded (fewer than ``W_min`` partials); and the intervals
ending at a landmark are computed on demand, right to left, as far back as a
lookup asks (each once), so ``W_max`` is the widest range actually looked up:
amortized ``W_max / W_min`` monoid calls per partial, as Theorem 3.4's
``c``, and ``live * W_max / W_min`` values of memory.
"""

from __future__ import annotations

from ..markers import EMPTY
from ._final import FinalAggregator, ListStore


class LInt(FinalAggregator):
    """Append: one combine (the interval from the current landmark).
    Lookup: one combine, plus the intervals before its landmark not computed
    yet (amortized ``W_max / W_min`` per partial over a stream), or at most
    ``W_min - 1`` combines for a narrow range.  Eviction O(landmarks
    dropped)."""

    NAME = "lint"

    def __init__(self, monoid, *, w_min: int = 8) -> None:
        """Landmarks every ``w_min`` partials; O(1)."""
        super().__init__(monoid)
        if type(w_min) is not int or w_min < 1:
            raise ValueError(f"LInt: w_min must be a positive int, got {w_min!r}")
        self.w_min = w_min
        self._partials = ListStore()
        self._before: dict = {}  # landmark -> list: f(landmark - 1 - k .. landmark - 1) at index k
        self._after: dict = {}  # landmark -> list: f(landmark .. landmark + d) at index d

    def append(self, v) -> None:
        """One combine: the interval from the current landmark grows."""
        pos, w = self.hi, self.w_min
        self._partials.append(v)
        self.hi += 1
        if pos % w == 0:
            self._after[pos] = [v]
            self._before[pos] = []
        else:
            after = self._after[pos - pos % w]
            after.append(self._combine(after[-1], v))

    def range(self, lo: int, hi: int, spec=None):
        """Theorem 3.3: two landmark intervals, one combine."""
        self._check(lo, hi)
        if lo == hi:
            return EMPTY
        w = self.w_min
        landmark = (hi - 1) - (hi - 1) % w
        if landmark < lo:  # no landmark inside: a narrow range
            partials, combine = self._partials, self._combine
            acc = partials[lo]
            for pos in range(lo + 1, hi):
                acc = combine(acc, partials[pos])
            return acc
        after = self._after[landmark][hi - 1 - landmark]
        if landmark == lo:
            return after
        before = self._before[landmark]
        need = landmark - lo  # intervals ending at landmark - 1, of widths 1 .. need
        if len(before) < need:
            partials, combine = self._partials, self._combine
            if not before:
                before.append(partials[landmark - 1])
            acc = before[-1]
            for j in range(landmark - 1 - len(before), lo - 1, -1):
                acc = combine(partials[j], acc)
                before.append(acc)
        return self._combine(before[need - 1], after)

    def evict(self, lo: int) -> None:
        """Landmarks before ``lo`` start no range again."""
        if lo <= self.lo:
            return
        self.lo = lo = min(lo, self.hi)
        w = self.w_min
        first = lo - lo % w  # the landmark whose prefix intervals may still serve
        for table in (self._before, self._after):
            for landmark in [k for k in table if k < first]:
                del table[landmark]
        self._partials.drop_before(lo - (lo % w))
