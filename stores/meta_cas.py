"""Compare-and-set of a window's metadata record: the metadata half of
:class:`stores.base.Store`.

Each window has one small metadata blob, updated with compare-and-set:
:meth:`MetaCas.read_meta` returns an opaque token, :meth:`MetaCas.cas_meta`
succeeds only if the record still has that token.  The public methods here
check their arguments, count statistics and run the backend's hooks
(``_read_meta``, ``_cas_meta``, ``_swap_meta``, ``_delete_meta``, declared
on :class:`stores.base.Store`) through its retries; a retry whose first
attempt landed is told so (``retry``), so that it is not reported as a lost
race.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Any, Callable, NamedTuple, Optional, Sequence

from .checks import as_blob, check_window
from .errors import CasMismatch, CorruptValue, StoreConfigError
from .stats import StoreStats

__all__ = ["MetaCas", "Swap", "Token", "cas_mismatch", "first_token", "stored_record"]

#: Opaque compare-and-set token of a window's metadata (``None`` when the
#: record is absent).  Compare tokens only with ``==``; never interpret them.
Token = Any

#: This process's key for :func:`first_token`.
_FIRST_TOKEN_KEY = secrets.token_bytes(16)


def first_token(window: str, value: bytes) -> int:
    """The token of a record created with ``value`` by a backend that
    numbers its records' versions (memory, SQLite, Redis; each update adds
    one).  Not 1: a window deleted and made anew would hand out its old
    tokens again, and a zombie still holding one could overwrite the new
    window.  A keyed hash of the window and the value instead, the key
    drawn per process: a retry of the same creation gets the same token
    (its landed first attempt is recognised), another creation a token
    unrelated to any earlier one.  Below 2**52, so that it and its
    successors stay exact in Redis's Lua numbers (doubles).  O(len(value))."""
    digest = hashlib.blake2b(window.encode() + b"\0" + value, digest_size=8, key=_FIRST_TOKEN_KEY).digest()
    return int.from_bytes(digest, "big") % (2**52 - 1) + 1


def stored_record(url: str, window: str, blob: Any, version: Any) -> tuple[bytes, int]:
    """A metadata record as a backend that numbers its versions read it
    (SQLite's columns, Redis's hash fields: another application or a hand
    edit may have written anything there), checked: ``(blob, version)``,
    the version an int (Redis keeps it as decimal digits); CorruptValue
    naming the window, the store (``url``, redacted) and the field otherwise,
    rather than a lost compare-and-set or an unexpected error later."""
    if isinstance(version, (bytes, str)) and version.isdigit() and version.isascii():
        version = int(version)
    if type(version) is not int:
        raise CorruptValue(f"window {window!r} in {url}: its metadata record's version {version!r} is not an "
                           "integer (a record this code did not write)")
    if not isinstance(blob, bytes):
        raise CorruptValue(f"window {window!r} in {url}: its metadata record's blob is a {type(blob).__name__}, "
                           "not bytes (a record this code did not write)")
    return blob, version


class MetaCas:
    """The metadata half of :class:`stores.base.Store` (its backend hooks
    and retries are the Store's)."""

    stats: StoreStats
    SYNCS_META: bool
    _run: Callable[..., Any]
    _swap_meta: Optional[Callable[..., tuple[bool, Token, Any]]]
    _swap_meta_many: Optional[Callable[..., list]]
    _read_meta_many: Callable[[list[str]], list]
    pipelines_windows: bool

    def read_meta(self, window: str) -> tuple[Optional[bytes], Token]:
        """``(blob, token)`` of the window's metadata; ``(None, None)`` when
        absent.  One round trip."""
        check_window(window)
        blob, token = self._run("read_meta", window, self._read_meta, window)
        self.stats.add(round_trips=1, meta_reads=1, bytes_read=len(blob or b""))
        return blob, token

    def cas_meta(self, window: str, expected: Token, value: bytes, *, durable: bool = True) -> Token:
        """Replace the window's metadata with ``value`` if its token is
        still ``expected`` (``None``: create it, it must not exist).
        Returns the new token; raises :class:`~stores.errors.CasMismatch`
        otherwise.  One round trip.

        ``durable=False``: the record may be lost by a power loss until the
        store's next durable write, which makes it durable too (the store
        orders every write after it), and which then also loses every
        write that came after it; a backend that syncs metadata writes
        (:attr:`SYNCS_META`) skips the sync, the others ignore it.  A
        window's claim uses it: a claim lost with the writes that followed
        it leaves the window as the last checkpoint left it.

        A retry after a connection lost mid-call is made safe: if the first
        attempt did land (the record now holds exactly ``value`` one version
        after ``expected``), the retry returns its token instead of raising
        CasMismatch.
        """
        check_window(window)
        data = as_blob(value)
        if expected is not None:
            self._check_token(window, expected)
        lazy = {} if durable or not self.SYNCS_META else {"durable": False}
        try:
            token = self._run("cas_meta", window, told_retries(
                lambda retry: self._cas_meta(window, expected, data, retry, **lazy)))
        except CasMismatch:
            self.stats.add(round_trips=1, cas_failures=1)
            raise
        self.stats.add(round_trips=1, meta_writes=1, bytes_written=len(data))
        return token

    def swap_meta(self, window: str, expected: Token, old: bytes, value: bytes, *,
                  durable: bool = True) -> "Swap":
        """Replace the window's metadata with ``value`` if it still holds
        exactly ``old`` with token ``expected``; else say what it holds.

        For a caller that remembers a record it wrote (:mod:`stores.meta_cache`):
        a record deleted and created again restarts its versions, so a
        remembered token alone may match a record that is not the one
        remembered; its content then differs.  Returns a :class:`Swap`:
        ``done`` and the new token, or the record's current token and blob
        (``None``, ``None`` when absent), which saves the caller a
        :meth:`read_meta` before it tries :meth:`cas_meta`.  ``durable`` as
        :meth:`cas_meta` takes it.  One round trip where the backend has
        :meth:`_swap_meta` (file, redis), else two or three (read_meta,
        cas_meta, and read_meta again if that lost a race)."""
        check_window(window)
        if expected is None:
            raise StoreConfigError("swap_meta needs the token of an existing record")
        old, data = as_blob(old), as_blob(value)
        self._check_token(window, expected)
        if self._swap_meta is None:
            blob, token = self.read_meta(window)
            if token == expected and blob == old:
                try:
                    return Swap(True, self.cas_meta(window, expected, data, durable=durable), None)
                except CasMismatch:
                    blob, token = self.read_meta(window)
            self.stats.add(cas_failures=1)
            return Swap(False, token, blob)
        done, token, blob = self._swap(window, expected, data, old, False, durable)
        return Swap(True, token, None) if done else Swap(False, token, blob)

    def cas_meta_epochs(self, window: str, expected: Token, value: bytes, *,
                        durable: bool = True) -> tuple[Token, list[int]]:
        """:meth:`cas_meta`, then :meth:`list_epochs`: the new token and the
        window's epochs that may hold pairs, sorted, as of the write.  One
        round trip where the backend lists them in its compare-and-set
        (:meth:`_swap_meta`: file, redis), else two."""
        if self._swap_meta is None:
            token = self.cas_meta(window, expected, value, durable=durable)
            return token, self.list_epochs(window)
        check_window(window)
        data = as_blob(value)
        if expected is not None:
            self._check_token(window, expected)
        done, token, epochs = self._swap(window, expected, data, None, True, durable)
        if not done:
            raise cas_mismatch(window, expected, token)
        return token, sorted(epochs)

    def read_meta_many(self, windows: Sequence[str]) -> list[tuple[Optional[bytes], Token]]:
        """:meth:`read_meta` of each of ``windows``, in order: one round trip
        where the backend pipelines them (:attr:`pipelines_windows`), else one
        per window.  O(total size of the records)."""
        windows = [check_window(w) for w in windows]
        if not self.pipelines_windows or len(windows) < 2:
            return [self.read_meta(w) for w in windows]
        out = self._run(f"read_meta of {len(windows)} windows", None, self._read_meta_many, windows)
        self.stats.add(round_trips=1, meta_reads=len(windows), bytes_read=sum(len(blob or b"") for blob, _ in out))
        return out

    def swap_meta_many(self, requests: Sequence[tuple[str, Token, Optional[bytes], bytes]], *,
                       listing: bool = False, durable: bool = True) -> list[tuple[bool, Token, Any]]:
        """Many windows' compare-and-sets at once: for each ``(window,
        expected, old, value)`` of ``requests``, what :meth:`swap_meta` does
        (``old`` given) or :meth:`cas_meta` (``old`` ``None``).  Returns, in
        order, ``(True, new token, epochs)`` (``epochs``: as
        :meth:`cas_meta_epochs` lists them when ``listing``, else ``None``)
        or ``(False, current token, current blob)`` (the blob when ``old``
        was given, else ``None``; both ``None`` when the record is absent):
        a lost compare-and-set is returned, not raised, and the others stand.

        One round trip where the backend pipelines them
        (:attr:`pipelines_windows`), else what each costs alone.  A transient
        failure resends every request, each told it may have landed, so one
        that did is not reported as lost (see :meth:`cas_meta`).  O(total
        size of the values)."""
        calls = []
        for window, expected, old, value in requests:
            check_window(window)
            if expected is None and old is not None:
                raise StoreConfigError("swap_meta_many: a request with old needs the token of an existing record")
            if expected is not None:
                self._check_token(window, expected)
            calls.append((window, expected, as_blob(value), None if old is None else as_blob(old)))
        if not self.pipelines_windows or len(calls) < 2:
            return [self._swap_one(*call, listing, durable) for call in calls]
        out = self._run(f"cas_meta of {len(calls)} windows", None, told_retries(
            lambda retry: self._swap_meta_many([(w, e, v, retry, o) for w, e, v, o in calls], listing=listing,
                                               durable=durable)))
        done = [c for c, r in zip(calls, out) if r[0]]
        self.stats.add(round_trips=1, meta_writes=len(done), bytes_written=sum(len(c[2]) for c in done),
                       cas_failures=len(calls) - len(done), bytes_read=sum(len(r[2] or b"") for r in out if not r[0]))
        return [(True, r[1], sorted(r[2]) if listing else None) if r[0] else r for r in out]

    def _swap_one(self, window: str, expected: Token, value: bytes, old: Optional[bytes], listing: bool,
                  durable: bool) -> tuple[bool, Token, Any]:
        """One request of :meth:`swap_meta_many` on its own."""
        if old is not None:
            swap = self.swap_meta(window, expected, old, value, durable=durable)
            if swap.done and listing:
                return True, swap.token, self.list_epochs(window)
            return tuple(swap)
        try:
            if listing:
                return (True, *self.cas_meta_epochs(window, expected, value, durable=durable))
            return True, self.cas_meta(window, expected, value, durable=durable), None
        except CasMismatch as exc:
            return False, exc.actual, None

    def _swap(self, window: str, expected: Token, data: bytes, old: Optional[bytes], listing: bool,
              durable: bool) -> tuple[bool, Token, Any]:
        """One :meth:`_swap_meta` call, retried and counted like :meth:`cas_meta`."""
        out = self._run("cas_meta", window, told_retries(
            lambda retry: self._swap_meta(window, expected, data, retry, old=old, listing=listing, durable=durable)))
        if out[0]:
            self.stats.add(round_trips=1, meta_writes=1, bytes_written=len(data))
        else:
            self.stats.add(round_trips=1, cas_failures=1, bytes_read=len(out[2] or b""))
        return out

    def delete_meta(self, window: str, expected: Token) -> None:
        """Delete the window's metadata record if its token is still
        ``expected`` (pairs are untouched); raises
        :class:`~stores.errors.CasMismatch` if the record changed.  An
        absent record counts as deleted (a retry whose first attempt landed).
        One round trip."""
        check_window(window)
        if expected is None:
            raise StoreConfigError("delete_meta needs the token of an existing record")
        self._check_token(window, expected)
        self._run("delete_meta", window, self._delete_meta, window, expected)
        self.stats.add(round_trips=1, meta_writes=1)

    def _check_token(self, window: str, expected: Token) -> None:
        """Tokens are positive ints: any other was never given out (a mismatch)."""
        if type(expected) is not int or expected <= 0:
            self.stats.add(cas_failures=1)
            raise cas_mismatch(window, expected, self.read_meta(window)[1])


def told_retries(send: Callable[[bool], Any]) -> Callable[[], Any]:
    """``send(retry)`` as the call a store's retries repeat
    (:meth:`stores.retry.Retrying._run`): ``retry`` is true from the
    second attempt on, whose first may have landed (a compare-and-set then
    accepts the record as it left it instead of reporting a lost race)."""
    attempts = [0]

    def call() -> Any:
        attempts[0] += 1
        return send(attempts[0] > 1)

    return call


class Swap(NamedTuple):
    """What :meth:`Store.swap_meta` did: ``done`` (the record held what the
    caller remembered and now holds its new value) with the new ``token``;
    else the record's current ``token`` and ``blob`` (``None`` when absent)."""

    done: bool
    token: Token
    blob: Optional[bytes]


def cas_mismatch(window: str, expected: Token, actual: Token) -> CasMismatch:
    if expected is None:
        what = "metadata already exists" if actual is not None else "metadata changed"
    elif actual is None:
        what = "metadata was deleted"
    else:
        what = "metadata changed"
    return CasMismatch(f"compare-and-set lost on window {window!r}: {what} "
                       f"(expected token {expected!r})",
                       window=window, expected=expected, actual=actual)