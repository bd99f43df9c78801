"""A Redis store's connection: client settings, TLS, Cluster, pooled round trips.

:class:`RedisConnection` is the base of :class:`stores.redis_store.RedisStore`
(which holds the key layout and the store operations).  It turns the parsed
URL and the pass-through options into redis-py client settings, makes the
client (standalone or Cluster) and registers the store's Lua scripts on it,
sends RESP-packed commands on a pooled connection in one round trip, and says
which errors are transient, an authentication failure or a TLS mistake.

Connections are made lazily: :func:`stores.open_store` does no network I/O,
and a server that is down makes the *first operation* raise
:class:`~stores.errors.StoreUnavailable` after the retries (never a raw
``ConnectionRefusedError``).  redis-py's own retries are disabled so that
the store's bounded backoff is the only one.  After ``fork`` redis-py opens
fresh connections in the child.
"""

from __future__ import annotations

import contextlib
import os
import socket
import ssl
import threading
from typing import Any, Iterator, Optional

from .base import AUTH, CONFIG, TRANSIENT, Store
from .errors import StoreConfigError
from .redis_url import check_client_settings, redacted_url
from .redis_wire import CAS_LUA, DELETE_META_LUA, READ_LUA, WRITE_LUA, command


#: The client options that name files (TLS certificates and keys).
TLS_FILES = ("ssl_ca_certs", "ssl_certfile", "ssl_keyfile")


#: What a server that is not a Cluster node answers a Cluster client (redis-py's words).
NOT_A_CLUSTER = "Cluster mode is not enabled"


def _chain(exc: BaseException | None) -> Iterator[BaseException]:
    """``exc`` and the errors behind it (``__cause__``, else ``__context__``):
    redis-py wraps a refusal or a TLS mistake in a ConnectionError, and its
    Cluster client in a RedisClusterException, like an outage."""
    seen = 0
    while exc is not None and seen < 8:
        yield exc
        exc, seen = exc.__cause__ or exc.__context__, seen + 1


def _tls_mistake(exc: BaseException) -> BaseException | None:
    """The TLS configuration error behind ``exc`` (a certificate that does
    not verify, a missing file, a handshake with a server not speaking TLS),
    or None."""
    for cause in _chain(exc):
        if isinstance(cause, ssl.SSLCertVerificationError) or isinstance(cause, FileNotFoundError):
            return cause
        if isinstance(cause, ssl.SSLError) and getattr(cause, "reason", None) in (
                "WRONG_VERSION_NUMBER", "PEM_LIB", "KEY_VALUES_MISMATCH", "NO_START_LINE"):
            return cause
    return None


def _refused(exc: BaseException, rx: Any) -> bool:
    """Whether the server refused the credentials behind ``exc``."""
    return any(isinstance(cause, (rx.AuthenticationError, rx.AuthorizationError, rx.NoPermissionError))
               or (isinstance(cause, rx.ResponseError) and str(cause).startswith(("NOAUTH", "WRONGPASS")))
               for cause in _chain(exc))


def _not_a_cluster(exc: BaseException, rx: Any) -> bool:
    """Whether a seed behind ``exc`` answered that it is not a Cluster node."""
    return any(isinstance(cause, rx.RedisClusterException) and NOT_A_CLUSTER in str(cause) for cause in _chain(exc))


def _speaks_plain_redis(host: str, port: int, timeout: float = 0.5) -> bool:
    """``host:port`` answers a plain-text PING: a Redis port without TLS
    (a TLS handshake with it stalls until the connect timeout, since the
    server waits for the end of a command line that never comes)."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as conn:
            conn.sendall(b"PING\r\n")
            return conn.recv(16)[:1] in (b"+", b"-")
    except OSError:
        return False


def _may_have_stalled(exc: BaseException, rx: Any) -> bool:
    """``exc`` may come from a TLS handshake with a port that speaks plain
    Redis (it stalls until the connect timeout): a connection that timed
    out while it was being made, or a Cluster client reaching no seed (its
    message names one seed's failure only, maybe not the stalled one's)."""
    text = str(exc).lower()
    return "connect" in text and (isinstance(exc, (rx.TimeoutError, TimeoutError))
                                  or (isinstance(exc, rx.RedisClusterException) and "cannot be connected" in text))


def _cluster_client_options() -> set[str]:
    """The options redis-py's RedisCluster takes: its own, and those it
    passes on to each node's connections."""
    import inspect

    from redis.cluster import REDIS_ALLOWED_KEYS, RedisCluster
    return set(REDIS_ALLOWED_KEYS) | set(inspect.signature(RedisCluster.__init__).parameters) - {"self", "kwargs"}


def no_retries() -> Any:
    """redis-py's retry policy that never retries (the store's bounded
    backoff is the only one); StoreConfigError when redis-py is missing."""
    try:
        from redis.backoff import NoBackoff
        from redis.retry import Retry
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise StoreConfigError(
            "redis:// stores need redis-py: pip install 'mta-windows[redis]'") from exc
    return Retry(NoBackoff(), 0)


class RedisConnection(Store):
    """The connection half of a Redis store (see the module docstring).

    ``cluster`` says whether it talks to a Redis Cluster; :meth:`client`
    gives the redis-py client, made on first use."""

    def _connect_lazily(self, cfg: dict[str, Any], options: dict[str, Any], retry: Any) -> None:
        """Client settings from the parsed URL ``cfg`` (credentials settled)
        and the pass-through client ``options``; a standalone client is made
        now, which validates them (redis-py connects on first use)."""
        self._password: Optional[str] = cfg["password"]
        self.cluster: bool = cfg["cluster"]
        kwargs: dict[str, Any] = {
            "host": cfg["host"], "port": cfg["port"],
            "username": cfg["username"], "password": cfg["password"],
            # two attempts fit in the operation's timeout
            "socket_timeout": cfg.get("socket_timeout", min(5.0, self.timeout / 2)),
            "socket_connect_timeout": cfg.get("socket_connect_timeout", min(2.0, self.timeout / 3)),
            "retry": retry,
        }
        for name in ("health_check_interval", "max_connections", "client_name",
                     "ssl_cert_reqs", "ssl_ca_certs", "ssl_certfile", "ssl_keyfile",
                     "ssl_check_hostname"):
            if name in cfg:
                kwargs[name] = cfg[name]
        if cfg["tls"]:
            kwargs["ssl"] = True
        kwargs.update(options)  # pass-through client options win
        try:
            check_client_settings(kwargs)
        except StoreConfigError as exc:
            raise StoreConfigError(f"store {redacted_url(cfg)}: {exc}") from None
        for name in TLS_FILES:
            path = kwargs.get(name)
            if path is not None and not os.path.isfile(path):
                raise StoreConfigError(f"store {redacted_url(cfg)}: {name}: no such file {path!r}")
        if self.cluster:
            if cfg["db"] not in (0, None):
                raise StoreConfigError("Redis Cluster has database 0 only")
            kwargs.pop("db", None)
            kwargs.setdefault("require_full_coverage", False)
            # redis-py's Cluster client drops options it does not know: refused here, as Redis() refuses them
            unknown = sorted(set(kwargs) - _cluster_client_options())
            if unknown:
                raise StoreConfigError(f"store {redacted_url(cfg)}: bad Redis client option: redis-py's Cluster "
                                       f"client takes no {', '.join(map(repr, unknown))}")
        else:
            kwargs["db"] = cfg["db"]
        self._kwargs = kwargs
        self._seeds = cfg["seeds"]
        self._client_obj: Any = None
        self._client_lock = threading.Lock()
        self._cas_script: Any = None
        self._delete_meta_script: Any = None
        self._write_script: Any = None
        self._read_script: Any = None
        if not self.cluster:
            self.client()  # validates options; redis-py connects lazily

    # ------------------------------------------------------------ client

    def client(self) -> Any:
        client = self._client_obj
        if client is not None:
            return client
        with self._client_lock:
            if self._client_obj is None:
                import redis
                try:
                    if self.cluster:
                        from redis.cluster import ClusterNode, RedisCluster
                        kwargs = dict(self._kwargs)
                        del kwargs["host"], kwargs["port"]
                        client = RedisCluster(startup_nodes=[ClusterNode(h, p) for h, p in self._seeds], **kwargs)
                    else:
                        client = redis.Redis(**self._kwargs)
                        # a connection is made lazily, and checks its settings then (ssl_cert_reqs):
                        # one made here, not connected, checks them when the store is opened
                        pool = client.connection_pool
                        pool.connection_class(**pool.connection_kwargs)
                except (TypeError, ValueError, redis.RedisError) as exc:
                    # the Cluster client connects to its seeds here: their failures are classified as any other's
                    if isinstance(exc, redis.RedisError) and self._classify(exc) is not None:
                        raise
                    raise StoreConfigError(
                        f"store {self.url}: bad Redis client option: "
                        f"{self._scrub(str(exc))}") from None
                self._cas_script = client.register_script(CAS_LUA)
                self._delete_meta_script = client.register_script(DELETE_META_LUA)
                self._write_script = client.register_script(WRITE_LUA)
                self._read_script = client.register_script(READ_LUA)
                self._client_obj = client
            return self._client_obj

    def _secrets(self) -> tuple[str, ...]:
        return (self._password,) if self._password else ()

    def _classify(self, exc: Exception) -> Optional[str]:
        from redis import exceptions as rx
        if _tls_mistake(exc) is not None:
            return CONFIG
        # before the outages: the Cluster client reports a refusal as reaching no seed
        if _refused(exc, rx):
            return AUTH
        if self.cluster and _not_a_cluster(exc, rx):
            return CONFIG
        if self._kwargs.get("ssl") and _may_have_stalled(exc, rx):
            # a cluster's client says it reached no seed; a seed that answers plain Redis is the mistake
            nodes = self._seeds if self.cluster else [(self._kwargs["host"], self._kwargs["port"])]
            self._plain_port = next((node for node in nodes if _speaks_plain_redis(*node)), None)
            if self._plain_port is not None:
                return CONFIG
        # ClusterError: redis-py gave up following MOVED, ASK and TRYAGAIN replies (a slot being
        # migrated, its keys split between two masters): the migration ends, and a retry then lands
        if isinstance(exc, (rx.ConnectionError, rx.TimeoutError, rx.BusyLoadingError,
                            rx.ClusterError, rx.TryAgainError, rx.ReadOnlyError,
                            rx.SlotNotCoveredError, ConnectionError, TimeoutError,
                            socket.timeout, OSError)):
            return TRANSIENT
        if isinstance(exc, rx.RedisClusterException) and any(
                s in str(exc) for s in ("cannot be connected", "could not agree",
                                        "has no redis_connection", "No targets were found")):
            return TRANSIENT
        if isinstance(exc, rx.ResponseError) and str(exc).startswith(("LOADING", "MASTERDOWN",
                                                                       "CLUSTERDOWN", "TRYAGAIN")):
            return TRANSIENT
        return None

    def _config_problem(self, exc: Exception) -> str:
        from redis import exceptions as rx
        if self.cluster and _tls_mistake(exc) is None and _not_a_cluster(exc, rx):
            return (f"{NOT_A_CLUSTER} on a seed node: a Redis Cluster URL (redis+cluster://) names a server "
                    "that is not a Cluster node; use redis:// (or rediss://) for a standalone server")
        if getattr(self, "_plain_port", None) is not None:
            host, port = self._plain_port
            return (f"the server at {host}:{port} speaks Redis without TLS: a rediss:// URL needs the server's "
                    "TLS port (or use redis:// for this one)")
        cause = _tls_mistake(exc)
        if isinstance(cause, ssl.SSLCertVerificationError):
            trusted = self._kwargs.get("ssl_ca_certs")
            trusted = f"ssl_ca_certs={trusted!r}" if trusted else "the system's CA certificates (set ssl_ca_certs)"
            return (f"TLS certificate verification failed against {trusted}: "
                    f"{cause.verify_message or cause.reason}")
        if isinstance(cause, FileNotFoundError):
            return f"TLS file not found: {cause.filename!r}"
        return (f"TLS handshake failed ({getattr(cause, 'reason', None) or cause}): is the server speaking "
                f"TLS (rediss://) on this port, and are ssl_certfile and ssl_keyfile a matching pair?")

    # ------------------------------------------------- pooled round trips

    def release_connection(self, conn: Any) -> None:
        client = self._client_obj
        if client is not None:
            client.connection_pool.release(conn)

    def _raw(self, commands: list[bytes]) -> list:
        """Send RESP-packed ``commands`` in one write on a pooled connection
        (standalone Redis) and read every reply: one round trip.  An error
        reply is raised after all replies were read (the connection stays in
        step); a broken connection is dropped by redis-py and the call is
        retried by the store."""
        from redis.exceptions import ResponseError

        pool = self.client().connection_pool
        try:
            conn = pool.get_connection()
        except TypeError:  # pragma: no cover - redis-py < 5.1 wants a command name
            conn = pool.get_connection("HMGET")
        try:
            conn.send_packed_command([b"".join(commands)])
            replies, error = [], None
            for _ in commands:
                try:
                    replies.append(conn.read_response())
                except ResponseError as exc:
                    error = error or exc
            if error is not None:
                raise error
            return replies
        finally:
            pool.release(conn)

    def _evalsha(self, script: Any, keys: list, args: list) -> Any:
        """``script`` (registered) on a standalone server through :meth:`_raw`,
        loaded first if the server does not have it (a restarted server)."""
        return self._evalsha_many(script, [(keys, args)])[0]

    def _evalsha_many(self, script: Any, calls: list[tuple[list, list]], again: list | None = None) -> list:
        """``script`` run for each ``(keys, args)`` of ``calls``, in one
        round trip (:meth:`_evalsha`); loaded and sent again if the server
        does not have it, as ``again`` (default ``calls``): the calls as a
        retry sends them, since a flush of the server's scripts between two
        calls of the round trip leaves the first ones run."""
        from redis.exceptions import NoScriptError, ResponseError

        def packed(these: list) -> list[bytes]:
            return [command(b"EVALSHA", script.sha, len(keys), *keys, *args) for keys, args in these]

        try:
            return self._raw(packed(calls))
        except ResponseError as exc:
            if not isinstance(exc, NoScriptError) and not str(exc).startswith("NOSCRIPT"):
                raise
        self.client().script_load(script.script)
        return self._raw(packed(calls if again is None else again))

    def _close(self) -> None:
        client = self._client_obj
        self._client_obj = None
        if client is not None:
            with contextlib.suppress(Exception):  # best effort: the store is closed either way
                client.close()
