"""Checks and messages for store files that cannot be used: each becomes one StoreError line.

:func:`check_file` looks at a path before SQLite opens it (a directory, a file that is not
SQLite, a copy shorter than its header says, a file or folder this process cannot write) and
:func:`describe` words an ``sqlite3`` error that happens later (a page damaged in the middle
of the file is only found when a query reads it).

What this module does not do: no repair, and no full integrity scan (``PRAGMA quick_check``
reads the whole file; run ``sqlite3 FILE 'PRAGMA integrity_check'`` yourself when in doubt).
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from rankgym.errors import StoreError

SQLITE_MAGIC = b"SQLite format 3\x00"
_DAMAGED = "restore it from a backup, or write to a new store"


def _truncated(path: Path, head: bytes, size: int) -> bool:
    """True when the file is shorter than its own header says (a cut-off copy)."""
    if len(head) < 100:
        return True
    page_size = int.from_bytes(head[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    if page_size < 512 or page_size & (page_size - 1) or size % page_size:
        return True
    pages = int.from_bytes(head[28:32], "big")
    header_valid = head[24:28] == head[92:96]  # in-header size is current (SQLite >= 3.7.0)
    wal = path.with_name(path.name + "-wal")
    wal_frames = wal.is_file() and wal.stat().st_size > 32  # a WAL may hold newer pages
    return header_valid and not wal_frames and size < pages * page_size


def check_file(path: Path, readonly: bool) -> None:
    """Raise :class:`StoreError` if ``path`` cannot hold a store; a missing path is fine to create."""
    shown = repr(str(path))
    if path.is_dir():
        raise StoreError(
            f"store {shown} is a directory; pass the path of a store file, e.g. "
            f"{str(path / 'store.db')!r}"
        )
    if not path.exists():
        if readonly:
            raise StoreError(
                f"store {shown} does not exist; create one with "
                "`rankgym rollout --store PATH ...` or `rankgym demo`."
            )
        _check_folder(path)
        return
    if not path.is_file():
        raise StoreError(f"store {shown} is not a regular file; pass the path of a store file")
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            head = f.read(100)
    except OSError as e:
        raise StoreError(f"store {shown} cannot be read: {e.strerror or e}") from None
    if size == 0:
        return  # SQLite treats an empty file as a new database
    if not head.startswith(SQLITE_MAGIC[: len(head)]) or len(head) < len(SQLITE_MAGIC):
        raise StoreError(
            f"store {shown} is not a rankgym store (not an SQLite database file); check the path"
        )
    if _truncated(path, head, size):
        raise StoreError(
            f"store {shown} is damaged: the file is shorter than its header says (a cut-off "
            f"copy?); {_DAMAGED}"
        )
    if not readonly and not os.access(path, os.W_OK):
        raise StoreError(
            f"store {shown} is read-only (no write permission) and this command writes to it; "
            "make it writable or copy it to a writable place"
        )
    if not readonly:
        _check_folder(path)


def _check_folder(path: Path) -> None:
    """The folder of a store must be (or become) a writable directory: SQLite adds -wal files."""
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise StoreError(
            f"store {str(path)!r} cannot be created: {str(folder)!r} is a file, not a folder"
        )
    if not os.access(folder, os.W_OK | os.X_OK):
        raise StoreError(
            f"store {str(path)!r} cannot be written: folder {str(folder)!r} is not writable "
            "(SQLite keeps its -wal and -shm files next to the store)"
        )


def describe(e: sqlite3.Error, path: Path, readonly: bool = False) -> str:
    """One line saying what an ``sqlite3`` error means for the store at ``path``."""
    shown = repr(str(path))
    msg = str(e).lower()
    if "not a database" in msg:
        return f"store {shown} is not a rankgym store (not an SQLite database file); check the path"
    if "malformed" in msg or "disk image" in msg:
        return f"store {shown} is damaged ({e}); {_DAMAGED}"
    if ("readonly" in msg or "read-only" in msg) and readonly:
        return (
            f"store {shown} cannot be read here ({e}): SQLite must create {path.name}-shm next "
            "to it and its folder is not writable; copy the store to a writable folder"
        )
    if "readonly" in msg or "read-only" in msg:
        return (
            f"store {shown} cannot be written ({e}); check the permissions of the file and its "
            "folder, or copy it to a writable place"
        )
    if "unable to open" in msg:
        return f"store {shown} cannot be opened ({e}); check that its folder exists and is writable"
    if "disk is full" in msg:
        return f"store {shown}: the disk is full; free some space and rerun"
    return f"store {shown}: {e}"
