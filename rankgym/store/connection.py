"""Opening a store file and talking to it: pragmas, migration, the write lock, retries.

- WAL mode, foreign keys on, ``synchronous=NORMAL``: readers (the dashboard) never block the
  writer (the trainer) and the writer never blocks readers.
- Every write is one ``BEGIN IMMEDIATE`` transaction, retried with backoff while another
  process holds the write lock, so ``database is locked`` never reaches a user; after
  ``busy_seconds`` of waiting a :class:`StoreBusy` names the file and what to do.
- A path that cannot be a store (a directory, not SQLite, truncated, not writable, a newer
  schema) is refused at open with one :class:`StoreError` line; an ``sqlite3`` error found
  later (a damaged page) becomes a StoreError too. Text that is not valid UTF-8 is read with
  U+FFFD in place of the bad bytes and counted in ``repaired_texts``.
- A read-only store in a read-only folder (SQLite cannot create its ``-shm`` file there) is
  read as immutable when no ``-wal`` file shows a writer at work.

What it does not do: no data methods (see ``core.Store``), no connection pool: one
connection per ``StoreFile``, shared by threads under a lock.
"""

from __future__ import annotations

import logging
import os
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Self, TypeVar
from urllib.parse import quote

from rankgym.errors import StoreBusy, StoreError
from rankgym.store.health import check_file, describe
from rankgym.store.rows import TextSafe, clean_params
from rankgym.store.schema import SCHEMA_VERSION, apply_migrations, user_version

T = TypeVar("T")
log = logging.getLogger(__name__)


def _is_busy(e: sqlite3.OperationalError) -> bool:
    msg = str(e).lower()
    return "locked" in msg or "busy" in msg


class _Decoder:
    """SQLite text -> str: UTF-8, or (a row another tool wrote badly) U+FFFD, counted."""

    def __init__(self) -> None:
        self.repaired = 0

    def __call__(self, raw: bytes) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            self.repaired += 1
            return raw.decode("utf-8", "replace")


class StoreFile:
    """One store file: opened, checked, migrated; locked and retried writes; reads."""

    def __init__(self, path: str | Path, readonly: bool = False, busy_seconds: float = 120.0):
        self.path = Path(path)
        self.readonly = readonly
        self.busy_seconds = busy_seconds
        self._decode = _Decoder()  # not a bound method: no Store <-> connection cycle
        self._lock = threading.RLock()
        check_file(self.path, readonly)
        try:
            self._connect_and_open(immutable=False)
        except sqlite3.DatabaseError as e:
            if not (readonly and "readonly" in str(e) and not self._wal_in_use()):
                raise StoreError(describe(e, self.path, readonly)) from None
            # A read-only folder: SQLite cannot create the -shm file. With no -wal file no
            # writer is active, so reading the file as immutable is exact.
            try:
                self._connect_and_open(immutable=True)
            except sqlite3.DatabaseError as e2:
                raise StoreError(describe(e2, self.path, readonly)) from None

    def _connect_and_open(self, immutable: bool) -> None:
        try:
            self.conn = self._connect(immutable)
        except OSError as e:
            raise StoreError(f"store {str(self.path)!r} cannot be created: {e}") from None
        except sqlite3.Error as e:
            raise StoreError(describe(e, self.path, self.readonly)) from None
        try:
            self._open()
        except BaseException:
            self.conn.close()
            raise

    def _wal_in_use(self) -> bool:
        wal = self.path.with_name(self.path.name + "-wal")
        return wal.exists() and wal.stat().st_size > 0

    @classmethod
    def for_reading(cls, path: str | Path) -> Self:
        """Open an existing store to read: read-write when the file is writable (so an older
        schema is migrated), read-only otherwise; a missing file is an error, never created."""
        p = Path(path)
        return cls(p, readonly=not (p.is_file() and os.access(p, os.W_OK)))

    def _connect(self, immutable: bool = False) -> sqlite3.Connection:
        if self.readonly:
            uri = "file:" + quote(str(self.path.resolve())) + "?mode=ro"
            uri += "&immutable=1" if immutable else ""
            conn = sqlite3.connect(uri, uri=True, timeout=30, check_same_thread=False)
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(
                str(self.path), timeout=30, isolation_level=None, check_same_thread=False
            )
        conn.row_factory = sqlite3.Row
        conn.text_factory = self._decode
        return conn

    def _open(self) -> None:
        """Set the pragmas, migrate (read-write) and check the schema version."""
        self._retry(lambda: self.conn.execute("PRAGMA busy_timeout = 30000"))
        self.conn.execute("PRAGMA foreign_keys = ON")
        self.conn.execute("PRAGMA cache_size = -65536")
        self.conn.execute("PRAGMA mmap_size = 268435456")
        version = self._retry(lambda: user_version(self.conn))
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"store {str(self.path)!r} has schema version {version}, newer than this "
                f"rankgym ({SCHEMA_VERSION}); upgrade rankgym to read it."
            )
        if not self.readonly:
            self._retry(lambda: self.conn.execute("PRAGMA journal_mode = WAL"))
            self.conn.execute("PRAGMA synchronous = NORMAL")
            self._migrate()
        elif version < SCHEMA_VERSION:
            if not (os.access(self.path, os.W_OK) and os.access(self.path.parent, os.W_OK)):
                raise StoreError(
                    f"store {str(self.path)!r} has schema version {version} (current "
                    f"{SCHEMA_VERSION}) and is not writable here; open it once read-write "
                    "(any rankgym write command, as its owner) to migrate it."
                )
            # A reader after a rankgym upgrade: migrate once (a short read-write open), then
            # go on read-only, so the dashboard never refuses a store the trainer wrote.
            log.info(
                "store %s: schema %d -> %d (one-time upgrade)", self.path, version, SCHEMA_VERSION
            )
            StoreFile(self.path, busy_seconds=self.busy_seconds).close()
        # A file that is SQLite but damaged inside often reads its first page fine.
        self._retry(lambda: self.conn.execute("SELECT count(*) FROM sqlite_master").fetchone())

    @property
    def repaired_texts(self) -> int:
        """How many texts read so far were not valid UTF-8 (read with U+FFFD in their place)."""
        return self._decode.repaired

    # ------------------------------------------------------------------ plumbing
    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection (idempotent); committed writes are on disk."""
        with self._lock:
            self.conn.close()

    def _retry(self, fn: Callable[[], T]) -> T:
        deadline = time.monotonic() + self.busy_seconds
        delay = 0.01
        while True:
            try:
                with self._lock:
                    return fn()
            except sqlite3.ProgrammingError:
                raise  # a bug in rankgym, not a property of the file
            except sqlite3.DatabaseError as e:
                if not (isinstance(e, sqlite3.OperationalError) and _is_busy(e)):
                    raise StoreError(describe(e, self.path, self.readonly)) from e
                if time.monotonic() > deadline:
                    raise StoreBusy(
                        f"store {str(self.path)!r} stayed locked by another process for "
                        f"{self.busy_seconds:.0f}s; stop the other writer or retry later."
                    ) from e
                time.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 2, 1.0)

    def _write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` in one IMMEDIATE transaction, retrying while the file is locked.

        Text that UTF-8 cannot encode (a lone surrogate from an agent) rolls the transaction
        back and redoes it with such characters replaced by U+FFFD in plain text columns.
        """
        if self.readonly:
            raise StoreError(f"store {str(self.path)!r} was opened read-only")

        def attempt(conn: Any) -> T:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                out = fn(conn)
                self.conn.execute("COMMIT")
            except BaseException:
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                raise
            return out

        try:
            return self._retry(lambda: attempt(self.conn))
        except UnicodeEncodeError:
            return self._retry(lambda: attempt(TextSafe(self.conn)))

    def _migrate(self) -> None:
        if user_version(self.conn) < SCHEMA_VERSION:
            self._write(lambda c: apply_migrations(c, self.path))

    def query(
        self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()
    ) -> list[dict[str, Any]]:
        """Run a read query and return rows as dicts (text params made valid UTF-8 first)."""
        params = clean_params(params)
        return self._retry(lambda: [dict(r) for r in self.conn.execute(sql, params).fetchall()])

    @property
    def schema_version(self) -> int:
        """The file's schema version (``PRAGMA user_version``)."""
        return int(self.conn.execute("PRAGMA user_version").fetchone()[0])
