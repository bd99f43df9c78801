"""Redis as deployments run it, on loopback: TLS mistakes reported at once
naming the setting, and Redis Cluster URLs with several seed nodes.

The servers are real (tests/conftest.py: ``redis_tls`` speaks TLS only with
an ACL user, ``redis_cluster`` has three masters); the store contract itself
runs on both in tests/test_stores.py.
"""

from __future__ import annotations

import pytest

from bench.redis_server import free_port
from stores import StoreConfigError, StoreUnavailable, open_store
from stores.redis_url import parse_redis_url

#: Retries that an outage would go through: a configuration mistake must not.
PATIENT = dict(retries=5, backoff=0.5, backoff_max=2.0)


def _fails_at_once(url: str, match: str) -> StoreConfigError:
    """Opening the store, or its first operation, raises StoreConfigError
    without one retry."""
    store = None
    with pytest.raises(StoreConfigError, match=match) as caught:
        store = open_store(url, **PATIENT)
        store.ping()
    if store is not None:
        assert store.stats.retries == 0, "retried like an outage"
        store.close()
    assert "failed after" not in str(caught.value)
    return caught.value


def test_tls_server_works_with_its_ca(redis_tls):
    store = open_store(redis_tls.url)
    store.write_pairs("w", 0, 0, 0, [b"a"])
    assert store.read_pairs("w", 0, 0, 0, 2) == [b"a", None]
    store.close()


def test_untrusted_certificate_fails_at_once_naming_the_ca(redis_tls):
    other = redis_tls.tls["other_ca"]
    error = _fails_at_once(redis_tls.url.replace(redis_tls.tls["ca"], other),
                           "TLS certificate verification failed")
    assert "ssl_ca_certs" in str(error) and "other_ca.crt" in str(error)


def test_no_ca_given_fails_at_once_saying_which_setting(redis_tls):
    _fails_at_once(redis_tls.url.split("?")[0], r"system's CA certificates \(set ssl_ca_certs\)")


@pytest.mark.parametrize("setting", ["ssl_ca_certs", "ssl_certfile", "ssl_keyfile"])
def test_missing_tls_file_names_setting_and_path(redis_tls, tmp_path, setting):
    missing = str(tmp_path / "nowhere" / f"{setting}.pem")
    url = f"rediss://127.0.0.1:{redis_tls.port}/0?{setting}={missing}"
    error = _fails_at_once(url, setting)
    assert missing in str(error)


def test_tls_url_for_a_plain_port_fails_at_once_saying_so(redis_server):
    """rediss:// to a server without TLS: the handshake stalls (the server
    waits for a command line), then the store finds the port answering
    plain Redis and says so instead of retrying like an outage."""
    url = redis_server.url.replace("redis://", "rediss://", 1)
    error = _fails_at_once(url, "speaks Redis without TLS")
    assert f"127.0.0.1:{redis_server.port}" in str(error)


def test_tls_errors_show_no_password(redis_tls):
    error = _fails_at_once(redis_tls.url.replace(redis_tls.tls["ca"], redis_tls.tls["other_ca"]), "TLS")
    assert redis_tls.user[1] not in str(error) and ":***@" in str(error)


# -- cluster seed nodes -----------------------------------------------------------
def test_cluster_url_with_several_seeds_parses_and_shows_them_all():
    cfg = parse_redis_url("redis+cluster://:pw@10.0.0.1:7000,10.0.0.2,[::1]:7002")
    assert cfg["seeds"] == [("10.0.0.1", 7000), ("10.0.0.2", 6379), ("::1", 7002)]
    assert (cfg["host"], cfg["port"], cfg["password"]) == ("10.0.0.1", 7000, "pw")
    store = open_store("redis+cluster://:pw@10.0.0.1:7000,10.0.0.2,[::1]:7002")
    assert store.url == "redis+cluster://:***@10.0.0.1:7000,10.0.0.2:6379,[::1]:7002"
    store.close()


@pytest.mark.parametrize("url, match", [
    ("redis://h1:1,h2:2/0", "need a Redis Cluster URL"),
    ("redis+cluster://h1:1,,h2:2", "empty host"),
    ("redis+cluster://h1:1,h2:port", "'h2' has an invalid port"),
])
def test_bad_seed_lists_are_config_errors(url, match):
    with pytest.raises(StoreConfigError, match=match):
        parse_redis_url(url)


def test_cluster_serves_with_its_first_seed_down(redis_cluster):
    """A seed that does not answer is skipped: the cluster is healthy, so
    every window (on every master) is reachable through the others."""
    redis_cluster.flushall()
    dead = f"127.0.0.1:{free_port()}"
    url = redis_cluster.url.replace("redis+cluster://", f"redis+cluster://{dead},")
    store = open_store(url, retries=1)
    windows = [f"w{i}" for i in range(30)]  # spread over the three masters' slots
    for i, w in enumerate(windows):
        store.write_pairs(w, 0, 0, 0, [str(i).encode()])
    assert [store.read_pairs(w, 0, 0, 0, 1)[0] for w in windows] == [str(i).encode() for i in range(30)]
    store.close()
    with pytest.raises(StoreUnavailable):  # the dead seed alone: nothing to learn the cluster from
        alone = open_store(f"redis+cluster://{dead}", retries=1, backoff=0.01)
        try:
            alone.ping()
        finally:
            alone.close()


def test_cluster_windows_spread_over_every_master(redis_cluster):
    """The contract suite's cluster is a real three-master one: windows land on each."""
    redis_cluster.flushall()
    store = open_store(redis_cluster.url)
    for i in range(60):
        store.write_pairs(f"w{i}", 0, 0, 0, [b"x"])
    store.close()
    sizes = []
    for node in redis_cluster.nodes:
        client = node.client()
        sizes.append(client.dbsize())
        client.close()
    assert all(n > 0 for n in sizes) and sum(sizes) >= 60


# -- stalls -------------------------------------------------------------------------
def test_a_server_that_stops_answering_holds_an_operation_about_timeout(redis_server_factory):
    """A server paused (SIGSTOP: connections accepted by the kernel, never
    answered) fails the operation with StoreUnavailable once ``timeout``
    has passed, however many retries are allowed."""
    import os
    import signal

    server = redis_server_factory()
    store = open_store(server.url, retries=50, backoff=0.01, backoff_max=0.05, timeout=1.5)
    store.write_pairs("w", 0, 0, 0, [b"a"])
    os.kill(server.proc.pid, signal.SIGSTOP)
    try:
        with pytest.raises(StoreUnavailable, match=r"timeout 1\.5 s") as caught:
            store.read_pairs("w", 0, 0, 0, 1)
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)
    # the bound under test: attempts of half the timeout each fit in the
    # timeout (plus the one in flight), never the 50 retries
    assert caught.value.attempts <= 3, caught.value
    assert store.read_pairs("w", 0, 0, 0, 1) == [b"a"]  # answering again: the store works
    store.close()


@pytest.mark.parametrize("bad", [0, -1, float("inf"), "5", True])
def test_timeout_must_be_a_positive_number(bad):
    with pytest.raises(StoreConfigError, match="timeout"):
        open_store("memory://", timeout=bad)
