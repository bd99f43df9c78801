"""One stream, many queries: :class:`SharedWindows`.

The execution side of mqo-shein-chrysanthis-tkde: a plan (:mod:`.plan`)
splits the queries into trees; each tree cuts the stream into partials at
its edges (partial aggregation: :mod:`.panes`, :mod:`.pairs`,
:mod:`.cutty`) and answers every query's windows from a final aggregator
over those partials (:mod:`.naive`, :mod:`.bint`, :mod:`.rint`,
:mod:`.slickdeque_inv`, :mod:`.slickdeque_noninv`, :mod:`.flatfat`,
:mod:`.flatfit`, :mod:`.lint`).  ``plan="separate"`` gives every query its
own Amortized MTA (:mod:`.separate`), the no-sharing baseline.

Windows are intervals of keys (times, or indices for ``rows=`` queries,
see :mod:`.query`).  A tree's partial holds the elements between two
consecutive edges and is keyed by its first element's key; every window
bound is an edge, so a window is the partials whose keys lie in it, found
by binary search, plus the open partial when the window ends at the newest
element (Cutty's reading of the current partial).
"""

from __future__ import annotations

import numbers
from bisect import bisect_left, bisect_right
from fractions import Fraction
from typing import Any, Callable, Iterable

from ..errors import EngineFailedError, MTAError, OperationRefused
from ..markers import EMPTY
from . import cutty, pairs, panes
from .plan import FINAL_ALIASES, FINALS, PARTIALS, Group, Plan, applicable_finals, final_class, sharing_key
from .query import OutOfOrderError, Query, Result

_PARTIAL_MODULES = {"panes": panes, "pairs": pairs, "cutty": cutty}


class ArgumentRefused(OperationRefused, TypeError):
    """A bad argument to ``push``, ``flush`` or ``query``: refused before any
    change."""


class UnknownQuery(OperationRefused, KeyError):
    """``query(name)`` with a name no query has."""


def next_multiple(x, s):
    """The smallest multiple of ``s`` strictly greater than ``x`` (exact)."""
    if not (isinstance(x, int) and isinstance(s, int)):
        x = Fraction(x)
    return (x // s + 1) * s


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
        specs: dict = {}
        self.spec = {q.name: specs.setdefault((q.periodic, q._w, q._lag), len(specs)) for q in self.queries}

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

    def window(self, q: Query, a, b, left_closed: bool):
        """Aggregate of the elements with keys in ``[a, b)`` (or ``(a, b]``),
        or EMPTY; ``a`` and ``b`` are edges (or ``b`` is past the newest
        element).  Two binary searches (O(log partials), no call), the final
        technique's lookup, and one combine with the open partial."""
        find = bisect_left if left_closed else bisect_right
        keys, base = self._keys, self._kbase
        dead = self.final.lo - base
        lo = base + find(keys, a, dead)
        hi = base + find(keys, b, dead)
        value = self.final.range(lo, hi, self.spec[q.name]) if lo < hi else EMPTY
        if self._open:
            k = self._open_key
            if (a <= k < b) if left_closed else (a < k <= b):
                v = self._open_value
                value = v if value is EMPTY else self._combine(value, v)
        return value

    def first_key(self, a):
        """The key of the first partial (closed or open) at or after ``a``.
        O(log partials), no monoid call."""
        keys = self._keys
        i = bisect_left(keys, a, self.final.lo - self._kbase)
        if i < len(keys):
            return keys[i]
        if self._open and self._open_key >= a:
            return self._open_key
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


def _resolve_final(name, queries) -> str:
    if not isinstance(name, str):
        raise TypeError(f"final technique must be a str, got {type(name).__name__}")
    key = FINAL_ALIASES.get(name.strip().lower().replace("_", "-"))
    if key is None:
        raise ValueError(f"unknown final technique {name!r}; one of {sorted(FINALS)} (or 'slickdeque')")
    monoid = queries[0].aggregator.monoid
    if key == "slickdeque":
        key = "slickdeque-inv" if monoid.inverse is not None else "slickdeque-noninv"
    if key not in applicable_finals(queries):
        why = {"rint": "an invertible monoid", "slickdeque-inv": "an invertible monoid",
               "slickdeque-noninv": "a selective monoid and no lag (it answers suffix windows)",
               "flatfit": "no lag (it answers suffix windows)"}.get(key, "other queries")
        names = ", ".join(q.name for q in queries)
        raise ValueError(f"final technique {key!r} needs {why}; it cannot serve {names} "
                         f"(monoid {monoid.name!r})")
    return key


def _resolve_plan(queries: list, plan) -> tuple[list, str]:
    """The groups of ``plan`` and its display name."""
    if isinstance(plan, str):
        parts = [p.strip() for p in plan.split("+")]
    elif isinstance(plan, (tuple, list)) and all(isinstance(p, str) for p in plan):
        parts = [p.strip() for p in plan]
    else:
        raise TypeError(f"plan must be a str such as 'pairs+bint' or a tuple ('pairs', 'bint'), got {plan!r}")
    if not 1 <= len(parts) <= 2 or not all(parts):
        raise ValueError(f"plan must name a plan and optionally a final technique, got {plan!r}")
    name = parts[0].lower()
    final = parts[1] if len(parts) == 2 else None
    if name in ("auto", "weaveshare", "triweave"):
        if final is not None:
            raise ValueError(f"plan {name!r} chooses the final techniques itself; drop {final!r}")
        from . import planner

        groups = list(planner.choose(queries, name))
        return groups, name
    if name == "separate":
        if final is not None:
            raise ValueError(f"plan 'separate' runs every query on its own Amortized MTA; drop {final!r}")
        return [Group((q,), "none", "mta") for q in queries], name
    if name not in PARTIALS:
        raise ValueError(f"unknown plan {name!r}; one of 'auto', 'weaveshare', 'triweave', 'separate', "
                         f"{', '.join(repr(p) for p in PARTIALS)} (optionally '+final')")
    from . import planner

    groups = []
    for qs in planner.share(queries):
        f = planner.best_final(qs) if final is None else _resolve_final(final, qs)
        groups.append(Group(qs, name, f, planner.estimate(qs, name, f)))
    label = name if final is None else f"{name}+{groups[0].final if len(groups) == 1 else final}"
    return groups, label


def _check_groups(queries: list, groups: list) -> None:
    """A planner's groups must cover every query once and be executable."""
    seen = []
    for g in groups:
        if not isinstance(g, Group) or not g.queries:
            raise TypeError(f"planner returned {g!r}, not a non-empty Group")
        if g.final == "mta":
            if len(g.queries) != 1:
                raise ValueError(f"a separate group holds one query: {g!r}")
        else:
            if g.partial not in PARTIALS:
                raise ValueError(f"unknown partial technique in {g!r}")
            if len({sharing_key(q) for q in g.queries}) != 1:
                raise ValueError(f"{g!r} mixes queries that cannot share partials")
            if g.final not in applicable_finals(g.queries):
                raise ValueError(f"final technique {g.final!r} cannot serve {g!r}")
        seen.extend(g.queries)
    if sorted(id(q) for q in seen) != sorted(id(q) for q in queries):
        raise ValueError("the plan's groups must hold every query exactly once")


class SharedWindows:
    """``SharedWindows(queries, *, time=None, plan="auto", store=None,
    window_id=None, **options)``: one stream, many :class:`~mta.Query`.

    * ``push(raw) -> list[Result]``: every window this element completes,
      ordered by end, then by the queries' order;
    * ``flush(until=None) -> list[Result]``: the periodic windows ending at
      or before ``until`` (all that hold elements when None), final after;
    * ``query(name)``: the current aggregate of that query's window: the
      window ending at the newest element (per-element queries) or the one
      the newest element falls in (periodic ones);
    * ``plan``: the :class:`~mta.multi.plan.Plan` being run (print it).

    ``time(raw)`` is an element's time (needed by ``range=`` queries);
    times must not decrease.  ``plan`` is ``"auto"``, ``"weaveshare"``,
    ``"triweave"``, ``"separate"``, or a partial technique (``"panes"``,
    ``"pairs"``, ``"cutty"``) with an optional final one, ``"pairs+bint"`` or
    ``("pairs", "bint")``.  ``store=`` and ``window_id=`` keep B-Int's level
    queues in a store (``options``: ``buffer_size``, ``cache_size``).

    If user code (time, lift, combine, lower) raises before anything
    changed, the object is intact; if it raises half-way, every later call
    raises :class:`~mta.EngineFailedError`.
    """

    def __init__(self, queries: Iterable[Query], *, time: Callable[[Any], Any] | None = None, plan="auto",
                 store=None, window_id: str | None = None, **options) -> None:
        if isinstance(queries, Query):
            raise TypeError("SharedWindows takes a list of Query, not one Query")
        queries = list(queries)
        if not queries:
            raise ValueError("SharedWindows needs at least one Query")
        names = set()
        for q in queries:
            if not isinstance(q, Query):
                raise TypeError(f"SharedWindows takes mta.Query objects, got {type(q).__name__}")
            if q.name in names:
                raise ValueError(f"two queries are named {q.name!r}; names must be unique")
            names.add(q.name)
        if time is not None and not callable(time):
            raise TypeError(f"time must be callable time(raw) -> number, got {type(time).__name__}")
        if time is None and any(not q.by_rows for q in queries):
            which = next(q.name for q in queries if not q.by_rows)
            raise TypeError(f"query {which!r} has a range: SharedWindows needs time= (raw -> time)")
        unknown = set(options) - {"buffer_size", "cache_size"}
        if unknown:
            raise TypeError(f"SharedWindows: unknown options {sorted(unknown)}")
        if store is None and (window_id is not None or options):
            raise TypeError("SharedWindows: window_id= and store options need a store=")
        if store is not None and (not isinstance(window_id, str) or not window_id):
            raise TypeError(f"SharedWindows: store= needs window_id=, a non-empty str (got {window_id!r})")
        groups, name = _resolve_plan(queries, plan)
        _check_groups(queries, groups)
        if store is not None and not any(g.final == "bint" for g in groups):
            raise ValueError("store= keeps B-Int's levels in the store: the plan has no B-Int tree "
                             f"(plan {name!r}); ask for e.g. plan='cutty+bint'")
        self.queries = queries
        self.plan = Plan(groups, name)
        self._time = time
        self._order = {q.name: i for i, q in enumerate(queries)}
        self._storages: list = []
        self._executors: list = []
        self._executor_of: dict = {}
        for i, g in enumerate(groups):
            if g.final == "mta":
                from .separate import Separate

                ex = Separate(g.queries[0])
            else:
                cls = final_class(g.final)
                if store is not None and g.final == "bint":
                    storage = store.open_window(f"{window_id}.tree{i}", engine="BInt", mutable_tail=0,
                                                buffer_size=options.get("buffer_size", 512),
                                                cache_size=options.get("cache_size", 512))
                    self._storages.append(storage)
                    if storage.levels:
                        raise MTAError(f"window {window_id!r} tree {i} has stored levels: resuming a "
                                       "SharedWindows is not supported; use a new window_id")
                    final = cls(g.queries[0].aggregator.monoid, new_level=storage.new_level)
                    final._storage = storage
                else:
                    final = cls(g.queries[0].aggregator.monoid)
                ex = Tree(g, final)
            ex.periodic = [q for q in g.queries if q.periodic]
            ex.per_element = [q for q in g.queries if not q.periodic]
            self._executors.append(ex)
            for q in g.queries:
                self._executor_of[q.name] = ex
        self._count = 0  # elements pushed
        self._last_time = None
        self._next: dict = {q.name: None for q in queries if q.periodic}
        self._failure: BaseException | None = None
        self._failed_in = ""

    # ------------------------------------------------------------ guard

    def _check_usable(self) -> None:
        """Raise :class:`EngineFailedError` after a failure or close; O(1)."""
        if self._failure is not None:
            if self._failed_in == "close":
                raise EngineFailedError(f"SharedWindows was closed: {self._failure}")
            raise EngineFailedError(
                f"SharedWindows is unusable: {self._failure!r} was raised during {self._failed_in}(), so its "
                "state may be inconsistent; rebuild it") from self._failure

    def _fail(self, exc: BaseException, where: str) -> None:
        """Mark the object failed; O(1)."""
        self._failure = exc
        self._failed_in = where

    # ------------------------------------------------------------ keys

    def _last_key(self, ex):
        """The newest element's key for ``ex``'s queries; O(1)."""
        return self._count - 1 if ex.by_rows else self._last_time

    def _report(self, ex, q: Query, threshold, out: list) -> None:
        """Report ``q``'s windows ending at ``e <= threshold`` (every window
        holding elements when None) that hold elements; skips runs of empty
        windows by jumping to the next element's first window.  One lookup
        per reported window, plus one per run of empty windows."""
        e = self._next[q.name]
        if e is None:
            return
        s, lag, w = q._s, q._lag, q._w
        cap = None if threshold is None else next_multiple(threshold, s)
        lower = q.aggregator.lower
        rank = self._order[q.name]
        while threshold is None or e <= threshold:
            value = ex.window(q, e - lag - w, e - lag, True)
            if value is not EMPTY:
                end = q.end_value(e)
                out.append((end, rank, Result(q.name, end, lower(value))))
                e += s
                continue
            x = ex.first_key(e - lag - w)
            if x is None:
                if cap is not None:
                    e = cap
                break
            e = max(e + s, next_multiple(x + lag, s))
            if cap is not None and e > cap:
                e = cap
        self._next[q.name] = e

    def _floor(self, ex):
        """The smallest key a future window (or lookup) of ``ex``'s queries
        may hold.  O(queries of the tree), no monoid call."""
        last = self._last_key(ex)
        floor = None
        for q in ex.queries:
            if q.periodic:
                e = next_multiple(last, q._s)
                nxt = self._next[q.name]
                if nxt is not None and nxt < e:
                    e = nxt
                f = e - q._lag - q._w
            else:
                f = last - q._lag - q._w
            if floor is None or f < floor:
                floor = f
        return floor

    # ------------------------------------------------------------ API

    def push(self, raw) -> list:
        """Add one element; returns the :class:`Result` of every window it
        completes.  Amortized cost per tree: one combine for the open partial
        plus the final technique's (see the plan)."""
        self._check_usable()
        t = None
        if self._time is not None and any(not ex.by_rows for ex in self._executors):
            t = self._time(raw)
            if isinstance(t, bool) or not isinstance(t, numbers.Real) or t != t:
                raise ArgumentRefused(f"time(raw) must give a real number, got {type(t).__name__} {t!r}")
            if self._last_time is not None and t < self._last_time:
                raise OutOfOrderError(f"element time {t!r} is older than the newest time {self._last_time!r}; "
                                      "elements must arrive in time order (nothing was changed)")
        values = [ex.lift(raw) for ex in self._executors]
        out: list = []
        index = self._count
        try:
            first = index == 0
            for ex, v in zip(self._executors, values):
                key = index if ex.by_rows else t
                if first:
                    for q in ex.periodic:
                        self._next[q.name] = next_multiple(key + q._lag, q._s)
                if not ex.by_rows:
                    for q in ex.periodic:
                        self._report(ex, q, key, out)
                ex.add(key, v)
                if ex.by_rows:
                    for q in ex.periodic:
                        self._report(ex, q, key + 1, out)
                for q in ex.per_element:
                    value = ex.window(q, key - q._lag - q._w, key - q._lag, False)
                    agg = q.aggregator
                    out.append((key, self._order[q.name],
                                Result(q.name, key, agg.lower(agg.monoid.identity if value is EMPTY else value))))
            self._count = index + 1
            if t is not None:
                self._last_time = t
            for ex in self._executors:
                ex.evict(self._floor(ex))
        except BaseException as exc:
            self._fail(exc, "push")
            raise
        out.sort(key=lambda r: (r[0], r[1]))
        return [r[2] for r in out]

    def flush(self, until=None) -> list:
        """Report the periodic windows ending at or before ``until`` (every
        window holding elements when None) not reported yet; they are final:
        elements pushed later never change them.  One lookup per reported
        window (plus one per run of empty ones)."""
        self._check_usable()
        if until is not None and (isinstance(until, bool) or not isinstance(until, numbers.Real) or until != until):
            raise ArgumentRefused(f"flush(until) needs a real number or None, got {type(until).__name__} {until!r}")
        out: list = []
        if not self._count:
            return out
        try:
            for ex in self._executors:
                for q in ex.periodic:
                    threshold = None if until is None else (until + 1 if q.by_rows else until)
                    self._report(ex, q, threshold, out)
                ex.evict(self._floor(ex))
        except BaseException as exc:
            self._fail(exc, "flush")
            raise
        out.sort(key=lambda r: (r[0], r[1]))
        return [r[2] for r in out]

    def query(self, name: str):
        """The current aggregate of query ``name``'s window (the lookup
        model): for a per-element query the window ending at the newest
        element, for a periodic one the window the newest element falls in
        (its end is the first multiple of the slide after the newest key),
        over the elements pushed so far.  One lookup of the query's final
        technique."""
        self._check_usable()
        if name not in self._executor_of:
            raise UnknownQuery(f"no query named {name!r}; queries: {sorted(self._executor_of)}")
        ex = self._executor_of[name]
        q = next(q for q in ex.queries if q.name == name)
        agg = q.aggregator
        if not self._count:
            return agg.lower(agg.monoid.identity)
        last = self._last_key(ex)
        try:
            if q.periodic:
                e = next_multiple(last, q._s)
                value = ex.window(q, e - q._lag - q._w, e - q._lag, True)
            else:
                value = ex.window(q, last - q._lag - q._w, last - q._lag, False)
            return agg.lower(agg.monoid.identity if value is EMPTY else value)
        except BaseException as exc:
            self._fail(exc, "query")
            raise

    def __len__(self) -> int:
        """Elements pushed so far.  O(1)."""
        return self._count

    # ------------------------------------------------------------ store

    def close(self, *, delete: bool = False) -> None:
        """Wait for the store's background I/O; ``delete=True`` also removes
        the trees' levels from the store.  Unusable afterwards when
        store-backed.  O(levels) plus the store's I/O."""
        if not self._storages or self._failed_in == "close":
            return
        for ex, storage in zip([e for e in self._executors if getattr(e, "final", None) is not None
                                and getattr(e.final, "_storage", None) is not None], self._storages):
            storage.close(ex.final.levels, delete=delete)
        self._fail(MTAError("closed"), "close")

    @property
    def store_stats(self) -> list:
        """Each store-backed tree's store counters.  O(trees)."""
        return [s.stats for s in self._storages]

    def __repr__(self) -> str:
        """O(1)."""
        return f"SharedWindows({len(self.queries)} queries, plan={self.plan.name!r}, elements={self._count})"
