"""One execution tree of a shared plan: :class:`Tree`.

mqo-shein-chrysanthis-tkde section 2: a tree's partial aggregation cuts the
stream into partials at its edges (:mod:`.panes`, :mod:`.pairs`,
:mod:`.cutty`), and a final aggregator over the closed partials answers
every query's windows (:mod:`.naive`, :mod:`.bint`, :mod:`.rint`, ...).
A partial is keyed by its first element's key; every window bound is an
edge, so a window is the partials whose keys lie in it, found by binary
search, plus the open partial when the window ends at the newest element
(Cutty's reading of the current partial), plus a TriWeave shared slicer's
open fragment when one feeds the tree.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right

from ..markers import EMPTY
from . import cutty, pairs, panes
from .plan import Group, holistic
from .quantiles import Runs
from .query import Query

_PARTIAL_MODULES = {"panes": panes, "pairs": pairs, "cutty": cutty}


class Tree:
    """One execution tree: the partial aggregator (the open partial and the
    edges) and a final aggregator over the closed partials."""

    def __init__(self, group: Group, final) -> None:
        """The tree of ``group`` over ``final``; O(queries)."""
        self.group = group
        self.queries = group.queries
        self.by_rows = self.queries[0].by_rows
        aggregator = self.queries[0].aggregator
        self.monoid = aggregator.monoid
        self.lift = aggregator.lift
        self._combine = self.monoid.combine
        self.edges = _PARTIAL_MODULES[group.partial].edges(self.queries)
        self.final = final
        self._keys: list = []  # first key of each closed partial
        self._kbase = final.hi  # position of _keys[0]
        self._open = False
        self._open_key = None
        self._open_value = None
        self._open_end = None
        self.slicer = None  # TriWeave's shared first level, when one feeds this tree
        # B-INT-QNT: exact quantiles select over B-Int's cover, unmerged
        self.holistic = holistic(self.queries[0]) and hasattr(final, "runs")
        specs: dict = {}
        self.spec = {q.name: specs.setdefault((q.periodic, q.exact_width, q.exact_lag), len(specs))
                     for q in self.queries}

    def add(self, key, v) -> None:
        """Partial aggregation: one combine unless ``key`` starts a partial,
        then the closed partial goes to the final aggregator (its append's
        cost) and the next edge is computed (O(progressions), no call)."""
        if self._open:
            if self.edges.every:
                same = key == self._open_key
            else:
                same = key < self._open_end
            if same:
                self._open_value = self._combine(self._open_value, v)
                return
            self.final.append(self._open_value)
            self._keys.append(self._open_key)
            self._open = False
        self._open_key = key
        self._open_value = v
        self._open_end = None if self.edges.every else self.edges.next_after(key)
        self._open = True

    def suffix(self, a, spec: int):
        """:meth:`window` for ``[a, b)`` when ``b`` lies past every key (a
        periodic window without lag, reported as soon as it ends): one
        binary search, the final technique's lookup of ``spec`` (an index
        of :attr:`spec`), one combine with the open partial (and one with a
        shared slicer's open fragment).  Not for exact quantiles."""
        keys, base, final = self._keys, self._kbase, self.final
        lo = base + bisect_left(keys, a, final.lo - base)
        value = final.range(lo, final.hi, spec) if lo < final.hi else EMPTY
        if self._open and a <= self._open_key:
            v = self._open_value
            value = v if value is EMPTY else self._combine(value, v)
        slicer = self.slicer
        if slicer is not None and slicer.open and a <= slicer.open_key:
            v = slicer.open_value
            value = v if value is EMPTY else self._combine(value, v)
        return value

    def window(self, q: Query, a, b, left_closed: bool):
        """Aggregate of the elements with keys in ``[a, b)`` (or ``(a, b]``),
        or EMPTY; ``a`` and ``b`` are edges (or ``b`` is past the newest
        element).  Two binary searches (O(log partials), no call), the final
        technique's lookup, and one combine with the open partial (and one
        with a shared slicer's open fragment, when it feeds the tree).  For exact
        quantiles, B-Int's O(log W) covering runs and the open partial as
        :class:`~mta.multi.quantiles.Runs`, no call."""
        find = bisect_left if left_closed else bisect_right
        keys, base = self._keys, self._kbase
        dead = self.final.lo - base
        lo = base + find(keys, a, dead)
        hi = base + find(keys, b, dead)
        if self.holistic:
            return self._runs(lo, hi, a, b, left_closed)
        value = self.final.range(lo, hi, self.spec[q.name]) if lo < hi else EMPTY
        if self._open:
            k = self._open_key
            if (a <= k < b) if left_closed else (a < k <= b):
                v = self._open_value
                value = v if value is EMPTY else self._combine(value, v)
        slicer = self.slicer
        if slicer is not None and slicer.open:
            k = slicer.open_key
            if (a <= k < b) if left_closed else (a < k <= b):
                v = slicer.open_value
                value = v if value is EMPTY else self._combine(value, v)
        return value

    def _runs(self, lo: int, hi: int, a, b, left_closed: bool):
        """The window's sorted runs (B-INT-QNT's LOOKUP before selection),
        or EMPTY.  O(log W), no monoid call."""
        runs = self.final.runs(lo, hi) if lo < hi else []
        if self._open:
            k = self._open_key
            if (a <= k < b) if left_closed else (a < k <= b):
                runs.append(self._open_value)
        slicer = self.slicer
        if slicer is not None and slicer.open:
            k = slicer.open_key
            if (a <= k < b) if left_closed else (a < k <= b):
                runs.append(slicer.open_value)
        return Runs(runs) if runs else EMPTY

    def first_key(self, a):
        """The key of the first partial (closed or open) at or after ``a``.
        O(log partials), no monoid call."""
        keys = self._keys
        i = bisect_left(keys, a, self.final.lo - self._kbase)
        if i < len(keys):
            return keys[i]
        if self._open and self._open_key >= a:
            return self._open_key
        slicer = self.slicer
        if slicer is not None and slicer.open and slicer.open_key >= a:
            return slicer.open_key
        return None

    def evict(self, floor) -> None:
        """No window will hold a key below ``floor`` again: O(log partials)
        plus the final technique's eviction, amortized O(1) for the keys."""
        keys = self._keys
        dead = self.final.lo - self._kbase
        i = bisect_left(keys, floor, dead)
        if i > dead:
            self.final.evict(self._kbase + i)
            dead = self.final.lo - self._kbase
        if dead > 64 and 2 * dead > len(keys):
            del keys[:dead]
            self._kbase += dead

    def describe(self) -> str:
        """``partial + final``, O(1)."""
        return f"{self.group.partial} + {self.final.NAME}"
