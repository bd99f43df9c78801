"""Orphaned windows: ``Store.windows``, ``Store.sweep`` and ``mta-spark gc``.

On memory, file (SQLite), a real Redis server and a three-master Redis
Cluster (tests/conftest.py).  Windows are made by real engines whose store
has a fake wall clock (``store.clock``), so ages are set, not slept.  What
a sweep left is checked by reading the backend directly -- SQLite's tables,
every key of every Redis node, the memory store's dicts -- never through the
store API under test.  Couchbase's index and sweep are unit-tested in
tests/test_couchbase_store.py.
"""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
import uuid
from urllib.parse import quote

import pytest

import stores
from mta.amortized_mta import AmortizedMTA
from stores import StoreConfigError, open_store
from stores.codec import decode, encode
from stores.gc import sweep_listed
from tests.oracle import CONCAT
from tests.store_fixtures import settle_background

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BACKENDS = ["memory", "file", "redis", "redis-cluster"]
DAY = 86400.0
T0 = 1_750_000_000.0  # the fake clock's start


@pytest.fixture(params=BACKENDS)
def backend(request, tmp_path):
    """``(url, raw)``: a fresh store URL and ``raw()``, every key or row the
    backend holds, grouped by window, read directly from the backend."""
    name = request.param
    if name == "memory":
        space = f"gc-{uuid.uuid4().hex}"
        yield f"memory://{space}", lambda: _memory_raw(space)
        stores.memory_store.reset_memory(space)
    elif name == "file":
        yield f"file://{tmp_path / 'store'}", lambda: _sqlite_raw(tmp_path / "store" / "mta.sqlite3")
    elif name == "redis":
        server = request.getfixturevalue("redis_server")
        _flush([server])
        yield server.url, lambda: _redis_raw([server])
    else:
        cluster = request.getfixturevalue("redis_cluster")
        cluster.flushall()
        yield cluster.url, lambda: _redis_raw(cluster.nodes)


def _memory_raw(space: str) -> dict[str, set]:
    from stores.memory_store import _spaces

    sp = _spaces[space]
    out: dict[str, set] = {}
    with sp.lock:
        for w in sp.meta:
            out.setdefault(w, set()).add(("meta",))
        for w, epochs in sp.pairs.items():
            for e, levels in epochs.items():
                for lv, idx in levels.items():
                    out.setdefault(w, set()).update(("pair", e, lv, i) for i in idx)
    return out


def _sqlite_raw(path) -> dict[str, set]:
    conn = sqlite3.connect(path)
    try:
        out: dict[str, set] = {}
        for (w,) in conn.execute("SELECT window FROM meta"):
            out.setdefault(w, set()).add(("meta",))
        for w, e, lv, i in conn.execute("SELECT window, epoch, level, idx FROM pairs"):
            out.setdefault(w, set()).add(("pair", e, lv, i))
        return out
    finally:
        conn.close()


def _redis_raw(servers) -> dict[str, set]:
    """Every key of every node (``KEYS *``: a test server), by the window in
    its hash tag; a level hash counts as its fields."""
    out: dict[str, set] = {}
    for server in servers:
        client = server.client()
        try:
            for key in client.keys("*"):
                text = key.decode()
                m = re.fullmatch(r"mta:\{([^}]*)\}:(.*)", text)
                assert m, f"a key outside the store's layout: {text!r}"
                window, suffix = m.groups()
                if re.fullmatch(r"e\d+:l\d+", suffix):
                    out.setdefault(window, set()).update((suffix, int(f)) for f in client.hkeys(key))
                else:
                    out.setdefault(window, set()).add((suffix,))
        finally:
            client.close()
    return out


def _flush(servers) -> None:
    for server in servers:
        client = server.client()
        client.flushall()
        client.close()


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def _wsp(keep):
    return lambda total, prefix: len(total) - len(prefix) >= keep


def _engine(store, window, *, resume=True):
    # small buffers: the window's levels reach the store at several levels
    return AmortizedMTA(CONCAT, _wsp(40), store=store, window_id=window, buffer_size=2, cache_size=2,
                        resume=resume)


def _fill(engine, start, n):
    for i in range(start, start + n):
        engine.push(((i,),))


def _checkpointed(store, window, start, n):
    """``window`` opened, ``start .. start + n - 1`` pushed, checkpointed and closed."""
    e = _engine(store, window)
    _fill(e, start, n)
    e.checkpoint()
    e.close()


def _values(start, end) -> tuple:
    """What the CONCAT window holds after pushing ``start .. end - 1``."""
    return tuple((i,) for i in range(start, end))


def _levels(keys) -> set:
    """The levels a window's raw keys hold pairs at."""
    out = set()
    for k in keys:
        if k[0] == "pair":
            out.add(k[2])
        elif re.fullmatch(r"e\d+:l\d+", k[0]):
            out.add(int(k[0].split(":l")[1]))
    return out


def _make_windows(store, clock):
    """Windows of every kind; returns (orphans, kept, live engine, live values)."""
    clock.t = T0
    # a streaming window abandoned two days ago: checkpointed, closed, kept
    _checkpointed(store, "old/closed", 0, 150)
    # a killed batch attempt's: opened twice (two epochs), and a stale engine
    # wrote more under its old epoch after the second owner took over
    e1 = _engine(store, "old/epochs")
    _fill(e1, 0, 100)
    e1.checkpoint()
    e2 = _engine(store, "old/epochs")
    _fill(e2, 100, 60)
    e2.checkpoint()
    store.write_pairs("old/epochs", e1._storage.epoch, 3, 500, [b"zombie"])
    e1.close()
    e2.close()
    # a batch task attempt killed mid-key (issue 18's leftover records): the
    # key's window and its times FIFO were never closed
    killed = "mta/batch-1/17/'host-3'"
    e = _engine(store, killed, resume=False)
    _fill(e, 0, 90)
    fifo = store.open_fifo(killed + "~times", buffer_size=2, cache_size=2)
    for t in range(90):
        fifo.append(float(t))
    fifo.lo = 50
    # pairs without a record (a stale engine wrote after its window was deleted)
    store.write_pairs("stray", 7, 0, 0, [b"a", b"b"])
    store.write_pairs("stray", 7, 2, 4, [b"c"])
    # an emptied record, left by a delete that was interrupted, with its pairs
    _checkpointed(store, "interrupted", 0, 80)
    blob, token = store.read_meta("interrupted")
    store.cas_meta("interrupted", token, encode(dict(decode(blob), epochs=[], checkpoints=[])))
    # used two days ago, then again just now: held
    _checkpointed(store, "recent", 0, 120)
    clock.t = T0 + 2 * DAY
    _checkpointed(store, "recent", 120, 10)
    # open right now, never checkpointed yet: held
    live = _engine(store, "live")
    _fill(live, 0, 90)
    clock.t = T0 + 2 * DAY + 3600
    # the open engines' flushes run in the background: let them land, so that
    # snapshots of the backend differ only by what the sweep does
    settle_background()
    return (["interrupted", killed, killed + "~times", "old/closed", "old/epochs", "stray"], ["live", "recent"],
            live)


@pytest.mark.timeout(120)
def test_sweep_deletes_exactly_the_old_unowned_windows(backend):
    url, raw = backend
    store = open_store(url)
    clock = store.clock = Clock(T0)
    orphans, kept, live = _make_windows(store, clock)
    before = raw()
    assert sorted(before) == sorted(orphans + kept)
    # the windows really reach the store at several levels (and epochs)
    for w in ("old/closed", "old/epochs", "recent"):
        assert len(_levels(before[w])) >= 3, (w, before[w])

    listed = {w.name: w for w in store.windows(DAY)}
    assert sorted(listed) == sorted(orphans + kept)
    assert {n for n, w in listed.items() if not w.held} == set(orphans)
    assert listed["old/closed"].used == T0 and listed["old/closed"].idle == 2 * DAY + 3600
    assert listed["recent"].used == T0 + 2 * DAY and listed["recent"].owner.endswith(f"pid {os.getpid()}")
    assert listed["old/epochs"].epoch == decode(store.read_meta("old/epochs")[0])["epoch"]  # its second owner's
    assert listed["stray"].kind == "no record"
    assert listed["interrupted"].kind == "deleting"

    dry = store.sweep(DAY, dry_run=True)
    assert sorted(dry.deleted) == sorted(orphans) and dry.kept == len(kept) and dry.found == len(listed)
    assert raw() == before, "a dry run deleted something"

    done = store.sweep(DAY)
    assert sorted(done.deleted) == sorted(orphans) and done.changed == []
    after = raw()
    assert sorted(after) == sorted(kept), "an orphan left keys behind (or a kept window lost all of them)"
    assert after["recent"] == before["recent"]
    assert after["live"] == before["live"]

    # the live engine goes on as if nothing happened, and so does a resumed window
    _fill(live, 90, 50)
    live.checkpoint()
    assert live.query() == _values(140 - 40, 140)
    live.close()
    again = _engine(store, "recent")
    assert again.query() == _values(130 - 40, 130)
    again.close()
    assert store.sweep(DAY).deleted == []  # what is left is in use
    store.close()


def test_window_used_after_the_listing_is_not_deleted(backend):
    """The sweep is fenced: a window opened between its listing and its
    deletion keeps every key, and its new owner works on."""
    url, raw = backend
    store = open_store(url)
    clock = store.clock = Clock(T0)
    _checkpointed(store, "comes-back", 0, 100)
    clock.t = T0 + 3 * DAY
    found = store.windows(DAY)
    assert [w.held for w in found] == [False]
    back = _engine(store, "comes-back")  # its owner returns before the sweep deletes
    keys = raw()["comes-back"]
    result = sweep_listed(store, found)
    assert result.deleted == [] and result.changed == ["comes-back"]
    assert raw()["comes-back"] == keys
    _fill(back, 100, 10)
    back.checkpoint()
    assert back.query() == _values(110 - 40, 110)
    back.close(delete=True)
    assert raw() == {}
    store.close()


def test_records_of_unknown_age_are_kept(backend):
    """A record without a time (written before records had one) or one that
    does not decode is listed and held: nothing says it is abandoned."""
    url, raw = backend
    store = open_store(url)
    store.clock = Clock(T0 + 10 * DAY)
    _checkpointed(store, "untimed", 0, 60)
    blob, token = store.read_meta("untimed")
    meta = decode(blob)
    del meta["used"], meta["owner"]
    store.cas_meta("untimed", token, encode(meta))
    store.cas_meta("alien", None, b"not a record of ours")
    before = raw()
    listed = {w.name: w for w in store.windows(1)}
    assert listed["untimed"].kind == "untimed" and listed["untimed"].held and listed["untimed"].used is None
    assert listed["alien"].kind == "unreadable" and listed["alien"].held
    assert store.sweep(1).deleted == [] and raw() == before
    assert _engine(store, "untimed").query() == _values(20, 60)  # still resumable
    store.close()


@pytest.mark.parametrize("bad", [-1, float("nan"), float("inf"), "1d", True, None])
def test_bad_ages_are_refused_before_anything_is_deleted(bad, tmp_path):
    url = f"file://{tmp_path}"
    store = open_store(url)
    store.clock = Clock(T0)
    _checkpointed(store, "w", 0, 50)
    store.clock = Clock(T0 + 100 * DAY)
    before = _sqlite_raw(tmp_path / "mta.sqlite3")
    with pytest.raises(StoreConfigError, match="older_than"):
        store.sweep(bad)
    if bad is not None:
        with pytest.raises(StoreConfigError, match="older_than"):
            store.windows(bad)
    assert _sqlite_raw(tmp_path / "mta.sqlite3") == before
    store.close()


# ----------------------------------------------------------------------- CLI

def test_age_parser():
    from spark_ops.cli.gc import age, span

    assert age("1d") == DAY and age("12h") == 43200 and age("30m") == 1800 and age("90s") == 90
    assert age("1d12h") == 1.5 * DAY and age("2w") == 14 * DAY and age(" 1.5h ") == 5400
    assert age("3600") == 3600  # a number of seconds, as everywhere a duration is typed
    for bad in ("", "1x", "d", "0d", "1d-2h", "-1d", "1dd", "3 months"):
        with pytest.raises(Exception, match="--older-than must be"):
            age(bad)
    assert span(90) == "1m30s" and span(DAY + 7200) == "1d2h" and span(5) == "5s"


def _old_and_new(url, password=None):
    """Two windows used three days ago and one used now, through a store
    whose fake clock is set back."""
    import time

    store = open_store(url, **({"password": password} if password else {}))
    store.clock = Clock(time.time() - 3 * DAY)
    for w in ("old/a", "old/b"):
        e = _engine(store, w)
        _fill(e, 0, 70)
        e.checkpoint()
        e.close()
    store.clock = time.time
    _checkpointed(store, "new", 0, 70)
    store.close()


@pytest.mark.timeout(120)
def test_cli_gc_with_a_password_never_prints_it(redis_server_factory, capsys, monkeypatch):
    from spark_ops import cli

    secret = "gc-Pa55:w/rd@x"
    server = redis_server_factory(password=secret)
    url = f"redis://:{quote(secret, safe='')}@127.0.0.1:{server.port}/0"
    _old_and_new(url)
    keys = lambda: sorted(_redis_raw([server]))  # noqa: E731

    outputs = []
    assert cli.main(["gc", "--store", url, "--older-than", "1d", "--dry-run", "-v"]) == 0
    out = capsys.readouterr()
    outputs.append(out.out + out.err)
    assert "would delete 2 windows" in out.out and "'old/a': orphan" in out.out and "'new': in use" in out.out
    assert keys() == ["new", "old/a", "old/b"]

    assert cli.main(["gc", "--store", url, "--older-than", "1d"]) == 0
    out = capsys.readouterr()
    outputs.append(out.out + out.err)
    assert "3 windows, 2 not used for 1d" in out.out and "deleted 2 windows of 3, kept 1" in out.out
    assert "2/2" in out.err
    assert keys() == ["new"]

    # the password from the environment, and errors: a bad parameter, a wrong password
    monkeypatch.setenv("MTA_REDIS_PASSWORD", secret)
    bare = f"redis://127.0.0.1:{server.port}/0"
    assert cli.main(["gc", "--store", bare, "--older-than", "12h", "-v"]) == 0
    out = capsys.readouterr()
    outputs.append(out.out + out.err)
    assert "1 window, 0 not used" in out.out and keys() == ["new"]
    assert cli.main(["gc", "--store", url + "?socket_timout=3", "--older-than", "1d", "-v"]) == 2
    outputs.append("".join(capsys.readouterr()))
    monkeypatch.delenv("MTA_REDIS_PASSWORD")
    wrong = f"redis://:{quote(secret[::-1], safe='')}@127.0.0.1:{server.port}/0"
    assert cli.main(["gc", "--store", wrong, "--older-than", "1d", "-v"]) == 2
    outputs.append("".join(capsys.readouterr()))
    text = "\n".join(outputs)
    assert "***" in text
    for form in (secret, quote(secret, safe=""), secret[::-1], quote(secret[::-1], safe="")):
        assert form not in text, f"the password ({form!r}) was printed"


def test_cli_gc_as_a_command(tmp_path):
    """The installed command's path: exit statuses, a usage error in one line,
    and a real sweep of a file store."""
    url = f"file://{tmp_path / 'store'}"
    _old_and_new(url)
    env = dict(os.environ, PYTHONPATH=ROOT)
    run = lambda *a: subprocess.run([sys.executable, "-m", "spark_ops.cli", "gc", *a],  # noqa: E731
                                    capture_output=True, text=True, env=env, timeout=60)
    bad = run("--store", url, "--older-than", "soon")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--older-than must be" in bad.stderr
    assert sorted(_sqlite_raw(tmp_path / "store" / "mta.sqlite3")) == ["new", "old/a", "old/b"]
    ok = run("--store", str(tmp_path / "store"), "--older-than", "2d")
    assert ok.returncode == 0, ok.stderr
    assert f"store {url}: 3 windows, 2 not used for 2d" in ok.stdout
    assert sorted(_sqlite_raw(tmp_path / "store" / "mta.sqlite3")) == ["new"]
    # a mistyped file store is an error, not an empty store made and swept
    typo = run("--store", f"file:{tmp_path / 'stroe'}", "--older-than", "2d")
    assert typo.returncode == 2 and "no store at" in typo.stderr and not (tmp_path / "stroe").exists()
