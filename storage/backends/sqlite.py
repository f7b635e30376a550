"""SQLite, the embedded default: one file beside the daemon, in WAL mode.

One ``SqliteBackend`` owns one connection; a thread that needs the store opens its own on
the same file (WAL lets readers and one writer work side by side). ``PRAGMA user_version``
records how far the file's schema has come.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path

import sqlite_utils

from storage.integrity import (
    FileIdentity,
    StoreError,
    StoreHealth,
    StoreProblem,
    classify,
    file_identity,
    healthy,
    probe_writes,
    remedy,
)
from storage.schema import SQLITE, newer_than_this_dta, scripts

AUTOCHECKPOINT_PAGES = 1000  # SQLite's own default

_WRITERS: dict[str, threading.Lock] = {}
_WRITERS_GUARD = threading.Lock()


def _writers_of(path: str) -> threading.Lock:
    """The one lock this process's writers of the SQLite file at ``path`` take turns on."""
    key = os.path.realpath(path)
    with _WRITERS_GUARD:
        return _WRITERS.setdefault(key, threading.Lock())


def migrate(conn: sqlite3.Connection) -> int:
    """Bring ``conn`` up to the newest schema; returns the resulting version."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    every = scripts(SQLITE)
    if version > len(every):
        raise StoreError(StoreProblem.SCHEMA, newer_than_this_dta(version))
    for number, script in enumerate(every[version:], start=version + 1):
        # executescript commits first; wrap each migration so it applies whole or not at all
        conn.executescript(f"BEGIN;\n{script}\nPRAGMA user_version = {number};\nCOMMIT;")
    return len(every)


class SqliteBackend:
    dialect = SQLITE
    exclusive = True  # one daemon per file, under its instance lock (storage/lock.py)
    fallback = True

    @staticmethod
    def accepts(target: str) -> bool:
        return True  # any path; ":memory:" for a store that lives as long as its object

    def __init__(
        self, target: str, *, synchronous: str, busy_timeout_s: float, schema: str | None
    ) -> None:
        del schema  # one store per file
        self.path = target
        self.synchronous = synchronous
        self.file: str | None = None if target == ":memory:" else target
        self.identity: FileIdentity | None = None
        try:
            self._conn = self._open(synchronous, busy_timeout_s)
        except StoreError as exc:
            raise StoreError(exc.problem, f"store {target}: {exc}") from exc
        except (sqlite3.Error, OSError) as exc:
            problem = classify(exc)
            message = f"store {target} cannot be opened ({problem}: {exc}): {remedy(problem)}"
            raise StoreError(problem, message) from exc
        self._writers = None if self.file is None else _writers_of(target)

    def _open(self, synchronous: str, busy_timeout_s: float) -> sqlite3.Connection:
        if self.file is not None:
            Path(self.file).parent.mkdir(parents=True, exist_ok=True)
        # isolation_level=None: transactions are opened explicitly (StoreBase._tx).
        conn = sqlite3.connect(self.path, isolation_level=None, timeout=busy_timeout_s)
        try:
            db = sqlite_utils.Database(conn)
            if self.file is not None:
                db.enable_wal()
                self.identity = file_identity(self.file)
            db.execute(f"PRAGMA synchronous = {synchronous.upper()}")
            db.execute("PRAGMA foreign_keys = ON")
            migrate(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    @property
    def conn(self) -> sqlite3.Connection:
        return self._conn

    @property
    def where(self) -> str:
        return self.path

    def writers(self) -> threading.Lock | None:
        return self._writers

    def probe(self, timeout_s: float, page_limit: int | None) -> StoreHealth:
        if self.file is None:
            return healthy("in memory")
        return probe_writes(self.file, self.identity, timeout_s, page_limit, self.synchronous)

    def page_limit(self) -> int | None:
        return int(self._conn.execute("PRAGMA max_page_count").fetchone()[0])

    def set_autocheckpoint(self, on: bool) -> None:
        pages = AUTOCHECKPOINT_PAGES if on else 0
        self._conn.execute(f"PRAGMA wal_autocheckpoint = {pages}")

    def close(self) -> None:
        self._conn.close()


BACKEND = SqliteBackend
