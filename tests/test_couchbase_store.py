"""The Couchbase store.

Unit tests run the store's own logic (URL and credential parsing, key
naming, range records, batching, result handling, exception mapping)
against :class:`FakeCollection`, an in-memory stand-in for an SDK 4
``Collection`` that returns the SDK's real result classes
(``MultiGetResult``, ``MultiMutationResult``, ``GetResult``,
``MutationResult``) and raises its real exceptions, with the transcoder the
store passes (the SDK's default JSON transcoder refuses bytes, as the real
one does).

Integration tests need a real server: they run only when ``COUCHBASE_URL``
(and ``COUCHBASE_USERNAME`` / ``COUCHBASE_PASSWORD``) are set.
"""

from __future__ import annotations

import itertools
import os
import threading
import uuid
from collections import deque

import pytest

from stores import (CasMismatch, CorruptValue, StoreAuthenticationError, StoreConfigError,
                    StoreError, StoreUnavailable, open_store)
from stores import couchbase_connection as connection
from stores import couchbase_store as cbs
from stores.couchbase_store import CouchbaseStore, exc_kind
from stores.couchbase_url import parse_couchbase_url

cb_exc = pytest.importorskip(
    "couchbase.exceptions",
    reason="Couchbase SDK not installed: pip install -e '.[couchbase]'")
from couchbase.result import (GetResult, MultiGetResult, MultiMutationResult,  # noqa: E402
                              MutationResult)
from couchbase.transcoder import JSONTranscoder, RawBinaryTranscoder  # noqa: E402

NO_SERVER = "no Couchbase server: set COUCHBASE_URL (no Docker engine for testcontainers here)"
SECRET = "cb-s3cret-PW"


# ------------------------------------------------------------------- fake

class _Orig:
    """Stands in for the SDK core's ``pycbc_result``: results read ``raw_result``."""

    def __init__(self, raw: dict) -> None:
        self.raw_result = raw


class FakeCollection:
    """In-memory Collection with the SDK 4 call signatures and result shapes.

    ``fail(op, exc, applied=False)`` queues a failure for the next call of
    ``op``; with ``applied=True`` the call takes effect before raising (an
    ambiguous failure, e.g. a timeout after the server applied the write).
    """

    def __init__(self) -> None:
        self.docs: dict[str, tuple[bytes, int, int]] = {}  # key -> (value, flags, cas)
        self.calls: list[tuple[str, int]] = []
        self.kwargs: list[dict] = []
        self._failures: deque = deque()
        self._cas = itertools.count(1_000_001, 7)
        self._lock = threading.Lock()

    def fail(self, op: str, exc: BaseException, applied: bool = False, times: int = 1) -> None:
        for _ in range(times):
            self._failures.append((op, exc, applied))

    def _enter(self, op: str, n: int, kwargs: dict):
        self.calls.append((op, n))
        self.kwargs.append(kwargs)
        if self._failures and self._failures[0][0] == op:
            _, exc, applied = self._failures.popleft()
            if not applied:
                raise exc
            return exc
        return None

    @staticmethod
    def _tc(kwargs):
        return kwargs.get("transcoder") or JSONTranscoder()

    def _encode(self, value, kwargs):
        return self._tc(kwargs).encode_value(value)

    def _get_orig(self, key):
        value, flags, cas = self.docs[key]
        return _Orig({"value": value, "flags": flags, "cas": cas, "key": key})

    def get_multi(self, keys, *opts, **kwargs):
        pending = self._enter("get_multi", len(keys), kwargs)
        assert kwargs.get("return_exceptions", True) is True
        raw: dict = {}
        with self._lock:
            for k in keys:
                raw[k] = self._get_orig(k) if k in self.docs else \
                    cb_exc.DocumentNotFoundException(message=f"not found: {k}")
        raw["all_okay"] = all(k in self.docs for k in keys)
        tc = self._tc(kwargs)
        res = MultiGetResult(_Orig(raw), return_exceptions=True,
                             transcoders={k: tc for k in keys})
        if pending is not None:
            raise pending
        return res

    def upsert_multi(self, keys_and_docs, *opts, **kwargs):
        assert isinstance(keys_and_docs, dict)
        encoded = {k: self._encode(v, kwargs) for k, v in keys_and_docs.items()}
        pending = self._enter("upsert_multi", len(keys_and_docs), kwargs)
        raw: dict = {"all_okay": True}
        with self._lock:
            for k, (value, flags) in encoded.items():
                cas = next(self._cas)
                self.docs[k] = (value, flags, cas)
                raw[k] = _Orig({"cas": cas})
        res = MultiMutationResult(_Orig(raw), return_exceptions=True)
        if pending is not None:
            raise pending
        return res

    def remove_multi(self, keys, *opts, **kwargs):
        pending = self._enter("remove_multi", len(keys), kwargs)
        raw: dict = {}
        ok = True
        with self._lock:
            for k in keys:
                if k in self.docs:
                    del self.docs[k]
                    raw[k] = _Orig({"cas": next(self._cas)})
                else:
                    ok = False
                    raw[k] = cb_exc.DocumentNotFoundException(message=f"not found: {k}")
        raw["all_okay"] = ok
        res = MultiMutationResult(_Orig(raw), return_exceptions=True)
        if pending is not None:
            raise pending
        return res

    def get(self, key, *opts, **kwargs):
        pending = self._enter("get", 1, kwargs)
        if pending is not None:
            raise pending
        with self._lock:
            if key not in self.docs:
                raise cb_exc.DocumentNotFoundException(message=f"not found: {key}")
            return GetResult(self._get_orig(key), transcoder=self._tc(kwargs))

    def insert(self, key, value, *opts, **kwargs):
        value, flags = self._encode(value, kwargs)
        pending = self._enter("insert", 1, kwargs)
        with self._lock:
            if key in self.docs:
                raise cb_exc.DocumentExistsException(message=f"exists: {key}")
            cas = next(self._cas)
            self.docs[key] = (value, flags, cas)
        if pending is not None:
            raise pending
        return MutationResult(_Orig({"cas": cas}), key=key)

    def replace(self, key, value, *opts, cas=None, **kwargs):
        value, flags = self._encode(value, kwargs)
        pending = self._enter("replace", 1, kwargs)
        with self._lock:
            if key not in self.docs:
                raise cb_exc.DocumentNotFoundException(message=f"not found: {key}")
            if cas not in (None, 0) and self.docs[key][2] != cas:
                raise cb_exc.CasMismatchException(message=f"cas mismatch: {key}")
            new = next(self._cas)
            self.docs[key] = (value, flags, new)
        if pending is not None:
            raise pending
        return MutationResult(_Orig({"cas": new}), key=key)

    def remove(self, key, *opts, cas=None, **kwargs):
        pending = self._enter("remove", 1, kwargs)
        with self._lock:
            if key not in self.docs:
                raise cb_exc.DocumentNotFoundException(message=f"not found: {key}")
            if cas not in (None, 0) and self.docs[key][2] != cas:
                raise cb_exc.CasMismatchException(message=f"cas mismatch: {key}")
            del self.docs[key]
            new = next(self._cas)
        if pending is not None:
            raise pending
        return MutationResult(_Orig({"cas": new}), key=key)


@pytest.fixture
def fake():
    return FakeCollection()


@pytest.fixture
def store(fake):
    s = open_store("couchbase://db.example/bucket?scope=s&collection=c", collection=fake,
                   username="u", password=SECRET, retries=2, backoff=0.001)
    yield s
    s.close()


def pair_docs(fake):
    return sorted(k for k in fake.docs if "::l" in k)


# ------------------------------------------------------------ URL / config

def test_url_parsing():
    cfg = parse_couchbase_url("couchbases://h1,h2:11210/bk?scope=sc&collection=co"
                              "&network=external")
    assert cfg["connstr"] == "couchbases://h1,h2:11210?network=external"
    assert (cfg["bucket"], cfg["scope"], cfg["collection"]) == ("bk", "sc", "co")
    cfg = parse_couchbase_url("couchbase://h/b")
    assert (cfg["scope"], cfg["collection"], cfg["connstr"]) == ("_default", "_default",
                                                                 "couchbase://h")
    for bad in ("couchbase://h", "couchbase://h/a/b", "couchbase:///b", "http://h/b"):
        with pytest.raises(StoreConfigError):
            parse_couchbase_url(bad)
    with pytest.raises(StoreConfigError, match="credentials"):
        parse_couchbase_url("couchbase://h/b?password=x")


def test_credentials_precedence_and_redaction(monkeypatch):
    monkeypatch.setenv("COUCHBASE_USERNAME", "envuser")
    monkeypatch.setenv("COUCHBASE_PASSWORD", "envpw-" + SECRET)
    s = open_store("couchbase://h/b")
    assert s._cfg["username"] == "envuser" and s._password == "envpw-" + SECRET
    s2 = open_store(f"couchbase://urluser:url{SECRET}@h/b")
    assert s2._cfg["username"] == "urluser" and s2._password == "url" + SECRET
    s3 = open_store(f"couchbase://urluser:url{SECRET}@h/b", username="opt", password=SECRET)
    assert s3._cfg["username"] == "opt" and s3._password == SECRET
    for x in (s, s2, s3):
        for text in (x.url, repr(x), str(x)):
            assert SECRET not in text
    assert s2.url == "couchbase://urluser:***@h/b?scope=_default&collection=_default"
    assert s.url == "couchbase://envuser:***@h/b?scope=_default&collection=_default"
    with pytest.raises(StoreConfigError, match="unknown option"):
        open_store("couchbase://h/b", bogus=1)


def test_no_credentials_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("COUCHBASE_USERNAME", raising=False)
    monkeypatch.delenv("COUCHBASE_PASSWORD", raising=False)
    s = open_store("couchbase://127.0.0.1/b")  # lazy: no connection yet
    with pytest.raises(StoreConfigError, match="COUCHBASE_USERNAME"):
        s.read_meta("w")


def test_key_naming():
    assert CouchbaseStore.pair_key("w", 3, 2, 17) == "mta::w::e3::l2::17"
    assert CouchbaseStore.meta_key("w") == "mta::w::meta"
    assert CouchbaseStore.ranges_key("w", 3) == "mta::w::e3::ranges"
    assert CouchbaseStore.epochs_key("w") == "mta::w::epochs"
    longest = "x" * 160
    assert len(CouchbaseStore.pair_key(longest, 2**63, 2**16, 2**63).encode()) <= 250


def test_exception_classification(store):
    assert store._classify(cb_exc.UnAmbiguousTimeoutException()) == "transient"
    assert store._classify(cb_exc.AmbiguousTimeoutException()) == "transient"
    assert store._classify(cb_exc.TemporaryFailException()) == "transient"
    assert store._classify(cb_exc.ServiceUnavailableException()) == "transient"
    assert store._classify(cb_exc.AuthenticationException()) == "auth"
    assert store._classify(cb_exc.InvalidArgumentException()) is None
    assert "DocumentNotFoundException" in exc_kind(cb_exc.DocumentNotFoundException())


# ------------------------------------------------------------- pair data

def test_write_read_delete(store, fake):
    store.write_pairs("w", 0, 1, 10, [b"a", b"b", b"c"])
    assert store.read_pairs("w", 0, 1, 9, 5) == [None, b"a", b"b", b"c", None]
    assert fake.docs["mta::w::e0::l1::10"][0] == b"a"
    assert fake.docs["mta::w::e0::l1::10"][1] == RawBinaryTranscoder().encode_value(b"a")[1]
    assert all(isinstance(kw.get("transcoder"), RawBinaryTranscoder)
               for (op, _), kw in zip(fake.calls, fake.kwargs) if op != "remove_multi")
    store.delete_pairs("w", 0, 1, 0, 11)  # missing keys are fine
    assert store.read_pairs("w", 0, 1, 10, 3) == [None, b"b", b"c"]
    assert pair_docs(fake) == ["mta::w::e0::l1::11", "mta::w::e0::l1::12"]


def test_round_trips(store, fake):
    store.write_pairs("w", 0, 0, 0, [b"x"] * 512)
    # first write to an epoch by this store object reads the range records once
    assert [op for op, _ in fake.calls] == ["get_multi", "upsert_multi"]
    assert store.stats.round_trips == 2
    fake.calls.clear()
    store.write_pairs("w", 0, 0, 512, [b"y"] * 512)
    store.read_pairs("w", 0, 0, 0, 1024)
    store.delete_pairs("w", 0, 0, 0, 100)
    assert [op for op, _ in fake.calls] == ["upsert_multi", "get_multi", "remove_multi"]
    assert store.stats.round_trips == 5
    # records ride in the same batch: 512 pairs + the ranges record
    assert fake.calls[0][1] == 513


def test_large_batches_are_chunked(store, fake, monkeypatch):
    monkeypatch.setattr(cbs, "CHUNK", 100)
    store.write_pairs("w", 0, 0, 0, [b"z"] * 250)  # 1 get + 3 upserts
    assert [op for op, _ in fake.calls] == ["get_multi"] + ["upsert_multi"] * 3
    assert store.stats.round_trips == 4
    assert store.read_pairs("w", 0, 0, 0, 260) == [b"z"] * 250 + [None] * 10
    assert store.stats.round_trips == 7


def test_non_binary_document_is_corrupt(store, fake):
    fake.docs["mta::w::e0::l0::0"] = (b'{"json": 1}', JSONTranscoder().encode_value({})[1], 5)
    with pytest.raises(StoreError):
        store.read_pairs("w", 0, 0, 0, 1)


def test_range_records_and_drop_epoch(store, fake):
    for level in range(3):
        store.write_pairs("w", 4, level, 100, [b"p"] * 10)
    store.write_pairs("w", 4, 0, 110, [b"q"] * 5)
    store.write_pairs("w", 5, 0, 0, [b"r"])
    assert store.list_epochs("w") == [4, 5]
    # a fresh store object (e.g. after a restart) finds everything from the records
    other = open_store("couchbase://db.example/bucket?scope=s&collection=c",
                       collection=fake, username="u", password=SECRET)
    other.drop_epoch("w", 4)
    assert pair_docs(fake) == ["mta::w::e5::l0::0"]
    assert "mta::w::e4::ranges" not in fake.docs
    assert other.list_epochs("w") == [5]
    assert store.list_epochs("w") == [5]
    other.drop_epoch("w", 4)  # nothing left: fine


def test_drop_epoch_ranges_are_a_hint_every_level_goes(store, fake):
    """The contract: ranges name pairs the records may lack; levels they do
    not name go too (their record would be gone, and the pairs with it)."""
    store.write_pairs("w", 1, 0, 0, [b"a"] * 10)
    store.write_pairs("w", 1, 1, 0, [b"b"] * 5)
    store.write_pairs("w", 1, 2, 0, [b"c"] * 3)
    fake.docs["mta::w::e1::l0::12"] = fake.docs["mta::w::e1::l0::0"]  # a pair no record lists
    store.drop_epoch("w", 1, ranges={0: (4, 13)})
    assert pair_docs(fake) == []
    assert "mta::w::e1::ranges" not in fake.docs and store.list_epochs("w") == []


def test_meta_cas_refuses_tokens_that_are_not_cas_values(store, fake):
    token = store.cas_meta("m", None, b"one")
    for bad in ("not a token", 0, -1, True, 1.5, str(token)):
        with pytest.raises(CasMismatch):
            store.cas_meta("m", bad, b"overwritten")
    assert store.read_meta("m") == (b"one", token)


def test_delete_from_head_advances_recorded_start(store, fake):
    store.write_pairs("w", 0, 0, 0, [b"a"] * 100)
    store.delete_pairs("w", 0, 0, 0, 90)
    store.write_pairs("w", 0, 0, 100, [b"b"] * 10)  # carries the new start
    from stores.codec import decode
    assert decode(fake.docs["mta::w::e0::ranges"][0]) == {0: (90, 110)}
    fake.calls.clear()
    fresh = open_store("couchbase://db.example/bucket", collection=fake, username="u",
                       password="p")
    fresh.drop_epoch("w", 0)
    # the 20 pairs from the recorded start, the ranges record, and the epochs
    # record (its last epoch went)
    assert sum(n for op, n in fake.calls if op == "remove_multi") == 20 + 1 + 1
    assert pair_docs(fake) == [] and fake.docs == {}


def test_threads_sharing_a_store_keep_the_records_complete(store, fake):
    def work(level):
        for k in range(20):
            store.write_pairs("w", level % 3, level, k * 5, [b"x"] * 5)
            if k % 5 == 4:
                store.delete_pairs("w", level % 3, level, 0, k * 5)

    threads = [threading.Thread(target=work, args=(lv,)) for lv in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    fresh = open_store("couchbase://h/b", collection=fake, username="u", password="p")
    assert fresh.list_epochs("w") == [0, 1, 2]
    for e in range(3):
        fresh.drop_epoch("w", e)
    assert pair_docs(fake) == [] and fresh.list_epochs("w") == []


def test_delete_window(store, fake):
    store.write_pairs("w", 0, 0, 0, [b"a"] * 3)
    store.write_pairs("w", 7, 2, 50, [b"b"] * 3)
    store.cas_meta("w", None, b"m")
    store.write_pairs("keep", 0, 0, 0, [b"k"])
    store.delete_window("w")
    assert sorted(fake.docs) == ["mta::keep::e0::l0::0", "mta::keep::e0::ranges",
                                 "mta::keep::epochs"]
    assert store.read_meta("w") == (None, None)
    store.write_pairs("w", 0, 0, 0, [b"again"])  # records are rebuilt
    assert store.list_epochs("w") == [0]


# ------------------------------------------------------------------ meta

def test_meta_cas(store, fake):
    assert store.read_meta("w") == (None, None)
    t1 = store.cas_meta("w", None, b"one")
    assert fake.docs["mta::w::meta"][2] == t1
    assert store.read_meta("w") == (b"one", t1)
    with pytest.raises(CasMismatch) as info:
        store.cas_meta("w", None, b"dup")  # DocumentExistsException
    assert info.value.actual == t1
    t2 = store.cas_meta("w", t1, b"two")
    with pytest.raises(CasMismatch):
        store.cas_meta("w", t1, b"stale")  # CasMismatchException
    assert store.read_meta("w") == (b"two", t2)
    del fake.docs["mta::w::meta"]
    with pytest.raises(CasMismatch) as info:
        store.cas_meta("w", t2, b"gone")  # DocumentNotFoundException
    assert info.value.actual is None


def test_two_stores_racing_cas(fake):
    a = open_store("couchbase://h/b", collection=fake, username="u", password="p")
    b = open_store("couchbase://h/b", collection=fake, username="u", password="p")
    a.cas_meta("w", None, b"0")
    _, ta = a.read_meta("w")
    _, tb = b.read_meta("w")
    a.cas_meta("w", ta, b"a")
    with pytest.raises(CasMismatch):
        b.cas_meta("w", tb, b"b")
    assert b.read_meta("w")[0] == b"a"


def test_ambiguous_cas_is_resolved_on_retry(store, fake):
    t1 = store.cas_meta("w", None, b"one")
    # the replace lands, then the reply is lost: the retry sees its own value
    fake.fail("replace", cb_exc.AmbiguousTimeoutException(message="timeout"), applied=True)
    t2 = store.cas_meta("w", t1, b"two")
    assert store.read_meta("w") == (b"two", t2)
    assert store.stats.retries == 1
    # same for a creation
    fake.fail("insert", cb_exc.AmbiguousTimeoutException(message="timeout"), applied=True)
    store.cas_meta("new", None, b"v")
    assert store.read_meta("new")[0] == b"v"


# ----------------------------------------------------------------- errors

def test_transient_errors_are_retried(store, fake):
    fake.fail("upsert_multi", cb_exc.TemporaryFailException(message="tmpfail"), times=2)
    store.write_pairs("w", 0, 0, 0, [b"a"])
    assert store.stats.retries == 2
    assert store.read_pairs("w", 0, 0, 0, 1) == [b"a"]


def test_persistent_failure_is_store_unavailable(store, fake):
    fake.fail("get_multi", cb_exc.UnAmbiguousTimeoutException(message=f"timeout {SECRET}"),
              times=3)
    with pytest.raises(StoreUnavailable) as info:
        store.read_pairs("w", 0, 0, 0, 4)
    assert info.value.attempts == 3
    msg = str(info.value)
    assert "couchbase://u:***@db.example/bucket" in msg and "read_pairs" in msg
    assert "'w'" in msg and "after 3 attempt(s)" in msg
    assert SECRET not in msg and SECRET not in repr(store)
    assert isinstance(info.value.__cause__, cb_exc.UnAmbiguousTimeoutException)


def test_authentication_error_is_not_retried(store, fake):
    fake.fail("get", cb_exc.AuthenticationException(message="bad creds"))
    with pytest.raises(StoreAuthenticationError) as info:
        store.read_meta("w")
    assert info.value.attempts == 1 and store.stats.retries == 0


def test_unexpected_sdk_error_is_store_error(store, fake):
    fake.fail("get_multi", cb_exc.InvalidArgumentException(message="nope"))
    with pytest.raises(StoreError, match="InvalidArgumentException") as info:
        store.read_pairs("w", 0, 0, 0, 1)
    assert not isinstance(info.value, StoreUnavailable)


def test_per_key_errors_in_multi_results_are_raised(store, fake):
    store.write_pairs("w", 0, 0, 0, [b"a", b"b"])
    original = fake.get_multi

    def flaky(keys, *opts, **kwargs):
        res = original(keys, *opts, **kwargs)
        res._results[keys[0]] = cb_exc.TemporaryFailException(message="one key failed")
        return res

    fake.get_multi = flaky
    with pytest.raises(StoreUnavailable):
        store.read_pairs("w", 0, 0, 0, 2)


def test_corrupt_range_record(store, fake):
    store.write_pairs("w", 0, 0, 0, [b"a"])
    value, flags, cas = fake.docs["mta::w::e0::ranges"]
    fake.docs["mta::w::e0::ranges"] = (value[:-1] + bytes([value[-1] ^ 1]), flags, cas)
    fresh = open_store("couchbase://h/b", collection=fake, username="u", password="p")
    with pytest.raises(CorruptValue):
        fresh.drop_epoch("w", 0)


@pytest.mark.timeout(60)
def test_real_sdk_against_closed_port_is_unavailable():
    """The real SDK, no server: the first operation fails clearly and in bounded time."""
    from tests.conftest import free_port
    s = open_store(f"couchbase://127.0.0.1:{free_port()}/b", username="u", password=SECRET,
                   connect_timeout=1, retries=0)
    with pytest.raises(StoreUnavailable) as info:
        s.read_meta("w")
    assert info.value.attempts == 1  # retries=0; the timeout mark bounds the time
    assert SECRET not in str(info.value)
    assert "read_meta" in str(info.value) and "127.0.0.1" in str(info.value)
    s.close()


# ------------------------------------------------------------ integration

@pytest.fixture
def real_store():
    url = os.environ.get("COUCHBASE_URL")
    if not url:
        pytest.skip(NO_SERVER)
    s = open_store(url, retries=3)
    window = f"it-{uuid.uuid4().hex[:12]}"
    yield s, window
    try:
        s.delete_window(window)
    finally:
        s.close()


def test_integration_pairs(real_store):
    s, w = real_store
    s.write_pairs(w, 0, 0, 0, [b"a", b"b", b"c"])
    assert s.read_pairs(w, 0, 0, 0, 4) == [b"a", b"b", b"c", None]
    s.delete_pairs(w, 0, 0, 0, 2)
    assert s.read_pairs(w, 0, 0, 0, 3) == [None, None, b"c"]
    s.write_pairs(w, 1, 2, 10, [b"x"] * 600)
    assert s.list_epochs(w) == [0, 1]
    s.drop_epoch(w, 1)
    assert s.read_pairs(w, 1, 2, 10, 600) == [None] * 600
    assert s.list_epochs(w) == [0]


def test_integration_meta_cas(real_store):
    s, w = real_store
    assert s.read_meta(w) == (None, None)
    t = s.cas_meta(w, None, b"m1")
    with pytest.raises(CasMismatch):
        s.cas_meta(w, None, b"dup")
    t2 = s.cas_meta(w, t, b"m2")
    with pytest.raises(CasMismatch):
        s.cas_meta(w, t, b"stale")
    assert s.read_meta(w) == (b"m2", t2)


# ------------------------------------------------- window index and sweep

def test_window_index_lists_every_record_and_forgets_deleted_ones(store, fake):
    from stores import couchbase_layout as layout
    from stores.codec import decode

    names = [f"w{i}" for i in range(40)] + ["a::b", "ünï/ 1"]
    for n in names:
        store.cas_meta(n, None, b"m")
    store.write_pairs("w0", 1, 0, 0, [b"p"])
    assert store.window_names() == sorted(names)
    index_docs = {k for k in fake.docs if k.startswith("mta::windows::")}
    assert index_docs and index_docs <= set(layout.index_keys())
    # what the shards hold, read from the fake's documents directly
    held = set()
    for k in index_docs:
        held |= set(decode(fake.docs[k][0]))
    assert held == set(names)
    for n in names[1:]:
        token = store.read_meta(n)[1]
        store.delete_meta(n, token)
    store.delete_window("w0")
    assert store.window_names() == [] and fake.docs == {}


def test_unindex_keeps_a_window_created_again_meanwhile(store, fake):
    """A delete takes the name out after the record; a store that created
    the window again in between (finding the name still listed) must stay
    listed: the deleter puts the name back when the record exists."""
    store.cas_meta("w", None, b"m")
    store._unindex("w")  # as the deleter would, with the new record in place
    assert store.window_names() == ["w"]


def test_sweep_on_couchbase_leaves_no_document_of_an_orphan(store, fake):
    from mta.amortized_mta import AmortizedMTA
    from tests.oracle import CONCAT

    def engine(w):
        return AmortizedMTA(CONCAT, lambda a, b: len(a) - len(b) >= 30, store=store, window_id=w,
                            buffer_size=2, cache_size=2)

    store.clock = lambda: 1000.0
    for w in ("old", "older"):
        e = engine(w)
        for i in range(100):
            e.push(((i,),))
        e.checkpoint()
        e.close()
    e = engine("older")  # a second epoch
    e.push(((100,),))
    e.checkpoint()
    e.close()
    store.clock = lambda: 1000.0 + 7200
    e = engine("new")
    for i in range(100):
        e.push(((i,),))
    e.checkpoint()
    e.close()
    new_docs = {k: v for k, v in fake.docs.items() if k.startswith("mta::new::")}
    assert any("::l2::" in k for k in new_docs)  # the levels reach the store
    dry = store.sweep(3600, dry_run=True, now=1000.0 + 7300)
    assert dry.deleted == ["old", "older"] and store.window_names() == ["new", "old", "older"]
    done = store.sweep(3600, now=1000.0 + 7300)
    assert done.deleted == ["old", "older"]
    left = {k for k in fake.docs if not k.startswith("mta::windows::")}
    assert left == set(new_docs), sorted(left - set(new_docs))
    assert store.window_names() == ["new"]
    assert engine("new").query() == tuple((i,) for i in range(70, 100))


# ------------------------------------------- one cluster per process, KV only

class FakeCluster:
    """Stands in for ``couchbase.cluster.Cluster``: counts what a store asks of it."""

    made: list = []

    def __init__(self, connstr, options):
        self.connstr, self.options = connstr, options
        self.buckets, self.waits, self.closed = [], [], 0
        self.collection = FakeCollection()
        FakeCluster.made.append(self)

    def bucket(self, name):
        self.buckets.append(name)
        coll = self.collection

        class Bucket:
            def scope(self, s):
                return self

            def collection(self, c):
                return coll

        return Bucket()

    def wait_until_ready(self, timeout, *options, **kwargs):
        self.waits.append((options, kwargs))

    def close(self):
        self.closed += 1


def test_one_cluster_per_process_and_settings_waiting_for_key_value_only(monkeypatch):
    import couchbase.cluster
    from couchbase.diagnostics import ServiceType
    from couchbase.options import forward_args

    monkeypatch.setattr(couchbase.cluster, "Cluster", FakeCluster)
    monkeypatch.setattr(FakeCluster, "made", [])

    def opened(url="couchbase://h1,h2/bucket", password=SECRET, **kw):
        s = open_store(url, username="u", password=password, **kw)
        s.read_meta("w")  # connects
        return s

    a, b = opened(), opened(retries=1)  # store options do not matter to the connection
    d = opened("couchbase://h1,h2/other")
    assert len(FakeCluster.made) == 1
    first = FakeCluster.made[0]
    assert first.connstr == "couchbase://h1,h2" and first.buckets == ["bucket", "other"]
    # one wait per bucket, for the key-value service alone (read as the SDK reads it)
    assert len(first.waits) == 2
    for options, kwargs in first.waits:
        assert forward_args(kwargs, *options)["service_types"] == [ServiceType.KeyValue]
    c = opened(password="other-" + SECRET)
    e = opened(kv_timeout=1.0)
    assert len(FakeCluster.made) == 3  # other credentials, other timeouts: other clusters
    assert SECRET not in repr(connection.clusters)
    a.close()
    b.close()
    assert first.closed == 0  # still used by d
    d.close()
    assert first.closed == 1
    c.close()
    e.close()
    assert [cl.closed for cl in FakeCluster.made] == [1, 1, 1] and connection.clusters == {}
    again = opened()
    assert len(FakeCluster.made) == 4
    again.close()


def test_a_failed_connection_is_not_shared(monkeypatch):
    import couchbase.cluster

    class Down(FakeCluster):
        def wait_until_ready(self, timeout, *options, **kwargs):
            raise cb_exc.UnAmbiguousTimeoutException(message="not ready")

    monkeypatch.setattr(couchbase.cluster, "Cluster", Down)
    monkeypatch.setattr(FakeCluster, "made", [])
    s = open_store("couchbase://h/b", username="u", password=SECRET, retries=1, backoff=0.001)
    with pytest.raises(StoreUnavailable) as info:
        s.read_meta("w")
    assert SECRET not in str(info.value)
    s.close()
    assert connection.clusters == {} and all(cl.closed == 1 for cl in FakeCluster.made)


def test_integration_index_and_sweep(real_store):
    s, w = real_store
    s.clock = lambda: 1000.0
    s.cas_meta(w, None, b"not a record of ours")  # unreadable: listed, kept
    assert w in s.window_names()
    assert s.sweep(60, now=5000.0).deleted == []
    s.delete_window(w)
    assert w not in s.window_names()


def test_a_forked_child_connects_afresh_and_never_closes_the_parents_cluster(monkeypatch):
    import couchbase.cluster

    monkeypatch.setattr(couchbase.cluster, "Cluster", FakeCluster)
    monkeypatch.setattr(FakeCluster, "made", [])
    s = open_store("couchbase://h/b", username="u", password=SECRET)
    s.read_meta("w")
    parent = FakeCluster.made[0]
    monkeypatch.setattr(cbs.os, "getpid", lambda: -4242)  # as in a child after fork
    s.read_meta("w")
    assert len(FakeCluster.made) == 2 and parent in connection.inherited
    s.close()
    assert parent.closed == 0 and FakeCluster.made[1].closed == 1
    connection.inherited.remove(parent)
