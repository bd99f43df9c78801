"""Private ``redis-server`` child processes on loopback ports.

The one launcher the store benchmarks (:func:`bench.storebench.backends`)
and the test fixtures (``tests/conftest.py``) both use: persistence off
(``--save "" --appendonly no``), bound to 127.0.0.1, optionally with a
password, an ACL user, TLS only (certificates from :func:`make_tls_files`),
or as a single-node Redis Cluster (every slot on the one node);
:class:`RedisClusterServers` is a Redis Cluster of several masters.
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import ssl
import subprocess
import time
from urllib.parse import quote

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
                 password: str | None = None, cluster: bool = False, tls: dict | None = None,
                 user: tuple[str, str] | None = None, whole_cluster: bool = True) -> None:
        binary = redis_binary()
        if binary is None:
            raise RuntimeError(MISSING)
        self.binary = binary
        self.directory = directory
        self.port = port or (free_cluster_port() if cluster else free_port())
        self.password = password
        self.cluster = cluster
        #: the files of :func:`make_tls_files`: the server speaks TLS only
        self.tls = tls
        #: ``(name, password)``: an ACL user with every right; the default user is off
        self.user = user
        self._whole_cluster = whole_cluster
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        """The store URL of this server (its ACL user's credentials and CA file included)."""
        scheme = ("rediss" if self.tls else "redis") + ("+cluster" if self.cluster else "")
        auth = f"{quote(self.user[0], safe='')}:{quote(self.user[1], safe='')}@" if self.user else ""
        query = f"?ssl_ca_certs={quote(self.tls['ca'])}" if self.tls else ""
        return f"{scheme}://{auth}127.0.0.1:{self.port}" + ("" if self.cluster else "/0") + query

    def start(self, timeout: float = 10.0) -> "RedisServer":
        args = [self.binary, "--bind", "127.0.0.1",
                "--save", "", "--appendonly", "no", "--dir", self.directory,
                "--daemonize", "no", "--loglevel", "warning", "--maxmemory", "0"]
        if self.tls:
            args += ["--port", "0", "--tls-port", str(self.port), "--tls-cert-file", self.tls["cert"],
                     "--tls-key-file", self.tls["key"], "--tls-ca-cert-file", self.tls["ca"],
                     "--tls-auth-clients", "no"]
        else:
            args += ["--port", str(self.port)]
        if self.password:
            args += ["--requirepass", self.password]
        if self.user:
            args += ["--user", "default", "off", "--user", self.user[0], "on", ">" + self.user[1],
                     "~*", "&*", "+@all"]
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
                with self._connect() as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(64):  # +PONG, or -NOAUTH with a password: it is up
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"redis-server did not start on port {self.port}")
            time.sleep(0.02)
        if self.cluster and self._whole_cluster:
            self._make_single_node_cluster(deadline)
        return self

    def _connect(self) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=0.5)
        if not self.tls:
            return sock
        context = ssl.create_default_context(cafile=self.tls["ca"])
        return context.wrap_socket(sock, server_hostname="127.0.0.1")

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

        user, password = self.user or (None, self.password)
        tls = dict(ssl=True, ssl_ca_certs=self.tls["ca"]) if self.tls else {}
        return redis.Redis(host="127.0.0.1", port=self.port, username=user, password=password, **tls)


class RedisClusterServers:
    """A Redis Cluster of ``masters`` nodes on loopback, the slots split
    evenly between them (no replicas)."""

    def __init__(self, directory: str, masters: int = 3) -> None:
        self.nodes = [RedisServer(os.path.join(directory, f"node{i}"), cluster=True, whole_cluster=False)
                      for i in range(masters)]

    @property
    def url(self) -> str:
        """The cluster's URL, every node a seed."""
        return "redis+cluster://" + ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)

    def start(self, timeout: float = 30.0) -> "RedisClusterServers":
        deadline = time.monotonic() + timeout
        try:
            for node in self.nodes:
                os.makedirs(node.directory, exist_ok=True)
                node.start()
            clients = [node.client() for node in self.nodes]
            share = 16384 // len(self.nodes)
            for i, client in enumerate(clients):
                last = 16383 if i == len(clients) - 1 else (i + 1) * share - 1
                client.execute_command("CLUSTER", "ADDSLOTSRANGE", i * share, last)
                if i:
                    client.execute_command("CLUSTER", "MEET", "127.0.0.1", self.nodes[0].port)
            for client in clients:
                while b"cluster_state:ok" not in client.execute_command("CLUSTER", "INFO"):
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"Redis Cluster did not become ready; logs in {self.nodes[0].directory}")
                    time.sleep(0.05)
                client.close()
        except BaseException:
            self.stop()
            raise
        return self

    def flushall(self) -> None:
        for node in self.nodes:
            client = node.client()
            try:
                client.flushall()
            finally:
                client.close()

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


def make_tls_files(directory: str) -> dict:
    """A certificate authority and a server certificate for 127.0.0.1 and
    localhost signed by it, made with ``openssl``: ``{"ca", "cert", "key"}``
    paths, plus ``"other_ca"``, an authority that did not sign it."""
    def run(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=directory)

    os.makedirs(directory, exist_ok=True)
    for ca in ("ca", "other_ca"):
        run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN=mta test {ca}",
            "-keyout", f"{ca}.key", "-out", f"{ca}.crt")
    with open(os.path.join(directory, "san.cnf"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    run("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", "server.key",
        "-out", "server.csr")
    run("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
        "-days", "2", "-extfile", "san.cnf", "-out", "server.crt")
    path = lambda name: os.path.join(directory, name)  # noqa: E731
    return {"ca": path("ca.crt"), "cert": path("server.crt"), "key": path("server.key"),
            "other_ca": path("other_ca.crt")}
