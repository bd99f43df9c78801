"""Every engine configuration, once: the benchmarks' and the tests' table.

Every engine is built as ``spec(monoid, wsp)`` (or ``spec.build(monoid,
wsp)``), i.e. ``spec.cls(monoid, wsp, **spec.options)``, and has the shared
interface of :mod:`mta.engine` (insert, evict, enforce, query, push, len).
``needs`` names the monoid flag an engine requires: None (any monoid),
``"inverse"``, ``"selective"`` or ``"inverse|selective"`` (either one:
SlickDeque picks its Inv variant for an invertible monoid, its NonInv
variant for a selective one).

:data:`ENGINES` is what the benchmark driver runs (each experiment calls
:func:`applicable` with its monoid to pick the engines that can run it);
``tests/strategies.py`` runs every configuration of :data:`CONFIGURATIONS`
with a single requirement (SlickDeque's two variants rather than its choice
between them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mta.amortized_mta import AmortizedMTA
from mta.baselines.daba import DABA
from mta.baselines.flatfat import FlatFAT
from mta.baselines.flatfit import FlatFIT
from mta.baselines.recalc import Recalc
from mta.baselines.slickdeque import SlickDeque
from mta.baselines.subtract_on_evict import SubtractOnEvict
from mta.baselines.two_stacks import TwoStacks
from mta.log_mta import LogMTA
from mta.monoid import Monoid
from mta.native import AVAILABLE as NATIVE_AVAILABLE, NativeAmortizedMTA, NativeLogMTA


@dataclass(frozen=True, eq=False)
class EngineSpec:
    """One engine configuration: ``cls(monoid, wsp, **options)``."""

    name: str
    cls: type
    options: dict[str, Any] = field(default_factory=dict)
    #: None (any monoid), "inverse", "selective" or "inverse|selective" (either).
    needs: str | None = None
    #: Monoid calls per update on a constant window (from the papers).
    complexity: str = ""
    description: str = ""

    def __call__(self, monoid: Monoid, wsp=None):
        return self.cls(monoid, wsp, **self.options)

    def build(self, monoid: Monoid, wsp):
        return self(monoid, wsp)

    def supports(self, monoid: Monoid) -> bool:
        if self.needs is None:
            return True
        flags = {"inverse": monoid.inverse is not None, "selective": bool(monoid.selective)}
        return any(flags[r] for r in self.needs.split("|"))

    def why_not(self, monoid: Monoid) -> str:
        """Why :meth:`supports` is False (empty when it is True)."""
        if self.supports(monoid):
            return ""
        need = " or ".join(self.needs.split("|"))
        return f"needs an {need} monoid; {monoid.name} is not"

    def __repr__(self) -> str:
        return self.name


#: Every configuration, in the order tables and plots list the engines.
CONFIGURATIONS: tuple[EngineSpec, ...] = (
    EngineSpec("AMTA", AmortizedMTA, complexity="O(1) amortized, O(log n) worst; bulk O(log n)",
               description="Amortized MTA (paper section 4.2), in-memory level queues"),
    EngineSpec("LMTA", LogMTA, complexity="O(log n); bulk O(log n)",
               description="Log MTA (paper section 4.1), in-memory level queues"),
    EngineSpec("DABA", DABA, {"cached": True}, complexity="O(1) worst case",
               description="De-Amortized Banker's Aggregator, cached (DABA paper Fig. 17)"),
    EngineSpec("DABA-uncached", DABA, {"cached": False}, complexity="O(1) worst case",
               description="De-Amortized Banker's Aggregator, no query cache"),
    EngineSpec("TwoStacks", TwoStacks, complexity="O(1) amortized, O(n) worst",
               description="Two-Stacks with query cache (DABA paper section 4)"),
    EngineSpec("FlatFAT", FlatFAT, complexity="O(log n)",
               description="Flat Fixed-sized Aggregator (Reactive Aggregator), resizable"),
    EngineSpec("FlatFIT", FlatFIT, complexity="O(1) amortized, O(n) worst",
               description="Flat and Fast Index Traverser, resizable"),
    EngineSpec("SlickDeque", SlickDeque, {"variant": "auto"}, "inverse|selective",
               "O(1) (Inv), O(1) amortized (NonInv)",
               "SlickDeque: Inv variant for invertible monoids, NonInv for selective ones"),
    EngineSpec("SlickDeque-inv", SlickDeque, {"variant": "inv"}, "inverse", "O(1)", "SlickDeque, Inv variant"),
    EngineSpec("SlickDeque-noninv", SlickDeque, {"variant": "noninv"}, "selective", "O(1) amortized",
               "SlickDeque, NonInv variant"),
    EngineSpec("Recalc", Recalc, complexity="O(n) per eviction",
               description="Recalculate from scratch with a result cache (MTA paper's Naive)"),
    EngineSpec("SubtractOnEvict", SubtractOnEvict, needs="inverse", complexity="O(1)",
               description="Running aggregate, inverse on evict (DABA paper Fig. 19)"),
)
if NATIVE_AVAILABLE:  # the compiled core, when built (mta.native)
    CONFIGURATIONS += (
        EngineSpec("AMTA-native", NativeAmortizedMTA, complexity="O(1) amortized, O(log n) worst; bulk O(log n)",
                   description="Amortized MTA with its core compiled (mta/_native.c), in-memory level queues"),
        EngineSpec("LMTA-native", NativeLogMTA, complexity="O(log n); bulk O(log n)",
                   description="Log MTA with its core compiled (mta/_native.c), in-memory level queues"),
    )
BY_NAME: dict[str, EngineSpec] = {s.name: s for s in CONFIGURATIONS}

#: What the benchmark driver runs: one configuration per engine.
ENGINES: dict[str, EngineSpec] = {
    name: BY_NAME[name]
    for name in ("AMTA", "LMTA", "DABA", "TwoStacks", "FlatFAT", "FlatFIT", "SlickDeque", "Recalc", "SubtractOnEvict")
}

#: Engines with O(log n) bulk eviction.
MTA_ENGINES = ("AMTA", "LMTA")


def applicable(monoid: Monoid, names=None) -> tuple[list[EngineSpec], dict[str, str]]:
    """The engines (of ``names``, default all) that support ``monoid``, and
    ``{name: reason}`` for the ones that do not."""
    chosen, skipped = [], {}
    for name in names or ENGINES:
        spec = ENGINES[name]
        if spec.supports(monoid):
            chosen.append(spec)
        else:
            skipped[name] = spec.why_not(monoid)
    return chosen, skipped


def class_name(engine) -> str:
    """The concrete class (e.g. SlickDequeInv), for the JSON records."""
    return type(engine).__name__


def parse_engine_list(text: str | None) -> list[str] | None:
    """``"AMTA,DABA"`` -> ``["AMTA", "DABA"]`` (None: all), case-insensitive."""
    if not text:
        return None
    lookup = {n.lower(): n for n in ENGINES}
    names = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if part.lower() not in lookup:
            raise ValueError(f"unknown engine {part!r}; known: {', '.join(ENGINES)}")
        names.append(lookup[part.lower()])
    return names
