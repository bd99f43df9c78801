"""Shared fixtures: real ``redis-server`` processes on loopback ports.

* ``redis_server`` (session) -- one server for the whole run, no persistence.
* ``redis_url`` (function) -- that server's URL, flushed before the test.
* ``redis_server_factory`` (function) -- start private servers (for restart,
  password and cluster tests); every one is killed after the test.

When ``redis-server`` is not installed the fixtures FAIL (they never skip):
the suite is meant to run against a real server.
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import tempfile
import time
from typing import Callable, Iterator, Optional

import pytest

REDIS_MISSING = "redis-server not found: run scripts/test (apt-get install redis-server)"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_cluster_port() -> int:
    """A free port P <= 55535 whose cluster bus port P + 10000 is free too."""
    for _ in range(200):
        port = random.randint(20000, 55535)
        if _bindable(port) and _bindable(port + 10000):
            return port
    raise RuntimeError("no free port pair for a Redis Cluster node")


class RedisServer:
    """A redis-server child process bound to 127.0.0.1."""

    def __init__(self, directory: str, *, port: Optional[int] = None,
                 password: Optional[str] = None, cluster: bool = False) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.fail(REDIS_MISSING, pytrace=False)
        self.binary = binary
        self.directory = directory
        self.port = port or (free_cluster_port() if cluster else free_port())
        self.password = password
        self.cluster = cluster
        self.proc: Optional[subprocess.Popen] = None

    @property
    def url(self) -> str:
        scheme = "redis+cluster" if self.cluster else "redis"
        return f"{scheme}://127.0.0.1:{self.port}" + ("" if self.cluster else "/0")

    def start(self, timeout: float = 10.0) -> "RedisServer":
        args = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1",
                "--save", "", "--appendonly", "no", "--dir", self.directory,
                "--daemonize", "no", "--loglevel", "warning"]
        if self.password:
            args += ["--requirepass", self.password]
        if self.cluster:
            args += ["--cluster-enabled", "yes", "--cluster-config-file",
                     f"nodes-{self.port}.conf"]
        log = open(os.path.join(self.directory, f"redis-{self.port}.log"), "ab")
        self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        log.close()
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.proc.returncode}; "
                                   f"see {self.directory}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(64):  # +PONG, or -NOAUTH with a password: it is up
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"redis-server did not start on port {self.port}")
            time.sleep(0.02)
        if self.cluster:
            self._make_single_node_cluster(deadline)
        return self

    def _make_single_node_cluster(self, deadline: float) -> None:
        import redis
        client = redis.Redis(host="127.0.0.1", port=self.port, password=self.password)
        try:
            client.execute_command("CLUSTER", "ADDSLOTSRANGE", 0, 16383)
            while b"cluster_state:ok" not in client.execute_command("CLUSTER", "INFO"):
                if time.monotonic() > deadline:
                    raise RuntimeError("single-node Redis Cluster did not become ready")
                time.sleep(0.05)
        finally:
            client.close()

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)

    def client(self):
        import redis
        return redis.Redis(host="127.0.0.1", port=self.port, password=self.password)


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    if shutil.which("redis-server") is None:
        pytest.fail(REDIS_MISSING, pytrace=False)
    directory = tempfile.mkdtemp(prefix="mta-redis-")
    server = RedisServer(directory).start()
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
        directory = tempfile.mkdtemp(prefix="srv-", dir=tmp_path)
        server = RedisServer(directory, **kwargs).start()
        servers.append(server)
        return server

    try:
        yield make
    finally:
        for server in servers:
            server.stop()
