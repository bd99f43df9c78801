"""Every store backend against the same contract, plus backend specifics.

Backends: memory, file (SQLite in tmp_path), redis (a real redis-server
started by tests/conftest.py), redis-cluster (three masters) and redis-tls
(TLS only, an ACL user); and ``env``, the store at the URL in the
environment variable ``MTA_TEST_STORE_URL`` when it is set (docs/operations.md:
check a deployment's store before using it).  Couchbase has its own file
(tests/test_couchbase_store.py).
"""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
import threading
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stores
from stores import (CasMismatch, StoreAuthenticationError, StoreClosed, StoreConfigError,
                    StoreError, StoreStats, StoreUnavailable, open_store)
from stores.memory_store import MemoryStore, reset_memory
from stores.redis_store import RedisStore
from stores.redis_url import parse_redis_url
from stores.sqlite_store import SQLiteStore
from tests.strategies import sane_settings

BACKENDS = ["memory", "file", "redis", "redis-cluster", "redis-tls"] + (
    ["env"] if os.environ.get("MTA_TEST_STORE_URL") else [])


@pytest.fixture(params=BACKENDS)
def backend(request):
    return request.param


def _isolated(url: str, tmp_path) -> tuple[str, dict]:
    """The store at ``url`` as a test of its own sees it: a fresh key prefix
    (Redis), a fresh directory (file) or name (memory)."""
    scheme = stores.scheme_of(url)
    tag = f"t{uuid.uuid4().hex[:12]}"
    if scheme in (None, "file"):
        return f"file://{stores.urls.parse_file_url(url)}/{tag}", {}
    if scheme == "memory":
        return f"memory://{tag}", {}
    if scheme.startswith("redis"):
        return url, {"key_prefix": tag}
    pytest.fail(f"MTA_TEST_STORE_URL: the contract suite isolates tests on file, memory and Redis "
                f"stores; a {scheme} store runs tests/test_couchbase_store.py (COUCHBASE_URL)", pytrace=False)


@pytest.fixture
def make_store(backend, request, tmp_path):
    """Open stores of the backend under test that share one space."""
    given = {}
    if backend == "memory":
        name = f"test-{uuid.uuid4().hex}"
        url = f"memory://{name}"
    elif backend == "file":
        url = f"file://{tmp_path / 'store'}"
    elif backend == "redis":
        url = request.getfixturevalue("redis_url")
    elif backend == "redis-cluster":
        cluster = request.getfixturevalue("redis_cluster")
        cluster.flushall()
        url = cluster.url
    elif backend == "redis-tls":
        server = request.getfixturevalue("redis_tls")
        client = server.client()
        client.flushall()
        client.close()
        url = server.url
    else:
        url, given = _isolated(os.environ["MTA_TEST_STORE_URL"], tmp_path)
    opened = []

    def make(**options):
        s = open_store(url, **given, **options)
        opened.append(s)
        return s

    yield make
    for s in opened:
        s.close()
    if backend == "memory":
        reset_memory(name)


@pytest.fixture
def store(make_store):
    return make_store()


def blobs(n, tag=b"v", start=0):
    return [tag + str(i).encode() for i in range(start, start + n)]


# ------------------------------------------------------------------ pairs

def test_write_read_ranges(store):
    store.write_pairs("w", 0, 0, 10, blobs(5, start=10))
    assert store.read_pairs("w", 0, 0, 10, 5) == blobs(5, start=10)
    assert store.read_pairs("w", 0, 0, 8, 4) == [None, None, b"v10", b"v11"]
    assert store.read_pairs("w", 0, 0, 13, 4) == [b"v13", b"v14", None, None]
    assert store.read_pairs("w", 0, 0, 100, 3) == [None] * 3
    assert store.read_pairs("w", 0, 0, 10, 0) == []
    # overwrite part of the range
    store.write_pairs("w", 0, 0, 12, [b"X", b"Y"])
    assert store.read_pairs("w", 0, 0, 10, 5) == [b"v10", b"v11", b"X", b"Y", b"v14"]


def test_keys_are_isolated(store):
    store.write_pairs("w", 0, 0, 0, [b"a"])
    store.write_pairs("w", 0, 1, 0, [b"b"])
    store.write_pairs("w", 1, 0, 0, [b"c"])
    store.write_pairs("w2", 0, 0, 0, [b"d"])
    store.write_pairs("w:0", 0, 0, 0, [b"e"])
    assert store.read_pairs("w", 0, 0, 0, 1) == [b"a"]
    assert store.read_pairs("w", 0, 1, 0, 1) == [b"b"]
    assert store.read_pairs("w", 1, 0, 0, 1) == [b"c"]
    assert store.read_pairs("w2", 0, 0, 0, 1) == [b"d"]
    assert store.read_pairs("w:0", 0, 0, 0, 1) == [b"e"]
    assert store.read_pairs("nothing", 0, 0, 0, 2) == [None, None]


def test_binary_blobs_and_unicode_windows(store):
    data = [bytes(range(256)), b"", b"\x00" * 1000, os.urandom(100_000)]
    window = "fenêtre:ünïcode/ключ 1"
    store.write_pairs(window, 3, 2, 7, data)
    assert store.read_pairs(window, 3, 2, 7, 4) == data


def test_bytes_like_blobs_accepted(store):
    store.write_pairs("w", 0, 0, 0, [bytearray(b"ab"), memoryview(b"cd")])
    assert store.read_pairs("w", 0, 0, 0, 2) == [b"ab", b"cd"]


def test_delete_pairs(store):
    store.write_pairs("w", 0, 0, 0, blobs(10))
    store.delete_pairs("w", 0, 0, 2, 3)
    assert store.read_pairs("w", 0, 0, 0, 10) == blobs(2) + [None] * 3 + blobs(5, start=5)
    store.delete_pairs("w", 0, 0, 0, 100)  # missing keys are fine
    assert store.read_pairs("w", 0, 0, 0, 10) == [None] * 10
    store.delete_pairs("never", 9, 9, 0, 5)
    store.delete_pairs("w", 0, 0, 0, 0)


def test_large_batches(store):
    n = 10_000
    data = blobs(n)
    before = store.stats.snapshot()
    store.write_pairs("w", 0, 0, 5, data)
    got = store.read_pairs("w", 0, 0, 0, n + 10)
    store.delete_pairs("w", 0, 0, 0, n // 2)
    after = store.stats - before
    assert got == [None] * 5 + data + [None] * 5
    assert after.round_trips == 3
    assert store.read_pairs("w", 0, 0, n // 2, 2) == data[n // 2 - 5:n // 2 - 3]


def test_drop_epoch(store):
    for level in range(4):
        store.write_pairs("w", 1, level, 0, blobs(8))
        store.write_pairs("w", 2, level, 0, blobs(8, tag=b"two"))
    store.write_pairs("other", 1, 0, 0, [b"o"])
    assert store.list_epochs("w") == [1, 2]
    store.drop_epoch("w", 1)
    for level in range(4):
        assert store.read_pairs("w", 1, level, 0, 8) == [None] * 8
        assert store.read_pairs("w", 2, level, 0, 8) == blobs(8, tag=b"two")
    assert store.read_pairs("other", 1, 0, 0, 1) == [b"o"]
    assert store.list_epochs("w") == [2]
    store.drop_epoch("w", 1)  # again: nothing to do
    store.drop_epoch("w", 7)
    store.drop_epoch("w", 2, ranges={0: (0, 8), 1: (0, 8)})  # a hint; all levels go
    for level in range(4):
        assert store.read_pairs("w", 2, level, 0, 8) == [None] * 8
    assert store.list_epochs("w") == []
    # an epoch can be written again after a drop
    store.write_pairs("w", 1, 0, 0, [b"again"])
    assert store.read_pairs("w", 1, 0, 0, 1) == [b"again"]


_EPOCH_OPS = st.lists(st.tuples(st.sampled_from(["write", "delete", "drop"]), st.integers(0, 5), st.integers(0, 2),
                                 st.integers(0, 6)), max_size=25)


@settings(parent=sane_settings(25), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_EPOCH_OPS)
def test_list_epochs_against_the_pairs_written(store, ops):
    """Writes, deletes and drops of pairs in random epochs: list_epochs
    names every epoch holding a pair (brute force over what was written),
    and no epoch never written or dropped since."""
    window = f"w{uuid.uuid4().hex[:8]}"
    held: dict[int, set] = {}  # epoch -> (level, idx) holding a pair
    written: set = set()  # epochs written since their last drop
    for op, epoch, level, idx in ops:
        if op == "write":
            store.write_pairs(window, epoch, level, idx, [b"x"])
            held.setdefault(epoch, set()).add((level, idx))
            written.add(epoch)
        elif op == "delete":
            store.delete_pairs(window, epoch, level, idx, 1)
            held.get(epoch, set()).discard((level, idx))
        else:
            store.drop_epoch(window, epoch)
            held.pop(epoch, None)
            written.discard(epoch)
        listed = store.list_epochs(window)
        assert listed == sorted(set(listed))
        assert {e for e, places in held.items() if places} <= set(listed) <= written


_RANGES = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 40), st.integers(0, 12)),
                   max_size=12)


@settings(parent=sane_settings(25), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(written=_RANGES, ranges=_RANGES)
def test_read_pairs_many_reads_each_range_as_read_pairs_does(store, written, ranges):
    """Pairs written in random epochs, levels and ranges; read_pairs_many of
    random ranges (empty ones, missing pairs, several of one level) returns
    what brute force over the writes holds, range by range, in one round
    trip on every backend here (each reads several ranges at once)."""
    window = f"w{uuid.uuid4().hex[:8]}"
    held: dict = {}
    for epoch, level, first, count in written:
        data = [f"{epoch}/{level}/{i}/{len(held)}".encode() for i in range(first, first + count)]
        store.write_pairs(window, epoch, level, first, data)
        held.update(((epoch, level, i), b) for i, b in enumerate(data, first))
    before = store.stats.snapshot()
    got = store.read_pairs_many(window, ranges)
    trips = (store.stats - before).round_trips
    assert got == [[held.get((e, lv, i)) for i in range(f, f + n)] for e, lv, f, n in ranges]
    assert store.reads_ranges_at_once
    assert trips == (1 if len(ranges) > 1 else sum(1 for r in ranges if r[3]))


def test_read_pairs_many_checks_every_range(store):
    store.write_pairs("w", 0, 0, 0, [b"a"])
    with pytest.raises(TypeError, match=r"\(epoch, level, first, count\)"):
        store.read_pairs_many("w", [(0, 0, 0, 1), (0, 0, 1)])
    with pytest.raises(ValueError, match="count must be >= 0"):
        store.read_pairs_many("w", [(0, 0, 0, 1), (0, 0, 0, -1)])
    assert store.read_pairs_many("w", []) == []


def test_drop_epoch_round_trips_are_bounded(store):
    for level in range(20):
        store.write_pairs("w", 0, level, 0, blobs(4))
    before = store.stats.snapshot()
    store.drop_epoch("w", 0)
    assert 1 <= (store.stats - before).round_trips <= 2


def test_delete_window(store):
    store.write_pairs("w", 0, 0, 0, blobs(3))
    store.write_pairs("w", 5, 3, 100, blobs(3))
    store.cas_meta("w", None, b"meta")
    store.write_pairs("keep", 0, 0, 0, [b"k"])
    store.cas_meta("keep", None, b"km")
    store.delete_window("w")
    assert store.read_pairs("w", 0, 0, 0, 3) == [None] * 3
    assert store.read_pairs("w", 5, 3, 100, 3) == [None] * 3
    assert store.read_meta("w") == (None, None)
    assert store.list_epochs("w") == []
    assert store.read_pairs("keep", 0, 0, 0, 1) == [b"k"]
    assert store.read_meta("keep")[0] == b"km"
    store.delete_window("w")  # idempotent


def test_window_names_list_records_and_pairs(store):
    """What ``mta-spark gc`` starts from: every window with a record or
    pairs, once each, whatever the name holds (the layout's separators too)."""
    assert store.window_names() == []
    store.write_pairs("pairs only", 2, 1, 0, [b"p"])
    store.cas_meta("record:only", None, b"m")
    store.write_pairs("both::e1", 0, 0, 0, [b"b"])
    store.write_pairs("both::e1", 3, 0, 0, [b"b"])
    store.cas_meta("both::e1", None, b"m")
    store.write_pairs("mta/run/'k*?[x]'", 0, 0, 0, [b"g"])
    assert store.window_names() == sorted(["pairs only", "record:only", "both::e1", "mta/run/'k*?[x]'"])
    store.delete_window("both::e1")
    store.drop_epoch("pairs only", 2)
    assert store.window_names() == sorted(["record:only", "mta/run/'k*?[x]'"])


# ---------------------------------------------------------------- metadata

def test_meta_compare_and_set(store):
    assert store.read_meta("w") == (None, None)
    t1 = store.cas_meta("w", None, b"one")
    assert t1 is not None
    assert store.read_meta("w") == (b"one", t1)
    with pytest.raises(CasMismatch) as info:
        store.cas_meta("w", None, b"again")
    assert info.value.window == "w" and info.value.actual == t1
    t2 = store.cas_meta("w", t1, b"two")
    assert t2 != t1
    assert store.read_meta("w") == (b"two", t2)
    with pytest.raises(CasMismatch):
        store.cas_meta("w", t1, b"stale")  # stale token
    with pytest.raises(CasMismatch):
        store.cas_meta("w", "not a token", b"x")
    assert store.read_meta("w") == (b"two", t2)
    t3 = store.cas_meta("w", t2, b"")
    assert store.read_meta("w") == (b"", t3)


def test_swap_meta_compares_token_and_content(store):
    """swap_meta replaces only the record it is told (token and blob), and
    otherwise returns what the record holds instead of raising; a record
    deleted and created again is never at the token remembered."""
    t1 = store.cas_meta("w", None, b"one")
    done = store.swap_meta("w", t1, b"one", b"two", durable=False)
    assert done.done and done.blob is None and done.token != t1
    t2 = done.token
    assert store.read_meta("w") == (b"two", t2)
    assert tuple(store.swap_meta("w", t1, b"one", b"x")) == (False, t2, b"two")  # stale token
    assert tuple(store.swap_meta("w", t2, b"one", b"x")) == (False, t2, b"two")  # same token, other content
    store.delete_window("w")
    assert tuple(store.swap_meta("w", t2, b"two", b"x")) == (False, None, None)  # gone
    again = store.cas_meta("w", None, b"other")
    assert again not in (t1, t2)
    assert tuple(store.swap_meta("w", t2, b"two", b"x")) == (False, again, b"other")
    assert store.read_meta("w") == (b"other", again)
    with pytest.raises(CasMismatch):
        store.swap_meta("w", "not a token", b"other", b"x")


def test_swap_meta_many_does_what_each_would_alone(store, backend):
    """swap_meta_many makes each request as swap_meta (``old`` given) or
    cas_meta_epochs would alone, in order (a request may build on an
    earlier one), a lost one returned with the record's token (and blob,
    for a swap) while the others stand; one round trip where the store
    pipelines windows (the file store, in one transaction, and standalone
    Redis)."""
    ta = store.cas_meta("a", None, b"a1")
    tb = store.cas_meta("b", None, b"b1")
    store.write_pairs("b", 3, 0, 0, [b"p"])
    before = store.stats.round_trips
    out = store.swap_meta_many([("a", ta, b"a1", b"a2"),  # swap, current
                                ("b", tb, None, b"b2"),  # compare-and-set, current
                                ("a", ta, b"a1", b"a3"),  # stale: the first changed it
                                ("b", tb, None, b"b3"),  # stale too
                                ("c", None, None, b"c1")],  # creation
                               listing=True, durable=False)
    assert store.pipelines_windows == (backend in ("file", "redis", "redis-tls"))
    trips = store.stats.round_trips - before
    assert trips == 1 if store.pipelines_windows else trips >= len(out)
    ta2, tb2 = store.read_meta("a")[1], store.read_meta("b")[1]
    assert out == [(True, ta2, []), (True, tb2, [3]), (False, ta2, b"a2"), (False, tb2, None),
                   (True, store.read_meta("c")[1], [])]
    assert [store.read_meta(w)[0] for w in "abc"] == [b"a2", b"b2", b"c1"]
    assert store.swap_meta_many([("a", ta2, b"a2", b"a4"), ("c", store.read_meta("c")[1], b"x", b"c2")]) == \
        [(True, store.read_meta("a")[1], None), (False, store.read_meta("c")[1], b"c1")]
    assert store.swap_meta_many([]) == []
    with pytest.raises(StoreConfigError, match="needs the token"):
        store.swap_meta_many([("a", None, b"a4", b"a5")])
    assert store.read_meta("a")[0] == b"a4"


def test_read_meta_many_reads_many_windows_records(store):
    """read_meta_many returns what read_meta of each window would, in order
    (an absent record (None, None), a window named twice twice); one round
    trip where the store pipelines many windows' requests."""
    ta = store.cas_meta("a", None, b"a1")
    store.cas_meta("a", ta, b"a2")
    store.cas_meta("b", None, b"b1")
    store.cas_meta("w599", None, b"last")
    windows = ["b", "x", "a", "b"] + [f"w{i}" for i in range(600)]  # more than one statement takes
    before = store.stats.round_trips
    out = store.read_meta_many(windows)
    trips = store.stats.round_trips - before
    assert out == [store.read_meta(w) for w in windows]
    assert [blob for blob, _ in out[:4]] == [b"b1", None, b"a2", b"b1"] and out[1] == (None, None)
    assert out[-1][0] == b"last"
    assert trips == 1 if store.pipelines_windows else trips == len(windows)
    assert store.read_meta_many([]) == []


def test_read_ranges_reads_many_windows_pairs(store):
    """read_ranges returns what read_pairs of each range would, in order,
    across windows (missing pairs None, an empty range empty); one round
    trip where the store pipelines many windows' requests."""
    store.write_pairs("a", 1, 0, 0, blobs(4, b"a"))
    store.write_pairs("b", 2, 3, 10, blobs(2, b"b"))
    ranges = [("b", 2, 3, 9, 4), ("a", 1, 0, 1, 2), ("a", 1, 1, 0, 2), ("c", 0, 0, 0, 1), ("a", 1, 0, 0, 0)]
    before = store.stats.round_trips
    out = store.read_ranges(ranges)
    trips = store.stats.round_trips - before
    assert out == [store.read_pairs(*r) for r in ranges]
    assert out[:2] == [[None, b"b0", b"b1", None], [b"a1", b"a2"]]
    assert trips == 1 if store.pipelines_windows else trips >= 3
    assert store.read_ranges([]) == []
    many = [("a", 1, 0, i % 4, 1 + i % 3) for i in range(150)] + [("b", 2, 3, 11, 2)]  # more than one SELECT takes
    assert store.read_ranges(many) == [store.read_pairs(*r) for r in many]


def test_delete_ranges_deletes_many_windows_pairs(store):
    """delete_ranges deletes what delete_pairs of each range would (missing
    pairs fine, an empty range nothing, a range longer than a Redis command
    takes in chunks), across windows, and leaves every other pair; one
    round trip where the store pipelines many windows' requests; a
    malformed range is refused before anything is deleted."""
    from stores.redis_wire import CHUNK

    store.write_pairs("a", 1, 0, 0, blobs(CHUNK + 6, b"a"))
    store.write_pairs("b", 2, 3, 10, blobs(4, b"b"))
    with pytest.raises(TypeError, match="delete_ranges takes"):
        store.delete_ranges([("a", 1, 0, 0, 2), ("b", 2, 3)])
    with pytest.raises(ValueError):
        store.delete_ranges([("a", 1, 0, 0, 2), ("b", 2, 3, -1, 2)])
    assert store.read_pairs("a", 1, 0, 0, 2) == [b"a0", b"a1"]
    before = store.stats.round_trips
    store.delete_ranges([("a", 1, 0, 1, CHUNK + 2), ("b", 2, 3, 12, 5), ("c", 0, 0, 0, 3), ("a", 1, 0, 0, 0)])
    trips = store.stats.round_trips - before
    assert store.read_pairs("a", 1, 0, 0, CHUNK + 6) == [b"a0"] + [None] * (CHUNK + 2) + \
        [b"a%d" % i for i in range(CHUNK + 3, CHUNK + 6)]
    assert store.read_pairs("b", 2, 3, 10, 4) == [b"b0", b"b1", None, None]
    assert trips == 1 if store.pipelines_windows else trips >= 3
    store.delete_ranges([])


def test_cas_meta_epochs_lists_the_epochs_with_pairs(store):
    t1, listed = store.cas_meta_epochs("w", None, b"one")
    assert listed == []
    store.write_pairs("w", 7, 0, 0, [b"p"])
    store.write_pairs("w", 3, 2, 5, [b"q", b"r"])
    t2, listed = store.cas_meta_epochs("w", t1, b"two", durable=False)
    assert listed == [3, 7] and store.read_meta("w") == (b"two", t2)
    store.drop_epoch("w", 7)
    with pytest.raises(CasMismatch) as info:
        store.cas_meta_epochs("w", t1, b"stale")
    assert info.value.actual == t2 and store.read_meta("w") == (b"two", t2)
    assert store.cas_meta_epochs("w", t2, b"three")[1] == [3]


def test_cas_after_delete_window(store):
    t = store.cas_meta("w", None, b"a")
    store.delete_window("w")
    with pytest.raises(CasMismatch) as info:
        store.cas_meta("w", t, b"b")
    assert info.value.actual is None
    store.cas_meta("w", None, b"c")


def test_a_window_made_anew_never_takes_a_token_of_its_earlier_life(store):
    """Deleted (as a whole, or its record alone) and created again, a
    window's record hands out none of the tokens it had before, so a zombie
    still holding one is refused instead of overwriting the new window."""
    old = [store.cas_meta("w", None, b"life 1")]
    for i in range(3):
        old.append(store.cas_meta("w", old[-1], b"life 1 checkpoint %d" % i))
    store.delete_window("w")
    new = [store.cas_meta("w", None, b"life 2")]
    for i in range(3):
        new.append(store.cas_meta("w", new[-1], b"life 2 checkpoint %d" % i))
    store.delete_meta("w", new[-1])
    new.append(store.cas_meta("w", None, b"life 3"))
    assert not set(old) & set(new[:-1]) and not set(old + new[:-1]) & {new[-1]}
    for stale in old + new[:-1]:
        with pytest.raises(CasMismatch):
            store.cas_meta("w", stale, b"zombie")
        with pytest.raises(CasMismatch):
            store.delete_meta("w", stale)
    assert store.read_meta("w") == (b"life 3", new[-1])


def test_cas_refuses_anything_but_a_real_token(store):
    """A token the store did not give (a string, 0, a bool, a float, the
    token's text) is a mismatch, never an unconditional overwrite."""
    token = store.cas_meta("w", None, b"one")
    for bad in ("not a token", 0, -1, True, 1.5, str(token), b"x"):
        with pytest.raises(CasMismatch):
            store.cas_meta("w", bad, b"overwritten")
    assert store.read_meta("w") == (b"one", token)


def test_delete_meta_is_compare_and_delete(store):
    t1 = store.cas_meta("w", None, b"one")
    store.write_pairs("w", 1, 0, 0, [b"p"])
    t2 = store.cas_meta("w", t1, b"two")
    with pytest.raises(CasMismatch) as info:
        store.delete_meta("w", t1)  # stale token: the record stays
    assert info.value.actual == t2 and store.read_meta("w") == (b"two", t2)
    store.delete_meta("w", t2)
    assert store.read_meta("w") == (None, None)
    assert store.read_pairs("w", 1, 0, 0, 1) == [b"p"]  # pairs are not its business
    store.delete_meta("w", t2)  # absent: a retry that already landed


def test_two_stores_racing_cas(make_store):
    a, b = make_store(), make_store()
    a.cas_meta("w", None, b"start")
    blob_a, token_a = a.read_meta("w")
    blob_b, token_b = b.read_meta("w")
    assert token_a == token_b and blob_a == blob_b == b"start"
    new = a.cas_meta("w", token_a, b"A wins")
    with pytest.raises(CasMismatch):
        b.cas_meta("w", token_b, b"B loses")
    assert b.read_meta("w") == (b"A wins", new)
    # both racing to create
    a.cas_meta("fresh", None, b"A")
    with pytest.raises(CasMismatch):
        b.cas_meta("fresh", None, b"B")


def test_concurrent_cas_increments_are_linearizable(make_store):
    threads, per_thread = 4, 25
    store_objs = [make_store() for _ in range(threads)]
    store_objs[0].cas_meta("counter", None, b"0")
    losses = []

    def worker(s):
        lost = 0
        for _ in range(per_thread):
            while True:
                blob, token = s.read_meta("counter")
                try:
                    s.cas_meta("counter", token, str(int(blob) + 1).encode())
                    break
                except CasMismatch:
                    lost += 1
        losses.append(lost)

    ts = [threading.Thread(target=worker, args=(s,)) for s in store_objs]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert int(store_objs[0].read_meta("counter")[0]) == threads * per_thread
    assert sum(s.stats.cas_failures for s in store_objs) == sum(losses)


def test_one_store_shared_by_threads(store):
    def worker(level):
        for k in range(20):
            store.write_pairs("w", 0, level, k * 10, blobs(10, start=k * 10))

    ts = [threading.Thread(target=worker, args=(lv,)) for lv in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for level in range(4):
        assert store.read_pairs("w", 0, level, 0, 200) == blobs(200)
    assert store.stats.round_trips == 80 + 4


# ------------------------------------------------------------- statistics

def test_round_trip_counters(store):
    s = store.stats
    assert isinstance(s, StoreStats) and s.round_trips == 0
    store.write_pairs("w", 0, 0, 0, [b"ab", b"cde", b"f"])
    assert (s.round_trips, s.pairs_written, s.bytes_written) == (1, 3, 6)
    assert store.read_pairs("w", 0, 0, 0, 5) == [b"ab", b"cde", b"f", None, None]
    assert (s.round_trips, s.pairs_read, s.bytes_read) == (2, 3, 6)
    store.delete_pairs("w", 0, 0, 0, 2)
    assert (s.round_trips, s.pairs_deleted) == (3, 2)
    store.read_meta("w")
    assert (s.round_trips, s.meta_reads) == (4, 1)
    token = store.cas_meta("w", None, b"meta")
    assert (s.round_trips, s.meta_writes, s.bytes_written) == (5, 1, 10)
    with pytest.raises(CasMismatch):
        store.cas_meta("w", None, b"x")
    assert (s.round_trips, s.cas_failures) == (6, 1)
    store.cas_meta("w", token, b"m2")
    assert s.round_trips == 7
    # empty ranges make no round trip
    store.write_pairs("w", 0, 0, 0, [])
    store.read_pairs("w", 0, 0, 0, 0)
    store.delete_pairs("w", 0, 0, 0, 0)
    assert s.round_trips == 7
    assert s.retries == 0
    d = s.as_dict()
    assert d["round_trips"] == 7 and "_lock" not in d
    s.reset()
    assert s.round_trips == 0 and s.pairs_written == 0


def test_one_write_is_one_round_trip_whatever_its_size(store):
    for n in (1, 512, 3000):
        before = store.stats.round_trips
        store.write_pairs("w", 0, 1, 0, blobs(n))
        assert store.stats.round_trips == before + 1
        store.read_pairs("w", 0, 1, 0, n)
        assert store.stats.round_trips == before + 2


# -------------------------------------------------------------- validation

@pytest.mark.parametrize("window", ["", "a{b", "a}b", "tab\there", "nl\n", "x" * 161, 5,
                                    None, b"bytes", "lone\ud800", "é" * 81])
def test_bad_window_names(store, window):
    with pytest.raises((TypeError, ValueError)):
        store.write_pairs(window, 0, 0, 0, [b"x"])
    with pytest.raises((TypeError, ValueError)):
        store.read_meta(window)


@pytest.mark.parametrize("args", [(-1, 0, 0), (0, -1, 0), (0, 0, -1), (True, 0, 0),
                                  (0.5, 0, 0), ("1", 0, 0), (2**63, 0, 0), (0, 0, 2**63)])
def test_bad_numbers(store, args):
    epoch, level, first = args
    with pytest.raises((TypeError, ValueError)):
        store.write_pairs("w", epoch, level, first, [b"x"])
    with pytest.raises((TypeError, ValueError)):
        store.read_pairs("w", epoch, level, first, 1)


def test_bad_blobs(store):
    with pytest.raises(TypeError, match="bytes"):
        store.write_pairs("w", 0, 0, 0, ["str"])
    with pytest.raises(TypeError, match="bytes"):
        store.cas_meta("w", None, "str")
    with pytest.raises((TypeError, ValueError)):
        store.read_pairs("w", 0, 0, 0, -1)
    with pytest.raises((TypeError, ValueError)):
        store.drop_epoch("w", 0, ranges={0: (5, 1)})


def test_close_and_context_manager(make_store):
    s = make_store()
    with s as same:
        assert same is s
        s.write_pairs("w", 0, 0, 0, [b"x"])
    assert s.closed
    with pytest.raises(StoreClosed):
        s.read_pairs("w", 0, 0, 0, 1)
    with pytest.raises(StoreError):
        s.read_meta("w")
    s.close()  # idempotent
    assert "closed" in repr(s)
    t = make_store()
    assert t.read_pairs("w", 0, 0, 0, 1) == [b"x"]  # data outlives the object


def test_ping(store):
    store.ping()


# --------------------------------------------------------------- open_store

def test_open_store_urls(tmp_path, monkeypatch):
    s = open_store(f"file://{tmp_path}/abs")
    assert isinstance(s, SQLiteStore) and s.directory == str(tmp_path / "abs")
    assert s.url == f"file://{tmp_path}/abs"
    s.close()
    monkeypatch.chdir(tmp_path)
    s = open_store("file:rel/dir")
    assert s.directory == str(tmp_path / "rel" / "dir")
    s.write_pairs("w", 0, 0, 0, [b"x"])
    assert (tmp_path / "rel" / "dir" / "mta.sqlite3").exists()
    s.close()
    s = open_store("plain/path")
    assert isinstance(s, SQLiteStore) and s.directory == str(tmp_path / "plain" / "path")
    s.close()
    s = open_store(str(tmp_path / "abs2"))
    assert isinstance(s, SQLiteStore)
    s.close()
    assert isinstance(open_store("memory://"), MemoryStore)
    assert isinstance(open_store("redis://localhost:1/0"), RedisStore)
    with pytest.raises(StoreConfigError, match="unknown store URL scheme 'ftp'"):
        open_store("ftp://host/x")
    with pytest.raises(StoreConfigError):
        open_store("")
    with pytest.raises(StoreConfigError, match="unknown option"):
        open_store("memory://", bogus=1)
    with pytest.raises(StoreConfigError, match="unknown option"):
        open_store(f"file://{tmp_path}/x", bogus=1)
    with pytest.raises(StoreConfigError, match="only local"):
        open_store("file://otherhost/x")
    with pytest.raises(StoreConfigError, match="retries"):
        open_store("memory://", retries=-1)
    with pytest.raises(StoreConfigError, match="synchronous"):
        open_store(f"file://{tmp_path}/x", synchronous="sometimes")


def test_memory_names_share_and_anonymous_do_not():
    name = f"shared-{uuid.uuid4().hex}"
    a, b = open_store(f"memory://{name}"), open_store(f"memory://{name}")
    a.write_pairs("w", 0, 0, 0, [b"x"])
    assert b.read_pairs("w", 0, 0, 0, 1) == [b"x"]
    c, d = open_store("memory://"), open_store("memory://")
    c.write_pairs("w", 0, 0, 0, [b"x"])
    assert d.read_pairs("w", 0, 0, 0, 1) == [None]
    reset_memory(name)
    assert open_store(f"memory://{name}").read_pairs("w", 0, 0, 0, 1) == [None]


def test_package_exports():
    for name in ("open_store", "Store", "StoreStats", "StoreError", "StoreUnavailable",
                 "CasMismatch", "CorruptValue", "MissingData", "FormatVersionError",
                 "encode", "decode", "register_codec"):
        assert hasattr(stores, name), name
    assert issubclass(stores.StoreError, stores.errors.MTAError)
    assert stores.codec.encode is stores.encode
    with pytest.raises(AttributeError):
        stores.no_such_name


def test_stores_do_not_import_pyspark():
    import pathlib
    import re
    src = pathlib.Path(stores.__file__).parent
    for f in src.rglob("*.py"):
        assert not re.search(r"^\s*(import|from)\s+(pyspark|spark_ops)\b", f.read_text(),
                             re.MULTILINE), f


# ------------------------------------------------------------ file (SQLite)

def _file_worker(url, worker, n, rounds, queue):
    try:
        s = open_store(url)
        for k in range(rounds):
            s.write_pairs("shared", 0, 0, (worker * rounds + k) * n,
                          [f"{worker}:{k}:{i}".encode() for i in range(n)])
            while True:
                blob, token = s.read_meta("shared")
                try:
                    s.cas_meta("shared", token, str(int(blob) + 1).encode())
                    break
                except CasMismatch:
                    pass
        s.close()
        queue.put(("ok", worker))
    except BaseException as exc:  # pragma: no cover - reported by the parent
        queue.put(("error", repr(exc)))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_file_store_shared_by_processes(tmp_path, method):
    url = f"file://{tmp_path}/mp"
    parent = open_store(url)
    parent.cas_meta("shared", None, b"0")
    parent.write_pairs("shared", 9, 0, 0, [b"parent"])  # the parent has a live connection
    ctx = multiprocessing.get_context(method)
    queue = ctx.Queue()
    workers, n, rounds = 3, 50, 10
    procs = [ctx.Process(target=_file_worker, args=(url, w, n, rounds, queue))
             for w in range(workers)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=50) for _ in procs]
    for p in procs:
        p.join(timeout=10)
    assert all(r[0] == "ok" for r in results), results
    assert int(parent.read_meta("shared")[0]) == workers * rounds
    got = parent.read_pairs("shared", 0, 0, 0, workers * rounds * n)
    expected = [f"{w}:{k}:{i}".encode() for w in range(workers) for k in range(rounds)
                for i in range(n)]
    assert got == expected
    parent.close()


def _inherited_worker(store, queue):
    try:
        store.write_pairs("fork", 0, 1, 0, [b"child"])
        blob, token = store.read_meta("fork")
        store.cas_meta("fork", token, b"child-meta")
        queue.put("ok")
    except BaseException as exc:  # pragma: no cover
        queue.put(repr(exc))


@pytest.mark.timeout(60)
def test_file_store_object_survives_fork(tmp_path):
    s = open_store(f"file://{tmp_path}/fork")
    s.write_pairs("fork", 0, 0, 0, [b"parent"])
    s.cas_meta("fork", None, b"parent-meta")
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    p = ctx.Process(target=_inherited_worker, args=(s, queue))
    p.start()
    assert queue.get(timeout=30) == "ok"
    p.join(timeout=10)
    assert p.exitcode == 0
    # the parent's connection still works after the child used (and exited) its own
    assert s.read_pairs("fork", 0, 1, 0, 1) == [b"child"]
    assert s.read_meta("fork")[0] == b"child-meta"
    s.write_pairs("fork", 0, 0, 1, [b"after"])
    assert s.read_pairs("fork", 0, 0, 0, 2) == [b"parent", b"after"]
    s.close()


def _window_in_a_forked_child(url, queue):
    try:
        from mta import Window, aggregators, policies
        from stores.background import drain_background

        store = open_store(url)
        w = Window(aggregators.SUM, policies.Count(10**6), store=store, window_id="child", buffer_size=16,
                   cache_size=16)
        w.extend(range(500))  # flushes on the background pool
        w.checkpoint()
        drain_background(timeout=30)
        w.close()
        again = Window(aggregators.SUM, policies.Count(10**6), store=store, window_id="child")
        queue.put(("ok", len(again), again.query()))
        again.close()
        store.close()
    except BaseException as exc:  # pragma: no cover - reported by the parent
        queue.put(("error", repr(exc)))


@pytest.mark.timeout(120)
def test_a_child_forked_after_background_io_gets_a_pool_of_its_own(tmp_path):
    """The parent's windows used the background pool (its threads run) when
    it forks: a window in the child flushes on a pool of the child's own,
    instead of waiting forever on the parent's, whose threads did not come
    along."""
    from mta import Window, aggregators, policies

    url = f"file://{tmp_path}/forked"
    store = open_store(url)
    w = Window(aggregators.SUM, policies.Count(10**6), store=store, window_id="parent", buffer_size=16,
               cache_size=16)
    w.extend(range(500))
    w.checkpoint()
    w.close()
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_window_in_a_forked_child, args=(url, queue))
    child.start()
    child.join(timeout=30)
    if child.is_alive():
        child.kill()
        child.join()
        pytest.fail("the forked child hung waiting for a background flush")
    assert child.exitcode == 0 and queue.get(timeout=10) == ("ok", 500, sum(range(500)))
    store.close()


def test_file_store_wal_and_schema(tmp_path):
    s = open_store(str(tmp_path / "db"))
    s.write_pairs("w", 0, 0, 0, [b"x"])
    conn = sqlite3.connect(tmp_path / "db" / "mta.sqlite3")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    tables = {r[0]: r[1] for r in conn.execute("SELECT name, sql FROM sqlite_master "
                                               "WHERE type = 'table'")}
    assert "WITHOUT ROWID" in tables["pairs"] and "meta" in tables
    conn.execute("UPDATE info SET value = 99 WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    s.close()
    with pytest.raises(stores.FormatVersionError, match="99"):
        open_store(str(tmp_path / "db")).read_meta("w")


@pytest.mark.parametrize("mode", ["meta", "full", "normal", "off"])
def test_file_store_synchronous_modes(tmp_path, mode):
    s = open_store(str(tmp_path / mode), synchronous=mode)
    s.write_pairs("w", 0, 0, 0, [b"x"])
    t = s.cas_meta("w", None, b"m")
    s.cas_meta("w", t, b"n")
    assert s.read_meta("w")[0] == b"n"
    s.close()


@pytest.mark.parametrize("mode", ["meta", "full", "normal"])
def test_file_store_cas_meta_durable_false_skips_only_the_metadata_sync(tmp_path, mode):
    """``durable=False`` commits like a pair write: in mode "meta" the
    metadata's own FULL sync is skipped, and a mode syncing every commit
    still syncs it."""
    s = open_store(str(tmp_path / mode), synchronous=mode)
    t = s.cas_meta("w", None, b"m")
    statements = []
    s._conn().set_trace_callback(statements.append)
    t = s.cas_meta("w", t, b"claim", durable=False)
    lazy = list(statements)
    statements.clear()
    s.cas_meta("w", t, b"checkpoint")
    assert s.read_meta("w") == (b"checkpoint", t + 1)
    switches = [q for q in lazy if q.startswith("PRAGMA synchronous")]
    assert switches == []  # the claim runs at the connection's pair-write level
    assert any(q == "PRAGMA synchronous = FULL" for q in statements) == (mode == "meta")
    s.close()


@pytest.mark.parametrize("mode", ["meta", "full", "normal", "off"])
def test_file_store_checkpoints_with_durable_false_are_synced_once(tmp_path, mode, monkeypatch):
    """Windows opened with ``durable=False`` checkpoint without the
    metadata's own sync (no switch to FULL); one ``sync()`` then fsyncs the
    WAL and the directory once where the mode syncs
    metadata ("meta", "full"), and costs no round trip where it does not;
    the checkpoints are there either way."""
    from mta.amortized_mta import AmortizedMTA
    from stores import sqlite_store

    from tests.oracle import CONCAT

    s = open_store(str(tmp_path / mode), synchronous=mode)
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(sqlite_store.os, "fsync", lambda fd: (synced.append(os.readlink(f"/proc/self/fd/{fd}")),
                                                              real_fsync(fd))[1])
    statements = []
    s._conn().set_trace_callback(statements.append)
    for w in ("a", "b", "c"):
        e = AmortizedMTA(CONCAT, None, store=s, window_id=w, durable=False, background=False)
        e.push((w,))
        e.checkpoint()
        e.close()
    assert "PRAGMA synchronous = FULL" not in statements
    assert synced == []
    trips = s.stats.round_trips
    s.sync()
    syncs_meta = mode in ("meta", "full")
    wal, directory = str(tmp_path / mode / "mta.sqlite3") + "-wal", str(tmp_path / mode)
    assert synced == ([wal, directory] if syncs_meta else [])
    assert s.stats.round_trips == trips + syncs_meta
    synced.clear()
    s.sync()  # the directory again: SQLite may have deleted and made the WAL anew since
    assert synced == ([wal, directory] if syncs_meta else [])
    for w in ("a", "b", "c"):
        assert AmortizedMTA(CONCAT, None, store=s, window_id=w).query() == (w,)
    s.close()


def test_sync_is_free_where_the_backend_does_not_sync(tmp_path):
    s = open_store(f"memory://sync-{uuid.uuid4().hex}")
    s.sync()
    assert s.stats.round_trips == 0
    s.close()


def test_file_store_busy_database_is_retried_then_unavailable(tmp_path):
    s = open_store(str(tmp_path / "busy"), busy_timeout=0.05, retries=2, backoff=0.01)
    s.write_pairs("w", 0, 0, 0, [b"x"])
    blocker = sqlite3.connect(tmp_path / "busy" / "mta.sqlite3", isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(StoreUnavailable) as info:
            s.write_pairs("w", 0, 0, 1, [b"y"])
        msg = str(info.value)
        assert "write_pairs" in msg and "'w'" in msg and str(tmp_path) in msg
        assert info.value.attempts == 3 and s.stats.retries == 2
        assert isinstance(info.value.__cause__, sqlite3.OperationalError)
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    s.write_pairs("w", 0, 0, 1, [b"y"])  # works again once the lock is gone
    assert s.read_pairs("w", 0, 0, 0, 2) == [b"x", b"y"]
    s.close()


def test_file_store_deleted_under_a_running_job_is_detected(tmp_path):
    """The directory removed while a store is open: the next call (from any
    thread, on connections opened before or after) is MissingData naming the
    database, instead of going on with the deleted file or a new empty one."""
    import shutil

    directory = tmp_path / "state"
    store = SQLiteStore(f"file://{directory}")
    token = store.cas_meta("w", None, b"one")
    store.write_pairs("w", 1, 0, 0, [b"p"])
    shutil.rmtree(directory)
    for call in (lambda: store.read_meta("w"), lambda: store.cas_meta("w", token, b"two")):
        with pytest.raises(stores.MissingData, match="was deleted while in use"):
            call()
    errors = []
    worker = threading.Thread(target=lambda: errors.append(_raised(lambda: store.read_pairs("w", 1, 0, 0, 1))))
    worker.start()
    worker.join()
    assert isinstance(errors[0], stores.MissingData), errors
    other = SQLiteStore(f"file://{directory}")  # a new worker creates a new, empty database there
    assert other.read_meta("w") == (None, None)
    with pytest.raises(stores.MissingData, match="was replaced by another database"):
        store.read_meta("w")
    other.close()
    store.close()


def _raised(fn):
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - returned for the assertion
        return exc
    return None


def test_file_store_connection_per_thread(tmp_path):
    s = open_store(str(tmp_path / "threads"))
    conns = set()

    def work():
        s.write_pairs("w", 0, 0, 0, [b"x"])
        conns.add(id(s._conn()))

    ts = [threading.Thread(target=work) for _ in range(3)]
    for t in ts:
        t.start()
        t.join()
    work()
    assert len(conns) >= 2
    s.close()


# -------------------------------------------------------------------- redis

def test_redis_key_layout(redis_url, redis_server):
    s = open_store(redis_url)
    s.write_pairs("win", 3, 2, 10, [b"a", b"b"])
    s.cas_meta("win", None, b"m")
    raw = redis_server.client()
    try:
        keys = {k.decode() for k in raw.keys("*")}
        assert keys == {"mta:{win}:e3:l2", "mta:{win}:e3:levels", "mta:{win}:epochs",
                        "mta:{win}:meta"}
        assert raw.hgetall("mta:{win}:e3:l2") == {b"10": b"a", b"11": b"b"}
        assert raw.hgetall("mta:{win}:meta") == {b"v": str(s.read_meta("win")[1]).encode(), b"b": b"m"}
        s.delete_pairs("win", 3, 2, 0, 100)
        assert not raw.exists("mta:{win}:e3:l2")
        s.drop_epoch("win", 3)
        assert {k.decode() for k in raw.keys("*")} == {"mta:{win}:meta"}
    finally:
        raw.close()
        s.close()


def test_redis_key_prefix(redis_url, redis_server):
    s = open_store(redis_url, key_prefix="app1")
    s.write_pairs("w", 0, 0, 0, [b"a"])
    raw = redis_server.client()
    try:
        assert raw.exists("app1:{w}:e0:l0")
    finally:
        raw.close()
        s.close()


def test_redis_cas_retry_is_idempotent(redis_url):
    """A CAS whose reply was lost is retried: the retry sees its own write."""
    s = open_store(redis_url)
    t1 = s._cas_meta("w", None, b"v1", retry=False)
    assert s._cas_meta("w", None, b"v1", retry=True) == t1  # replay of the creation
    with pytest.raises(CasMismatch):
        s._cas_meta("w", None, b"other", retry=True)
    t2 = s._cas_meta("w", t1, b"v2", retry=False)
    assert s._cas_meta("w", t1, b"v2", retry=True) == t2
    with pytest.raises(CasMismatch):
        s._cas_meta("w", t1, b"v2", retry=False)  # not a retry: a real conflict
    s.close()


def test_redis_swap_retry_is_idempotent(redis_url):
    """A swap whose reply was lost is retried: the retry sees its own write,
    its listing too; another value is still refused."""
    s = open_store(redis_url)
    t1 = s.cas_meta("w", None, b"v1")
    s.write_pairs("w", 4, 0, 0, [b"p"])
    assert s._swap_meta("w", t1, b"v2", False, old=b"v1")[:2] == (True, t1 + 1)
    assert s._swap_meta("w", t1, b"v2", True, old=b"v1")[:2] == (True, t1 + 1)
    assert s._swap_meta("w", t1 + 1, b"v3", False, listing=True) == (True, t1 + 2, [4])
    assert s._swap_meta("w", t1 + 1, b"v3", True, listing=True) == (True, t1 + 2, [4])
    assert s._swap_meta("w", t1 + 1, b"other", True, old=b"v2") == (False, t1 + 2, b"v3")
    s.close()


def test_redis_swaps_sent_again_after_a_lost_reply_land_once(redis_url, monkeypatch):
    """Pipelined compare-and-sets whose replies were lost (the connection
    dropped after the server ran them) are sent again, told so: each that
    landed is reported done, not lost, and nothing is written twice."""
    from redis.exceptions import ConnectionError as RedisConnectionError

    s = open_store(redis_url, backoff=0.001)
    ta, tb = s.cas_meta("a", None, b"a1"), s.cas_meta("b", None, b"b1")
    real, calls = RedisStore._swap_meta_many, []

    def lost_reply_once(self, batch, **options):
        calls.append([c[3] for c in batch])  # the retry flags sent
        out = real(self, batch, **options)
        if len(calls) == 1:
            raise RedisConnectionError("connection dropped before the replies")
        return out

    monkeypatch.setattr(RedisStore, "_swap_meta_many", lost_reply_once)
    out = s.swap_meta_many([("a", ta, b"a1", b"a2"), ("b", tb, None, b"b2")])
    assert calls == [[False, False], [True, True]]
    assert out == [(True, ta + 1, None), (True, tb + 1, None)]
    assert s.read_meta("a") == (b"a2", ta + 1) and s.read_meta("b") == (b"b2", tb + 1)
    assert s.stats.retries == 1
    s.close()


def test_redis_swaps_of_which_some_landed_are_each_reported_as_they_are(redis_url, monkeypatch):
    """The connection dropped after the server ran the first of two
    pipelined compare-and-sets: sent again, told they may have landed, the
    first is reported done (it landed), the second done too (it lands now),
    and a third, stale, still lost."""
    from redis.exceptions import ConnectionError as RedisConnectionError

    s = open_store(redis_url, backoff=0.001)
    ta, tb, tc = (s.cas_meta(w, None, w.encode()) for w in "abc")
    real, calls = RedisStore._swap_meta_many, []

    def first_landed_only(self, batch, **options):
        calls.append(len(batch))
        if len(calls) == 1:
            real(self, batch[:1], **options)
            raise RedisConnectionError("connection dropped after the first command")
        return real(self, batch, **options)

    monkeypatch.setattr(RedisStore, "_swap_meta_many", first_landed_only)
    out = s.swap_meta_many([("a", ta, None, b"a2"), ("b", tb, None, b"b2"), ("c", tc + 5, None, b"c2")])
    assert calls == [3, 3]
    assert out == [(True, ta + 1, None), (True, tb + 1, None), (False, tc, None)]
    assert [s.read_meta(w)[0] for w in "abc"] == [b"a2", b"b2", b"c"]
    s.close()


def test_redis_cas_script_is_loaded_again_when_the_server_forgot_it(redis_url, redis_server):
    """The compare-and-set script runs by its SHA; a server that lost its
    scripts (restarted, SCRIPT FLUSH) gets it again, and the write lands once."""
    s = open_store(redis_url)
    t1 = s.cas_meta("w", None, b"one")
    raw = redis_server.client()
    try:
        raw.script_flush()
        t2, listed = s.cas_meta_epochs("w", t1, b"two")
        assert (t2, listed) == (t1 + 1, []) and s.read_meta("w") == (b"two", t2)
        raw.script_flush()
        assert tuple(s.swap_meta("w", t2, b"two", b"three")) == (True, t2 + 1, None)
        raw.script_flush()
        got = s.swap_meta_many([("w", t2 + 1, b"three", b"four"), ("v", None, None, b"v")])
        assert got == [(True, t2 + 2, None), (True, s.read_meta("v")[1], None)] and got[1][1] is not None
    finally:
        raw.close()
        s.close()


@pytest.mark.timeout(60)
def test_redis_restart_mid_run(redis_server_factory):
    server, s = _server_with_a_pair(redis_server_factory, retries=3, backoff=0.01, backoff_max=0.05)
    token = s.cas_meta("w", None, b"m")
    server.stop()
    with pytest.raises(StoreUnavailable) as info:
        s.read_pairs("w", 0, 0, 0, 1)
    msg = str(info.value)
    assert server.url in msg and "read_pairs" in msg and "'w'" in msg
    assert info.value.attempts == 4 and info.value.url == s.url
    assert info.value.operation == "read_pairs" and info.value.window == "w"
    with pytest.raises(StoreUnavailable, match="cas_meta"):
        s.cas_meta("w", token, b"n")
    server.start()
    # works again (the server kept no data: --save '')
    assert s.read_pairs("w", 0, 0, 0, 1) == [None]
    s.write_pairs("w", 0, 0, 0, [b"y"])
    assert s.read_pairs("w", 0, 0, 0, 1) == [b"y"]
    t = s.cas_meta("w", None, b"fresh")  # the CAS script is reloaded
    assert s.read_meta("w") == (b"fresh", t)
    s.close()


@pytest.mark.timeout(60)
def test_redis_restart_while_retrying(redis_server_factory):
    """A server back within the retry budget: the call succeeds."""
    server, s = _server_with_a_pair(redis_server_factory, retries=8, backoff=0.1, backoff_max=0.5)
    server.stop()
    timer = threading.Timer(0.3, server.start)
    timer.start()
    try:
        s.write_pairs("w", 0, 0, 0, [b"y"])
    finally:
        timer.join()
    assert s.stats.retries >= 1
    assert s.read_pairs("w", 0, 0, 0, 1) == [b"y"]
    s.close()


def test_redis_down_at_start():
    from tests.conftest import free_port
    url = f"redis://127.0.0.1:{free_port()}/0"
    s = open_store(url, retries=2, backoff=0.01)  # lazy: no I/O yet
    with pytest.raises(StoreUnavailable) as info:
        s.write_pairs("w", 0, 0, 0, [b"x"])
    assert info.value.attempts == 3
    msg = str(info.value)
    assert msg.startswith(f"store {url} is unavailable: write_pairs on window 'w' failed "
                          f"after 3 attempt(s)")
    assert not isinstance(info.value, ConnectionRefusedError)
    assert isinstance(info.value, StoreError)
    with pytest.raises(StoreUnavailable, match="ping"):
        s.ping()
    s.close()


SECRET = "s3cr3t-Pa55"


@pytest.mark.timeout(60)
def test_redis_password_never_shown(redis_server_factory, monkeypatch):
    server = redis_server_factory(password=SECRET)
    monkeypatch.delenv("MTA_REDIS_PASSWORD", raising=False)
    url = f"redis://:{SECRET}@127.0.0.1:{server.port}/0"
    s = open_store(url)
    s.write_pairs("w", 0, 0, 0, [b"x"])
    assert s.read_pairs("w", 0, 0, 0, 1) == [b"x"]
    for text in (s.url, repr(s), str(s)):
        assert SECRET not in text
        assert ":***@" in text
    # the same store, server gone: the error names the store without the secret
    s2 = open_store(url.replace(str(server.port), str(server.port)), retries=1, backoff=0.01)
    server.stop()
    with pytest.raises(StoreUnavailable) as info:
        s2.read_meta("w")
    assert SECRET not in str(info.value) and SECRET not in repr(info.value)
    assert SECRET not in str(info.value.__cause__)
    server.start()
    # wrong password: fails at once, without retrying, secrets not shown
    wrong = "WrOnG-pw-123"
    bad = open_store(f"redis://:{wrong}@127.0.0.1:{server.port}/0", retries=5)
    with pytest.raises(StoreAuthenticationError) as info:
        bad.read_meta("w")
    assert info.value.attempts == 1 and bad.stats.retries == 0
    assert wrong not in str(info.value) and wrong not in repr(bad)
    # no password at all
    anon = open_store(f"redis://127.0.0.1:{server.port}/0", retries=0)
    with pytest.raises(StoreAuthenticationError):
        anon.read_meta("w")
    # environment variable, overridden by the URL, overridden by the option
    monkeypatch.setenv("MTA_REDIS_PASSWORD", SECRET)
    env = open_store(f"redis://127.0.0.1:{server.port}/0")
    env.ping()
    assert SECRET not in repr(env)
    with pytest.raises(StoreAuthenticationError):
        open_store(f"redis://:{wrong}@127.0.0.1:{server.port}/0").ping()
    opt = open_store(f"redis://:{wrong}@127.0.0.1:{server.port}/0", password=SECRET)
    opt.ping()
    assert SECRET not in repr(opt) and wrong not in repr(opt)
    for x in (s, s2, bad, anon, env, opt):
        x.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("password", [123456789, b"wrong-bytes"])
def test_redis_password_option_of_another_type_fails_authentication_cleanly(redis_server_factory, password):
    """A password option that is not a str (an int read from a config file,
    bytes) and does not match: StoreAuthenticationError, at once, as for a
    wrong str."""
    server = redis_server_factory(password=SECRET)
    s = open_store(f"redis://127.0.0.1:{server.port}/0", password=password, retries=3)
    with pytest.raises(StoreAuthenticationError, match="authentication failed") as info:
        s.ping()
    assert info.value.attempts == 1 and ":***@" in str(info.value)
    s.close()


@pytest.mark.timeout(60)
def test_rediss_cluster_url_for_plain_ports_fails_at_once_saying_so(redis_cluster):
    """rediss+cluster:// to a cluster without TLS (docs/operations.md, TLS):
    the handshakes stall, then the store finds a seed answering plain Redis
    and says so instead of retrying like an outage."""
    port = redis_cluster.nodes[0].port
    s = open_store(f"rediss+cluster://127.0.0.1:1,127.0.0.1:{port}", retries=5, backoff=0.5, backoff_max=2.0,
                   timeout=30)
    with pytest.raises(StoreConfigError, match=f"the server at 127.0.0.1:{port} speaks Redis without TLS"):
        s.ping()
    assert s.stats.retries == 0
    s.close()


@pytest.mark.parametrize("url, options, unknown", [
    ("redis+cluster://127.0.0.1:1", {"bogus_option": 1}, "'bogus_option'"),
    ("redis+cluster://127.0.0.1:1", {"socket_timeout": 1, "db_number": 3}, "'db_number'"),
    ("redis+cluster://127.0.0.1:1?health_check_interval=5", {}, "'health_check_interval'"),
    ("redis://127.0.0.1:1/0", {"cluster": True, "bogus_option": 1}, "'bogus_option'"),
])
def test_redis_cluster_refuses_options_its_client_would_drop(url, options, unknown):
    """An option redis-py's Cluster client does not know is refused when the
    store is opened, as a standalone client refuses it, not dropped."""
    with pytest.raises(StoreConfigError, match=f"bad Redis client option: .*{unknown}"):
        open_store(url, **options)
    s = open_store("redis+cluster://127.0.0.1:1", socket_timeout=1, max_connections=4, read_from_replicas=False,
                   ssl_cert_reqs="none", client_name="mta")
    s.close()


def test_redis_url_parsing(monkeypatch):
    monkeypatch.delenv("MTA_REDIS_PASSWORD", raising=False)
    cfg = parse_redis_url("rediss://user:p%40ss@example.com:6380/3?socket_timeout=1.5")
    assert (cfg["tls"], cfg["cluster"], cfg["host"], cfg["port"], cfg["db"]) == \
        (True, False, "example.com", 6380, 3)
    assert cfg["username"] == "user" and cfg["password"] == "p@ss"
    assert cfg["socket_timeout"] == 1.5
    cfg = parse_redis_url("redis+cluster://h")
    assert cfg["cluster"] and cfg["port"] == 6379 and cfg["password"] is None
    with pytest.raises(StoreConfigError, match="unknown Redis URL parameter"):
        parse_redis_url("redis://h/0?password=x")
    with pytest.raises(StoreConfigError):
        parse_redis_url("redis://h/notanumber")
    s = open_store("rediss://user:p%40ss@example.com:6380/3", ssl_cert_reqs="none")
    assert s.url == "rediss://user:***@example.com:6380/3"
    assert s._kwargs["ssl"] is True and s._kwargs["ssl_cert_reqs"] == "none"
    s.close()
    s = open_store("redis://h:1", cluster=True)
    assert s.cluster and s.url == "redis+cluster://h:1"
    s.close()
    with pytest.raises(StoreConfigError, match="decode_responses"):
        open_store("redis://h", decode_responses=True)
    with pytest.raises(StoreConfigError, match="bad Redis client option"):
        open_store("redis://h", no_such_redis_option=1)


@pytest.mark.timeout(60)
def test_redis_cluster_single_node(redis_server_factory):
    server = redis_server_factory(cluster=True)
    s = open_store(server.url, retries=2, backoff=0.05)
    assert isinstance(s, RedisStore) and s.cluster
    for level in range(3):
        s.write_pairs("cw", 0, level, 0, blobs(600))
    assert s.read_pairs("cw", 0, 2, 598, 4) == [b"v598", b"v599", None, None]
    s.delete_pairs("cw", 0, 0, 0, 10)
    assert s.read_pairs("cw", 0, 0, 9, 2) == [None, b"v10"]
    t = s.cas_meta("cw", None, b"m")
    with pytest.raises(CasMismatch):
        s.cas_meta("cw", None, b"m2")
    s.cas_meta("cw", t, b"m3")
    assert s.read_meta("cw")[0] == b"m3"
    assert s.list_epochs("cw") == [0]
    s.drop_epoch("cw", 0)
    assert s.read_pairs("cw", 0, 1, 0, 1) == [None]
    s.delete_window("cw")
    assert s.read_meta("cw") == (None, None)
    s.close()


class _SlotMigration:
    """Resharding one slot of ``cluster`` as ``redis-cli --cluster reshard``
    does: :meth:`begin` marks it importing and migrating, :meth:`send`
    moves keys with MIGRATE, :meth:`end` gives the slot to its new master on
    every master.  ``owner``: the port of the master serving it now."""

    def __init__(self, cluster, slot: int) -> None:
        import redis

        self.slot = slot
        self.clients = {n.port: redis.Redis(port=n.port) for n in cluster.nodes}
        self.ids = {p: c.execute_command("CLUSTER", "MYID").decode() for p, c in self.clients.items()}
        layout = self.clients[cluster.nodes[0].port].execute_command("CLUSTER", "SLOTS")
        self.owner = next(master[1] for lo, hi, master, *_ in layout if lo <= slot <= hi)

    def begin(self, src: int, dst: int) -> None:
        self.clients[dst].execute_command("CLUSTER", "SETSLOT", self.slot, "IMPORTING", self.ids[src])
        self.clients[src].execute_command("CLUSTER", "SETSLOT", self.slot, "MIGRATING", self.ids[dst])

    def send(self, src: int, dst: int, keys=None) -> None:
        if keys is None:
            keys = self.clients[src].execute_command("CLUSTER", "GETKEYSINSLOT", self.slot, 1000)
        if keys:
            self.clients[src].execute_command("MIGRATE", "127.0.0.1", dst, "", 0, 5000, "KEYS", *keys)

    def end(self, dst: int) -> None:
        for c in self.clients.values():
            c.execute_command("CLUSTER", "SETSLOT", self.slot, "NODE", self.ids[dst])

    def move(self, src: int, dst: int) -> None:
        self.begin(src, dst)
        self.send(src, dst)
        self.end(dst)

    def close(self) -> None:
        for c in self.clients.values():
            c.close()


@pytest.mark.timeout(120)
def test_redis_cluster_write_during_a_slot_migration_lands_once_it_ends(redis_cluster):
    """A slot resharded while a window writes to it: with the window's keys
    split between two masters, the cluster answers TRYAGAIN until redis-py
    gives up (ClusterError); the store retries that like an outage, within
    its timeout, and the write lands once the migration ends."""
    s = open_store(redis_cluster.url, key_prefix=f"mig{uuid.uuid4().hex[:8]}", retries=200, backoff=0.05,
                   backoff_max=0.2, timeout=60)
    window = "moving"
    s.write_pairs(window, 1, 0, 0, blobs(4))
    s.write_pairs(window, 1, 1, 0, blobs(4))
    slot = s.client().keyslot(s.epochs_key(window))
    migration = _SlotMigration(redis_cluster, slot)
    src = migration.owner
    dst = next(n.port for n in redis_cluster.nodes if n.port != src)
    migration.begin(src, dst)
    # the epochs set moves first: a write of pairs (the set, its level's hash) finds its keys on two masters
    migration.send(src, dst, [s.epochs_key(window)])

    def the_rest() -> None:
        migration.send(src, dst)
        migration.end(dst)

    rest = threading.Timer(1.0, the_rest)
    rest.start()
    try:
        s.write_pairs(window, 1, 0, 4, blobs(4, start=4))
    finally:
        rest.join()
    assert s.stats.retries > 0  # it did wait for the migration
    assert s.read_pairs(window, 1, 0, 0, 9) == blobs(8) + [None]
    assert s.read_pairs(window, 1, 1, 0, 4) == blobs(4)
    s.delete_window(window)
    migration.move(dst, src)  # the slot back where it was, for the session's other tests
    migration.close()
    s.close()


def _server_with_a_pair(redis_server_factory, **retry):
    """A private server (restartable) and a store on it, with ``retry``
    settings, holding one pair: window "w", epoch, level and index 0, b"x"."""
    server = redis_server_factory()
    s = open_store(server.url, **retry)
    s.write_pairs("w", 0, 0, 0, [b"x"])
    return server, s
