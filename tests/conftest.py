"""Shared fixtures: real ``redis-server`` processes on loopback ports
(:class:`bench.redis_server.RedisServer`, the launcher the store benchmarks use).

* ``redis_server`` (session) -- one server for the whole run, no persistence.
* ``redis_url`` (function) -- that server's URL, flushed before the test.
* ``redis_server_factory`` (function) -- start private servers (for restart,
  password and cluster tests); every one is killed after the test.
* ``redis_cluster`` (session) -- a Redis Cluster of three masters.
* ``redis_tls`` (session) -- a server speaking TLS only (certificates made by
  ``openssl``), its default user off and an ACL user with a password.
* ``spark`` (module) -- a local Spark session for the test module
  (:func:`tests.spark_fixtures.spark_session`), on the module's
  ``SPARK_MASTER`` (``"local[2]"`` if it has none) with its ``SPARK_CONF``.

When ``redis-server`` is not installed the fixtures FAIL (they never skip):
the suite is meant to run against a real server.
"""

from __future__ import annotations

import shutil
import tempfile
from typing import Callable, Iterator

import pytest
from hypothesis import settings

from bench.redis_server import RedisClusterServers, RedisServer, free_port, make_tls_files, redis_binary  # noqa: F401 - free_port: tests import it from here

# CI shares a 2-core machine with Spark JVMs: an example's wall-clock time says
# nothing about the code, so no hypothesis test has a deadline.
settings.register_profile("shared-machine", deadline=None)
settings.load_profile("shared-machine")

REDIS_MISSING = "redis-server not found: run scripts/test (apt-get install redis-server)"


def _require_redis() -> None:
    if redis_binary() is None:
        pytest.fail(REDIS_MISSING, pytrace=False)


def _served(prefix: str, start: Callable[[str], object]) -> Iterator:
    """What ``start(directory)`` launched, in a fresh temporary directory;
    stopped and the directory removed afterwards."""
    _require_redis()
    directory = tempfile.mkdtemp(prefix=prefix)
    served = start(directory)
    try:
        yield served
    finally:
        served.stop()
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    yield from _served("mta-redis-", lambda d: RedisServer(d).start())


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[RedisClusterServers]:
    yield from _served("mta-redis-cluster-", lambda d: RedisClusterServers(d, masters=3).start())


@pytest.fixture(scope="session")
def redis_tls() -> Iterator[RedisServer]:
    if shutil.which("openssl") is None:
        pytest.fail("openssl not found: it makes the TLS server's certificates", pytrace=False)
    yield from _served("mta-redis-tls-", lambda d: RedisServer(
        d, tls=make_tls_files(f"{d}/tls"), user=("mta-test", "acl:pass@word")).start())


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


@pytest.fixture(scope="module")
def spark(request):
    """One Spark session for the test module, stopped after it (a module
    that needs other settings names them: ``SPARK_MASTER``, e.g.
    ``"local[2,3]"`` for task retries, and ``SPARK_CONF``)."""
    from tests.spark_fixtures import spark_session

    session = spark_session(getattr(request.module, "SPARK_MASTER", "local[2]"),
                            **getattr(request.module, "SPARK_CONF", {}))
    yield session
    session.stop()
