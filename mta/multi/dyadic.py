"""Dyadic decompositions: how many base intervals (Arasu and Widom, VLDB
2004, Definition 3.1; the nodes of a segment tree) cover a range of leaves.
The cost model (:mod:`mta.multi.cost`) prices B-Int lookups and FlatFAT
range queries with them.
"""

from __future__ import annotations

import math
from functools import lru_cache

__all__ = ["dyadic_pieces", "mean_dyadic_pieces"]


def dyadic_pieces(lo: int, hi: int) -> int:
    """Base intervals (Arasu-Widom Definition 3.1; the nodes of a segment
    tree) in the minimal decomposition of leaves ``lo <= i < hi``
    (Theorem 3.1).

    The highest bit where ``lo`` and ``hi - 1`` differ splits the interval at
    an aligned ``mid``: left of it the pieces grow (one per 1-bit of
    ``mid - lo``), right of it they shrink (one per 1-bit of ``hi - mid``);
    an interval that is itself a base interval is one piece.  O(1) word
    operations."""
    if hi <= lo:
        return 0
    width = hi - lo
    if width & (width - 1) == 0 and lo % width == 0:
        return 1
    m = (lo ^ (hi - 1)).bit_length() - 1
    mid = (hi - 1) >> m << m
    return bin(mid - lo).count("1") + bin(hi - mid).count("1")


def mean_dyadic_pieces(k: int) -> float:
    """Mean of :func:`dyadic_pieces` over windows of ``k`` leaves, averaged
    over 64 start positions spread evenly (by the golden ratio) across a
    period of ``2^(bits(k) + 1)``: a tree's windows start at every
    alignment in the long run.  Above 4,096 leaves ``k`` is first rounded to
    12 significant bits (the mean moves by well under one piece).
    O(64) word operations, O(1) when cached."""
    k = int(k)
    if k > 4096:
        shift = k.bit_length() - 12
        k = (k + (1 << (shift - 1))) >> shift << shift
    return _mean_dyadic_pieces(k)


@lru_cache(maxsize=1 << 16)
def _mean_dyadic_pieces(k: int, samples: int = 64) -> float:
    if k <= 0:
        return 0.0
    if k == 1:
        return 1.0
    span = 1 << (k.bit_length() + 1)
    if span <= samples:
        return sum(dyadic_pieces(lo, lo + k) for lo in range(span)) / span
    phi = (math.sqrt(5) - 1) / 2
    starts = {int(span * ((j * phi) % 1.0)) for j in range(samples)}
    return sum(dyadic_pieces(lo, lo + k) for lo in starts) / len(starts)
