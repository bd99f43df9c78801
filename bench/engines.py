"""The engines the benchmark driver knows: name -> constructor + requirements.

Every engine is built as ``spec.factory(monoid, wsp)`` and has the shared
interface of :mod:`mta.engine` (insert, evict, enforce, query, push, len).
``requires`` lists the monoid flags an engine needs; ``"inverse|selective"``
means either one (SlickDeque picks its Inv variant for an invertible monoid,
its NonInv variant for a selective one).  Each experiment calls
:func:`applicable` with its monoid to pick the engines that can run it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

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


@dataclass(frozen=True)
class EngineSpec:
    name: str
    factory: Callable[[Monoid, Any], Any]
    #: "" (any monoid), "inverse", "selective" or "inverse|selective" (either).
    requires: str = ""
    #: Monoid calls per update on a constant window (from the papers).
    complexity: str = ""
    description: str = ""

    def supports(self, monoid: Monoid) -> bool:
        if not self.requires:
            return True
        flags = {"inverse": monoid.inverse is not None, "selective": bool(monoid.selective)}
        return any(flags[r] for r in self.requires.split("|"))

    def why_not(self, monoid: Monoid) -> str:
        """Why :meth:`supports` is False (empty when it is True)."""
        if self.supports(monoid):
            return ""
        need = " or ".join(self.requires.split("|"))
        return f"needs an {need} monoid; {monoid.name} is not"

    def build(self, monoid: Monoid, wsp):
        return self.factory(monoid, wsp)


def _daba(monoid, wsp):
    return DABA(monoid, wsp, cached=True)


def _slickdeque(monoid, wsp):
    return SlickDeque(monoid, wsp, variant="auto")


#: Registry, in the order tables and plots list the engines.
ENGINES: dict[str, EngineSpec] = {
    s.name: s
    for s in (
        EngineSpec("AMTA", AmortizedMTA, "", "O(1) amortized, O(log n) worst; bulk O(log n)",
                   "Amortized MTA (paper section 4.2), in-memory level queues"),
        EngineSpec("LMTA", LogMTA, "", "O(log n); bulk O(log n)",
                   "Log MTA (paper section 4.1), in-memory level queues"),
        EngineSpec("DABA", _daba, "", "O(1) worst case",
                   "De-Amortized Banker's Aggregator, cached (DABA paper Fig. 17)"),
        EngineSpec("TwoStacks", TwoStacks, "", "O(1) amortized, O(n) worst",
                   "Two-Stacks with query cache (DABA paper section 4)"),
        EngineSpec("FlatFAT", FlatFAT, "", "O(log n)",
                   "Flat Fixed-sized Aggregator (Reactive Aggregator), resizable"),
        EngineSpec("FlatFIT", FlatFIT, "", "O(1) amortized, O(n) worst",
                   "Flat and Fast Index Traverser, resizable"),
        EngineSpec("SlickDeque", _slickdeque, "inverse|selective", "O(1) (Inv), O(1) amortized (NonInv)",
                   "SlickDeque: Inv variant for invertible monoids, NonInv for selective ones"),
        EngineSpec("Recalc", Recalc, "", "O(n) per eviction",
                   "Recalculate from scratch with a result cache (MTA paper's Naive)"),
        EngineSpec("SubtractOnEvict", SubtractOnEvict, "inverse", "O(1)",
                   "Running aggregate, inverse on evict (DABA paper Fig. 19)"),
    )
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
