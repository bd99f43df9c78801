"""Redis on the wire: RESP commands packed by hand, the Lua scripts, and the
deferred channel that sends a request at once and reads its reply later.

:class:`stores.redis_store.RedisStore` uses these; nothing here knows URLs
or store semantics beyond the key names it is given.
"""

from __future__ import annotations

import os
from collections import deque
from typing import TYPE_CHECKING, Any

from .background import Pending
from .checks import as_blobs, check_window

if TYPE_CHECKING:
    from .redis_store import RedisStore

#: Fields per HSET / HMGET / HDEL command inside one pipeline.
CHUNK = 4096

#: Compare-and-set of a metadata hash.  KEYS = the hash, the window's epochs
#: set; ARGV = expected version ('' to create), new blob, '1' for a retry
#: (an earlier attempt that landed counts as done), '1' to also require
#: the blob ARGV[5], '1' to return the epochs set with the new version,
#: the version of a record created (``meta_cas.first_token``).
#: Returns {1, version[, epochs]}, or {0, current version or ''[, current
#: blob when ARGV[4] is '1']}.
CAS_LUA = """
local cur = redis.call('HGET', KEYS[1], 'v')
local exp = ARGV[1]
local ok = false
if exp == '' and not cur then
  redis.call('HSET', KEYS[1], 'v', ARGV[7], 'b', ARGV[2])
  cur, ok = ARGV[7], true
elseif exp ~= '' and cur == exp and (ARGV[4] ~= '1' or redis.call('HGET', KEYS[1], 'b') == ARGV[5]) then
  cur = redis.call('HINCRBY', KEYS[1], 'v', 1)
  redis.call('HSET', KEYS[1], 'b', ARGV[2])
  ok = true
elseif ARGV[3] == '1' and cur then
  local want = tonumber(ARGV[7])
  if exp ~= '' then want = tonumber(exp) + 1 end
  if tonumber(cur) == want and redis.call('HGET', KEYS[1], 'b') == ARGV[2] then
    cur, ok = want, true
  end
end
if not ok then
  if cur and ARGV[4] == '1' then return {0, cur, redis.call('HGET', KEYS[1], 'b')} end
  return {0, cur or ''}
end
if ARGV[6] == '1' then return {1, cur, redis.call('SMEMBERS', KEYS[2])} end
return {1, cur}
"""

#: Compare-and-delete of a metadata hash: '' when deleted or absent, else
#: the current version (the caller's token is stale).
DELETE_META_LUA = """
local cur = redis.call('HGET', KEYS[1], 'v')
if cur and cur ~= ARGV[1] then return cur end
redis.call('DEL', KEYS[1])
return ''
"""

#: write_pairs: KEYS = pairs hash, epochs set, levels set; ARGV = epoch, level,
#: first index, the blobs concatenated, their lengths (uint32 little-endian).
WRITE_LUA = """
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
READ_LUA = """
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


def command(*args: Any) -> bytes:
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


def hset_commands(key: bytes, first: int, blobs: list[bytes]) -> list[bytes]:
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


def hmget_commands(key: bytes, first: int, count: int) -> list[bytes]:
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
#: latency than the script, whose set-up dominates a small read).
SMALL_READ = 32

#: Indices the scripts handle exactly (Lua numbers are doubles).
LUA_INDEX_LIMIT = 1 << 53

class Request(Pending):
    """A request sent on a :class:`DeferredChannel`; its replies are read when
    its result is asked for (or by ``done``, when already there).  If the
    connection fails, ``result`` runs ``fallback`` -- the same operation
    through the store's retrying path -- once."""

    __slots__ = ("channel", "replies", "count", "finish", "fallback", "failed")

    def __init__(self, channel: "DeferredChannel", count: int, finish, fallback) -> None:
        super().__init__()
        self.channel = channel
        self.replies: list = []
        self.count = count  # replies expected
        self.finish = finish  # replies -> value
        self.fallback = fallback  # () -> value, through Store.write_pairs / read_pairs
        self.failed = False  # the connection broke before the replies were read

    def ready(self) -> bool:
        return self._finished or self.failed

    def _poll(self) -> None:
        self.channel.poll(self)

    def _wait(self) -> None:
        if not self.failed:
            self.channel.complete(self)
        if not self._finished:  # the connection broke: redo it the safe way
            self.run(self.fallback)


class DeferredChannel:
    """Requests whose replies are read later, pipelined on one pooled
    connection (standalone Redis): the store's "background communication"
    without threads.  ``write_pairs`` / ``read_pairs`` send at once and
    return a :class:`Request`; replies come back in order and are read
    when a result is asked for (or by ``poll``, when already there).  The
    round trip is then off the caller's path, and no background thread has
    to wait for the interpreter lock to handle it.

    A channel belongs to one thread (one window's engine).  Its connection
    goes back to the pool whenever no reply is pending.  After ``fork`` a
    child never uses a parent's connection: pending requests fall back to
    the store's ordinary path."""

    def __init__(self, store: "RedisStore") -> None:
        self.store = store
        self.queue: deque[Request] = deque()
        self.conn: Any = None
        self.pid = os.getpid()

    # -- requests --------------------------------------------------------------
    def write_pairs(self, window: str, epoch: int, level: int, first: int, blobs: list):
        """Start :meth:`Store.write_pairs` (blobs of one size: else it runs now)."""
        st = self.store
        check_window(window)
        data = as_blobs(blobs)
        fallback = lambda: st.write_pairs(window, epoch, level, first, data)  # noqa: E731
        if not data or len(set(map(len, data))) != 1 or st.closed:
            return Pending.of(fallback)
        commands = [command(b"SADD", st.epochs_key(window), epoch),
                    command(b"SADD", st.levels_key(window, epoch), level),
                    *hset_commands(st.pairs_key(window, epoch, level).encode(), first, data)]
        req = self._send(commands, _ignore, fallback)
        if not req.failed:
            st.stats.add(round_trips=1, pairs_written=len(data), bytes_written=sum(map(len, data)))
        return req

    def read_pairs(self, window: str, epoch: int, level: int, first: int, count: int):
        """Start :meth:`Store.read_pairs`."""
        st = self.store
        check_window(window)
        fallback = lambda: st.read_pairs(window, epoch, level, first, count)  # noqa: E731
        if count <= 0 or st.closed:
            return Pending.of(fallback)
        req = self._send(hmget_commands(st.pairs_key(window, epoch, level).encode(), first, count),
                         self._found, fallback)
        if not req.failed:
            st.stats.add(round_trips=1)
        return req

    def _found(self, replies: list) -> list:
        out = replies[0] if len(replies) == 1 else [b for part in replies for b in part]
        self.store.stats.add(pairs_read=len(out) - out.count(None), bytes_read=sum(map(len, filter(None, out))))
        return out

    # -- the connection ----------------------------------------------------------
    def _send(self, commands: list[bytes], finish, fallback) -> Request:
        req = Request(self, len(commands), finish, fallback)
        try:
            if self.pid != os.getpid():  # forked: the connection is the parent's
                self.queue.clear()
                self.conn = None
                self.pid = os.getpid()
            if self.conn is None:
                pool = self.store.client().connection_pool
                try:
                    self.conn = pool.get_connection()
                except TypeError:  # pragma: no cover - redis-py < 5.1 wants a command name
                    self.conn = pool.get_connection("HMGET")
            self.conn.send_packed_command([b"".join(commands)])
        except Exception:
            self._break()
            req.failed = True
            return req
        self.queue.append(req)
        return req

    def poll(self, req: Request) -> None:
        """Read replies that already arrived, in order, up to ``req``'s (a
        reply whose first bytes are there is read whole)."""
        try:
            while not req.ready() and self.queue and self.conn.can_read(timeout=0):
                self._read_head()
        except Exception:
            self._break()
        self._release_if_idle()

    def complete(self, req: Request) -> None:
        """Read replies, in order, until ``req``'s are in."""
        try:
            while not req.ready() and self.queue:
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
            req.failed = True
            return
        replies, req.replies = req.replies, []
        req.run(req.finish, replies)

    def _break(self) -> None:
        """The connection failed: every pending request falls back."""
        for req in self.queue:
            req.failed = True
        self.queue.clear()
        conn, self.conn = self.conn, None
        if conn is not None:
            try:
                conn.disconnect()
            finally:
                self.store.release_connection(conn)

    def _release_if_idle(self) -> None:
        if not self.queue and self.conn is not None:
            conn, self.conn = self.conn, None
            if self.pid == os.getpid():
                self.store.release_connection(conn)

    def close(self) -> None:
        """Read every pending reply and give the connection back."""
        while self.queue:
            self.complete(self.queue[-1])


def _ignore(replies: list) -> None:
    return None




