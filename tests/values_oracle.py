"""The brute-force oracle of several value columns (tests/test_spark_values.py,
tests/test_values.py): each row's window in plain Python over (cpu, mem)
tuples, ready aggregations by the column they read ("max(cpu)") and two
user aggregators whose lift takes the row's tuple, a VWAP and a
non-commutative join (a reordered, lost or repeated row shows).
"""

from __future__ import annotations

import math
import sys

from mta import Aggregator, Monoid
from tests.spark_fixtures import _close, ship_by_value

ship_by_value(sys.modules[__name__])

SCHEMA = "id long, k string, t double, cpu double, mem long"
BIG = 2 ** 53 + 1  # a long that a double would round: values must stay exact


def _mean(xs):
    return math.fsum(xs) / len(xs)


def _stddev(xs):
    if len(xs) < 2:
        return None
    m = _mean(xs)
    return math.sqrt(math.fsum((x - m) ** 2 for x in xs) / (len(xs) - 1))


READY = {"max": max, "min": min, "sum": sum, "count": len, "mean": _mean, "first": lambda xs: xs[0],
         "last": lambda xs: xs[-1], "stddev": _stddev}
COLUMNS = ("cpu", "mem")


def vwap_oracle(window):
    volume = sum(m for _, m in window)
    return math.fsum(c * m for c, m in window) / volume if volume else None


def joined_oracle(window):
    return ";".join(f"{c!r}/{m!r}" for c, m in window)


USER = {"vwap": vwap_oracle, "joined": joined_oracle}


def oracle_of(agg: str):
    """The brute-force function of an output column's aggregation over a
    window of (cpu, mem) tuples: "max(cpu)", or a user one by name."""
    if agg in USER:
        return USER[agg]
    name, column = agg[:-1].split("(")
    at = COLUMNS.index(column)
    return lambda window: READY[name]([row[at] for row in window])


def bad(row) -> bool:
    return any(row[c] is None or (isinstance(row[c], float) and math.isnan(row[c])) for c in COLUMNS)


def expected(rows, outputs: dict, *, range=None, count=None) -> dict:
    """Row id -> {output column: value}: ``outputs`` maps each output
    column to its aggregation ("max(cpu)", "vwap"); a row's window is its
    key's rows at or before it in (time, arrival) order, with time in
    ``(t - range, t]`` or the newest ``count``; rows with a null or NaN in
    either value column get None and are in no window."""
    by_key, out = {}, {}
    for arrival, r in enumerate(rows):
        if bad(r):
            out[r["id"]] = {**{c: None for c in outputs}, "rejected": "null or NaN value"}
        else:
            by_key.setdefault(r["k"], []).append((r["t"], arrival, (r["cpu"], r["mem"]), r["id"]))
    for items in by_key.values():
        items.sort(key=lambda x: (x[0], x[1]))
        for pos, (t, _, _, rid) in enumerate(items):
            before = items[: pos + 1]
            window = [x[2] for x in (before[-count:] if count is not None else before if range is None
                                     else [x for x in before if x[0] > t - range])]
            out[rid] = {**{c: oracle_of(a)(window) for c, a in outputs.items()}, "rejected": None}
    return out


def random_rows(rng, *, keys=5, per_key=(10, 40), nulls=0.0, strict=False):
    rows = []
    for i in range(keys):
        t = 0.0
        for _ in range(rng.randint(*per_key)):
            t += rng.choice([1, 2, 3, 7, 20]) if strict else rng.choice([0, 0, 1, 2, 3, 7, 20])
            cpu = rng.choice([rng.randint(-3, 9) * 1.0, round(rng.uniform(0.5, 99), 2)])
            mem = rng.choice([rng.randint(1, 9), BIG, rng.randint(1, 1000)])
            if rng.random() < nulls:
                if rng.random() < 0.5:
                    cpu = rng.choice([None, float("nan")])
                else:
                    mem = None
            rows.append({"k": f"k{i}", "t": t, "cpu": cpu, "mem": mem})
    rng.shuffle(rows)
    for j, r in enumerate(rows):
        r["id"] = j
    return rows


def assert_rows(got, rows, want, outputs, *, flag=False):
    inputs = {r["id"]: r for r in rows}
    got = [g.asDict() for g in got]
    assert sorted(g["id"] for g in got) == sorted(inputs)
    wrong = []
    for g in got:
        w = want[g["id"]]
        for c in list(outputs) + (["rejected"] if flag else []):
            if c == "rejected":
                ok = (g[c] is None) == (w[c] is None) and (w[c] is None or w[c] in g[c])
            else:
                ok = _close(g[c], w[c]) and (type(w[c]) is not int or g[c] == w[c])
            if not ok:
                wrong.append((g["id"], g["k"], g["t"], c, g[c], w[c]))
    assert not wrong, f"{len(wrong)} mismatches, first (id, k, t, column, got, want): {wrong[:8]}"


# -- user aggregators over the row's tuple ------------------------------------------------
def vwap() -> Aggregator:
    """sum(price * volume) / sum(volume), over (price, volume) tuples."""
    return Aggregator(Monoid(lambda a, b: (a[0] + b[0], a[1] + b[1]), (0.0, 0), name="pv"),
                      lambda row: (row[0] * row[1], row[1]), lambda s: s[0] / s[1] if s[1] else None, name="vwap")


def joined() -> Aggregator:
    """The window's tuples joined in order: not commutative, so a reordered,
    lost or repeated row shows."""
    return Aggregator(Monoid(lambda a, b: a + ";" + b if a and b else a or b, "", name="join"),
                      lambda row: f"{row[0]!r}/{row[1]!r}", name="joined")



def names_of(aggs) -> dict:
    """Output column -> aggregation for ready ones: {"max_cpu": "max(cpu)"}."""
    return {a.replace("(", "_").rstrip(")"): a for a in aggs}
