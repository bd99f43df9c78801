"""Shared fixtures: real ``redis-server`` processes on loopback ports
(:class:`bench.redis_server.RedisServer`, the launcher the store benchmarks use).

* ``redis_server`` (session) -- one server for the whole run, no persistence.
* ``redis_url`` (function) -- that server's URL, flushed before the test.
* ``redis_server_factory`` (function) -- start private servers (for restart,
  password and cluster tests); every one is killed after the test.
* ``redis_cluster`` (session) -- a Redis Cluster of three masters.
* ``redis_tls`` (session) -- a server speaking TLS only (certificates made by
  ``openssl``), its default user off and an ACL user with a password.

When ``redis-server`` is not installed the fixtures FAIL (they never skip):
the suite is meant to run against a real server.
"""

from __future__ import annotations

import shutil
import tempfile
from typing import Callable, Iterator

import pytest

from bench.redis_server import RedisClusterServers, RedisServer, free_port, make_tls_files, redis_binary  # noqa: F401 - free_port: tests import it from here

REDIS_MISSING = "redis-server not found: run scripts/test (apt-get install redis-server)"


def _require_redis() -> None:
    if redis_binary() is None:
        pytest.fail(REDIS_MISSING, pytrace=False)


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    _require_redis()
    directory = tempfile.mkdtemp(prefix="mta-redis-")
    server = RedisServer(directory).start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[RedisClusterServers]:
    _require_redis()
    directory = tempfile.mkdtemp(prefix="mta-redis-cluster-")
    cluster = RedisClusterServers(directory, masters=3).start()
    try:
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="session")
def redis_tls() -> Iterator[RedisServer]:
    _require_redis()
    if shutil.which("openssl") is None:
        pytest.fail("openssl not found: it makes the TLS server's certificates", pytrace=False)
    directory = tempfile.mkdtemp(prefix="mta-redis-tls-")
    server = RedisServer(directory, tls=make_tls_files(f"{directory}/tls"), user=("mta-test", "acl:pass@word")).start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    client = redis_server.client()
    try:
        client.flushall()
    finally:
        client.close()
    return redis_server.url


@pytest.fixture
def redis_server_factory(tmp_path) -> Iterator[Callable[..., RedisServer]]:
    servers: list[RedisServer] = []

    def make(**kwargs) -> RedisServer:
        _require_redis()
        directory = tempfile.mkdtemp(prefix="srv-", dir=tmp_path)
        server = RedisServer(directory, **kwargs).start()
        servers.append(server)
        return server

    try:
        yield make
    finally:
        for server in servers:
            server.stop()
