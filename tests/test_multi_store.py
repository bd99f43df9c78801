"""B-Int trees whose level queues live in a store (memory://, tiny buffers
and caches so that pairs go through the store and come back from it)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mta import Query, SharedWindows
from stores import open_store
from tests.multi_oracle import MultiOracle
from tests.strategies import sane_settings
from tests.test_multi_queries import CONCAT_AGG, Spec, operations, query_sets, run


@pytest.mark.parametrize("plan", ["cutty+bint", "pairs+bint", "panes+bint"])
@sane_settings(40)
@given(data=st.data())
def test_store_backed_bint_against_oracle(plan, data):
    queries = data.draw(query_sets([CONCAT_AGG], max_queries=4), label="queries")
    ops = data.draw(operations(st.lists(st.integers(0, 9), max_size=2).map(tuple), max_ops=40), label="ops")
    run(queries, ops, Spec("concat", [CONCAT_AGG], None), plan, store=open_store("memory://"), window_id="w",
        buffer_size=1, cache_size=1)


def test_store_traffic_and_close():
    store = open_store("memory://")
    qs = [Query("a", CONCAT_AGG, rows=50), Query("b", CONCAT_AGG, rows=200, slide=10, lag=20)]
    shared = SharedWindows(qs, plan="cutty+bint", store=store, window_id="multi", buffer_size=2, cache_size=2)
    oracle = MultiOracle(qs)
    for k in range(600):
        raw = (None, (k,))
        assert shared.push(raw) == oracle.push(raw)
    stats = shared.store_stats[0]
    assert stats.pairs_written > 0 and stats.round_trips > 0
    shared.close()
    with pytest.raises(Exception, match="closed"):
        shared.push((None, (1,)))


def test_store_needs_a_bint_tree_and_a_window_id():
    store = open_store("memory://")
    q = Query("a", CONCAT_AGG, rows=5)
    with pytest.raises(TypeError, match="window_id"):
        SharedWindows([q], plan="cutty+bint", store=store)
    with pytest.raises(ValueError, match="B-Int"):
        SharedWindows([q], plan="cutty+naive", store=store, window_id="w")
