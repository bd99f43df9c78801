"""``file:`` -- an embedded store in SQLite (stdlib ``sqlite3``), WAL mode.

URLs: ``file:///abs/path/dir``, ``file:relative/dir``, or a plain path.  The
path is a directory (created if missing); the database is
``<dir>/mta.sqlite3``::

    pairs(window TEXT, epoch INT, level INT, idx INT, blob BLOB,
          PRIMARY KEY (window, epoch, level, idx)) WITHOUT ROWID
    meta(window TEXT PRIMARY KEY, version INT, blob BLOB)
    info(key TEXT PRIMARY KEY, value)         -- schema_version = 1

The metadata token is ``version`` (1 on creation, +1 per successful
compare-and-set, done as ``UPDATE ... WHERE version = ?`` inside
``BEGIN IMMEDIATE``; ``swap_meta`` adds ``AND blob = ?`` and reads the
current record back when that fails, ``cas_meta_epochs`` lists the epochs
in the same transaction).  A batch of pairs is one ``executemany`` in one
transaction: one round trip.  Many windows' compare-and-sets share one
transaction, their records are read by one statement per 500 and their
heads by one per 100 ranges (:mod:`stores.sqlite_windows`: a streaming
task's claims and checkpoints, :mod:`stores.batch`).

Concurrency: several threads and several processes of one host may share a
directory.  Each thread has its own connection; writers serialize on
SQLite's lock, and before it on the writers' lock file
(:mod:`stores.writer_lock`); one attempt waits for the two together up to
``busy_timeout`` seconds (default 10, a finite number >= 0), and never longer
than the store's ``timeout``, after which the call is retried like any
transient error.
After ``fork`` (Spark executors fork their Python workers) the child
notices the pid change and opens its own connections; inherited ones are
never used or closed in the child.  Network file systems are not supported (WAL needs
shared memory between the processes).  The database a store first opens
is its identity: every call first checks that file is still there and the
same (device, inode), and raises :class:`~stores.errors.MissingData` if it
was deleted or replaced, rather than going on with a deleted file.

Durability (option ``synchronous``):

* ``"meta"`` (default) -- pair writes commit with ``synchronous=NORMAL``
  (no fsync: a power loss may lose the last pair writes, never corrupt the
  database), metadata compare-and-sets commit with ``synchronous=FULL``:
  the WAL is fsynced, which makes *every earlier write* durable too.  So
  once a checkpoint's ``cas_meta`` returns, the pairs written before it
  survive a power loss.  A claim's ``cas_meta(durable=False)`` commits
  like a pair write: the checkpoint after it makes it durable.  A batch of
  checkpoints made with ``durable=False`` is made durable by one
  ``sync()``, an fsync of the WAL.
* ``"full"`` -- every commit is fsynced: one fsync per write_pairs call.
* ``"normal"`` -- no commit is fsynced (a crash of the process loses
  nothing; a power loss may lose the latest commits).
* ``"off"`` -- no fsync at all, even at checkpoints of the WAL (tests).

An fsync dominates a small commit, which is why ``"meta"`` pays it only
at checkpoints; what each mode costs is measured in
docs/benchmarks-stores.md.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
import weakref
from typing import Any, Optional

from .base import STORE_OPTIONS, Store, Token, TRANSIENT, cas_mismatch
from .meta_cas import stored_record
from .errors import FormatVersionError, MissingData, StoreClosed, StoreConfigError, StoreError
from .options import seconds
from .sqlite_windows import SQLiteWindows
from .urls import parse_file_url
from .writer_lock import WriterLock, open_writer_lock

SCHEMA_VERSION = 1
DB_NAME = "mta.sqlite3"
WRITER_LOCK = DB_NAME + "-writer"  # beside the database

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS pairs (window TEXT NOT NULL, epoch INTEGER NOT NULL,"
    " level INTEGER NOT NULL, idx INTEGER NOT NULL, blob BLOB NOT NULL,"
    " PRIMARY KEY (window, epoch, level, idx)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS meta (window TEXT PRIMARY KEY NOT NULL,"
    " version INTEGER NOT NULL, blob BLOB NOT NULL)",
    "CREATE TABLE IF NOT EXISTS info (key TEXT PRIMARY KEY NOT NULL, value)",
)

#: The epochs a window has pairs under, each found by one seek in the primary key.
_LIST_EPOCHS = (
    "WITH RECURSIVE e(epoch) AS ("
    " SELECT (SELECT MIN(epoch) FROM pairs WHERE window = ?1)"
    " UNION ALL"
    " SELECT (SELECT MIN(epoch) FROM pairs WHERE window = ?1 AND epoch > e.epoch) FROM e WHERE e.epoch IS NOT NULL)"
    " SELECT epoch FROM e WHERE epoch IS NOT NULL")

_SYNC_MODES = {"meta": ("NORMAL", "FULL"), "full": ("FULL", "FULL"),
               "normal": ("NORMAL", "NORMAL"), "off": ("OFF", "OFF")}

#: Connections inherited across fork: kept referenced forever in the child so
#: that garbage collection never closes them (closing a parent's SQLite
#: connection in a child can damage the parent's locks and WAL).
_inherited: list = []


class _Connection(sqlite3.Connection):
    """A connection that can be weakly referenced (the store tracks its
    connections in a WeakSet, so a thread's connection is freed when the
    thread ends), with its own ``writer`` lock (closed by ``release``)."""

    writer: Optional[WriterLock] = None
    release: Any = None


class SQLiteStore(SQLiteWindows, Store):
    scheme = "file"
    SYNCS_META = True

    def __init__(self, url: str, *, busy_timeout: float = 10.0, synchronous: str = "meta",
                 **options: Any) -> None:
        unknown = set(options) - STORE_OPTIONS
        if unknown:
            raise StoreConfigError(f"unknown option(s) for file: stores: "
                                   f"{', '.join(sorted(unknown))}")
        directory = parse_file_url(url)
        super().__init__("file://" + directory, **options)
        if synchronous not in _SYNC_MODES:
            raise StoreConfigError(f"synchronous must be one of {sorted(_SYNC_MODES)}, "
                                   f"got {synchronous!r}")
        self.busy_timeout = seconds("busy_timeout", busy_timeout, zero=True)
        #: How long one attempt waits for the writers' lock and SQLite's lock together: the
        #: store's ``timeout`` bounds every attempt (stores.base), whatever ``busy_timeout`` says.
        self.lock_wait = min(self.busy_timeout, self.timeout)
        self.directory = directory
        self.path = os.path.join(directory, DB_NAME)
        self.writer_path = os.path.join(directory, WRITER_LOCK)
        self._sync_data, self._sync_meta = _SYNC_MODES[synchronous]
        self.SYNCS_META = self._sync_meta == "FULL"  # "normal" and "off" sync no metadata write
        self._local = threading.local()
        self._conns: "weakref.WeakSet" = weakref.WeakSet()
        self._conns_lock = threading.Lock()
        self._pid = os.getpid()
        self._idle = threading.Condition()  # close() waits for calls in flight
        self._in_flight = 0
        # (device, inode) of the database this store first opened: the store's
        # identity, checked before every call (see _check_identity)
        self._identity: tuple[int, int] | None = None

    # -------------------------------------------------------- connections

    def _conn(self) -> sqlite3.Connection:
        local = self._local
        pid = os.getpid()
        conn = getattr(local, "conn", None)
        if conn is not None and local.pid == pid:
            return conn
        if pid != self._pid:
            self._after_fork(pid)
        conn = self._connect()
        local.conn, local.pid = conn, pid
        return conn

    def _after_fork(self, pid: int) -> None:
        with self._conns_lock:
            if pid == self._pid:
                return
            _inherited.extend(self._conns)
            self._conns = weakref.WeakSet()
            self._pid = pid

    def _file_identity(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return st.st_dev, st.st_ino

    def _check_identity(self) -> None:
        """Refuse to go on when the database this store opened was deleted
        or replaced (its directory removed under a running job): open
        connections would keep using the deleted file, and a new one would
        silently start an empty store."""
        if self._identity is None:
            return
        identity = self._file_identity()
        if identity != self._identity:
            raise self._lost("was deleted" if identity is None else "was replaced by another database")

    def _lost(self, what: str) -> MissingData:
        return MissingData(f"store {self.url}: its database {self.path} {what} while in use; the windows it "
                           "held are gone (resume from a store that kept them, or start the query afresh "
                           "with a new checkpoint location)")

    def _connect(self) -> sqlite3.Connection:
        try:
            os.makedirs(self.directory, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"store {self.url}: cannot create directory: {exc}") from exc
        conn = sqlite3.connect(self.path, timeout=self.lock_wait, isolation_level=None,
                               check_same_thread=False, factory=_Connection)
        try:
            conn.execute(f"PRAGMA busy_timeout = {round(self.lock_wait * 1000)}")
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StoreError(f"store {self.url}: cannot switch {self.path} to WAL mode "
                                 f"(journal_mode is {mode})")
            conn.execute(f"PRAGMA synchronous = {self._sync_data}")
            self._init_schema(conn)
            identity = self._file_identity()
            if self._identity is None:
                self._identity = identity
            elif identity != self._identity:
                raise self._lost("was replaced by another database")
            conn.writer = open_writer_lock(self.writer_path)
            if conn.writer is not None:
                conn.release = weakref.finalize(conn, conn.writer.close)
                conn.release.atexit = False  # the process's descriptors close with it
        except BaseException:
            conn.close()
            if conn.release is not None:
                conn.release()
            raise
        with self._conns_lock:
            self._conns.add(conn)
        return conn

    def _init_schema(self, conn: sqlite3.Connection) -> None:
        row = None
        try:
            row = conn.execute("SELECT value FROM info WHERE key = 'schema_version'").fetchone()
        except sqlite3.OperationalError as exc:
            if "no such table" not in str(exc):
                raise
        if row is None:
            conn.execute("BEGIN IMMEDIATE")
            try:
                for stmt in _SCHEMA:
                    conn.execute(stmt)
                conn.execute("INSERT OR IGNORE INTO info VALUES ('schema_version', ?)",
                             (SCHEMA_VERSION,))
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            row = conn.execute("SELECT value FROM info WHERE key = 'schema_version'").fetchone()
        if row[0] != SCHEMA_VERSION:
            raise FormatVersionError(
                f"store {self.url}: database schema version {row[0]!r}; this code "
                f"reads version {SCHEMA_VERSION}")

    def _tx(self, conn: sqlite3.Connection, fn: Any) -> Any:
        started = time.monotonic()
        locked = conn.writer is not None and conn.writer.acquire(self.lock_wait)
        # the wait for the writers' lock counts against lock_wait: SQLite's busy wait gets what is left
        left = round((self.lock_wait - (time.monotonic() - started)) * 1000)
        shortened = left < round(self.lock_wait * 1000)
        try:
            if shortened:
                conn.execute(f"PRAGMA busy_timeout = {max(left, 0)}")
            conn.execute("BEGIN IMMEDIATE")
            try:
                out = fn()
                conn.execute("COMMIT")
                return out
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        finally:
            if locked:
                conn.writer.release()
            if shortened:
                with contextlib.suppress(sqlite3.Error):  # a connection that failed: a shorter wait is still bounded
                    conn.execute(f"PRAGMA busy_timeout = {round(self.lock_wait * 1000)}")

    def _write(self, conn: sqlite3.Connection, sql: str, args: tuple) -> None:
        self._tx(conn, lambda: conn.execute(sql, args))  # one statement, a transaction of its own

    def _run(self, operation, window, fn, *args):
        # Closing a connection while another thread is inside SQLite with it
        # crashes the interpreter, so close() waits for the calls in flight
        # (background flushes and prefetches of the engines).
        with self._idle:
            if self._closed:
                raise StoreClosed(f"{operation} on a closed store {self.url}")
            self._in_flight += 1
        try:
            self._check_identity()
            return super()._run(operation, window, fn, *args)
        finally:
            with self._idle:
                self._in_flight -= 1
                self._idle.notify_all()

    # ---------------------------------------------------------- backend

    def _classify(self, exc: Exception) -> Optional[str]:
        if isinstance(exc, sqlite3.OperationalError):
            msg = str(exc).lower()
            if "locked" in msg or "busy" in msg or "disk i/o" in msg \
                    or "unable to open" in msg:
                return TRANSIENT
        return None

    def _on_transient_error(self, exc: Exception) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None and self._local.pid == os.getpid():
            try:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
            except sqlite3.Error:
                self._local.conn = None

    def _write_pairs(self, window: str, epoch: int, level: int, first: int,
                     blobs: list[bytes]) -> None:
        conn = self._conn()
        rows = [(window, epoch, level, i, b) for i, b in enumerate(blobs, first)]
        self._tx(conn, lambda: conn.executemany(
            "INSERT OR REPLACE INTO pairs (window, epoch, level, idx, blob) "
            "VALUES (?, ?, ?, ?, ?)", rows))

    def _read_pairs(self, window: str, epoch: int, level: int, first: int,
                    count: int) -> list[Optional[bytes]]:
        rows = self._conn().execute(
            "SELECT idx, blob FROM pairs WHERE window = ? AND epoch = ? AND level = ?"
            " AND idx >= ? AND idx < ?", (window, epoch, level, first, first + count))
        out: list[Optional[bytes]] = [None] * count
        for idx, blob in rows:
            out[idx - first] = blob
        return out

    def _delete_pairs(self, window: str, epoch: int, level: int, first: int,
                      count: int) -> None:
        self._write(self._conn(), "DELETE FROM pairs WHERE window = ? AND epoch = ? AND level = ?"
                    " AND idx >= ? AND idx < ?", (window, epoch, level, first, first + count))

    def _drop_epoch(self, window: str, epoch: int, ranges: Any) -> None:
        self._write(self._conn(), "DELETE FROM pairs WHERE window = ? AND epoch = ?", (window, epoch))

    def _list_epochs(self, window: str) -> list[int]:
        # one index seek per epoch (O(epochs log pairs)): DISTINCT would walk every pair of the window
        return [r[0] for r in self._conn().execute(_LIST_EPOCHS, (window,))]

    def _read_meta(self, window: str) -> tuple[Optional[bytes], Token]:
        row = self._conn().execute("SELECT blob, version FROM meta WHERE window = ?",
                                   (window,)).fetchone()
        return (None, None) if row is None else stored_record(self.url, window, row[0], row[1])

    def _cas_meta(self, window: str, expected: Token, value: bytes, retry: bool, durable: bool = True) -> Token:
        done, token, _ = self._swap_meta(window, expected, value, retry, durable=durable)
        if not done:
            raise cas_mismatch(window, expected, token)
        return token

    def _sync(self) -> None:
        # fsync of the WAL makes every transaction committed before it durable, as
        # a FULL-synchronous commit does; and of the directory, whose entry of the WAL
        # is new whenever SQLite has emptied and deleted the WAL since (its last
        # connection closed), as SQLite syncs it for a new WAL; with nothing new in it,
        # a directory's fsync is cheap beside the WAL's
        for path in (self.path + "-wal", self.directory):
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:  # no WAL: nothing written since it was last emptied into the database
                continue
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def _delete_meta(self, window: str, expected: Token) -> None:
        conn = self._conn()

        def delete() -> Exception | None:
            row = conn.execute("SELECT version FROM meta WHERE window = ?", (window,)).fetchone()
            if row is not None and row[0] != expected:
                return cas_mismatch(window, expected, row[0])
            conn.execute("DELETE FROM meta WHERE window = ?", (window,))
            return None

        out = self._tx(conn, delete)
        if out is not None:
            raise out

    def _delete_window(self, window: str) -> None:
        conn = self._conn()

        def delete() -> None:
            conn.execute("DELETE FROM pairs WHERE window = ?", (window,))
            conn.execute("DELETE FROM meta WHERE window = ?", (window,))

        self._tx(conn, delete)

    def _window_names(self) -> list[str]:
        # the pairs' primary key starts with the window: DISTINCT walks that index
        return [r[0] for r in self._conn().execute(
            "SELECT window FROM meta UNION SELECT DISTINCT window FROM pairs")]

    def _ping(self) -> None:
        self._conn().execute("SELECT 1").fetchone()

    def _close(self) -> None:
        with self._idle:
            self._idle.wait_for(lambda: self._in_flight == 0)
        pid = os.getpid()
        with self._conns_lock:
            conns = list(self._conns) if pid == self._pid else []
            self._conns = weakref.WeakSet()
        for conn in conns:
            try:
                conn.close()
            except sqlite3.Error:
                pass
            if conn.release is not None:
                conn.release()
        self._local = threading.local()
