"""Can the store take writes right now? The truth for readiness, and why not.

``/readyz`` used to begin a transaction and roll it back: it stayed green with the disk full,
the file deleted (the open handle writes on into an unlinked inode) or its pages corrupted,
and 40 acked messages went into a file nobody would ever read again. This module asks the
questions that matter instead, each cheap enough to repeat every second:

* is the file at the store's path still the one the store opened? (``os.stat`` against the
  device and inode recorded at opening; deletion and replacement cannot be seen through the
  open handle, which keeps working on the old inode)
* can a *new* connection write and commit, within a short busy timeout? It really writes —
  one row upserted and a page-sized scratch row inserted and deleted in ``store_meta``, so a
  store that cannot grow (``SQLITE_FULL``: disk full or ``max_page_count``) fails it — and
  gives up after ``store_probe_timeout_s``, never the ten-second busy timeout of the
  pipeline's connection. It opens with ``mode=rw`` so it never creates a missing file.
* are the pages sound? ``PRAGMA quick_check(1)`` reads the whole file, so it is run at
  start-up and then rarely (see ``agent/daemon/serve.py``), on its own connection off the loop.

The problem codes are stable strings for logs, ``/readyz`` and metrics. Deleted, replaced
and corrupt are *fatal*: the daemon stops acking and exits; the others are transient and
readiness returns when a probe passes again.
"""

from __future__ import annotations

import os
import sqlite3
import time
import uuid
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import NamedTuple

# A tiny key/value table of the store's own: its identity and the probe's heartbeat. Created
# on demand (IF NOT EXISTS), so it needs no migration and a store of any version has it.
META_DDL = "CREATE TABLE IF NOT EXISTS store_meta (key TEXT PRIMARY KEY, value)"


class StoreProblem(StrEnum):
    LOCKED = "store_locked"  # the write lock stayed taken past the probe timeout
    FULL = "store_full"  # SQLITE_FULL: disk full, or the page limit reached
    READONLY = "store_readonly"  # the file or its directory cannot be written
    DELETED = "store_deleted"  # no file at the path any more
    REPLACED = "store_replaced"  # another file at the path than the one opened
    CORRUPT = "store_corrupt"  # malformed pages, or not a database at all
    SCHEMA = "store_schema"  # written by a newer dta
    MISSING = "store_missing"  # at start-up: a store lived here and is gone
    IN_USE = "store_in_use"  # at start-up: another daemon holds the store's lock
    UNREACHABLE = "store_unreachable"  # PostgreSQL: the server cannot be reached
    ERROR = "store_error"  # anything else SQLite, PostgreSQL or the OS said

    @property
    def fatal(self) -> bool:
        """The open handle no longer leads to the store that others will read."""
        return self in (StoreProblem.DELETED, StoreProblem.REPLACED, StoreProblem.CORRUPT)


class StoreError(RuntimeError):
    """The store cannot be used as asked; ``str()`` is the one line an operator reads."""

    def __init__(self, problem: StoreProblem, message: str) -> None:
        super().__init__(message)
        self.problem = problem


@dataclass(frozen=True)
class StoreHealth:
    ok: bool
    problem: StoreProblem | None = None
    detail: str = ""
    checked_at: float = 0.0

    @property
    def fatal(self) -> bool:
        return self.problem is not None and self.problem.fatal

    def to_dict(self) -> dict[str, object]:
        return {"ok": self.ok, "problem": self.problem, "detail": self.detail}


def remedy(problem: StoreProblem) -> str:
    """What an operator can do about ``problem`` (the end of a refusal's one line)."""
    return {
        StoreProblem.CORRUPT: "restore it from a backup, or move it aside and start with"
        " --new-store",
        StoreProblem.READONLY: "make the file and its directory writable for this user",
        StoreProblem.LOCKED: "another process holds its write lock; try again when it is done",
        StoreProblem.FULL: "the disk is full; free space and start again",
    }.get(problem, "check the path, and that its directory exists and is writable")


def healthy(detail: str = "") -> StoreHealth:
    return StoreHealth(True, None, detail, time.time())


def unhealthy(problem: StoreProblem, detail: str) -> StoreHealth:
    return StoreHealth(False, problem, detail, time.time())


class FileIdentity(NamedTuple):
    device: int
    inode: int


def file_identity(path: str | Path) -> FileIdentity | None:
    """The (device, inode) now at ``path``; None if there is no file."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return FileIdentity(st.st_dev, st.st_ino)


def check_identity(path: str | Path, opened: FileIdentity | None) -> StoreHealth | None:
    """A fatal health if the file at ``path`` is gone or another one; None if unchanged.

    Microseconds (one ``stat``): cheap enough for the connector to ask before every ack.
    """
    if opened is None:
        return None
    try:
        now = file_identity(path)
    except OSError as exc:
        return unhealthy(StoreProblem.ERROR, f"{path}: {exc}")
    if now is None:
        return unhealthy(StoreProblem.DELETED, f"{path} was deleted while open")
    if now != opened:
        return unhealthy(StoreProblem.REPLACED, f"{path} is another file than the one opened")
    return None


def classify(exc: BaseException) -> StoreProblem:
    """The problem code for an exception from SQLite or the OS."""
    if isinstance(exc, sqlite3.Error):
        code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
        by_code = {
            5: StoreProblem.LOCKED,  # SQLITE_BUSY
            6: StoreProblem.LOCKED,  # SQLITE_LOCKED
            8: StoreProblem.READONLY,  # SQLITE_READONLY
            11: StoreProblem.CORRUPT,  # SQLITE_CORRUPT
            13: StoreProblem.FULL,  # SQLITE_FULL
            26: StoreProblem.CORRUPT,  # SQLITE_NOTADB
        }
        if code in by_code:
            return by_code[code]
        text = str(exc).lower()
        if "malformed" in text or "not a database" in text:
            return StoreProblem.CORRUPT
        if "locked" in text:
            return StoreProblem.LOCKED
        if "readonly" in text or "read-only" in text:
            return StoreProblem.READONLY
        if "full" in text:
            return StoreProblem.FULL
    if isinstance(exc, PermissionError):
        return StoreProblem.READONLY
    if isinstance(exc, OSError) and exc.errno == 28:  # ENOSPC
        return StoreProblem.FULL
    return StoreProblem.ERROR


def connect_existing(path: str | Path, timeout_s: float) -> sqlite3.Connection:
    """A connection that never creates the file (``mode=rw``): a probe must not resurrect a
    deleted store as an empty one."""
    uri = Path(path).resolve().as_uri() + "?mode=rw"
    return sqlite3.connect(uri, uri=True, isolation_level=None, timeout=timeout_s)


_SYNCHRONOUS = {"off", "normal", "full", "extra"}


def probe_writes(
    path: str | Path,
    opened: FileIdentity | None,
    timeout_s: float,
    page_limit: int | None = None,
    synchronous: str = "normal",
) -> StoreHealth:
    """Write and commit through a new connection; the store's health as that shows it.

    Blocking (up to about ``timeout_s``): call it off the event loop. ``page_limit`` carries
    the store connection's ``max_page_count`` over, so a limit set there (the lab's way to
    simulate a full disk) holds for the probe too. The probe commits as the store does
    (``synchronous``) and never checkpoints: a new connection's default (``full``) made
    every probe's commit an ``fsync`` with the write lock held, 20-30 ms in which no frame
    could be stored and acked.
    """
    moved = check_identity(path, opened)
    if moved is not None:
        return moved
    try:
        conn = connect_existing(path, timeout_s)
    except sqlite3.Error as exc:
        return _failed(path, opened, exc)
    try:
        if synchronous.lower() not in _SYNCHRONOUS:
            raise ValueError(f"synchronous: {synchronous!r}")
        conn.execute(f"PRAGMA synchronous = {synchronous.upper()}")
        conn.execute("PRAGMA wal_autocheckpoint = 0")
        if page_limit is not None:
            conn.execute(f"PRAGMA max_page_count = {int(page_limit)}")
        page_size = int(conn.execute("PRAGMA page_size").fetchone()[0])
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute(META_DDL)
            conn.execute(
                "INSERT INTO store_meta (key, value) VALUES ('probe', ?)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (time.time(),),
            )
            # A row larger than a page needs pages of its own: a store that cannot grow
            # fails here. Freed again in the same transaction.
            conn.execute(
                "INSERT OR REPLACE INTO store_meta (key, value) VALUES ('probe_page', zeroblob(?))",
                (page_size + 1,),
            )
            conn.execute("DELETE FROM store_meta WHERE key = 'probe_page'")
            conn.execute("COMMIT")
        finally:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
    except sqlite3.Error as exc:
        return _failed(path, opened, exc)
    finally:
        conn.close()
    return healthy("write probe committed")


def _failed(path: str | Path, opened: FileIdentity | None, exc: BaseException) -> StoreHealth:
    # The file may have gone while we were opening it: say so rather than "cannot open".
    moved = check_identity(path, opened)
    if moved is not None:
        return moved
    return unhealthy(classify(exc), str(exc))


def quick_check(conn: sqlite3.Connection) -> StoreHealth:
    """``PRAGMA quick_check(1)`` on ``conn``: O(file size), so not on every probe."""
    started = time.monotonic()
    try:
        rows = conn.execute("PRAGMA quick_check(1)").fetchall()
    except sqlite3.Error as exc:
        return unhealthy(classify(exc), str(exc))
    seconds = time.monotonic() - started
    verdict = rows[0][0] if rows else "no answer"
    if verdict != "ok":
        first = str(verdict).replace("\n", " ").replace("*** in database main *** ", "")
        return unhealthy(StoreProblem.CORRUPT, f"quick_check: {first}")
    return healthy(f"quick_check ok in {seconds:.3f}s")


def read_store_id(conn: sqlite3.Connection) -> str | None:
    """The id given to this store by the first daemon that ran on it (None before that)."""
    try:
        row = conn.execute("SELECT value FROM store_meta WHERE key = 'store_id'").fetchone()
    except sqlite3.OperationalError:  # no store_meta yet
        return None
    return str(row[0]) if row else None


def assign_store_id(conn: sqlite3.Connection) -> str:
    """Give the store an id (kept if it has one): the lock file remembers it, so a restart
    can tell this store from a new empty file at the same path."""
    conn.execute(META_DDL)
    conn.execute(
        "INSERT OR IGNORE INTO store_meta (key, value) VALUES ('store_id', ?)", (uuid.uuid4().hex,)
    )
    store_id = read_store_id(conn)
    assert store_id is not None
    return store_id
