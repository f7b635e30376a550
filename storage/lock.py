"""One daemon per SQLite store, and a store that went missing is not silently replaced.

Why: two daemons on one file each take the other's in-flight attempts for crash leftovers
(an intent both ``uncertain`` and ``accepted``, events run twice). And a daemon started on
an empty file where a store used to be would answer again every old message DingTalk
redelivers, because the dedupe record went with the old file.

The lock follows the file, not the path's spelling. A symlink is resolved first, so every
name of it finds the same ``<store>.lock``; and a hard link (another name of the same
inode, with its own ``-wal`` beside it: two daemons on it corrupt the store) meets the
second lock, which is on the database file itself. Both are needed: the lock file exists
before the database does, and the database's own lock is the one no other name escapes.

The lock file ``<store>.lock`` (beside the resolved store) does both jobs:

* ``dta run`` holds ``flock(LOCK_EX | LOCK_NB)`` on it for its whole life, and on the
  database file too once it exists. The kernel drops both when the process ends, however
  it ends (``kill -9`` included), so there is no stale lock to clean up. (``flock`` locks
  are apart from the POSIX locks SQLite takes on the same file; the descriptor is closed
  only after the store is, since closing any descriptor of the file drops this process's
  POSIX locks on it.) The file says who holds it — ``{"pid", "host", "since",
  "store_id"}`` as JSON — so a second ``dta run`` refuses with one line naming the holder.
* The file outlives the database: it is never deleted. ``store_id`` is the id the first
  daemon wrote into the store (``store_meta``, see ``storage/integrity.py``). At the next
  start, a lock file with a ``store_id`` and no database file means "a store existed here
  and is gone": refused, unless ``dta run --new-store``. A database whose id differs (or
  that has none: an empty file some other command created) is refused the same way.

Other commands (``doctor``, ``store``, ``memory``, ``dev say``…) open the store without the
lock: reading, and pruning under SQLite's own write lock, are safe beside a daemon. On
PostgreSQL, run leases take this role; ``claim_store`` is the one place that decides.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import socket
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Self

from storage.base import StoreBase
from storage.integrity import (
    StoreError,
    StoreProblem,
    assign_store_id,
    classify,
    quick_check,
    read_store_id,
    remedy,
)

log = logging.getLogger("dta.store")

JOURNAL_SUFFIXES = ("-wal", "-shm", "-journal")


@dataclass(frozen=True)
class LockHolder:
    """What the lock file says about the daemon holding (or last holding) the store."""

    pid: int | None = None
    host: str | None = None
    since: float | None = None
    store_id: str | None = None

    @classmethod
    def parse(cls, text: str) -> LockHolder:
        try:
            data = json.loads(text) if text.strip() else {}
        except ValueError:
            return cls()
        if not isinstance(data, dict):
            return cls()
        known = {k: data.get(k) for k in ("pid", "host", "since", "store_id")}
        return cls(**known)

    def describe(self) -> str:
        since = (
            time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.since))
            if isinstance(self.since, int | float)
            else "an unknown time"
        )
        return f"pid {self.pid or '?'} on {self.host or '?'} since {since}"


def lock_path(store_path: str | Path) -> Path:
    return Path(f"{store_path}.lock")


class StoreLock:
    """The OS locks on ``<store>.lock`` and on the database file; released by ``release``
    or the end of the process."""

    def __init__(self, store_path: str | Path) -> None:
        self.store_path = Path(store_path)
        resolved = Path(os.path.realpath(store_path))  # every symlink's name, one lock
        self.path = lock_path(resolved)
        self.database = resolved
        self.previous = LockHolder()  # what the file said before we took it
        self._fd: int | None = None
        self._database_fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> Self:
        """Take the lock or raise ``StoreError`` (``store_in_use``) naming the holder."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise StoreError(
                classify(exc),
                f"cannot lock store {self.store_path} ({self.path}: {exc.strerror or exc}):"
                " make its directory writable for this user",
            ) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = self._read_holder(fd)
            os.close(fd)
            raise StoreError(
                StoreProblem.IN_USE,
                f"store {self.store_path} is in use by another dta run ({holder.describe()});"
                " stop it first: one daemon per store",
            ) from None
        self._fd = fd
        self.previous = self._read(fd)
        self._write(LockHolder(os.getpid(), socket.gethostname(), time.time(), None))
        return self

    def hold_database(self) -> None:
        """Lock the database file itself (it must exist): a hard link is another name of
        the same file, and its lock file another file, so only this lock stops it."""
        if self._database_fd is not None:
            return
        try:
            fd = os.open(self.database, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            raise StoreError(
                classify(exc), f"cannot lock store {self.store_path}: {exc.strerror or exc}"
            ) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise StoreError(
                StoreProblem.IN_USE,
                f"store {self.store_path} is in use by another dta run under another name"
                f" (a hard link to the same file, inode {os.stat(self.database).st_ino});"
                " stop it first: one daemon per store",
            ) from None
        self._database_fd = fd

    def _read_holder(self, fd: int) -> LockHolder:
        """The holder writes its name right after taking the lock: allow it a moment."""
        holder = self._read(fd)
        for _ in range(10):
            if holder.pid is not None:
                break
            time.sleep(0.02)
            holder = self._read(fd)
        return holder

    @staticmethod
    def _read(fd: int) -> LockHolder:
        try:
            return LockHolder.parse(os.pread(fd, 64 * 1024, 0).decode("utf-8", "replace"))
        except OSError:
            return LockHolder()

    def _write(self, holder: LockHolder) -> None:
        assert self._fd is not None
        data = (json.dumps(asdict(holder)) + "\n").encode()
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, data, 0)
        os.fsync(self._fd)

    def record_store(self, store_id: str) -> None:
        """Remember which store this daemon runs on (see the module docstring)."""
        self._write(LockHolder(os.getpid(), socket.gethostname(), time.time(), store_id))

    def release(self) -> None:
        """Unlock; the file stays (it remembers the store, and removing it would race).
        Called once the store is closed (see the module docstring)."""
        if self._database_fd is not None:
            os.close(self._database_fd)  # closing the descriptor drops its flock
            self._database_fd = None
        if self._fd is not None:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            finally:
                os.close(self._fd)
                self._fd = None

    def __enter__(self) -> Self:
        return self if self.held else self.acquire()

    def __exit__(self, *exc_info: Any) -> None:
        self.release()


def claim_store(
    store_path: str | Path, *, new_store: bool = False, synchronous: str = "normal"
) -> StoreLock:
    """Everything ``dta run`` checks before it touches the store; the held lock, or
    ``StoreError`` with the one line to print.

    In order: the lock (another daemon?); a store that existed and is missing; opening
    (corrupt header, a newer schema, read-only); a write probe (read-only file); a quick
    check of every page (corruption inside); the store's id against the one remembered.
    """
    lock = StoreLock(store_path).acquire()
    path = lock.database
    try:
        remembered = lock.previous.store_id
        if path.exists():
            lock.hold_database()  # before SQLite opens it: a hard link's WAL is another file
        else:
            if remembered and not new_store:
                raise StoreError(
                    StoreProblem.MISSING,
                    f"store {path} is missing, but a store ran here before (id {remembered},"
                    f" {lock.previous.describe()}); messages DingTalk redelivers would be"
                    " answered again. Restore it, or start with --new-store to begin empty",
                )
            _remove_stale_journal(path)
        store_id = _check_store(path, synchronous, remembered, new_store)
        lock.hold_database()  # created just now, if it was missing
        lock.record_store(store_id)
    except BaseException:
        lock.release()
        raise
    return lock


def _check_store(path: Path, synchronous: str, remembered: str | None, new_store: bool) -> str:
    with StoreBase(path, synchronous) as store:  # StoreError: corrupt header, schema, perms
        health = store.probe(timeout_s=2.0)
        if health.problem in (StoreProblem.READONLY, StoreProblem.CORRUPT):
            raise StoreError(
                health.problem,
                f"store {path} cannot take writes ({health.problem}: {health.detail}):"
                f" {remedy(health.problem)}",
            )
        started = time.monotonic()
        check = quick_check(store.conn)
        if not check.ok:
            raise StoreError(
                StoreProblem.CORRUPT,
                f"store {path} is corrupt ({check.detail}): {remedy(StoreProblem.CORRUPT)}",
            )
        checked_s = round(time.monotonic() - started, 3)
        found = read_store_id(store.conn)
        if remembered and found != remembered and new_store:
            log.warning(
                "starting on a new store (--new-store): messages answered before may be"
                " answered again if DingTalk redelivers them",
                extra={"store": str(path), "previous_id": remembered, "store_id": found},
            )
        elif remembered and found != remembered:
            raise StoreError(
                StoreProblem.REPLACED,
                f"store {path} is not the store the last daemon here ran on (id"
                f" {found or 'none'}, expected {remembered}); messages DingTalk redelivers"
                " could be answered again. Restore it, or start with --new-store to accept it",
            )
        log.info("store checked", extra={"store": str(path), "quick_check_s": checked_s})
        try:
            return found or assign_store_id(store.conn)
        except Exception as exc:
            problem = classify(exc)
            detail = f"store {path} cannot take writes ({problem}: {exc}): {remedy(problem)}"
            raise StoreError(problem, detail) from exc


def _remove_stale_journal(path: Path) -> None:
    """A WAL left by a deleted store would be replayed into the new, empty one."""
    for suffix in JOURNAL_SUFFIXES:
        stale = Path(f"{path}{suffix}")
        if stale.exists():
            log.warning("removing a journal left by a missing store", extra={"file": str(stale)})
            stale.unlink()
