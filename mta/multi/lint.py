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
no landmark, is folded (fewer than ``W_min`` partials); the intervals
ending at a landmark go back to the oldest live partial (``W_max`` is the
live window), computed right to left when the landmark is reached:
amortized ``live / W_min`` monoid calls per partial, and ``live^2 / W_min``
values of memory.
"""

from __future__ import annotations

from ._final import EMPTY, FinalAggregator, ListStore


class LInt(FinalAggregator):
    """Append: one combine (the interval from the current landmark), plus
    at each landmark one combine per live partial before it (amortized
    ``live / W_min``).  Lookup: one combine, or at most ``W_min - 1`` for a
    narrow range.  Eviction O(landmarks dropped)."""

    NAME = "lint"

    def __init__(self, monoid, *, w_min: int = 8) -> None:
        """Landmarks every ``w_min`` partials; O(1)."""
        super().__init__(monoid)
        if type(w_min) is not int or w_min < 1:
            raise ValueError(f"LInt: w_min must be a positive int, got {w_min!r}")
        self.w_min = w_min
        self._partials = ListStore()
        self._before: dict = {}  # landmark -> ListStore: f(j .. landmark - 1) at position j
        self._after: dict = {}  # landmark -> list: f(landmark .. landmark + d) at index d

    def append(self, v) -> None:
        """One combine, and at a landmark one per live partial before it (amortized ``live /
        w_min``)."""
        pos, w, combine = self.hi, self.w_min, self._combine
        self._partials.append(v)
        self.hi += 1
        if pos % w == 0:
            # landmark pos: the intervals ending just before it, right to left
            if pos > self.lo:
                partials = self._partials
                acc = partials[pos - 1]
                suffix = [acc]
                for j in range(pos - 2, self.lo - 1, -1):
                    acc = combine(partials[j], acc)
                    suffix.append(acc)
                suffix.reverse()
                store = ListStore(self.lo)
                store.items = suffix
                self._before[pos] = store
            self._after[pos] = [v]
        else:
            after = self._after[pos - pos % w]
            after.append(combine(after[-1], v))

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
        return self._combine(self._before[landmark][lo], after)

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
