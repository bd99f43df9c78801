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
element (Cutty's reading of the current partial).  Trees of a TriWeave plan
take their input from one :class:`~.shared_slicer.SharedSlicer` instead of
slicing the stream each, and also read its open fragment.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Callable, Iterable

from ..errors import EngineFailedError, MTAError, OperationRefused
from ..markers import EMPTY
from ..storage import DEFAULT_BUFFER_SIZE, DEFAULT_CACHE_SIZE
from .memory import EVICT_EVERY  # pushes between two evictions, in memory: its held estimate counts them
from .plan import Plan, final_class
from . import compiled
from .query import OutOfOrderError, Query, exact
from .resolve import check_groups, check_rate, resolve_plan
from .schedule import Schedule, is_double, next_multiple
from .shared_slicer import SharedSlicer
from .tree import Tree


class ArgumentRefused(OperationRefused, TypeError):
    """A bad argument to ``push``, ``flush`` or ``query``: refused before any
    change."""


class UnknownQuery(OperationRefused, KeyError):
    """``query(name)`` with a name no query has."""


class SharedWindows:
    """``SharedWindows(queries, *, time=None, plan="auto", store=None,
    window_id=None, **options)``: one stream, many :class:`~mta.Query`.

    * ``push(raw) -> list[Result]``: every window this element completes,
      ordered by end, then by the queries' order;
    * ``flush(until=None) -> list[Result]``: the periodic windows ending at
      or before ``until`` (all that hold elements when None), final after;
    * ``late``: elements pushed after a flush into a window it had made
      final (left out of that window, counted in every later one);
    * ``query(name)``: the current aggregate of that query's window: the
      window ending at the newest element (per-element queries) or the one
      the newest element falls in (periodic ones);
    * ``plan``: the :class:`~mta.multi.plan.Plan` being run (print it).

    ``time(raw)`` is an element's time (needed by ``range=`` queries);
    times must not decrease.  ``plan`` is ``"auto"``, ``"weaveshare"``,
    ``"triweave"``, ``"separate"``, or a partial technique (``"panes"``,
    ``"pairs"``, ``"cutty"``) with an optional final one, ``"pairs+bint"`` or
    ``("pairs", "bint")``, or groups already made (a :class:`Plan` or a list
    of :class:`Group`).  ``store=`` and ``window_id=`` keep B-Int's level
    queues in a store (``options``: ``buffer_size``, ``cache_size``).
    ``rate`` is the expected elements per time unit of the ``range=``
    queries, a finite number > 0 (1 when None): the planners price plans
    with it (``rows=`` queries count elements and ignore it).

    If user code (time, lift, combine, lower) raises before anything
    changed, the object is intact; if it raises half-way, every later call
    raises :class:`~mta.EngineFailedError`.
    """

    def __init__(self, queries: Iterable[Query], *, time: Callable[[Any], Any] | None = None, plan="auto",
                 rate=None, store=None, window_id: str | None = None, **options) -> None:
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
        groups, name = resolve_plan(queries, plan, check_rate(rate))
        check_groups(queries, groups)
        if store is not None and not any(g.final == "bint" for g in groups):
            raise ValueError("store= keeps B-Int's levels in the store: the plan has no B-Int tree "
                             f"(plan {name!r}); ask for e.g. plan='cutty+bint'")
        self.queries = queries
        self.plan = Plan(groups, name)
        self._time = time
        self._order = {q.name: i for i, q in enumerate(queries)}
        self._stored: list = []  # (window storage, final aggregator) of each store-backed tree
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
                                                buffer_size=options.get("buffer_size", DEFAULT_BUFFER_SIZE),
                                                cache_size=options.get("cache_size", DEFAULT_CACHE_SIZE))
                    if storage.levels:
                        raise MTAError(f"window {window_id!r} tree {i} has stored levels: resuming a "
                                       "SharedWindows is not supported; use a new window_id")
                    final = cls(g.queries[0].aggregator.monoid, new_level=storage.new_level)
                    self._stored.append((storage, final))
                else:
                    final = cls(g.queries[0].aggregator.monoid)
                ex = Tree(g, final)
            self._executors.append(ex)
        # where it applies, the compiled core holds the trees and runs push
        # (mta.multi.compiled); the Python trees stay the reference
        self._core = None
        why = "store" if store is not None else compiled.why_not(
            self._executors, queries, [g.slicer for g in groups if g.slicer is not None])
        if not why:
            self._executors = [compiled.CompiledTree(t, i) for i, t in enumerate(self._executors)]
        self.compiled_why_not = why
        for g, ex in zip(groups, self._executors):
            for q in g.queries:
                self._executor_of[q.name] = ex
        # the inputs: each executor slicing its own, or TriWeave's shared slicers
        self._feeders: list = []
        self._slicers: list = []
        fed: dict = {}
        for g, ex in zip(groups, self._executors):
            if g.slicer is None:
                self._feeders.append(ex)
            else:
                fed.setdefault(id(g.slicer), []).append(ex)
        for trees in fed.values():
            union = trees[0].edges
            for t in trees[1:]:
                union = union | t.edges
            slicer = SharedSlicer(union, trees, trees[0].monoid, trees[0].lift, trees[0].by_rows)
            for t in trees:
                t.slicer = slicer
            self._feeders.append(slicer)
            self._slicers.append(slicer)
        self._count = 0  # elements pushed
        self._last_time = None  # the newest time as given (for messages)
        self._last_held = None  # and as the executors hold it (see push)
        self._doubles = True  # every time key held is a double (Spec.answer)
        self.late = 0
        # after a flush: the time (index) below which a pushed element may
        # fall in a window the flush made final (None: none can)
        self._late_time = self._late_rows = None
        self._schedule = Schedule(self._executors, self._order)
        self._timed = time is not None and any(not ex.by_rows for ex in self._executors)
        self._rows = any(ex.by_rows for ex in self._executors)
        self._lifts: list = []  # (lift, feeders using it): each distinct lift is called once per element
        for f in self._feeders:
            for lift, users in self._lifts:
                if lift is f.lift:
                    users.append(f)
                    break
            else:
                self._lifts.append((f.lift, [f]))
        self._failure: BaseException | None = None
        self._failed_in = ""
        if not why:
            self._core = compiled.core_for(self._executors, self._schedule, EVICT_EVERY)
            self._lift_compiled = compiled.plain_lift(self._executors[0].lift)

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
        """The newest element's key for ``ex``'s queries, exact; O(1)."""
        return self._count - 1 if ex.by_rows else exact(self._last_held)

    def _evict(self) -> None:
        """Each executor forgets what no future window reads.  O(queries)
        plus the final techniques' evictions."""
        floor = self._schedule.floor
        for ex in self._executors:
            ex.evict(floor(ex, self._last_key(ex)))

    # ------------------------------------------------------------ API

    def push(self, raw) -> list:
        """Add one element; returns the :class:`Result` of every window it
        completes.  Amortized cost per tree: one combine for the open partial
        plus the final technique's (see the plan)."""
        core = self._core
        if core is not None:  # the compiled push (mta.multi.compiled): the same results and failure rule
            if self._failure is not None:
                self._check_usable()
            v = raw if self._lift_compiled is None else self._lift_compiled(raw)  # before any change
            if self._late_rows is not None:
                return self._push_after_flush(core, v)
            try:
                return core.push(v)
            except BaseException as exc:
                self._fail(exc, "push")
                raise
        self._check_usable()
        t = key = None
        if self._timed:
            t = self._time(raw)
            if not _finite(t):
                raise ArgumentRefused(f"time(raw) must give a finite real number, got {type(t).__name__} {t!r}")
            # the key the executors hold: a float, an int or a Fraction, which
            # compare with each other exactly (bounds are derived with
            # mta.multi.query.exact)
            key = t if type(t) is int else float(t) if isinstance(t, float) else exact(t)
            if self._last_held is not None and key < self._last_held:
                raise OutOfOrderError(f"element time {t!r} is older than the newest time {self._last_time!r}; "
                                      "elements must arrive in time order (nothing was changed)")
            if type(key) is not float and self._doubles and not is_double(key):
                self._doubles = False  # a key no double equals is held: exact bounds from now on
        lifted = [(lift(raw), users) for lift, users in self._lifts]
        out: list = []
        index = self._count
        late = False
        if self._late_time is not None:
            late = key < self._late_time and self._falls_in_final(key, False)
        if self._late_rows is not None:
            late = (index < self._late_rows and self._falls_in_final(index, True)) or late
        schedule = self._schedule
        try:
            if index == 0:
                schedule.start(index, key)
            # time windows ending at or before t are reported before the
            # element enters any tree (a shared slicer feeds several at once)
            if t is not None:
                for f in self._slicers:
                    if not f.by_rows:
                        f.advance(key)
                schedule.due(key, False, out)
            for v, users in lifted:
                for f in users:
                    f.add(index if f.by_rows else key, v)
            if self._rows:
                schedule.due(index + 1, True, out)
            for spec in schedule.per_element:
                if spec.by_rows:
                    spec.answer(index, index, True, out)
                else:
                    spec.answer(key, t, self._doubles, out)
            self._count = index + 1
            if t is not None:
                self._last_time = t
                self._last_held = key
            if late:
                self.late += 1
            if self._late_time is not None and key >= self._late_time:
                self._late_time = None
            if self._late_rows is not None and index + 1 >= self._late_rows:
                self._late_rows = None
            if index % EVICT_EVERY == 0:
                self._evict()
        except BaseException as exc:
            self._fail(exc, "push")
            raise
        out.sort()
        return [r[2] for r in out]

    def _push_after_flush(self, core, v) -> list:
        """The compiled push while an element may fall in a window a flush
        made final: counted in :attr:`late`.  O(periodic specs) more."""
        index = core.count
        late = index < self._late_rows and self._falls_in_final(index, True)
        try:
            out = core.push(v)
        except BaseException as exc:
            self._fail(exc, "push")
            raise
        if late:
            self.late += 1
        if index + 1 >= self._late_rows:
            self._late_rows = None
        return out

    def _falls_in_final(self, key, by_rows: bool) -> bool:
        """Whether an element with ``key`` (its time, or its index for
        rows specs) lies in a window a flush has made final: one ending
        before its spec's next end.  O(periodic specs)."""
        key = exact(key)
        for spec in self._schedule.specs:
            if spec.periodic and spec.by_rows == by_rows and spec.next is not None:
                first = spec.first_end(key)
                if first < spec.next and first <= key + spec.span:
                    return True
        return False

    def _mark_final(self) -> None:
        """After a flush: the keys below which a pushed element may fall in
        a window now final (a spec's windows ending before its next end);
        an element at or past ``next - slide - lag`` cannot.  O(specs)."""
        for spec in self._schedule.specs:
            if not spec.periodic or spec.next is None:
                continue
            below = spec.next - spec.slide - spec.lag
            if spec.by_rows:
                if below > self._count and (self._late_rows is None or below > self._late_rows):
                    self._late_rows = below
            elif self._last_held is not None and below > self._last_held and (
                    self._late_time is None or below > self._late_time):
                self._late_time = below

    def _sync(self) -> None:
        """With the compiled core: its count, and each spec's next end, for
        the pure-Python flush and query.  O(specs)."""
        core = self._core
        self._count = core.count
        if self._count:
            for spec, e in zip(self._schedule.specs, core.nexts()):
                spec.next = e

    def flush(self, until=None) -> list:
        """Report the periodic windows ending at or before ``until`` (every
        window holding elements when None) not reported yet; they are final:
        elements pushed later never change them (one that falls in such a
        window is counted in :attr:`late`); before the first element it does
        nothing (no window has started).  One lookup per reported window
        (plus one per run of empty ones)."""
        self._check_usable()
        if until is not None and not _finite(until):
            raise ArgumentRefused(f"flush(until) needs a finite real number or None, got {type(until).__name__} "
                                  f"{until!r}")
        out: list = []
        if self._core is not None:
            self._sync()
        if not self._count:
            return out
        try:
            self._schedule.flush(until, out)
            self._mark_final()
            if self._core is not None:
                self._core.set_nexts([min(s.next, compiled.NATIVE_LIMIT) for s in self._schedule.specs])
                self._core.evict()
            else:
                self._evict()
        except BaseException as exc:
            self._fail(exc, "flush")
            raise
        out.sort()
        return [r[2] for r in out]

    def query(self, name: str):
        """The current aggregate of query ``name``'s window (the lookup
        model): for a per-element query the window ending at the newest
        element, for a periodic one the window ending at the first multiple
        of the slide after the newest key (the one the newest element falls
        in; with a lag, that window shifted back by it), over the elements
        pushed so far.  One lookup of the query's final
        technique."""
        self._check_usable()
        if self._core is not None:
            self._sync()
        if not isinstance(name, str):  # before the lookup: an unhashable name would raise a plain TypeError
            raise ArgumentRefused(f"query(name) needs a query's name, a str, got {type(name).__name__} {name!r}")
        if name not in self._executor_of:
            raise UnknownQuery(f"no query named {name!r}; queries: {sorted(self._executor_of)}")
        ex = self._executor_of[name]
        q = next(q for q in ex.queries if q.name == name)
        agg = q.aggregator
        spec = self._schedule.spec_of[name]
        if not self._count:
            return agg.lower(agg.monoid.identity)
        last = self._last_key(ex)
        try:
            if not spec.periodic:  # the value push reported for the newest element
                out: list = []
                spec.answer(last, None, self._doubles, out)
                return out[0][2].value
            value = spec.ending_at(next_multiple(last, spec.slide))
            return agg.lower(agg.monoid.identity if value is EMPTY else value)
        except BaseException as exc:
            self._fail(exc, "query")
            raise

    def __len__(self) -> int:
        """Elements pushed so far.  O(1)."""
        return self._count if self._core is None else self._core.count

    # ------------------------------------------------------------ store

    def close(self, *, delete: bool = False) -> None:
        """Wait for the store's background I/O; ``delete=True`` also removes
        the trees' levels from the store.  Unusable afterwards when
        store-backed.  O(levels) plus the store's I/O."""
        if not self._stored or self._failed_in == "close":
            return
        for storage, final in self._stored:
            storage.close(final.levels, delete=delete)
        self._fail(MTAError("closed"), "close")

    @property
    def store_stats(self) -> list:
        """Each store-backed tree's store counters.  O(trees)."""
        return [storage.stats for storage, _ in self._stored]

    def __repr__(self) -> str:
        """O(1)."""
        return f"SharedWindows({len(self.queries)} queries, plan={self.plan.name!r}, elements={len(self)})"


def _finite(x) -> bool:
    """A time or bound the windows can place: a real number, neither a
    bool, NaN nor infinite (a window end is a multiple of the slide)."""
    return not isinstance(x, bool) and isinstance(x, numbers.Real) and x == x and x not in (math.inf, -math.inf)
