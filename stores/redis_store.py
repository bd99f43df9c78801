"""``redis://`` -- a store in Redis (standalone, TLS or Cluster), via redis-py.

URLs::

    redis://[[user]:password@]host[:port][/db]     plain TCP (port 6379, db 0)
    rediss://...                                    TLS
    redis+cluster://host[:port]                     Redis Cluster (one seed node)
    rediss+cluster://host[:port]                    Redis Cluster over TLS

The option ``cluster=True`` also selects Redis Cluster.  Credentials:
``password`` / ``username`` options, else the URL, else the environment
variables ``MTA_REDIS_PASSWORD`` / ``MTA_REDIS_USERNAME``.  The password is
never logged nor part of ``url``, ``repr`` or error messages.  Other options
go to the redis-py client unchanged (``ssl_ca_certs``, ``ssl_certfile``,
``ssl_keyfile``, ``ssl_cert_reqs``, ``socket_timeout`` (default 5 s),
``socket_connect_timeout`` (default 2 s), ``max_connections``, ...).  redis-py
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
commands are packed here (RESP) and sent on a pooled connection in one
write, the replies read back -- redis-py's per-argument encoding costs about
1 us of Python time per pair, this about 0.3 us, and the field names of a
batch of same-sized blobs come from one join/split per run.  A batch of
blobs of different sizes, and every batch on a Cluster, is one Lua script
call (EVALSHA): the blobs travel concatenated in one argument with their
lengths in another, and the server splits them (cheap for the client, but
the script costs the server about 1 us per pair against 0.3 us for HSET).
read_pairs is one HMGET packed the same way (Cluster: HMGET for up to
``SMALL_READ`` pairs, a script making the field names beyond).  Scripts
take indices below 2**53 only (Lua numbers are doubles); beyond, redis-py's
own commands.  delete_pairs is one HDEL (an emptied hash disappears).
drop_epoch is two round trips (SMEMBERS of the levels, then one UNLINK of
every level hash); do not write to an epoch while dropping it.  The metadata compare-and-set is
one Lua script (EVALSHA, reloaded by redis-py after a server restart):
compare the version, write the blob, increment the version, atomically.
Tokens are the integer versions (1 on creation).

Connections are made lazily: :func:`stores.open_store` does no network I/O,
and a server that is down makes the *first operation* raise
:class:`~stores.errors.StoreUnavailable` after the retries (never a raw
``ConnectionRefusedError``).  redis-py's own retries are disabled so that
the store's bounded backoff is the only one.  After ``fork`` redis-py opens
fresh connections in the child.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
from array import array
from collections import deque
from typing import Any, Optional
from urllib.parse import parse_qsl, unquote, urlsplit

from .base import AUTH, TRANSIENT, Store, Token, _as_blobs, cas_mismatch, check_window
from .errors import StoreConfigError

SCHEMES = ("redis", "rediss", "redis+cluster", "rediss+cluster")

#: Fields per HSET / HMGET / HDEL command inside one pipeline.
CHUNK = 4096

_CAS_LUA = """
local cur = redis.call('HGET', KEYS[1], 'v')
local exp = ARGV[1]
if exp == '' then
  if not cur then
    redis.call('HSET', KEYS[1], 'v', 1, 'b', ARGV[2])
    return {1, 1}
  end
elseif cur == exp then
  local v = redis.call('HINCRBY', KEYS[1], 'v', 1)
  redis.call('HSET', KEYS[1], 'b', ARGV[2])
  return {1, v}
end
if ARGV[3] == '1' and cur then
  local want = 1
  if exp ~= '' then want = tonumber(exp) + 1 end
  if tonumber(cur) == want and redis.call('HGET', KEYS[1], 'b') == ARGV[2] then
    return {1, want}
  end
end
return {0, cur or ''}
"""

#: write_pairs: KEYS = pairs hash, epochs set, levels set; ARGV = epoch, level,
#: first index, the blobs concatenated, their lengths (uint32 little-endian).
_WRITE_LUA = """
redis.call('SADD', KEYS[2], ARGV[1])
redis.call('SADD', KEYS[3], ARGV[2])
local k, data, lens = tonumber(ARGV[3]), ARGV[4], ARGV[5]
local fmt, sub, unpack_u32 = string.format, string.sub, struct.unpack
local args, n, off = {}, 0, 1
for pos = 1, #lens, 4 do
  local len = unpack_u32('<I4', lens, pos)
  args[n + 1] = fmt('%d', k)
  args[n + 2] = sub(data, off, off + len - 1)
  n, off, k = n + 2, off + len, k + 1
  if n == 4000 then
    redis.call('HSET', KEYS[1], unpack(args, 1, n))
    n = 0
  end
end
if off ~= #data + 1 then
  return redis.error_reply('ERR mta write_pairs: blob lengths do not add up')
end
if n > 0 then redis.call('HSET', KEYS[1], unpack(args, 1, n)) end
return #lens / 4
"""

#: read_pairs: KEYS = pairs hash; ARGV = first index, count.  Missing pairs
#: come back as nil.
_READ_LUA = """
local i, last = tonumber(ARGV[1]), tonumber(ARGV[1]) + tonumber(ARGV[2])
local fmt = string.format
local out, n = {}, 0
while i < last do
  local e = math.min(last, i + 4000)
  local fields = {}
  for j = i, e - 1 do fields[j - i + 1] = fmt('%d', j) end
  local got = redis.call('HMGET', KEYS[1], unpack(fields))
  for j = 1, e - i do out[n + j] = got[j] end
  n, i = n + e - i, e
end
return out
"""

class _BulkHeaders(dict):
    """``n -> b"$n\\r\\n"`` (RESP bulk-string headers), made on first use."""

    def __missing__(self, n: int) -> bytes:
        if len(self) > 4096:
            self.clear()
        value = self[n] = b"$%d\r\n" % n
        return value


_BULK = _BulkHeaders()


def _command(*args: Any) -> bytes:
    """One command in RESP (arguments: bytes, str or int)."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        b = a if isinstance(a, bytes) else str(a).encode()
        out.append(_BULK[len(b)] + b + b"\r\n")
    return b"".join(out)


def _digit_runs(first: int, end: int):
    """``[first, end)`` split where the decimal width of the index changes."""
    a = first
    while a < end:
        b = min(end, 10 ** len(str(a)))
        yield a, b
        a = b


def _hset_commands(key: bytes, first: int, blobs: list[bytes]) -> list[bytes]:
    """``HSET key first blobs[0] first+1 blobs[1] ...`` in RESP, in commands of
    at most CHUNK pairs, for blobs of one size: the field headers come from
    one join, encode and split per run of equal decimal width, so the cost
    per pair is a few C calls, not a Python loop."""
    size = len(blobs[0])
    suffix = "\r\n$%d\r\n" % size
    out = []
    for start in range(0, len(blobs), CHUNK):
        chunk = blobs[start:start + CHUNK]
        a0 = first + start
        parts = [b"*%d\r\n$4\r\nHSET\r\n%s%s" % (2 + 2 * len(chunk), _BULK[len(key)], key)]
        for a, b in _digit_runs(a0, a0 + len(chunk)):
            prefix = "\r\n$%d\r\n" % len(str(a))
            heads = (prefix + (suffix + "\0" + prefix).join(map(str, range(a, b))) + suffix).encode().split(b"\0")
            run = [None] * (2 * (b - a))
            run[0::2] = heads
            run[1::2] = chunk[a - a0:b - a0]
            parts.append(b"".join(run))
        parts.append(b"\r\n")
        out.append(b"".join(parts))
    return out


def _hmget_commands(key: bytes, first: int, count: int) -> list[bytes]:
    """``HMGET key first .. first+count-1`` in RESP, at most CHUNK fields each."""
    out = []
    for start in range(first, first + count, CHUNK):
        end = min(first + count, start + CHUNK)
        parts = [b"*%d\r\n$5\r\nHMGET\r\n%s%s" % (2 + end - start, _BULK[len(key)], key)]
        for a, b in _digit_runs(start, end):
            sep = "\r\n$%d\r\n" % len(str(a))
            parts.append((sep + sep.join(map(str, range(a, b)))).encode())
        parts.append(b"\r\n")
        out.append(b"".join(parts))
    return out


#: Reads of at most this many pairs are a plain HMGET (a cache miss: lower
#: latency than the script, whose set-up costs about 40 us).
SMALL_READ = 32

#: Indices the scripts handle exactly (Lua numbers are doubles).
_LUA_INDEX_LIMIT = 1 << 53

_QUERY_FLOATS = {"socket_timeout", "socket_connect_timeout", "health_check_interval"}
_QUERY_BOOLS = {"cluster", "ssl_check_hostname"}
_QUERY_STRS = {"ssl_cert_reqs", "ssl_ca_certs", "ssl_certfile", "ssl_keyfile", "key_prefix",
               "client_name"}
_QUERY_INTS = {"db", "max_connections"}
_STORE_OPTIONS = {"retries", "backoff", "backoff_max"}


def _parse_bool(name: str, value: str) -> bool:
    v = value.lower()
    if v in ("1", "true", "yes", "on"):
        return True
    if v in ("0", "false", "no", "off"):
        return False
    raise StoreConfigError(f"URL parameter {name}={value!r} is not a boolean")


def parse_redis_url(url: str) -> dict[str, Any]:
    """Split a redis URL into client settings (``password`` included:
    keep the result private)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise StoreConfigError(f"not a Redis URL (schemes: {', '.join(SCHEMES)})")
    try:
        port = parts.port or 6379
    except ValueError:
        raise StoreConfigError("Redis URL has an invalid port") from None
    cfg: dict[str, Any] = {
        "tls": scheme.startswith("rediss"),
        "cluster": scheme.endswith("+cluster"),
        "host": parts.hostname or "localhost",
        "port": port,
        "username": unquote(parts.username) if parts.username else None,
        "password": unquote(parts.password) if parts.password else None,
        "db": 0,
    }
    path = parts.path.strip("/")
    if path:
        try:
            cfg["db"] = int(path)
        except ValueError:
            raise StoreConfigError(f"Redis URL path must be a database number, got "
                                   f"{path!r}") from None
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if name in _QUERY_FLOATS:
            try:
                cfg[name] = float(value)
            except ValueError:
                raise StoreConfigError(f"URL parameter {name}={value!r} is not a number") \
                    from None
        elif name in _QUERY_INTS:
            try:
                cfg[name] = int(value)
            except ValueError:
                raise StoreConfigError(f"URL parameter {name}={value!r} is not an int") \
                    from None
        elif name in _QUERY_BOOLS:
            cfg[name] = _parse_bool(name, value)
        elif name in _QUERY_STRS:
            cfg[name] = value
        else:
            raise StoreConfigError(
                f"unknown Redis URL parameter {name!r} (pass credentials as options or "
                f"in the URL's user info, other client settings as options)")
    return cfg


def _redact(cfg: dict[str, Any]) -> str:
    scheme = ("rediss" if cfg["tls"] else "redis") + ("+cluster" if cfg["cluster"] else "")
    auth = ""
    if cfg.get("username") or cfg.get("password"):
        auth = (cfg.get("username") or "") + (":***" if cfg.get("password") else "") + "@"
    host = cfg["host"]
    if ":" in host:
        host = f"[{host}]"
    db = "" if cfg["cluster"] else f"/{cfg['db']}"
    return f"{scheme}://{auth}{host}:{cfg['port']}{db}"


_PENDING, _DONE, _FAILED = 0, 1, 2


class _Request:
    """A request sent on a :class:`DeferredChannel`; its replies are read when
    its result is asked for (``concurrent.futures.Future``-like: ``done``,
    ``result``, ``exception``).  If the connection fails, ``result`` runs
    ``fallback`` -- the same operation through the store's retrying path."""

    __slots__ = ("channel", "replies", "count", "finish", "fallback", "state", "value", "error")

    def __init__(self, channel: "DeferredChannel", count: int, finish, fallback) -> None:
        self.channel = channel
        self.replies: list = []
        self.count = count  # replies expected
        self.finish = finish  # replies -> value
        self.fallback = fallback  # () -> value, through Store.write_pairs / read_pairs
        self.state = _PENDING
        self.value: Any = None
        self.error: Optional[BaseException] = None

    def done(self) -> bool:
        if self.state == _PENDING:
            self.channel.poll(self)
        return self.state != _PENDING

    def ready(self) -> bool:
        """Whether the reply was read already (no I/O)."""
        return self.state != _PENDING

    def result(self) -> Any:
        if self.state == _PENDING:
            self.channel.complete(self)
        if self.state == _FAILED:  # the connection broke: redo it the safe way, once
            self.state = _DONE
            try:
                self.value = self.fallback()
            except BaseException as exc:
                self.error = exc
        if self.error is not None:
            raise self.error
        return self.value

    def exception(self) -> Optional[BaseException]:
        try:
            self.result()
        except BaseException as exc:
            return exc
        return None


class DeferredChannel:
    """Requests whose replies are read later, pipelined on one pooled
    connection (standalone Redis): the store's "background communication"
    without threads.  ``write_pairs`` / ``read_pairs`` send at once and
    return a :class:`_Request`; replies come back in order and are read
    when a result is asked for (or by ``poll``, when already there).  The
    round trip is then off the caller's path, and no background thread has
    to wait for the interpreter lock to handle it.

    A channel belongs to one thread (one window's engine).  Its connection
    goes back to the pool whenever no reply is pending.  After ``fork`` a
    child never uses a parent's connection: pending requests fall back to
    the store's ordinary path."""

    def __init__(self, store: "RedisStore") -> None:
        self.store = store
        self.queue: deque[_Request] = deque()
        self.conn: Any = None
        self.pid = os.getpid()

    # -- requests --------------------------------------------------------------
    def write_pairs(self, window: str, epoch: int, level: int, first: int, blobs: list):
        """Start :meth:`Store.write_pairs` (blobs of one size: else it runs now)."""
        st = self.store
        check_window(window)
        data = _as_blobs(blobs)
        fallback = lambda: st.write_pairs(window, epoch, level, first, data)  # noqa: E731
        if not data or len(set(map(len, data))) != 1 or st.closed:
            return _done(fallback)
        commands = [_command(b"SADD", st._epochs_key(window), epoch),
                    _command(b"SADD", st._levels_key(window, epoch), level),
                    *_hset_commands(st._pairs_key(window, epoch, level).encode(), first, data)]
        req = self._send(commands, _ignore, fallback)
        if req.state == _PENDING:
            st.stats.add(round_trips=1, pairs_written=len(data), bytes_written=sum(map(len, data)))
        return req

    def read_pairs(self, window: str, epoch: int, level: int, first: int, count: int):
        """Start :meth:`Store.read_pairs`."""
        st = self.store
        check_window(window)
        fallback = lambda: st.read_pairs(window, epoch, level, first, count)  # noqa: E731
        if count <= 0 or st.closed:
            return _done(fallback)
        req = self._send(_hmget_commands(st._pairs_key(window, epoch, level).encode(), first, count),
                         self._found, fallback)
        if req.state == _PENDING:
            st.stats.add(round_trips=1)
        return req

    def _found(self, replies: list) -> list:
        out = replies[0] if len(replies) == 1 else [b for part in replies for b in part]
        self.store.stats.add(pairs_read=len(out) - out.count(None), bytes_read=sum(map(len, filter(None, out))))
        return out

    # -- the connection ----------------------------------------------------------
    def _send(self, commands: list[bytes], finish, fallback) -> _Request:
        req = _Request(self, len(commands), finish, fallback)
        try:
            if self.pid != os.getpid():  # forked: the connection is the parent's
                self.queue.clear()
                self.conn = None
                self.pid = os.getpid()
            if self.conn is None:
                pool = self.store._client().connection_pool
                try:
                    self.conn = pool.get_connection()
                except TypeError:  # pragma: no cover - redis-py < 5.1 wants a command name
                    self.conn = pool.get_connection("HMGET")
            self.conn.send_packed_command([b"".join(commands)])
        except Exception:
            self._break()
            req.state = _FAILED
            return req
        self.queue.append(req)
        return req

    def poll(self, req: _Request) -> None:
        """Read replies that already arrived, in order, up to ``req``'s (a
        reply whose first bytes are there is read whole)."""
        try:
            while req.state == _PENDING and self.queue and self.conn.can_read(timeout=0):
                self._read_head()
        except Exception:
            self._break()
        self._release_if_idle()

    def complete(self, req: _Request) -> None:
        """Read replies, in order, until ``req``'s are in."""
        try:
            while req.state == _PENDING and self.queue:
                self._read_head()
        except Exception:
            self._break()
        self._release_if_idle()

    def _read_head(self) -> None:
        from redis.exceptions import ResponseError

        req = self.queue[0]
        while len(req.replies) < req.count:
            try:
                req.replies.append(self.conn.read_response())
            except ResponseError as exc:  # an error reply: redo it through the store's path
                req.replies.append(exc)
        self.queue.popleft()
        if any(isinstance(r, ResponseError) for r in req.replies):
            req.state = _FAILED
            return
        try:
            req.value = req.finish(req.replies)
        except BaseException as exc:  # pragma: no cover - finish only counts
            req.error = exc
        req.replies = []
        req.state = _DONE

    def _break(self) -> None:
        """The connection failed: every pending request falls back."""
        for req in self.queue:
            req.state = _FAILED
        self.queue.clear()
        conn, self.conn = self.conn, None
        if conn is not None:
            try:
                conn.disconnect()
            finally:
                self.store._release(conn)

    def _release_if_idle(self) -> None:
        if not self.queue and self.conn is not None:
            conn, self.conn = self.conn, None
            if self.pid == os.getpid():
                self.store._release(conn)

    def close(self) -> None:
        """Read every pending reply and give the connection back."""
        while self.queue:
            self.complete(self.queue[-1])


def _ignore(replies: list) -> None:
    return None


class _Completed:
    __slots__ = ("value", "error")

    def __init__(self, value: Any = None, error: Optional[BaseException] = None) -> None:
        self.value, self.error = value, error

    def done(self) -> bool:
        return True

    ready = done

    def result(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.value

    def exception(self) -> Optional[BaseException]:
        return self.error


def _done(fn) -> _Completed:
    try:
        return _Completed(fn())
    except BaseException as exc:
        return _Completed(error=exc)


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
        store_opts = {k: options.pop(k) for k in list(options) if k in _STORE_OPTIONS}
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
        super().__init__(_redact(cfg), **store_opts)

        self._password: Optional[str] = cfg["password"]
        self.cluster: bool = cfg["cluster"]
        prefix = cfg.get("key_prefix", "mta")
        if not isinstance(prefix, str) or "{" in prefix or "}" in prefix:
            raise StoreConfigError(f"key_prefix must be a str without braces, got {prefix!r}")
        self.key_prefix = prefix
        kwargs: dict[str, Any] = {
            "host": cfg["host"], "port": cfg["port"],
            "username": cfg["username"], "password": cfg["password"],
            "socket_timeout": cfg.get("socket_timeout", 5.0),
            "socket_connect_timeout": cfg.get("socket_connect_timeout", 2.0),
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
        if self.cluster:
            if cfg["db"] not in (0, None):
                raise StoreConfigError("Redis Cluster has database 0 only")
            kwargs.pop("db", None)
            kwargs.setdefault("require_full_coverage", False)
        else:
            kwargs["db"] = cfg["db"]
        self._kwargs = kwargs
        self._client_obj: Any = None
        self._client_lock = threading.Lock()
        self._cas_script: Any = None
        self._write_script: Any = None
        self._read_script: Any = None
        if not self.cluster:
            self._client()  # validates options; redis-py connects lazily

    # ------------------------------------------------------------ client

    def _client(self) -> Any:
        client = self._client_obj
        if client is not None:
            return client
        with self._client_lock:
            if self._client_obj is None:
                import redis
                try:
                    if self.cluster:
                        from redis.cluster import RedisCluster
                        client = RedisCluster(**self._kwargs)
                    else:
                        client = redis.Redis(**self._kwargs)
                except TypeError as exc:
                    raise StoreConfigError(
                        f"store {self.url}: bad Redis client option: "
                        f"{self._scrub(str(exc))}") from None
                self._cas_script = client.register_script(_CAS_LUA)
                self._write_script = client.register_script(_WRITE_LUA)
                self._read_script = client.register_script(_READ_LUA)
                self._client_obj = client
            return self._client_obj

    def _secrets(self) -> tuple[str, ...]:
        return (self._password,) if self._password else ()

    def _classify(self, exc: Exception) -> Optional[str]:
        from redis import exceptions as rx
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

    # -------------------------------------------------------------- keys

    def _base(self, window: str) -> str:
        return f"{self.key_prefix}:{{{window}}}"

    def _pairs_key(self, window: str, epoch: int, level: int) -> str:
        return f"{self._base(window)}:e{epoch}:l{level}"

    def _levels_key(self, window: str, epoch: int) -> str:
        return f"{self._base(window)}:e{epoch}:levels"

    def _epochs_key(self, window: str) -> str:
        return f"{self._base(window)}:epochs"

    def _meta_key(self, window: str) -> str:
        return f"{self._base(window)}:meta"

    # ----------------------------------------------------------- backend

    def _write_pairs(self, window: str, epoch: int, level: int, first: int,
                     blobs: list[bytes]) -> None:
        key = self._pairs_key(window, epoch, level)
        epochs_key, levels_key = self._epochs_key(window), self._levels_key(window, epoch)
        if not self.cluster and len(set(map(len, blobs))) == 1:
            # the usual batch (pairs of same-sized values): plain commands, packed here
            self._raw([_command(b"SADD", epochs_key, epoch), _command(b"SADD", levels_key, level),
                       *_hset_commands(key.encode(), first, blobs)])
            return
        if first + len(blobs) <= _LUA_INDEX_LIMIT:
            lens = array("I", map(len, blobs))
            if lens.itemsize == 4 and max(lens) < 1 << 32:
                if sys.byteorder != "little":  # pragma: no cover
                    lens.byteswap()
                self._client()
                self._write_script(keys=[key, epochs_key, levels_key],
                                   args=[epoch, level, first, b"".join(blobs), lens.tobytes()])
                return
        pipe = self._client().pipeline(transaction=False)  # pragma: no cover - indices >= 2**53
        pipe.sadd(epochs_key, epoch)
        pipe.sadd(levels_key, level)
        for start in range(0, len(blobs), CHUNK):
            chunk = blobs[start:start + CHUNK]
            base = first + start
            pipe.hset(key, mapping={base + k: b for k, b in enumerate(chunk)})
        pipe.execute()

    def _read_pairs(self, window: str, epoch: int, level: int, first: int,
                    count: int) -> list[Optional[bytes]]:
        key = self._pairs_key(window, epoch, level)
        end = first + count
        if not self.cluster:
            replies = self._raw(_hmget_commands(key.encode(), first, count))
            if len(replies) == 1:
                return replies[0]
            return [b for part in replies for b in part]
        if count > SMALL_READ and end <= _LUA_INDEX_LIMIT:
            self._client()
            return self._read_script(keys=[key], args=[first, count])
        if count <= CHUNK:
            return self._client().hmget(key, list(range(first, end)))
        pipe = self._client().pipeline(transaction=False)
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

    def _release(self, conn: Any) -> None:
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

        pool = self._client().connection_pool
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

    def _delete_pairs(self, window: str, epoch: int, level: int, first: int,
                      count: int) -> None:
        key = self._pairs_key(window, epoch, level)
        end = first + count
        if count <= CHUNK:
            self._client().hdel(key, *range(first, end))
            return
        pipe = self._client().pipeline(transaction=False)
        for start in range(first, end, CHUNK):
            pipe.hdel(key, *range(start, min(end, start + CHUNK)))
        pipe.execute()

    def _drop_epoch(self, window: str, epoch: int, ranges: Any) -> int:
        client = self._client()
        levels_key = self._levels_key(window, epoch)
        levels = client.smembers(levels_key)
        keys = [self._pairs_key(window, epoch, int(lv)) for lv in levels]
        pipe = client.pipeline(transaction=False)
        pipe.srem(self._epochs_key(window), epoch)
        for key in keys + [levels_key]:  # one key per UNLINK: Cluster pipelines need it
            pipe.unlink(key)
        pipe.execute()
        return 2

    def _list_epochs(self, window: str) -> list[int]:
        return [int(e) for e in self._client().smembers(self._epochs_key(window))]

    def _read_meta(self, window: str) -> tuple[Optional[bytes], Token]:
        version, blob = self._client().hmget(self._meta_key(window), ["v", "b"])
        if version is None:
            return None, None
        return blob if blob is not None else b"", int(version)

    def _cas_meta(self, window: str, expected: Token, value: bytes, retry: bool) -> Token:
        self._client()
        if expected is not None and (isinstance(expected, bool)
                                     or not isinstance(expected, int)):
            raise cas_mismatch(window, expected, self._read_meta(window)[1])
        ok, version = self._cas_script(
            keys=[self._meta_key(window)],
            args=["" if expected is None else str(expected), value, "1" if retry else "0"])
        if ok == 1:
            return int(version)
        raise cas_mismatch(window, expected, int(version) if version not in (b"", "") else None)

    def _delete_window(self, window: str) -> int:
        client = self._client()
        epochs_key = self._epochs_key(window)
        epochs = [int(e) for e in client.smembers(epochs_key)]
        keys = [epochs_key, self._meta_key(window)]
        trips = 1
        if epochs:
            pipe = client.pipeline(transaction=False)
            for e in epochs:
                pipe.smembers(self._levels_key(window, e))
            for e, levels in zip(epochs, pipe.execute()):
                keys.append(self._levels_key(window, e))
                keys.extend(self._pairs_key(window, e, int(lv)) for lv in levels)
            trips += 1
        pipe = client.pipeline(transaction=False)
        for key in keys:
            pipe.unlink(key)
        pipe.execute()
        return trips + 1

    def _ping(self) -> None:
        self._client().ping()

    def _close(self) -> None:
        client = self._client_obj
        self._client_obj = None
        if client is not None:
            try:
                client.close()
            except Exception:  # pragma: no cover - best effort
                pass
