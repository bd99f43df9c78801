"""DABA, the De-Amortized Banker's Aggregator (DABA paper section 6).

``DABA(monoid, wsp, cached=True)`` is Fig. 17 (caching ``Σ_F ⊕ Σ_B`` for
query and ``Σ_R ⊕ Σ_A`` for fixup: at most 1 combine per query, 3 per
insert, 2 per evict, Theorem 9); ``cached=False`` is Fig. 14 (at most 1 per
query, 4 per insert, 3 per evict).  Combines with an empty sublist's
identity are skipped, which never adds a call.

Storage: the paper's chunked-array queue is replaced by two Python lists
``vals`` and ``aggs`` addressed by the pointers ``F <= L <= R <= A <= B <= E``
(``E`` is ``len(vals)``).  ``popFront`` just advances ``F`` (dropping the
references); once the dead prefix is at least half the lists they are
compacted with ``del lst[:F]`` and every pointer shifts by ``F``.  Combine
calls stay worst-case O(1) as in the paper; the list moves are amortized
O(1) (a single C-level memmove), like the list's own ``append``.
"""

from __future__ import annotations

from ..markers import EMPTY
from ._enforce import SingleEvictionEnforce

#: Compact only once the dead prefix is at least this long (and half the lists).
_MIN_COMPACT = 64


class DABA(SingleEvictionEnforce):
    """DABA (Fig. 14), or cached DABA (Fig. 17) with ``cached=True`` (the default).

    Sublists: ``l_F = [F, B)`` (front portion ``[F, L)``, ``l_L = [L, R)``,
    ``l_R = [R, A)``, ``l_A = [A, B)``) and ``l_B = [B, E)``; ``aggs[i]`` is the
    aggregate up to the end of ``l_F`` on ``[F, L)`` and ``[A, B)``, up to
    ``R`` on ``l_L``, and cumulative from the start of ``l_R``/``l_B`` on
    those (section 6.3).  Only ``fixup`` moves the pointers.
    """

    def __init__(self, monoid, wsp=None, *, cached: bool = True) -> None:
        super().__init__(monoid, wsp)
        self.cached = bool(cached)
        self._vals: list = []
        self._aggs: list = []
        self._F = self._L = self._R = self._A = self._B = 0
        self._fplusb = EMPTY  # Fig. 17 cachedFplusB (EMPTY = not valid)
        self._rplusa = EMPTY  # Fig. 17 cachedRplusA

    # -- the SWAG operations (Fig. 14 lines 1-9, Fig. 17 lines 1-14) --

    def query(self):
        if self._fplusb is not EMPTY:
            return self._fplusb
        F, B, E = self._F, self._B, len(self._vals)
        aggs = self._aggs
        if F == B:
            result = aggs[E - 1] if B != E else self._identity
        elif B == E:
            result = aggs[F]
        else:
            result = self._combine(aggs[F], aggs[E - 1])
        if self.cached:
            self._fplusb = result
        return result

    def insert(self, v) -> None:
        self._fplusb = EMPTY
        vals, aggs = self._vals, self._aggs
        aggs.append(self._combine(aggs[-1], v) if self._B != len(vals) else v)  # Σ_B ⊕ v
        vals.append(v)
        self._fixup()

    def _head(self):
        return self._vals[self._F]

    def _pop(self) -> None:
        self._fplusb = EMPTY
        F = self._F
        self._vals[F] = self._aggs[F] = None  # popFront: release the references
        self._F = F + 1
        self._fixup()
        if self._F >= _MIN_COMPACT and 2 * self._F >= len(self._vals):
            self._compact()

    def __len__(self) -> int:
        return len(self._vals) - self._F

    # -- helpers (Fig. 14 lines 20-33) --

    def _fixup(self) -> None:
        E = len(self._vals)
        if self._F == self._B:  # window of one element, in l_B: move it to l_F
            self._B = self._A = self._R = self._L = E
            return
        if self._L == self._B:  # flip: the old l_F and l_B become l_L and l_R
            self._L, self._A, self._B = self._F, E, E
            if self.cached:
                self._rplusa = self._aggs[E - 1]  # Σ_R (l_A is empty)
        L, R, A, B = self._L, self._R, self._A, self._B
        if L == R:  # free ride: l_L and l_R are empty
            self._L, self._R, self._A = L + 1, R + 1, A + 1
            return
        # shrink l_L and l_R by one each
        aggs, combine = self._aggs, self._combine
        if self.cached:
            aggs[L] = combine(aggs[L], self._rplusa)  # Σ_L ⊕ cachedRplusA
        else:
            rest = combine(aggs[A - 1], aggs[A]) if A != B else aggs[A - 1]  # Σ_R ⊕ Σ_A
            aggs[L] = combine(aggs[L], rest)
        aggs[A - 1] = combine(self._vals[A - 1], aggs[A]) if A != B else self._vals[A - 1]
        self._L, self._A = L + 1, A - 1

    def _compact(self) -> None:
        """Drop the dead prefix ``[0, F)`` and shift every pointer by ``F``."""
        F = self._F
        del self._vals[:F]
        del self._aggs[:F]
        self._F = 0
        self._L -= F
        self._R -= F
        self._A -= F
        self._B -= F
