"""TriWeave's first level: one slicer shared by several execution trees.

Guirguis et al., "Three-level processing of multiple aggregate continuous
queries" (ICDE 2012), as restated in mqo-shein-chrysanthis-tkde section
3.1.1: TriWeave "assumes combined partial aggregation processing using a
large composite slide that passes ready partials to the execution trees".
The stream is sliced once, at the union of every tree's edges (the
composite slide of all their queries, section 3.1); each closed *fragment*
goes to every tree, which folds it into its own partial or starts a new
one where the fragment's first key is one of the tree's edges (the second
level); each tree's final aggregation is the third.

Cost per element (what :func:`mta.multi.cost.plan_cost` with
``shared_slicing=True`` prices): one combine per element that does not start
a fragment, ``1 - E_shared / lambda`` for the slicer, instead of
``1 - E_i / lambda`` in every tree; each tree then pays ``(E_shared - E_i) /
lambda`` to fold fragments.  Because every tree edge is a slicer edge, a
fragment never straddles a tree's edge.

A fragment is handed on as soon as it is known to be complete: for ``rows``
keys right after its last element, for time keys when an element past it
arrives, before the windows that element completes are reported.  A window
ending at an edge (Panes, Pairs, lagged Cutty windows) then reads the trees
alone.  A window ending inside a fragment (Cutty's windows end anywhere, a
per-element time query at the newest element) reads the open fragment after
the tree's own open partial (Cutty's reading of the current partial, one
level up): one combine more than in a tree that slices alone, unless the
tree's open partial is empty.
"""

from __future__ import annotations

from typing import Sequence

from .slicing import EdgeSet

__all__ = ["SharedSlicer", "Slicer"]


class Slicer:
    """A plan's record of one shared first level: the partial technique of
    every tree it feeds and its estimated monoid calls per element.  Groups
    holding the same :class:`Slicer` object share it."""

    __slots__ = ("partial", "estimate")

    def __init__(self, partial: str, estimate: float | None = None) -> None:
        """O(1)."""
        self.partial = partial
        self.estimate = estimate

    def __repr__(self) -> str:
        return f"Slicer({self.partial!r}, estimate={self.estimate!r})"


class SharedSlicer:
    """The executing first level: ``add(key, v)`` slices the stream at
    ``edges`` and hands each closed fragment to ``trees`` (each with
    ``add(key, value)``); ``open``, ``open_key``, ``open_value`` are the
    fragment being filled."""

    __slots__ = ("edges", "trees", "lift", "by_rows", "_combine", "open", "open_key", "open_value", "_open_end")

    def __init__(self, edges: EdgeSet, trees: Sequence, monoid, lift, by_rows: bool) -> None:
        """``edges``: the union of the trees' edge sets.  O(1)."""
        self.edges = edges
        self.trees = tuple(trees)
        self.lift = lift
        self.by_rows = by_rows
        self._combine = monoid.combine
        self.open = False
        self.open_key = None
        self.open_value = None
        self._open_end = None

    def advance(self, key) -> None:
        """Close the open fragment if ``key`` lies past it: a time window
        ending at an edge is then reported from the trees alone, as when
        each tree slices its own input.  O(trees) when a fragment closes
        (each tree's ``add``), else O(1); no call of its own."""
        if self.open and not (key == self.open_key if self.edges.every else key < self._open_end):
            self._close()

    def add(self, key, v) -> None:
        """One combine when ``key`` stays in the open fragment; otherwise the
        closed fragment goes to every tree (each tree's ``add``: one combine
        or the start of its next partial) and ``key`` opens the next.  With
        ``rows`` keys (consecutive ints) a fragment is closed as soon as its
        last key is in, for the same reason as :meth:`advance`.  The next
        edge is O(progressions), no call."""
        self.advance(key)
        if self.open:
            self.open_value = self._combine(self.open_value, v)
        else:
            self.open_key = key
            self.open_value = v
            self._open_end = None if self.edges.every else self.edges.next_after(key)
            self.open = True
        if self.by_rows and (self.edges.every or key + 1 >= self._open_end):
            self._close()

    def _close(self) -> None:
        """Hand the open fragment to every tree.  O(trees)."""
        k, value = self.open_key, self.open_value
        self.open = False
        self.open_value = None
        for tree in self.trees:
            tree.add(k, value)

    def describe(self) -> str:
        """O(1)."""
        return f"shared slicer over {self.edges!r} feeding {len(self.trees)} tree(s)"
