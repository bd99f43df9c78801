"""``redis://`` -- a store in Redis (standalone, TLS or Cluster), via redis-py.

URLs::

    redis://[[user]:password@]host[:port][/db]     plain TCP (port 6379, db 0)
    rediss://...                                    TLS
    redis+cluster://host[:port][,host[:port]...]    Redis Cluster (seed nodes: any one that
                                                    answers gives the cluster's layout)
    rediss+cluster://...                            Redis Cluster over TLS

The option ``cluster=True`` also selects Redis Cluster, ``ssl=True`` TLS (each a bool, or a
string as the URL's boolean parameters take it: ``"false"`` is off).  Credentials:
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

The connection (client settings, TLS, Cluster, the pooled round trips):
:mod:`stores.redis_connection`.
"""

from __future__ import annotations

import os
import sys
from array import array
from typing import Any, Optional

from .base import STORE_OPTIONS, Token, cas_mismatch
from .meta_cas import first_token, stored_record
from .errors import StoreConfigError
from .options import parse_bool

from .redis_connection import RedisConnection, no_retries
from .redis_url import parse_redis_url, redacted_url
from .redis_wire import (CHUNK, LUA_INDEX_LIMIT, SMALL_READ, DeferredChannel, command, hmget_commands,
                         hset_commands)


def _glob_escape(text: str) -> str:
    """``text`` matched literally by a Redis glob pattern (SCAN MATCH)."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


class RedisStore(RedisConnection):
    scheme = "redis"

    def __init__(self, url: str, **options: Any) -> None:
        retry = no_retries()
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
        # read as the URL reads them: bool("false") is True
        cfg["cluster"] = parse_bool("cluster", cfg["cluster"])
        cfg["tls"] = parse_bool("ssl", cfg["tls"])
        if "ssl_check_hostname" in options:
            options["ssl_check_hostname"] = parse_bool("ssl_check_hostname", options["ssl_check_hostname"])
        if options.get("decode_responses"):
            raise StoreConfigError("decode_responses=True is not supported: blobs are bytes")
        options.pop("decode_responses", None)
        super().__init__(redacted_url(cfg), **store_opts)

        prefix = cfg.get("key_prefix", "mta")
        if not isinstance(prefix, str) or "{" in prefix or "}" in prefix:
            raise StoreConfigError(f"key_prefix must be a str without braces, got {prefix!r}")
        self.key_prefix = prefix
        self._connect_lazily(cfg, options, retry)

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

    def _read_pairs_many(self, window: str, ranges: list) -> list[list[Optional[bytes]]]:
        # a window's keys share one hash slot ({window}), so in a cluster too one node answers
        if self.cluster:
            pipe = self.client().pipeline(transaction=False)
            for epoch, level, first, count in filter(lambda r: r[3], ranges):
                pipe.hmget(self.pairs_key(window, epoch, level), list(range(first, first + count)))
            replies = iter(pipe.execute())
            return [next(replies) if r[3] else [] for r in ranges]
        return self._read_ranges([(window, *r) for r in ranges])

    def _read_ranges(self, ranges: list) -> list[list[Optional[bytes]]]:
        commands = [hmget_commands(self.pairs_key(window, epoch, level).encode(), first, count)
                    for window, epoch, level, first, count in ranges]
        replies = iter(self._raw([c for cs in commands for c in cs]))
        return [[b for _ in cs for b in next(replies)] for cs in commands]

    def deferred_channel(self) -> Optional[DeferredChannel]:
        """A :class:`DeferredChannel` (standalone Redis; ``None`` on a Cluster,
        where the window's level queues use background threads instead)."""
        return None if self.cluster else DeferredChannel(self)


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

    def _delete_ranges(self, ranges: list) -> None:
        self._raw([command(b"HDEL", self.pairs_key(window, epoch, level),
                           *range(start, min(first + count, start + CHUNK)))
                   for window, epoch, level, first, count in ranges for start in range(first, first + count, CHUNK)])

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
            return self._record(window, *self.client().hmget(self.meta_key(window), ["v", "b"]))
        return self._read_meta_many([window])[0]  # packed here, as the pairs' commands

    def _read_meta_many(self, windows: list[str]) -> list[tuple[Optional[bytes], Token]]:
        return [self._record(w, *reply) for w, reply in zip(
            windows, self._raw([command(b"HMGET", self.meta_key(w), "v", "b") for w in windows]))]

    def _record(self, window: str, version: Optional[bytes], blob: Optional[bytes]) -> tuple[Optional[bytes], Token]:
        """A metadata hash's fields as ``_read_meta`` returns them."""
        if version is None:
            return None, None
        return stored_record(self.url, window, blob if blob is not None else b"", version)

    def _cas_meta(self, window: str, expected: Token, value: bytes, retry: bool) -> Token:
        done, token, _ = self._swap_meta(window, expected, value, retry)
        if not done:
            raise cas_mismatch(window, expected, token)
        return token

    def _swap_meta(self, window: str, expected: Token, value: bytes, retry: bool, *, old: Optional[bytes] = None,
                   listing: bool = False, durable: bool = True) -> tuple[bool, Token, Any]:
        self.client()
        keys, args = self._swap_call(window, expected, value, retry, old, listing)
        if self.cluster:
            reply = self._cas_script(keys=keys, args=args)
        else:  # packed here, as the pairs' commands: a window's every micro-batch makes two of these
            reply = self._evalsha(self._cas_script, keys, args)
        return _swapped(reply, old, listing)

    @property
    def pipelines_windows(self) -> bool:
        """Standalone Redis only: a Cluster spreads windows over its nodes."""
        return not self.cluster

    def _swap_meta_many(self, calls: list, *, listing: bool = False, durable: bool = True) -> list:
        self.client()
        replies = self._evalsha_many(self._cas_script, [self._swap_call(*c, listing) for c in calls],
                                     [self._swap_call(w, e, v, True, old, listing) for w, e, v, _, old in calls])
        return [_swapped(reply, c[4], listing) for reply, c in zip(replies, calls)]

    def _swap_call(self, window: str, expected: Token, value: bytes, retry: bool, old: Optional[bytes],
                   listing: bool) -> tuple[list, list]:
        """The CAS script's keys and arguments for one ``_swap_meta``."""
        keys = [self.meta_key(window), self.epochs_key(window)]
        args = ["" if expected is None else str(expected), value, "1" if retry else "0",
                "0" if old is None else "1", b"" if old is None else old, "1" if listing else "0",
                str(first_token(window, value)) if expected is None else "0"]
        return keys, args

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


def _swapped(reply: list, old: Optional[bytes], listing: bool) -> tuple[bool, Token, Any]:
    """The CAS script's reply as ``_swap_meta`` returns it."""
    if reply[0] == 1:
        return True, int(reply[1]), [int(e) for e in reply[2]] if listing else None
    if reply[1] in (b"", ""):
        return False, None, None
    return False, int(reply[1]), reply[2] if old is not None else None

