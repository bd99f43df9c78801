"""What a store refuses, and how: bad options at open (StoreConfigError
naming the option, never a credential), a Redis Cluster's refusal of the
credentials or a seed that is no Cluster node (at once, never retried as an
outage), metadata records in a valid encoding with fields of the wrong type
(CorruptValue naming the window, the store and the field), groups whose
elements are not the engine's shape (``element_arity``: CorruptValue naming
the window, the group and the element), an unknown window option (named
with the entry point called and the options there are), and the file
store's bound on one attempt's wait for its locks."""

from __future__ import annotations

import math
import os
import sqlite3
import time

import pytest

import stores
from mta import LogMTA, Window, aggregators, policies
from mta.amortized_mta import AmortizedMTA
from stores import (CorruptValue, StoreAuthenticationError, StoreConfigError, StoreUnavailable, UnknownWindowOption,
                    open_store)
from stores.window import group_place
from tests.oracle import CONCAT
from tests.store_fixtures import (_redis_client, _sqlite_path, fresh_window, overwrite_pair, pair_keys,  # noqa: F401
                                  persistent_url, read_pair, settle_background, store_url)

SECRET = "s3cret-pw"


# ------------------------------------------------------------- options

@pytest.mark.parametrize("options, cluster, tls", [
    ({"cluster": "false"}, False, False), ({"cluster": "true"}, True, False), ({"cluster": "0"}, False, False),
    ({"ssl": "no"}, False, False), ({"ssl": "On"}, False, True), ({"cluster": False, "ssl": True}, False, True),
])
def test_boolean_options_read_as_the_url_reads_them(options, cluster, tls):
    """``cluster="false"`` is Cluster mode off, as ``?cluster=false`` is."""
    s = open_store("redis://127.0.0.1:1/0", **options)
    assert s.cluster is cluster and bool(s._kwargs.get("ssl")) is tls
    s.close()


@pytest.mark.parametrize("name, value", [("cluster", "maybe"), ("ssl", 1.5), ("ssl_check_hostname", "nope")])
def test_a_boolean_option_that_is_none_is_refused_naming_it(name, value):
    with pytest.raises(StoreConfigError, match=f"{name}={value!r} is not a boolean"):
        open_store(f"rediss://:{SECRET}@127.0.0.1:1/0", **{name: value})


@pytest.mark.parametrize("url, options, problem", [
    ("redis://:{pw}@127.0.0.1:1/0", {"max_connections": -5}, "max_connections must be an int >= 1, got -5"),
    ("redis://:{pw}@127.0.0.1:1/0?max_connections=0", {}, "max_connections must be an int >= 1, got 0"),
    ("redis+cluster://:{pw}@127.0.0.1:1", {"max_connections": -5}, "max_connections must be an int >= 1"),
    ("redis://:{pw}@127.0.0.1:1/0", {"socket_timeout": -1}, "socket_timeout must be a finite number of seconds > 0"),
    ("redis://:{pw}@127.0.0.1:1/0?socket_timeout=nan", {}, "socket_timeout must be a finite .*, got nan"),
    ("redis+cluster://:{pw}@127.0.0.1:1", {"socket_connect_timeout": math.inf}, "socket_connect_timeout must be"),
    ("redis://:{pw}@127.0.0.1:1/0", {"health_check_interval": -1}, "health_check_interval must be .* >= 0"),
    ("redis://:{pw}@127.0.0.1:1/0?ssl_cert_reqs=bogus", {}, "ssl_cert_reqs must be .*, got 'bogus'"),
    ("redis+cluster://:{pw}@127.0.0.1:1", {"ssl_cert_reqs": "bogus"}, "ssl_cert_reqs must be"),
])
def test_bad_redis_client_settings_are_refused_at_open(url, options, problem):
    """From the URL or an option, standalone or Cluster: at open, not as an
    unexpected error (or a retried outage) at the first operation."""
    with pytest.raises(StoreConfigError, match=problem) as info:
        open_store(url.format(pw=SECRET), **options)
    assert SECRET not in str(info.value)


@pytest.mark.parametrize("value", [math.nan, math.inf, -1, "x", None])
def test_file_store_busy_timeout_is_checked(tmp_path, value):
    with pytest.raises(StoreConfigError, match=f"busy_timeout must be a finite number of seconds >= 0, got {value!r}"):
        open_store(str(tmp_path / "s"), busy_timeout=value)


@pytest.mark.parametrize("options, problem", [
    ({"connect_timeout": "abc"}, "connect_timeout must be a finite number of seconds > 0, got 'abc'"),
    ({"kv_timeout": math.nan}, "kv_timeout must be a finite number of seconds > 0, got nan"),
    ({"connect_timeout": -1}, "connect_timeout must be"),
    ({"cluster_options": "x"}, "cluster_options must be a dict of ClusterOptions settings, not str"),
    ({"cluster_options": {"transcoder": object()}}, "cluster_options must not set transcoder"),
])
def test_bad_couchbase_options_are_refused_at_open(options, problem):
    pytest.importorskip("couchbase")
    with pytest.raises(StoreConfigError, match=problem) as info:
        open_store(f"couchbase://user:{SECRET}@127.0.0.1/b", **options)
    assert SECRET not in str(info.value)


@pytest.mark.parametrize("options, connect, kv", [
    ({}, 4.8, 2.5), ({"timeout": 2}, 1.6, 1.0), ({"timeout": 60}, 10.0, 2.5),
    ({"timeout": 2, "connect_timeout": 30, "kv_timeout": 7}, 30.0, 7.0),
])
def test_couchbase_attempt_timeouts_default_below_the_store_timeout(options, connect, kv):
    """An SDK attempt ends before the store's ``timeout`` (the most one
    operation may take) unless the caller asks for longer ones."""
    pytest.importorskip("couchbase")
    store = open_store("couchbase://127.0.0.1/b", **options)  # no I/O until the first operation
    try:
        assert (store.connect_timeout, store.kv_timeout) == pytest.approx((connect, kv))
        assert store.connect_timeout < store.timeout or "connect_timeout" in options
    finally:
        store.close()


# ------------------------------------------------- a Cluster's refusals

@pytest.mark.timeout(60)
def test_redis_cluster_refusing_the_credentials_is_not_an_outage(redis_cluster):
    """redis-py's Cluster client wraps the refusal in "cannot be connected":
    still StoreAuthenticationError at once, as on a standalone server."""
    url = redis_cluster.url.replace("redis+cluster://", f"redis+cluster://nobody:{SECRET}@")
    s = open_store(url, retries=3, backoff=0.01)
    with pytest.raises(StoreAuthenticationError, match="authentication failed") as info:
        s.ping()
    assert info.value.attempts == 1 and s.stats.retries == 0
    assert SECRET not in str(info.value) and ":***@" in str(info.value)
    s.close()


@pytest.mark.timeout(60)
def test_cluster_url_for_a_standalone_server_fails_at_once_saying_so(redis_server):
    s = open_store(f"redis+cluster://127.0.0.1:{redis_server.port}", retries=3, backoff=0.01)
    with pytest.raises(StoreConfigError, match="Cluster mode is not enabled .* use redis://"):
        s.ping()
    assert s.stats.retries == 0
    s.close()


# ------------------------------------------------ malformed metadata

_GOOD = {"format": 2, "epoch": 1, "epochs": [1], "group": 2, "version": 1, "gc": [],
         "checkpoints": [[1, None, [{"lo": 0, "hi": 2, "stored": 0, "tail": [1, 2], "segments": [[1, 0]]}], "X"]]}


@pytest.mark.parametrize("field, value", [
    ("epoch", "x"), ("version", None), ("group", 0), ("group", True), ("epochs", 5), ("gc", ["a"]),
    ("checkpoints", "junk"), ("checkpoints", [[1, None, [{"lo": 0}], "AmortizedMTA"]]),
    ("checkpoints", [[1, None, [{"lo": 0, "hi": 2, "stored": 0, "tail": [], "segments": ["ab"]}], "X"]]),
    ("checkpoints", [["1", None, [], "AmortizedMTA"]]), ("tags", [1]),
])
def test_metadata_fields_of_the_wrong_type_are_corrupt_values(store_url, field, value):  # noqa: F811
    """A record in a valid encoding whose field has another type: CorruptValue
    naming the window, the store and the field, not a KeyError, a
    ZeroDivisionError or a misleading "checkpoint not retained"."""
    window = fresh_window("meta")
    store = open_store(store_url)
    store.cas_meta(window, None, stores.encode(dict(_GOOD, **{field: value})))
    with pytest.raises(CorruptValue, match=rf"metadata field {field}\b") as info:
        AmortizedMTA(CONCAT, None, store=store, window_id=window)
    assert repr(window) in str(info.value) and store.url in str(info.value)
    store.delete_window(window)
    store.close()


@pytest.mark.parametrize("column, value", [("blob", "text blob"), ("version", "not a number")])
def test_sqlite_metadata_columns_of_another_type_are_corrupt_values(tmp_path, column, value):
    store = open_store(str(tmp_path / "s"))
    store.cas_meta("w", None, stores.encode(_GOOD))
    with sqlite3.connect(_sqlite_path(store.url)) as db:
        db.execute(f"UPDATE meta SET {column} = ? WHERE window = 'w'", (value,))
    with pytest.raises(CorruptValue, match=f"window 'w' in {store.url}: its metadata record's {column}"):
        store.read_meta("w")
    with pytest.raises(CorruptValue, match=f"metadata record's {column}"):
        AmortizedMTA(CONCAT, None, store=store, window_id="w")
    store.close()


def test_redis_metadata_version_that_is_not_a_number_is_a_corrupt_value(redis_url):
    store, window = open_store(redis_url), fresh_window("version")
    store.cas_meta(window, None, stores.encode(_GOOD))
    client = _redis_client(redis_url)
    client.hset(store.meta_key(window), "v", b"notanint")
    try:
        with pytest.raises(CorruptValue, match=f"window {window!r} in {store.url}: its metadata record's version "
                                               "b'notanint'"):
            store.read_meta(window)
    finally:  # the server is the module's: later tests list its windows
        client.delete(store.meta_key(window))
        client.close()
        store.close()


# ---------------------------------------- the file store's lock waits

@pytest.mark.timeout(60)
def test_one_file_store_attempt_waits_for_its_locks_within_the_timeout(tmp_path):
    """Another writer holds the writers' lock file and SQLite's lock: the
    wait for both together stays within the store's timeout (stores.base),
    though each alone may take busy_timeout."""
    fcntl = pytest.importorskip("fcntl")
    s = open_store(str(tmp_path / "s"), busy_timeout=1.5, timeout=1.0, retries=0)
    s.cas_meta("w", None, b"m")
    holder = os.open(s.writer_path, os.O_RDWR)
    blocker = sqlite3.connect(s.path, isolation_level=None)
    fcntl.flock(holder, fcntl.LOCK_EX)
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        started = time.monotonic()
        with pytest.raises(StoreUnavailable, match="locked"):
            s.write_pairs("w", 0, 0, 0, [b"x"])
        assert time.monotonic() - started < 1.4
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
        fcntl.flock(holder, fcntl.LOCK_UN)
        os.close(holder)
    s.write_pairs("w", 0, 0, 0, [b"x"])  # and the next attempt waits as long as before
    assert s.read_pairs("w", 0, 0, 0, 1) == [b"x"]
    s.close()


def test_a_value_the_store_cannot_write_is_refused_at_its_own_push(store_url):  # noqa: F811
    """A lifted value the codec cannot encode (a NumPy scalar, an object) is
    a LiftError at its own push, the window unchanged: it used to enter, and
    a later push's flush failed, the window unusable and every push since
    the last checkpoint lost.  Pushes around them, a checkpoint and a
    resume agree with brute force; extend() refuses the batch before any
    of it enters."""
    import numpy as np

    from mta import Aggregator, LiftError, Window
    from mta.policies import Count

    store, window = open_store(store_url), fresh_window("codec")
    contents = Aggregator(CONCAT, lambda raw: (raw,), list, name="contents")
    w = Window(contents, Count(5), store=store, window_id=window, buffer_size=2, cache_size=2)
    pushed = []
    for i in range(40):
        if i % 7 == 3:
            for bad in (np.float64(1.5), object()):
                with pytest.raises(LiftError, match=r"the window's store cannot hold raw value .* as lifted: "
                                                    r"cannot encode value of type"):
                    w.push(bad)
            with pytest.raises(LiftError):
                w.extend([i, np.int64(2)])
            assert w.query() == pushed[-5:]
        pushed.append(i)
        assert w.push(i) == pushed[-5:]
    version = w.checkpoint()
    w.close()
    again = Window(contents, Count(5), store=store, window_id=window, buffer_size=2, cache_size=2, resume=version)
    assert again.query() == pushed[-5:] and again.push(40) == (pushed + [40])[-5:]
    again.close(delete=True)
    store.close()


def test_a_checkpoint_the_window_never_had_names_a_renamed_query_among_the_causes(store_url):  # noqa: F811
    """Resuming a version a window's record does not have (a query
    restarted with another name= finds fresh windows under the new name)
    names that slip and its remedy, beside a store that lost the window."""
    from mta import Window, aggregators, policies
    from stores import StoreError

    store = open_store(store_url)
    with pytest.raises(StoreError, match=r"has no checkpoint 2: the store has lost the window .* or the query was "
                                         r"restarted with another name= than it ran with .*restart it with that one"):
        Window(aggregators.SUM, policies.Count(3), store=store, window_id=fresh_window("renamed"), resume=2)
    store.close()


def test_pair_blobs_and_epoch_ranges_of_the_wrong_shape_are_refused_naming_them(tmp_path):
    """One bytes object is not a list of pair blobs (it would be read as
    ints), and ``ranges`` must map levels to pairs; the window's pairs are
    unchanged by the refused calls."""
    store = open_store(f"file://{tmp_path}/s.db")
    try:
        store.write_pairs("w", 1, 0, 0, [b"x", b"y"])
        for blobs in (b"ab", bytearray(b"ab"), "ab"):
            with pytest.raises(TypeError, match="pair blobs must be a sequence of bytes"):
                store.write_pairs("w", 1, 0, 2, blobs)
        with pytest.raises(TypeError, match="ranges must map a level"):
            store.drop_epoch("w", 1, ranges=[(0, 2)])
        assert store.read_pairs("w", 1, 0, 0, 3) == [b"x", b"y", None]
    finally:
        store.close()


# ------------------------------------------- group elements of another shape

def _window(store, window, **options):
    """A Window, whose elements are (aggregator value, policy value) pairs, in 2-pair groups: a Window in a
    store checks its elements' shape (element_arity=2) without being told."""
    return Window(aggregators.COLLECT, policies.Count(30), store=store, window_id=window, buffer_size=2,
                  cache_size=2, group_size=2, **options)


@pytest.mark.parametrize("plant, shown", [
    (lambda items: ["x"] * len(items), "'x'"),  # the review's: str where pairs
    (lambda items: list(range(len(items))), r"\d+"),
    (lambda items: items[:1] + [None] * (len(items) - 1), "None"),  # None only stands for a dead first element
    (lambda items: [e if e is None else e[:1] for e in items], r"\(\(\d+,\),\)"),
    (lambda items: [e if e is None else e + (0,) for e in items], r"\(\(\d+,\), 1, 0\)"),
    (lambda items: [e if e is None else list(e) for e in items], r"\[\(\d+,\), 1\]"),
    (lambda items: [{"a": 1}] * len(items), r"\{'a': 1\}"),
], ids=["str", "int", "None-not-first", "1-tuple", "3-tuple", "list", "dict"])
def test_group_elements_of_another_shape_are_corrupt_values(persistent_url, plant, shown):  # noqa: F811
    """Every group rewritten in a valid encoding, bound to its place, with
    elements the engine never writes: opening the window is a CorruptValue
    naming the window, the store, the group and the element (not the
    IndexError or TypeError the monoid would raise), nothing stored changes,
    and with the original bytes back the window resumes exactly."""
    store, window = open_store(persistent_url), fresh_window("elements")
    w = _window(store, window)
    w.extend(range(100))
    w.checkpoint()
    w.close()
    originals = {key: read_pair(persistent_url, window, *key) for key in pair_keys(persistent_url, window)}
    planted = {}
    for (epoch, level, g), blob in originals.items():
        start, items = stores.decode(blob, bind=group_place(window, epoch, level, g))
        planted[epoch, level, g] = stores.encode((start, plant(items)), bind=group_place(window, epoch, level, g))
        overwrite_pair(persistent_url, window, epoch, level, g, planted[epoch, level, g])
    try:
        with pytest.raises(CorruptValue, match=rf"^window {window!r} in {store.url}: group \d+ \(pairs \d+\.\.\d+\) of "
                                               rf"level \d+: element \d+ is {shown}, not a tuple of 2 values"):
            _window(store, window).extend(range(100, 140))
    finally:
        settle_background()
    assert {key: read_pair(persistent_url, window, *key) for key in originals} == planted
    for key, blob in originals.items():
        overwrite_pair(persistent_url, window, *key, blob)
    w = _window(store, window)
    assert w.extend(range(100, 140))[-1] == tuple(range(110, 140))
    w.close(delete=True)
    store.close()


@pytest.mark.parametrize("engine, background", [(AmortizedMTA, False), (AmortizedMTA, True), (LogMTA, True)])
def test_element_arity_takes_the_dead_first_element_of_a_resumed_level(engine, background):
    """A level resumed with an odd head holds None for the dead element
    before it and writes it with its pair: read back, it is no foreign
    element (this workload reads such a group)."""
    store, window = open_store(f"memory://arity-{fresh_window()}"), fresh_window("odd")
    options = dict(buffer_size=2, cache_size=1, group_size=2, background=background, element_arity=2)
    size, pushed = (9, 20) if engine is AmortizedMTA else (7, 41)
    w = Window(aggregators.COLLECT, policies.Count(size), engine, store=store, window_id=window, **options)
    w.extend(range(pushed))
    w.checkpoint()
    w.close()
    w = Window(aggregators.COLLECT, policies.Count(size), engine, store=store, window_id=window, **options)
    assert w.extend(range(pushed, pushed + 3 * size))[-1] == tuple(range(pushed + 2 * size, pushed + 3 * size))
    w.close(delete=True)
    store.close()


def test_element_arity_is_checked(tmp_path):
    store = open_store(str(tmp_path / "s"))
    for bad in (0, "2", 2.0, True):
        with pytest.raises(ValueError, match=f"element_arity must be None or a positive int, got {bad!r}"):
            Window(aggregators.SUM, policies.Count(3), store=store, window_id="w", element_arity=bad)
    store.close()


# ------------------------------------------------------ unknown options

def test_an_unknown_window_option_names_the_entry_point_called_and_the_options(tmp_path):
    """A TypeError naming the entry point the caller called (a Window, an
    engine), not an internal class, every unknown option by name (never its
    value: a misplaced credential) and the options there are; refused
    before the window is claimed."""
    store = open_store(str(tmp_path / "s"))
    options = "store, window_id, buffer_size, cache_size, group_size, resume, retain, background, durable, batch"
    with pytest.raises(UnknownWindowOption, match=rf"^Window: unknown option 'nonsense' for a window in a store; "
                                                  rf"the options are engine, check, equal, {options}, element_arity$"):
        Window(aggregators.SUM, policies.Count(3), store=store, window_id="w", nonsense=1)
    with pytest.raises(TypeError, match=rf"^LogMTA: unknown options 'nonsense', 'secret' for a window in a store; "
                                        rf"the options are {options}, element_arity$") as info:
        LogMTA(aggregators.SUM.monoid, store=store, window_id="w", nonsense=1, secret="pw-1")
    assert "pw-1" not in str(info.value)
    with pytest.raises(UnknownWindowOption, match="^Window: unknown option 'nonsense'"):
        Window(aggregators.SUM, policies.Count(3), store=store, window_id="w", batch=stores.Batch(store), nonsense=1)
    assert store.read_meta("w")[0] is None  # no claim
    store.close()
