"""``redis://`` -- a store in Redis (standalone, TLS or Cluster), via redis-py.

URLs::

    redis://[[user]:password@]host[:port][/db]     plain TCP (port 6379, db 0)
    rediss://...                                    TLS
    redis+cluster://host[:port][,host[:port]...]    Redis Cluster (seed nodes: any one that
                                                    answers gives the cluster's layout)
    rediss+cluster://...                            Redis Cluster over TLS

The option ``cluster=True`` also selects Redis Cluster.  Credentials:
``password`` / ``username`` options, else the URL, else the environment
variables ``MTA_REDIS_PASSWORD`` / ``MTA_REDIS_USERNAME``.  The password is
never logged nor part of ``url``, ``repr`` or error messages.  Other options
go to the redis-py client unchanged (``ssl_ca_certs``, ``ssl_certfile``,
``ssl_keyfile``, ``ssl_cert_reqs``, ``socket_timeout`` (default half the
store's ``timeout``, at most 5 s), ``socket_connect_timeout`` (default a
third of it, at most 2 s), ``max_connections``, ...).  redis-py
uses hiredis automatically when it is installed.  ``key_prefix`` (default
``"mta"``) namespaces the keys.

Key layout (every key of a window shares the hash tag ``{<window>}`` and so
one Cluster slot, which keeps pipelines on one node and lets the CAS script
run in Cluster)::

    mta:{<window>}:meta                 hash  v = version, b = blob
    mta:{<window>}:epochs               set   epochs that hold pairs
    mta:{<window>}:e<epoch>:levels      set   levels of that epoch
    mta:{<window>}:e<epoch>:l<level>    hash  field = decimal index, value = blob

A batch of pairs is one round trip: SADD to the two sets (first, so a pair
is never unlisted), then HSET of every pair.  On a standalone server the
commands are packed here (RESP, :mod:`stores.redis_wire`) and sent on a
pooled connection in one write, the replies read back: cheaper than
redis-py's per-argument encoding, and the field names of a batch of
same-sized blobs come from one join/split per run.  A batch of blobs of
different sizes, and every batch on a Cluster, is one Lua script call
(EVALSHA): the blobs travel concatenated in one argument with their lengths
in another, and the server splits them (cheap for the client, dearer for the
server than HSET).
read_pairs is one HMGET packed the same way (Cluster: HMGET for up to
``SMALL_READ`` pairs, a script making the field names beyond).  Scripts
take indices below 2**53 only (Lua numbers are doubles); beyond, redis-py's
own commands.  delete_pairs is one HDEL (an emptied hash disappears).
drop_epoch is two round trips (SMEMBERS of the levels, then one UNLINK of
every level hash); do not write to an epoch while dropping it.  The metadata compare-and-set is
one Lua script (EVALSHA, reloaded by redis-py after a server restart):
compare the version, write the blob, increment the version, atomically;
the same script compares the blob too (``swap_meta``, which gets the
current record back when it fails) or returns the epochs set with the new
version (``cas_meta_epochs``), still one round trip.
Tokens are the integer versions (1 on creation).

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
import sys
import threading
from array import array
from typing import Any, Optional

from .base import AUTH, CONFIG, STORE_OPTIONS, TRANSIENT, Store, Token, cas_mismatch
from .errors import StoreConfigError

from .redis_url import parse_redis_url, redacted_url
from .redis_wire import (CAS_LUA, DELETE_META_LUA, CHUNK, LUA_INDEX_LIMIT, READ_LUA, SMALL_READ, WRITE_LUA, DeferredChannel,
                         command, hmget_commands, hset_commands)


#: The client options that name files (TLS certificates and keys).
TLS_FILES = ("ssl_ca_certs", "ssl_certfile", "ssl_keyfile")


def _tls_mistake(exc: BaseException) -> BaseException | None:
    """The TLS configuration error behind ``exc`` (a certificate that does
    not verify, a missing file, a handshake with a server not speaking TLS),
    or None: redis-py wraps them in a ConnectionError, like an outage."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, ssl.SSLCertVerificationError) or isinstance(exc, FileNotFoundError):
            return exc
        if isinstance(exc, ssl.SSLError) and getattr(exc, "reason", None) in (
                "WRONG_VERSION_NUMBER", "PEM_LIB", "KEY_VALUES_MISMATCH", "NO_START_LINE"):
            return exc
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None


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


def _glob_escape(text: str) -> str:
    """``text`` matched literally by a Redis glob pattern (SCAN MATCH)."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


class RedisStore(Store):
    scheme = "redis"

    def __init__(self, url: str, **options: Any) -> None:
        try:
            from redis.backoff import NoBackoff
            from redis.retry import Retry
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise StoreConfigError(
                "redis:// stores need redis-py: pip install 'mta-windows[redis]'") from exc
        cfg = parse_redis_url(url)
        store_opts = {k: options.pop(k) for k in list(options) if k in STORE_OPTIONS}
        # Credentials: options > URL > environment.
        for name, env in (("password", "MTA_REDIS_PASSWORD"), ("username", "MTA_REDIS_USERNAME")):
            if options.get(name) is not None:
                cfg[name] = options.pop(name)
            else:
                options.pop(name, None)
                if cfg.get(name) is None and os.environ.get(env):
                    cfg[name] = os.environ[env]
        for name in ("cluster", "db", "key_prefix", "ssl"):
            if name in options:
                cfg["tls" if name == "ssl" else name] = options.pop(name)
        cfg["cluster"] = bool(cfg["cluster"])
        if options.get("decode_responses"):
            raise StoreConfigError("decode_responses=True is not supported: blobs are bytes")
        options.pop("decode_responses", None)
        super().__init__(redacted_url(cfg), **store_opts)

        self._password: Optional[str] = cfg["password"]
        self.cluster: bool = cfg["cluster"]
        prefix = cfg.get("key_prefix", "mta")
        if not isinstance(prefix, str) or "{" in prefix or "}" in prefix:
            raise StoreConfigError(f"key_prefix must be a str without braces, got {prefix!r}")
        self.key_prefix = prefix
        kwargs: dict[str, Any] = {
            "host": cfg["host"], "port": cfg["port"],
            "username": cfg["username"], "password": cfg["password"],
            # two attempts fit in the operation's timeout
            "socket_timeout": cfg.get("socket_timeout", min(5.0, self.timeout / 2)),
            "socket_connect_timeout": cfg.get("socket_connect_timeout", min(2.0, self.timeout / 3)),
            "retry": Retry(NoBackoff(), 0),
        }
        for name in ("health_check_interval", "max_connections", "client_name",
                     "ssl_cert_reqs", "ssl_ca_certs", "ssl_certfile", "ssl_keyfile",
                     "ssl_check_hostname"):
            if name in cfg:
                kwargs[name] = cfg[name]
        if cfg["tls"]:
            kwargs["ssl"] = True
        kwargs.update(options)  # pass-through client options win
        for name in TLS_FILES:
            path = kwargs.get(name)
            if path is not None and not os.path.isfile(path):
                raise StoreConfigError(f"store {redacted_url(cfg)}: {name}: no such file {path!r}")
        if self.cluster:
            if cfg["db"] not in (0, None):
                raise StoreConfigError("Redis Cluster has database 0 only")
            kwargs.pop("db", None)
            kwargs.setdefault("require_full_coverage", False)
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
                except TypeError as exc:
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
        if (isinstance(exc, (rx.TimeoutError, TimeoutError)) and self._kwargs.get("ssl") and not self.cluster
                and "connect" in str(exc).lower()
                and _speaks_plain_redis(self._kwargs["host"], self._kwargs["port"])):
            self._plain_port = True
            return CONFIG
        if isinstance(exc, (rx.AuthenticationError, rx.AuthorizationError,
                            rx.NoPermissionError)):
            return AUTH
        if isinstance(exc, rx.ResponseError) and str(exc).startswith(("NOAUTH", "WRONGPASS")):
            return AUTH
        if isinstance(exc, (rx.ConnectionError, rx.TimeoutError, rx.BusyLoadingError,
                            rx.ClusterDownError, rx.TryAgainError, rx.ReadOnlyError,
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
        if getattr(self, "_plain_port", False):
            return (f"the server at {self._kwargs['host']}:{self._kwargs['port']} speaks Redis without TLS: a "
                    "rediss:// URL needs the server's TLS port (or use redis:// for this one)")
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

    # -------------------------------------------------------------- keys

    def _base(self, window: str) -> str:
        return f"{self.key_prefix}:{{{window}}}"

    def pairs_key(self, window: str, epoch: int, level: int) -> str:
        return f"{self._base(window)}:e{epoch}:l{level}"

    def levels_key(self, window: str, epoch: int) -> str:
        return f"{self._base(window)}:e{epoch}:levels"

    def epochs_key(self, window: str) -> str:
        return f"{self._base(window)}:epochs"

    def meta_key(self, window: str) -> str:
        return f"{self._base(window)}:meta"

    # ----------------------------------------------------------- backend

    def _write_pairs(self, window: str, epoch: int, level: int, first: int,
                     blobs: list[bytes]) -> None:
        key = self.pairs_key(window, epoch, level)
        epochs_key, levels_key = self.epochs_key(window), self.levels_key(window, epoch)
        if not self.cluster and len(set(map(len, blobs))) == 1:
            # the usual batch (pairs of same-sized values): plain commands, packed here
            self._raw([command(b"SADD", epochs_key, epoch), command(b"SADD", levels_key, level),
                       *hset_commands(key.encode(), first, blobs)])
            return
        if first + len(blobs) <= LUA_INDEX_LIMIT:
            lens = array("I", map(len, blobs))
            if lens.itemsize == 4 and max(lens) < 1 << 32:
                if sys.byteorder != "little":  # pragma: no cover
                    lens.byteswap()
                self.client()
                self._write_script(keys=[key, epochs_key, levels_key],
                                   args=[epoch, level, first, b"".join(blobs), lens.tobytes()])
                return
        pipe = self.client().pipeline(transaction=False)  # pragma: no cover - indices >= 2**53
        pipe.sadd(epochs_key, epoch)
        pipe.sadd(levels_key, level)
        for start in range(0, len(blobs), CHUNK):
            chunk = blobs[start:start + CHUNK]
            base = first + start
            pipe.hset(key, mapping={base + k: b for k, b in enumerate(chunk)})
        pipe.execute()

    def _read_pairs(self, window: str, epoch: int, level: int, first: int,
                    count: int) -> list[Optional[bytes]]:
        key = self.pairs_key(window, epoch, level)
        end = first + count
        if not self.cluster:
            replies = self._raw(hmget_commands(key.encode(), first, count))
            if len(replies) == 1:
                return replies[0]
            return [b for part in replies for b in part]
        if count > SMALL_READ and end <= LUA_INDEX_LIMIT:
            self.client()
            return self._read_script(keys=[key], args=[first, count])
        if count <= CHUNK:
            return self.client().hmget(key, list(range(first, end)))
        pipe = self.client().pipeline(transaction=False)
        for start in range(first, end, CHUNK):
            pipe.hmget(key, list(range(start, min(end, start + CHUNK))))
        out: list[Optional[bytes]] = []
        for part in pipe.execute():
            out.extend(part)
        return out

    def deferred_channel(self) -> Optional[DeferredChannel]:
        """A :class:`DeferredChannel` (standalone Redis; ``None`` on a Cluster,
        where the window's level queues use background threads instead)."""
        return None if self.cluster else DeferredChannel(self)

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
        from redis.exceptions import NoScriptError, ResponseError

        packed = command(b"EVALSHA", script.sha, len(keys), *keys, *args)
        try:
            return self._raw([packed])[0]
        except ResponseError as exc:
            if not isinstance(exc, NoScriptError) and not str(exc).startswith("NOSCRIPT"):
                raise
        self.client().script_load(script.script)  # not run: it was unknown, so run it now
        return self._raw([packed])[0]

    def _delete_pairs(self, window: str, epoch: int, level: int, first: int,
                      count: int) -> None:
        key = self.pairs_key(window, epoch, level)
        end = first + count
        if count <= CHUNK:
            self.client().hdel(key, *range(first, end))
            return
        pipe = self.client().pipeline(transaction=False)
        for start in range(first, end, CHUNK):
            pipe.hdel(key, *range(start, min(end, start + CHUNK)))
        pipe.execute()

    def _drop_epoch(self, window: str, epoch: int, ranges: Any) -> int:
        client = self.client()
        levels_key = self.levels_key(window, epoch)
        levels = client.smembers(levels_key)
        keys = [self.pairs_key(window, epoch, int(lv)) for lv in levels]
        pipe = client.pipeline(transaction=False)
        pipe.srem(self.epochs_key(window), epoch)
        for key in keys + [levels_key]:  # one key per UNLINK: Cluster pipelines need it
            pipe.unlink(key)
        pipe.execute()
        return 2

    def _list_epochs(self, window: str) -> list[int]:
        return [int(e) for e in self.client().smembers(self.epochs_key(window))]

    def _read_meta(self, window: str) -> tuple[Optional[bytes], Token]:
        if self.cluster:
            version, blob = self.client().hmget(self.meta_key(window), ["v", "b"])
        else:  # packed here, as the pairs' commands: a key's every micro-batch may read its record
            version, blob = self._raw([command(b"HMGET", self.meta_key(window), "v", "b")])[0]
        if version is None:
            return None, None
        return blob if blob is not None else b"", int(version)

    def _cas_meta(self, window: str, expected: Token, value: bytes, retry: bool) -> Token:
        done, token, _ = self._swap_meta(window, expected, value, retry)
        if not done:
            raise cas_mismatch(window, expected, token)
        return token

    def _swap_meta(self, window: str, expected: Token, value: bytes, retry: bool, *, old: Optional[bytes] = None,
                   listing: bool = False, durable: bool = True) -> tuple[bool, Token, Any]:
        self.client()
        keys = [self.meta_key(window), self.epochs_key(window)]
        args = ["" if expected is None else str(expected), value, "1" if retry else "0",
                "0" if old is None else "1", b"" if old is None else old, "1" if listing else "0"]
        if self.cluster:
            reply = self._cas_script(keys=keys, args=args)
        else:  # packed here, as the pairs' commands: a window's every micro-batch makes two of these
            reply = self._evalsha(self._cas_script, keys, args)
        if reply[0] == 1:
            return True, int(reply[1]), [int(e) for e in reply[2]] if listing else None
        if reply[1] in (b"", ""):
            return False, None, None
        return False, int(reply[1]), reply[2] if old is not None else None

    def _delete_meta(self, window: str, expected: Token) -> None:
        self.client()
        version = self._delete_meta_script(keys=[self.meta_key(window)], args=[str(expected)])
        if version not in (b"", ""):
            raise cas_mismatch(window, expected, int(version))

    def _delete_window(self, window: str) -> int:
        client = self.client()
        epochs_key = self.epochs_key(window)
        epochs = [int(e) for e in client.smembers(epochs_key)]
        keys = [epochs_key, self.meta_key(window)]
        trips = 1
        if epochs:
            pipe = client.pipeline(transaction=False)
            for e in epochs:
                pipe.smembers(self.levels_key(window, e))
            for e, levels in zip(epochs, pipe.execute()):
                keys.append(self.levels_key(window, e))
                keys.extend(self.pairs_key(window, e, int(lv)) for lv in levels)
            trips += 1
        pipe = client.pipeline(transaction=False)
        for key in keys:
            pipe.unlink(key)
        pipe.execute()
        return trips + 1

    def _window_names(self) -> list[str]:
        # A window's keys are <prefix>:{<window>}:<suffix> and names hold no
        # brace; its record and its epochs set name every window with a
        # record or pairs.  SCAN walks every master of a Cluster.
        head = f"{self.key_prefix}:{{"
        pattern = _glob_escape(head) + "*}:*"
        names = []
        for key in self.client().scan_iter(match=pattern, count=1000):
            text = key.decode("utf-8", "replace") if isinstance(key, bytes) else key
            window, _, suffix = text[len(head):].partition("}:")
            if suffix in ("meta", "epochs"):
                names.append(window)
        return names

    def _ping(self) -> None:
        self.client().ping()

    def _close(self) -> None:
        client = self._client_obj
        self._client_obj = None
        if client is not None:
            with contextlib.suppress(Exception):  # best effort: the store is closed either way
                client.close()
