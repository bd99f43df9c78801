"""mta.multi.sizes_two_stacks.SizesTwoStacks against brute force.

Several windows over one stream, ending at the newest element, decided by
count or by tag (equal tags, gaps, bursts): every window's aggregate after
every element equals the fold of the elements it should hold.  The monoid is
CONCAT (non-commutative, and its identity ``()`` is also an element), so a
lost, repeated or reordered element shows.  The queues are in process memory
and in the memory, file and Redis stores with buffers and caches of one or
two pairs, so the flips' reads and the fronts' heads go through the store;
chunks as small as one element make every flip use B-Int lookups.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mta.multi.sizes_two_stacks import SizesTwoStacks
from stores import open_store
from tests.oracle import CONCAT
from tests.store_fixtures import fresh_window, store_url  # noqa: F401  (fixture)
from tests.strategies import sane_settings

elements = st.lists(st.integers(0, 9), max_size=2).map(tuple)
steps = st.sampled_from([0, 0, 1, 1, 2, 5, 30])


@st.composite
def tagged_stream(draw):
    deltas = draw(st.lists(steps, max_size=90))
    tags, t = [], draw(st.integers(-50, 50))
    for d in deltas:
        t += d
        tags.append(t)
    values = draw(st.lists(elements, min_size=len(tags), max_size=len(tags)))
    return tags, values


def fold(window):
    acc = CONCAT.identity
    for v in window:
        acc = CONCAT.combine(acc, v)
    return acc


def in_store(url: str, buffer: int):
    """``new_level`` and ``new_fifo`` of one window in the store at ``url``,
    and the closer that deletes it."""
    store = open_store(url)
    name = fresh_window("sizes")
    storage = store.open_window(name, engine="BInt", mutable_tail=0, buffer_size=buffer, cache_size=buffer)
    fifos = []

    def new_fifo(label):
        fifos.append(store.open_fifo(f"{name}~{label}", buffer_size=buffer, cache_size=buffer))
        return fifos[-1]

    def close(stacks):
        storage.close(stacks.blocks.levels, delete=True)
        for fifo in fifos:
            fifo.close(delete=True)

    return dict(new_level=storage.new_level, new_fifo=new_fifo), close


def run(stacks, values, cuts, tags=None, splits=()):
    """Push ``values`` in the pieces ``splits`` cuts them into."""
    got = [[] for _ in range(stacks.windows)]
    bounds = [0, *sorted(splits), len(values)]
    for a, b in zip(bounds, bounds[1:]):
        if tags is None:
            part = stacks.slide(values[a:b])
        else:
            part = stacks.slide(values[a:b], tags[a:b], [c[a:b] for c in cuts])
        for column, results in zip(got, part):
            column.extend(results)
    return got


@sane_settings(80)
@given(data=tagged_stream(), spans=st.lists(st.sampled_from([0, 1, 3, 10, 64]), min_size=1, max_size=4),
       chunk=st.sampled_from([1, 2, 3, 1024]), splits=st.lists(st.integers(0, 90), max_size=3))
def test_tag_windows_in_memory(data, spans, chunk, splits):
    tags, values = data
    stacks = SizesTwoStacks(CONCAT, len(spans), tagged=True, chunk=chunk)
    cuts = [[t - span for t in tags] for span in spans]
    got = run(stacks, values, cuts, tags, [s for s in splits if s <= len(values)])
    for s, span in enumerate(spans):
        want = [fold([v for u, v in zip(tags[: i + 1], values[: i + 1]) if u > t - span]) for i, t in enumerate(tags)]
        assert got[s] == want, (s, span)


@sane_settings(60)
@given(values=st.lists(elements, max_size=90), counts=st.lists(st.integers(1, 40), min_size=1, max_size=4),
       chunk=st.sampled_from([1, 2, 5, 1024]), splits=st.lists(st.integers(0, 90), max_size=3))
def test_count_windows_in_memory(values, counts, chunk, splits):
    stacks = SizesTwoStacks(CONCAT, len(counts), counts=counts, chunk=chunk)
    got = run(stacks, values, None, splits=[s for s in splits if s <= len(values)])
    for s, n in enumerate(counts):
        assert got[s] == [fold(values[max(0, i + 1 - n) : i + 1]) for i in range(len(values))], (s, n)


@sane_settings(25)
@given(data=tagged_stream(), spans=st.lists(st.sampled_from([0, 2, 7, 40]), min_size=1, max_size=3),
       chunk=st.sampled_from([1, 3, 1024]), buffer=st.sampled_from([1, 2]))
def test_tag_windows_in_a_store(store_url, data, spans, chunk, buffer):  # noqa: F811
    tags, values = data
    queues, close = in_store(store_url, buffer)
    stacks = SizesTwoStacks(CONCAT, len(spans), tagged=True, chunk=chunk, **queues)
    cuts = [[t - span for t in tags] for span in spans]
    got = run(stacks, values, cuts, tags, [len(values) // 2])
    close(stacks)
    for s, span in enumerate(spans):
        want = [fold([v for u, v in zip(tags[: i + 1], values[: i + 1]) if u > t - span]) for i, t in enumerate(tags)]
        assert got[s] == want, (s, span)


@sane_settings(15)
@given(values=st.lists(elements, max_size=90), counts=st.lists(st.integers(1, 30), min_size=1, max_size=3),
       chunk=st.sampled_from([1, 4]))
def test_count_windows_in_a_store(store_url, values, counts, chunk):  # noqa: F811
    queues, close = in_store(store_url, 1)
    stacks = SizesTwoStacks(CONCAT, len(counts), counts=counts, chunk=chunk, **queues)
    got = run(stacks, values, None)
    close(stacks)
    for s, n in enumerate(counts):
        assert got[s] == [fold(values[max(0, i + 1 - n) : i + 1]) for i in range(len(values))], (s, n)


def test_memory_stays_bounded_in_a_store(tmp_path):
    """Four windows of up to 4,000 elements in the file store, buffers and
    caches of 8 pairs, chunks of 16: the process holds a few hundred
    elements, not the windows."""
    from mta.monoid import Monoid

    queues, close = in_store(f"file://{tmp_path}", 8)
    stacks = SizesTwoStacks(Monoid(max, float("-inf")), 4, tagged=True, chunk=16, **queues)
    peak = 0
    spans = [4000, 2000, 1000, 500]
    for start in range(0, 12_000, 500):
        tags = list(range(start, start + 500))
        values = [float(t % 97) for t in tags]
        got = stacks.slide(values, tags, [[t - span for t in tags] for span in spans])
        assert got[0][-1] == max(float(t % 97) for t in range(max(0, tags[-1] - 3999), tags[-1] + 1))
        peak = max(peak, stacks.local_size())
    assert stacks.hi - stacks.lo(0) == 4000
    assert peak < 1_000, peak
    close(stacks)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="counts= .* or tagged=True"):
        SizesTwoStacks(CONCAT, 2)
    with pytest.raises(ValueError, match="counts must be 2 positive ints"):
        SizesTwoStacks(CONCAT, 2, counts=[3])
    with pytest.raises(ValueError, match="chunk must be a positive int"):
        SizesTwoStacks(CONCAT, 1, counts=[3], chunk=0)
    with pytest.raises(ValueError, match="need tags= and cutoffs="):
        SizesTwoStacks(CONCAT, 1, tagged=True).slide([(1,)])
