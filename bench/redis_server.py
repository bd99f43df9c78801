"""A private ``redis-server`` child process on a loopback port.

The one launcher the store benchmarks (:func:`bench.storebench.backends`)
and the test fixtures (``tests/conftest.py``) both use: persistence off
(``--save "" --appendonly no``), bound to 127.0.0.1, optionally with a
password or as a single-node Redis Cluster (every slot on the one node).
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import time

MISSING = "redis-server not found (apt-get install redis-server)"


def redis_binary() -> str | None:
    """The ``redis-server`` executable, or None when it is not installed."""
    return shutil.which("redis-server") or (
        "/usr/bin/redis-server" if os.path.exists("/usr/bin/redis-server") else None)


def redis_server_version(binary: str | None = None) -> str | None:
    binary = binary or redis_binary()
    if binary is None:
        return None
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for part in out.split():
        if part.startswith("v="):
            return part[2:]
    return out.strip() or None


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
    """A redis-server child process bound to 127.0.0.1, its log and working
    files in ``directory``.  ``stop()`` kills it (nothing is persisted, so
    nothing is lost that a clean shutdown would keep)."""

    def __init__(self, directory: str, *, port: int | None = None,
                 password: str | None = None, cluster: bool = False) -> None:
        binary = redis_binary()
        if binary is None:
            raise RuntimeError(MISSING)
        self.binary = binary
        self.directory = directory
        self.port = port or (free_cluster_port() if cluster else free_port())
        self.password = password
        self.cluster = cluster
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        scheme = "redis+cluster" if self.cluster else "redis"
        return f"{scheme}://127.0.0.1:{self.port}" + ("" if self.cluster else "/0")

    def start(self, timeout: float = 10.0) -> "RedisServer":
        args = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1",
                "--save", "", "--appendonly", "no", "--dir", self.directory,
                "--daemonize", "no", "--loglevel", "warning", "--maxmemory", "0"]
        if self.password:
            args += ["--requirepass", self.password]
        if self.cluster:
            args += ["--cluster-enabled", "yes", "--cluster-config-file", f"nodes-{self.port}.conf"]
        log = open(os.path.join(self.directory, f"redis-{self.port}.log"), "ab")
        self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.proc.returncode}; see {self.directory}")
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
        client = self.client()
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
