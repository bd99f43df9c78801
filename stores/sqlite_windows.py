"""The file store's requests of many windows at once: the half of
:class:`stores.sqlite_store.SQLiteStore` that makes it pipeline windows
(:attr:`stores.base.Store.pipelines_windows`), as standalone Redis does.

A streaming task claims and checkpoints every key of its partition
(:mod:`stores.batch`).  Each compare-and-set alone is a transaction of its
own: the writers' lock, ``BEGIN IMMEDIATE``, ``COMMIT``.  Here the
compare-and-sets of many windows share one transaction, each checked on
its own as :meth:`_swap_meta` checks it (one lost race is returned and the
others stand); the records of up to 500 windows are read by one
statement, up to 100 ranges of many windows' pairs by one compound
``SELECT`` (one seek in the primary key per range), and many ranges are
deleted in one transaction.  A transaction that fails is rolled back
whole, so the retry of a call finds none of its writes landed; a
statement that fails for good (a full disk) fails every window of its
transaction, as a lost round trip fails every window of a Redis pipeline:
a batch's windows then cannot tell if their checkpoint landed
(:meth:`stores.batch.Batch.commit`).
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from .base import Token
from .meta_cas import first_token, stored_record

__all__ = ["SQLiteWindows"]

#: One range of :meth:`SQLiteWindows._read_ranges`, tagged with its place in the request.
_RANGE_SELECT = ("SELECT ?, idx, blob FROM pairs WHERE window = ? AND epoch = ? AND level = ?"
                 " AND idx >= ? AND idx < ?")
#: Ranges per compound SELECT (SQLite allows at most 500 terms in one).
_RANGES_PER_SELECT = 100
#: Windows per ``IN (...)`` of :meth:`SQLiteWindows._read_meta_many` (SQLite
#: binds at most 32,766 parameters, 999 before 3.32).
_WINDOWS_PER_SELECT = 500


class SQLiteWindows:
    """The many-window hooks of :class:`stores.base.Store`, and the
    single-window compare-and-set they share (a mixin of the SQLite store:
    ``_conn``, ``_tx``, ``_list_epochs`` and the synchronous modes are its)."""

    _sync_data: str
    _sync_meta: str
    _conn: Callable[[], Any]
    _tx: Callable[[Any, Callable[[], Any]], Any]
    _list_epochs: Callable[[str], list]

    def _read_pairs_many(self, window: str, ranges: list) -> list[list[Optional[bytes]]]:
        return self._read_ranges([(window, *r) for r in ranges])

    def _read_ranges(self, ranges: list) -> list[list[Optional[bytes]]]:
        conn = self._conn()
        out: list[list[Optional[bytes]]] = [[None] * r[4] for r in ranges]
        for start in range(0, len(ranges), _RANGES_PER_SELECT):
            part = ranges[start:start + _RANGES_PER_SELECT]
            sql = " UNION ALL ".join([_RANGE_SELECT] * len(part))
            args = [a for k, (window, epoch, level, first, count) in enumerate(part, start)
                    for a in (k, window, epoch, level, first, first + count)]
            for k, idx, blob in conn.execute(sql, args):
                out[k][idx - ranges[k][3]] = blob
        return out

    def _read_meta_many(self, windows: list[str]) -> list[tuple[Optional[bytes], Token]]:
        conn = self._conn()
        found: dict = {}
        for start in range(0, len(windows), _WINDOWS_PER_SELECT):
            part = windows[start:start + _WINDOWS_PER_SELECT]
            sql = f"SELECT window, blob, version FROM meta WHERE window IN ({','.join('?' * len(part))})"
            for window, blob, version in conn.execute(sql, part):
                found[window] = stored_record(self.url, window, blob, version)
        return [found.get(w, (None, None)) for w in windows]

    def _swap_meta(self, window: str, expected: Token, value: bytes, retry: bool, *, old: Optional[bytes] = None,
                   listing: bool = False, durable: bool = True) -> tuple[bool, Token, Any]:
        return self._swap_meta_many([(window, expected, value, retry, old)], listing=listing, durable=durable)[0]

    def _swap_meta_many(self, calls: list, *, listing: bool = False, durable: bool = True) -> list:
        # one transaction: a failed attempt is rolled back whole, so a retry needs no check of its own
        conn = self._conn()

        def swap(window: str, expected: Token, value: bytes, old: Optional[bytes]) -> tuple[bool, Token, Any]:
            if expected is None:
                created = first_token(window, value)
                cur = conn.execute("INSERT INTO meta (window, version, blob) VALUES (?, ?, ?)"
                                   " ON CONFLICT (window) DO NOTHING", (window, created, value))
            elif old is None:
                cur = conn.execute("UPDATE meta SET version = version + 1, blob = ?"
                                   " WHERE window = ? AND version = ?", (value, window, expected))
            else:
                cur = conn.execute("UPDATE meta SET version = version + 1, blob = ?"
                                   " WHERE window = ? AND version = ? AND blob = ?", (value, window, expected, old))
            if cur.rowcount == 1:
                return True, created if expected is None else expected + 1, \
                    self._list_epochs(window) if listing else None
            row = conn.execute("SELECT version, blob FROM meta WHERE window = ?", (window,)).fetchone()
            if row is None:
                return False, None, None
            blob, version = stored_record(self.url, window, row[1], row[0])
            return False, version, blob if old is not None else None

        sync_changed = durable and self._sync_meta != self._sync_data
        if sync_changed:
            conn.execute(f"PRAGMA synchronous = {self._sync_meta}")
        try:
            return self._tx(conn, lambda: [swap(w, expected, value, old) for w, expected, value, _, old in calls])
        finally:
            if sync_changed:
                conn.execute(f"PRAGMA synchronous = {self._sync_data}")

    def _delete_ranges(self, ranges: list) -> None:
        conn = self._conn()
        rows = [(window, epoch, level, first, first + count) for window, epoch, level, first, count in ranges]
        self._tx(conn, lambda: conn.executemany("DELETE FROM pairs WHERE window = ? AND epoch = ? AND level = ?"
                                                " AND idx >= ? AND idx < ?", rows))
