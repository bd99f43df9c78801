"""The process's memory of the window records it wrote (stores.meta_cache).

A window opened again in the process that last wrote its record claims it
without reading it (Store.swap_meta against the remembered token and blob);
these tests check that what the cache remembers is never trusted beyond that
compare-and-set: a record another process changed, deleted, or deleted and
created again at the same token falls back to the store's record; two
owners racing with warm caches commit one linear history; and a stale
engine is still refused after a takeover made through the cache.  Engines
are checked against the brute-force oracle on a non-commutative monoid
(concatenation: order and contents both show).
"""

from __future__ import annotations

import gc
import threading

import pytest

import stores
from mta.amortized_mta import AmortizedMTA
from mta.log_mta import LogMTA
from stores import codec
from stores.meta_cache import MetaCache, Remembered, cache_of
from tests.oracle import CONCAT, BruteForceWindow
from tests.store_fixtures import fresh_window, settle_background, store_url  # noqa: F401  (fixture)

ENGINES = [pytest.param(LogMTA, id="LogMTA"), pytest.param(AmortizedMTA, id="AmortizedMTA")]


def _newest_10(t, p):
    return len(t) - len(p) >= 10


def _open(cls, store, window, **options):
    return cls(CONCAT, _newest_10, store=store, window_id=window, buffer_size=2, cache_size=1, **options)


def _session(cls, store, window, values, oracle, **options):
    """Open (resume the newest checkpoint), push ``values`` against the
    oracle, checkpoint, close: one micro-batch of a key.  Returns the version."""
    e = _open(cls, store, window, **options)
    assert len(e) == len(oracle.items) and e.query() == oracle.query()
    for v in values:
        assert e.push((v,)) == oracle.push((v,))
    version = e.checkpoint()
    e.close()
    return version


def _oracle():
    return BruteForceWindow(CONCAT, _newest_10)


def _set_token(store, window: str, token) -> None:
    """Give the window's record ``token``, its content unchanged, behind the
    store's back."""
    kind = type(store).__name__
    if kind == "MemoryStore":
        with store._space.lock:
            store._space.meta[window] = (token, store._space.meta[window][1])
    elif kind == "SQLiteStore":
        conn = store._conn()
        store._tx(conn, lambda: conn.execute("UPDATE meta SET version = ? WHERE window = ?", (token, window)))
    else:
        assert kind == "RedisStore", kind
        store.client().hset(store.meta_key(window), "v", token)


def _swaps(store) -> bool:
    return store._swap_meta is not None


#: How claims use a remembered record: swap it at once, or read the record
#: first (what a process does while its remembered records are seldom current).
MODES = ["swap-first", "read-first"]


def _store(url, mode):
    store = stores.open_store(url)
    cache_of(store)._current = 1.0 if mode == "swap-first" else 0.0
    return store


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("cls", ENGINES)
def test_a_remembered_record_is_claimed_without_reading_it(cls, mode, store_url):  # noqa: F811
    """The second micro-batch of a key in the same process claims its window
    in one round trip on the stores that compare content in their
    compare-and-set (file, redis) while swaps tend to succeed, and resumes
    exactly the checkpoint; read first, the claim wastes no compare-and-set."""
    store, window, oracle = _store(store_url, mode), fresh_window("warm"), _oracle()
    _session(cls, store, window, range(30), oracle)
    assert cache_of(store).get(window) is not None
    before, failures = store.stats.meta_reads, store.stats.cas_failures
    e = _open(cls, store, window)
    assert store.stats.meta_reads - before == (0 if _swaps(store) and mode == "swap-first" else 1)
    assert store.stats.cas_failures == failures
    assert len(e) == len(oracle.items) and e.query() == oracle.query()
    for v in range(30, 45):
        assert e.push((v,)) == oracle.push((v,))
    e.checkpoint()
    e.close()
    _session(cls, stores.open_store(store_url), window, range(45, 50), oracle)  # a cold process agrees
    settle_background()
    store.close()


@pytest.mark.skipif(not codec.PACKS_IN_C, reason="the codec's C extension is not in use (stores._codec not built, "
                    "or MTA_PURE_PYTHON set): nothing is untracked without it")
@pytest.mark.parametrize("cls", ENGINES)
def test_remembered_records_are_untracked_by_the_collector_and_resume_exactly(cls, store_url):  # noqa: F811
    """What the cache keeps of a record (its metadata, the payloads kept for
    re-encoding, the levels' head caches) is untracked by the cyclic garbage collector, so the full
    collections of a reused Spark worker do not walk it, and is never
    changed afterwards (what makes untracking it safe: the next claim and
    checkpoint leave it as it was); the key's next micro-batches, through
    the cache and from a cold process, still agree with the oracle."""
    store, window, oracle = stores.open_store(store_url), fresh_window("untracked"), _oracle()
    earlier = None
    for start in (0, 30, 60):
        _session(cls, store, window, range(start, start + 30), oracle)
        if earlier is not None:  # the claim and checkpoint after it changed nothing it holds
            assert codec.encode(earlier[0][2:]) == earlier[1]
        remembered = cache_of(store).get(window)
        earlier = remembered, codec.encode(remembered[2:])
        parts = [remembered.meta, remembered.packed, remembered.elements, remembered.heads]
        while parts:
            part = parts.pop()
            assert not gc.is_tracked(part), type(part)
            parts.extend(part.values() if isinstance(part, dict) else part if isinstance(part, (list, tuple)) else ())
    _session(cls, stores.open_store(store_url), window, range(90, 95), oracle)
    settle_background()
    store.close()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("cls", ENGINES)
def test_a_record_changed_by_another_process_is_read_again(cls, mode, store_url):  # noqa: F811
    """Another process (another store object, its own cache) takes the key
    and checkpoints: the remembered token is stale, and this process's next
    open resumes the other's checkpoint, not what it remembers."""
    window, oracle = fresh_window("stale"), _oracle()
    here, there = _store(store_url, mode), stores.open_store(store_url)
    _session(cls, here, window, range(20), oracle)
    _session(cls, there, window, range(20, 33), oracle)
    stale = cache_of(here).get(window)
    _session(cls, here, window, range(33, 40), oracle)  # asserts it resumed the other's state
    assert cache_of(here).get(window).token != stale.token
    _session(cls, there, window, range(40, 41), oracle)
    settle_background()
    here.close()
    there.close()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("cls", ENGINES)
def test_a_record_created_again_at_the_remembered_token_is_not_trusted(cls, mode, store_url):  # noqa: F811
    """The window is deleted and built again elsewhere with other contents:
    its record never takes the token this process remembers
    (``meta_cas.first_token``); given that token behind the store's back,
    as a backend repeating tokens would, the claim must still see the
    content differ and resume the new window."""
    window = fresh_window("aba")
    here, there = _store(store_url, mode), stores.open_store(store_url)
    _session(cls, here, window, range(20), _oracle())
    remembered = cache_of(here).get(window)
    there.delete_window(window)
    oracle = _oracle()
    _session(cls, there, window, range(100, 103), oracle, resume=False)
    for _ in range(3):  # a few more micro-batches elsewhere
        assert there.read_meta(window)[1] != remembered.token
        _session(cls, there, window, [200 + len(oracle.items)], oracle)
    _set_token(there, window, remembered.token)
    assert there.read_meta(window)[1] == remembered.token and there.read_meta(window)[0] != remembered.blob
    _session(cls, here, window, range(300, 305), oracle)  # resumes the new window, not the remembered one
    settle_background()
    here.close()
    there.close()


@pytest.mark.parametrize("cls", ENGINES)
def test_a_stale_engine_is_fenced_after_a_takeover_through_the_cache(cls, store_url):  # noqa: F811
    """A checkpoints (the cache remembers its record); B opens the window in
    the same process, taking it over through the cache; A's checkpoint and
    A's delete are refused, and the cache still holds B's record, so B's
    next micro-batch resumes what B committed."""
    store, window, oracle = stores.open_store(store_url), fresh_window("fence"), _oracle()
    a = _open(cls, store, window)
    for v in range(25):
        assert a.push((v,)) == oracle.push((v,))
    a.checkpoint()
    b = _open(cls, store, window)  # the takeover: a swap of A's remembered record
    assert b.query() == oracle.query()
    a.push((999,))
    with pytest.raises(stores.FencingError):
        a.checkpoint()
    for v in range(25, 31):
        assert b.push((v,)) == oracle.push((v,))
    b.checkpoint()
    with pytest.raises(stores.FencingError):
        a.close(delete=True)
    b.close()
    remembered = cache_of(store).get(window)
    assert remembered is not None and remembered.token == store.read_meta(window)[1]
    _session(cls, store, window, range(31, 36), oracle)
    settle_background()
    store.close()


@pytest.mark.parametrize("cls", ENGINES)
def test_two_owners_racing_with_warm_caches_commit_one_history(cls, store_url):  # noqa: F811
    """Two "processes" (threads with their own store object and cache) open,
    push one value and checkpoint the same window over and over; a lost
    race is a FencingError for the loser, from the checkpoint, or from a
    push or the opening when they read a group the winner cleaned up.  The versions committed are
    consecutive, each once, and the final window holds the committed
    values in commit order: nothing lost, nothing counted twice."""
    window, rounds = fresh_window("race"), 25
    _session(cls, stores.open_store(store_url), window, [], _oracle())  # version 1: empty
    committed: dict[int, int] = {}
    fenced: list[int] = []
    lock = threading.Lock()
    errors: list = []

    def owner(tag: int) -> None:
        store = stores.open_store(store_url)
        try:
            for i in range(rounds):
                value = tag * 1000 + i
                try:
                    e = _open(cls, store, window)
                except stores.FencingError:  # the rival claimed it while this opening read the levels' heads
                    with lock:
                        fenced.append(value)
                    continue
                try:
                    # A push can read a group the rival's checkpoint cleaned
                    # up: that read is fenced too, and the value never lands.
                    e.push((value,))
                    version = e.checkpoint()
                except stores.FencingError:
                    with lock:
                        fenced.append(value)
                    continue
                finally:
                    e.close()
                with lock:
                    assert version not in committed
                    committed[version] = value
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
        finally:
            settle_background()
            store.close()

    threads = [threading.Thread(target=owner, args=(tag,)) for tag in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert sorted(committed) == list(range(2, 2 + len(committed)))
    # Every attempt either committed or was fenced, never both; the owners may
    # fence each other in turn, so how many commit depends on the scheduling.
    assert len(committed) + len(fenced) == 2 * rounds
    assert not set(committed.values()) & set(fenced)
    assert committed, "no owner ever committed"
    oracle = _oracle()
    for version in sorted(committed):
        oracle.push((committed[version],))
    e = _open(cls, stores.open_store(store_url), window)
    assert len(e) == len(oracle.items) and e.query() == oracle.query()
    e.close()


def test_claims_stop_swapping_while_remembered_records_are_stale(store_url):  # noqa: F811
    """Two processes take turns with the same keys: each one's remembered
    records are always stale, so after a few failed swaps its claims read
    first (no more failed compare-and-sets), and swap again once records
    it remembers are current again."""
    here, there = stores.open_store(store_url), stores.open_store(store_url)
    windows = [fresh_window("turns") for _ in range(12)]
    oracles = {w: _oracle() for w in windows}
    for w in windows:
        _session(AmortizedMTA, here, w, [0], oracles[w])
    for turn in range(4):
        for w in windows:
            _session(AmortizedMTA, there if turn % 2 == 0 else here, w, [turn + 1], oracles[w])
    assert not cache_of(here).swapping()
    failures = here.stats.cas_failures
    for w in windows:
        _session(AmortizedMTA, there, w, [10], oracles[w])
        _session(AmortizedMTA, here, w, [11], oracles[w])
    assert here.stats.cas_failures == failures  # read first: nothing wasted
    for w in windows:  # this process alone now: its records are current
        _session(AmortizedMTA, here, w, [12], oracles[w])
    assert cache_of(here).swapping()
    settle_background()
    here.close()
    there.close()


def _moving_key(cls, url, window, turns=12, offset=0):
    """A key whose micro-batches alternate between two processes (two
    stores, each with its own cache; each claim reads and decodes the
    record the other wrote), checked against the oracle and for canonical
    records.  Returns the tail elements the checkpoints packed anew."""
    from stores import codec, window_packing
    from stores.window_meta import decode_meta

    here, there, oracle = stores.open_store(url), stores.open_store(url), _oracle()
    packs = []
    real = window_packing.packed

    def counted(value):
        packs.append(value)
        return real(value)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(window_packing, "packed", counted)
        for turn in range(turns):
            version = _session(cls, here if turn % 2 == 0 else there, window,
                               range(offset + turn * 7, offset + turn * 7 + 3 + turn), oracle)
            blob, _ = here.read_meta(window)
            assert blob == codec.encode(codec.decode(blob)), turn
            meta = decode_meta(blob, window)
            parts, payloads = window_packing.checkpoint_payloads(blob, meta, version)
            assert parts == [codec.packed(c) for c in meta["checkpoints"]]
            (entry,) = [c for c in meta["checkpoints"] if c[0] == version]
            elements = [e for rec in entry[2] for e in rec["tail"]]
            assert sorted(payloads) == sorted(id(e) for e in elements)
            assert all(payloads[id(e)][0] is e and payloads[id(e)][1] == codec.packed(e) for e in elements)
    settle_background()
    here.close()
    there.close()
    return [p for p in packs if isinstance(p, tuple)]


@pytest.mark.parametrize("packing", ["C", "Python", "C, big ints"])
@pytest.mark.parametrize("cls", ENGINES)
def test_a_key_moving_between_processes_reuses_the_tails_it_read(cls, store_url, packing):  # noqa: F811
    """A key moving between processes at every micro-batch: each record is
    byte for byte the encoding of what it holds.  Packed in C, a record is
    packed whole.  Packed in Python, or in C with values the C packer leaves
    to msgpack (big ints), the bytes reused for its tail elements are each
    element's own encoding (checkpoint_payloads), and the checkpoints pack
    fewer tail elements than without that reuse."""
    from stores import codec, window_owner

    offset = 2**70 if "big" in packing else 0
    with pytest.MonkeyPatch.context() as python_packing:
        if packing == "Python":
            python_packing.setattr(codec, "PACKS_IN_C", False)
        elif codec._fast is None:
            pytest.skip("the codec's C packer is not built (stores._codec), or MTA_PURE_PYTHON is set")
        reused = _moving_key(cls, store_url, fresh_window("moving"), offset=offset)
        if packing == "C":
            assert reused == []  # no tail element packed on its own
            return
        with pytest.MonkeyPatch.context() as patch:
            real = window_owner.claimed_payloads
            patch.setattr(window_owner, "claimed_payloads",
                          lambda blob, meta, checkpoint: (real(blob, meta, checkpoint)[0], {}))
            anew = _moving_key(cls, store_url, fresh_window("moving"), offset=offset)
    assert len(reused) < len(anew), (len(reused), len(anew))


def test_the_cache_is_bounded_and_forgets_only_its_own_token():
    cache = MetaCache(size=2)
    entries = {w: Remembered(i, b"blob", {}, {}, {}) for i, w in enumerate("abc")}
    cache.put("a", entries["a"])
    cache.put("b", entries["b"])
    assert cache.get("a") is entries["a"]  # now the most recently used
    cache.put("c", entries["c"])
    assert len(cache) == 2 and cache.get("b") is None and cache.get("a") is entries["a"]
    cache.forget("a", token=99)  # another engine's token: kept
    assert cache.get("a") is entries["a"]
    cache.forget("a", token=0)
    assert cache.get("a") is None and cache.get("c") is entries["c"]
    cache.forget("c")
    assert len(cache) == 0
