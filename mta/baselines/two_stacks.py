"""Two-Stacks (DABA paper section 4, Fig. 5), with the query cache of section 4."""

from __future__ import annotations

from ..markers import EMPTY
from ._enforce import SingleEvictionEnforce


class TwoStacks(SingleEvictionEnforce):
    """Front stack ``s_F`` (oldest value on top) and back stack ``s_B``.

    Entries are ``(val, agg)`` pairs, ``agg`` cumulative from the bottom of
    each stack: ``s_F[i].agg = s_F[i].val ⊕ ... ⊕ s_F[0].val`` and
    ``s_B[i].agg = s_B[0].val ⊕ ... ⊕ s_B[i].val`` (Fig. 4), so the window's
    aggregate is ``Σ_F ⊕ Σ_B``.  ``evict`` on an empty ``s_F`` first flips
    ``s_B`` onto it: amortized O(1), worst case O(n).  ``query`` caches its
    result until the next insert or evict.
    """

    def __init__(self, monoid, wsp=None) -> None:
        super().__init__(monoid, wsp)
        self._front: list = []
        self._back: list = []
        self._cache = EMPTY

    def insert(self, v) -> None:
        back = self._back
        back.append((v, self._combine(back[-1][1], v) if back else v))  # Fig. 5 line 4
        self._cache = EMPTY

    def _flip(self) -> None:
        """Reverse ``s_B`` onto ``s_F`` (Fig. 5 lines 13-17)."""
        front, back, combine = self._front, self._back, self._combine
        while back:
            v = back.pop()[0]
            front.append((v, combine(v, front[-1][1]) if front else v))  # v is older: on the left

    def _head(self):
        return self._front[-1][0] if self._front else self._back[0][0]

    def _pop(self) -> None:
        if not self._front:
            self._flip()
        self._front.pop()
        self._cache = EMPTY

    def query(self):
        if self._cache is EMPTY:
            front, back = self._front, self._back
            if not front:
                self._cache = back[-1][1] if back else self._identity
            elif not back:
                self._cache = front[-1][1]
            else:
                self._cache = self._combine(front[-1][1], back[-1][1])
        return self._cache

    def __len__(self) -> int:
        return len(self._front) + len(self._back)
