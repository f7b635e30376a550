"""Store backends: the one interface an engine implements to hold dta's records.

``StoreBase`` (storage/base.py) talks to a backend only through ``StoreBackend``; the record
families (storage/events.py, storage/work.py, …) write the SQL every engine shares through
its ``conn`` and ask its ``dialect`` for the rest. A new engine is one module here, found
by ``backends()``: a class with these members, named by the module's ``BACKEND``, whose
connection speaks the store's SQL (``?`` placeholders, ``ON CONFLICT``, ``RETURNING``,
``ORDER BY rowid``) and whose dialect (``storage/schema.py``) spells the rest — plus its
tests.

    backend = open_backend("postgresql://127.0.0.1/test", synchronous="normal",
                           busy_timeout_s=10.0, schema="dta_robot1")
    backend.conn.execute("SELECT COUNT(*) FROM events").fetchone()
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
import threading
from typing import Any, Protocol

from storage.integrity import FileIdentity, StoreHealth
from storage.schema import Dialect


class StoreBackend(Protocol):
    """What the store needs of an engine. Opening raises ``StoreError`` (one line)."""

    dialect: Dialect
    # A database file on this machine (its identity is watched, its WAL checkpointed, the
    # instance lock taken on it), or None for a server's database.
    file: str | None
    identity: FileIdentity | None
    # One daemon per store: whatever another owner left unfinished is a dead process's,
    # and runs of a thread are serial in memory (no fencing, no thread leases needed).
    exclusive: bool
    # Takes any target (SQLite: every path), so it is asked last; ``accepts(target)`` is a
    # static method of the class.
    fallback: bool

    @property
    def conn(self) -> Any:
        """The connection, speaking the store's SQL; transactions are opened explicitly
        (``BEGIN IMMEDIATE`` … ``COMMIT``)."""
        ...

    @property
    def where(self) -> str:
        """The store's location for messages, without secrets."""
        ...

    def writers(self) -> threading.Lock | None:
        """The lock this process's writers of the same database take turns on, if any."""
        ...

    def probe(self, timeout_s: float, page_limit: int | None) -> StoreHealth:
        """Can the store take writes now? A real write on a new connection, safe from any
        thread, blocking for about ``timeout_s``."""
        ...

    def page_limit(self) -> int | None: ...

    def set_autocheckpoint(self, on: bool) -> None: ...

    def close(self) -> None: ...


@functools.cache
def backends() -> tuple[Any, ...]:
    """Every engine in this package (a module's ``BACKEND``), the fallback last. Read at
    the first opening, when every module of the store has loaded."""
    found = []
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        backend = getattr(module, "BACKEND", None)
        if backend is not None:
            found.append(backend)
    return tuple(sorted(found, key=lambda backend: (backend.fallback, backend.__name__)))


def open_backend(
    target: str, *, synchronous: str, busy_timeout_s: float, schema: str | None = None
) -> StoreBackend:
    """The first engine whose ``accepts`` takes ``target``, opened on it."""
    for backend in backends():
        if backend.accepts(target):
            opened: StoreBackend = backend(
                target, synchronous=synchronous, busy_timeout_s=busy_timeout_s, schema=schema
            )
            return opened
    raise ValueError(f"no store backend takes {target!r}")  # SQLite takes every path


__all__ = ["StoreBackend", "backends", "open_backend"]
