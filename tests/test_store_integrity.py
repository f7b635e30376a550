"""The store's write probe, its instance lock and start-up claim, on real SQLite files.

Faults are made the way they happen: a full store with ``max_page_count`` (SQLite's own
SQLITE_FULL), a lock held by another connection's ``BEGIN IMMEDIATE``, the file unlinked or
replaced under an open handle, pages overwritten in the middle of the file, an immutable file.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from storage import Store
from storage.integrity import StoreError, StoreProblem, quick_check
from storage.lock import StoreLock, claim_store, lock_path
from tests.environment import unavailable

PAGE = 4096


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(tmp_path / "dta.db")
    yield s
    s.close()


def fill(store: Store, rows: int = 400) -> None:
    """Enough rows that the file has pages in the middle to damage, all checkpointed."""
    with store.db._tx() as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS filler (x TEXT)")
        conn.executemany("INSERT INTO filler VALUES (?)", [("x" * 500,) for _ in range(rows)])
    store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def corrupt_middle(path: Path) -> None:
    size = path.stat().st_size
    middle = (size // 2) // PAGE * PAGE
    with path.open("r+b") as f:
        f.seek(middle)
        f.write(os.urandom(3 * PAGE))


def corrupt_header(path: Path) -> None:
    with path.open("r+b") as f:
        f.write(os.urandom(100))


@contextmanager
def read_only(path: Path) -> Iterator[None]:
    """chmod for a normal user; root ignores modes, so the file is made immutable instead."""
    if os.geteuid() != 0:
        path.chmod(0o444)
        try:
            yield
        finally:
            path.chmod(0o644)
        return
    if shutil.which("chattr") is None:
        unavailable("running as root without chattr: cannot make a file read-only")
    done = subprocess.run(["chattr", "+i", str(path)], capture_output=True)
    if done.returncode != 0:
        unavailable(f"chattr +i not supported here: {done.stderr.decode().strip()}")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


# ---------------------------------------------------------------------- the probe


def test_probe_writes_and_commits(store: Store) -> None:
    health = store.probe()
    assert health.ok and health.problem is None
    assert store.writable()
    at = store.conn.execute("SELECT value FROM store_meta WHERE key = 'probe'").fetchone()[0]
    assert abs(at - time.time()) < 5
    assert store.conn.execute("SELECT COUNT(*) FROM store_meta").fetchone()[0] == 1


def test_probe_sees_a_full_store(store: Store) -> None:
    store.conn.execute("VACUUM")  # no free pages to reuse: the next page must grow the file
    pages = store.conn.execute("PRAGMA page_count").fetchone()[0]
    health = store.probe(page_limit=pages)
    assert not health.ok and health.problem is StoreProblem.FULL, health
    assert not health.fatal


def test_probe_carries_the_store_connections_page_limit(store: Store) -> None:
    store.conn.execute("VACUUM")
    pages = store.conn.execute("PRAGMA page_count").fetchone()[0]
    store.conn.execute(f"PRAGMA max_page_count = {pages}")
    assert store.probe(page_limit=store.page_limit()).problem is StoreProblem.FULL
    store.conn.execute("PRAGMA max_page_count = 1073741823")
    assert store.probe(page_limit=store.page_limit()).ok


def test_probe_gives_up_on_a_held_lock_after_its_own_timeout(store: Store) -> None:
    holder = sqlite3.connect(store.path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        started = time.monotonic()
        health = store.probe(timeout_s=0.2)
        took = time.monotonic() - started
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert health.problem is StoreProblem.LOCKED and not health.fatal
    assert took < 2, "the probe must not wait for the store's ten-second busy timeout"
    assert store.probe().ok  # transient: passes once the lock is gone


def test_probe_sees_a_deleted_store_and_never_recreates_it(store: Store) -> None:
    path = Path(store.path)
    os.unlink(path)
    health = store.probe()
    assert health.problem is StoreProblem.DELETED and health.fatal
    assert not path.exists()
    # the open handle still writes happily into the unlinked file: that is the danger
    store.conn.execute("CREATE TABLE still_writing (x)")


def test_probe_sees_a_replaced_store(store: Store, tmp_path: Path) -> None:
    other = Store(tmp_path / "other.db")
    other.close()
    os.replace(tmp_path / "other.db", store.path)
    health = store.probe()
    assert health.problem is StoreProblem.REPLACED and health.fatal


def test_probe_sees_a_corrupt_header(store: Store) -> None:
    store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    corrupt_header(Path(store.path))
    health = store.probe()
    assert health.problem is StoreProblem.CORRUPT and health.fatal, health


def test_quick_check_finds_pages_corrupted_in_the_middle(store: Store) -> None:
    fill(store)
    assert quick_check(store.conn).ok
    corrupt_middle(Path(store.path))
    fresh = sqlite3.connect(store.path)
    try:
        health = quick_check(fresh)
    finally:
        fresh.close()
    assert health.problem is StoreProblem.CORRUPT and health.fatal, health


def test_probe_sees_a_read_only_store(store: Store) -> None:
    store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    with read_only(Path(store.path)):
        health = store.probe()
    assert health.problem is StoreProblem.READONLY, health


# ---------------------------------------------------------------------- opening


def test_store_is_a_context_manager(tmp_path: Path) -> None:
    with Store(tmp_path / "dta.db") as s:
        assert s.counts().events == 0
    with pytest.raises(sqlite3.ProgrammingError):
        s.counts()


def test_opening_a_corrupt_file_raises_one_line(tmp_path: Path) -> None:
    path = tmp_path / "dta.db"
    path.write_bytes(os.urandom(8 * PAGE))
    with pytest.raises(StoreError) as raised:
        Store(path)
    assert raised.value.problem is StoreProblem.CORRUPT
    assert "\n" not in str(raised.value) and str(path) in str(raised.value)


def test_opening_a_store_from_a_newer_dta_raises_one_line(tmp_path: Path) -> None:
    path = tmp_path / "dta.db"
    Store(path).close()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 999")
    conn.close()
    with pytest.raises(StoreError) as raised:
        Store(path)
    assert raised.value.problem is StoreProblem.SCHEMA
    assert "999" in str(raised.value) and "\n" not in str(raised.value)


# ---------------------------------------------------------------------- the lock


def test_a_second_lock_is_refused_naming_the_holder(tmp_path: Path) -> None:
    path = tmp_path / "dta.db"
    with StoreLock(path):
        with pytest.raises(StoreError) as raised:
            StoreLock(path).acquire()
        message = str(raised.value)
        assert raised.value.problem is StoreProblem.IN_USE
        assert f"pid {os.getpid()}" in message and "since" in message
    with StoreLock(path) as again:  # released on exit
        assert again.held


HOLDER = """
import sys, time
from storage.lock import StoreLock
StoreLock(sys.argv[1]).acquire()
print("locked", flush=True)
time.sleep(60)
"""


def test_the_lock_is_released_when_its_holder_is_killed(tmp_path: Path) -> None:
    path = tmp_path / "dta.db"
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path)], cwd=root, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
        with pytest.raises(StoreError) as raised:
            StoreLock(path).acquire()
        assert f"pid {proc.pid}" in str(raised.value)
    finally:
        proc.kill()
        proc.wait(timeout=10)
    with StoreLock(path) as lock:  # kill -9 left no stale lock behind
        assert lock.held and lock.previous.pid == proc.pid


# ---------------------------------------------------------------------- the claim


def test_claim_remembers_the_store_and_refuses_it_missing(tmp_path: Path) -> None:
    path = tmp_path / "dta.db"
    claim_store(path).release()
    assert '"store_id"' in lock_path(path).read_text()
    claim_store(path).release()  # the same store: fine
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    with pytest.raises(StoreError) as raised:
        claim_store(path)
    assert raised.value.problem is StoreProblem.MISSING and "--new-store" in str(raised.value)
    assert not path.exists(), "a refused start must not leave an empty store behind"
    claim_store(path, new_store=True).release()
    claim_store(path).release()  # the new store is now the remembered one


def test_claim_refuses_an_empty_file_created_where_the_store_was(tmp_path: Path) -> None:
    path = tmp_path / "dta.db"
    claim_store(path).release()
    path.unlink()
    Store(path).close()  # e.g. `dta store stats` after the deletion
    with pytest.raises(StoreError) as raised:
        claim_store(path)
    assert raised.value.problem is StoreProblem.REPLACED


def test_claim_with_a_new_store_removes_a_journal_left_by_the_old_one(tmp_path: Path) -> None:
    path = tmp_path / "dta.db"
    claim_store(path).release()
    wal = Path(f"{path}-wal")
    wal.write_bytes(b"left by a store that is gone")
    path.unlink()
    claim_store(path, new_store=True).release()
    assert not wal.exists() or wal.read_bytes() != b"left by a store that is gone"


def test_claim_refuses_a_corrupt_store(tmp_path: Path) -> None:
    path = tmp_path / "dta.db"
    with Store(path) as s:
        fill(s)
    corrupt_middle(path)
    with pytest.raises(StoreError) as raised:
        claim_store(path)
    assert raised.value.problem is StoreProblem.CORRUPT
    StoreLock(path).acquire().release()  # a refusal releases the lock


def test_claim_refuses_a_read_only_store(tmp_path: Path) -> None:
    path = tmp_path / "dta.db"
    claim_store(path).release()
    with read_only(path), pytest.raises(StoreError) as raised:
        claim_store(path)
    assert raised.value.problem is StoreProblem.READONLY


def test_claim_refuses_while_another_daemon_holds_the_store(tmp_path: Path) -> None:
    path = tmp_path / "dta.db"
    with claim_store(path), pytest.raises(StoreError) as raised:
        claim_store(path)
    assert raised.value.problem is StoreProblem.IN_USE


@pytest.mark.parametrize("link", ["symlink", "hard link"])
def test_another_name_of_the_store_is_refused_too(tmp_path: Path, link: str) -> None:
    """The lock follows the file, not the path's spelling: a symlink resolves to the same
    lock file, and a hard link (its own lock file, its own -wal) meets the lock on the
    database file itself, before SQLite opens it."""
    (tmp_path / "d1").mkdir()
    (tmp_path / "d2").mkdir()
    path = tmp_path / "d1" / "dta.db"
    other = tmp_path / "d2" / "dta.db"
    with claim_store(path) as held:
        if link == "symlink":
            other.symlink_to(path)
        else:
            os.link(path, other)
        with pytest.raises(StoreError) as raised:
            claim_store(other)
        assert raised.value.problem is StoreProblem.IN_USE
        assert "\n" not in str(raised.value) and "in use by another dta run" in str(raised.value)
        assert not (tmp_path / "d2" / "dta.db-wal").exists(), "refused before SQLite opened it"
        assert held.held
    claim_store(other).release()  # once the first daemon is gone, either name may run


def test_writers_of_one_file_in_this_process_take_turns(tmp_path: Path) -> None:
    """Two connections (the connector's and the loop's) wait for each other's commit on a
    lock of their own; a turn held past the busy timeout reads as "database is locked"."""
    first = Store(tmp_path / "dta.db", busy_timeout_s=5.0)
    second = Store(tmp_path / "dta.db", busy_timeout_s=0.2)
    try:
        with (
            first.db._tx(),
            pytest.raises(sqlite3.OperationalError, match="locked"),
            second.db._tx(),
        ):
            pass
        holding, released = threading.Event(), threading.Event()

        def hold() -> None:  # a connection of the thread's own, as the connector has
            theirs = Store(tmp_path / "dta.db", busy_timeout_s=5.0)
            with theirs.db._tx():
                holding.set()
                released.wait(5)
            theirs.close()

        thread = threading.Thread(target=hold)
        thread.start()
        holding.wait(5)
        threading.Timer(0.1, released.set).start()
        with first.db._tx() as conn:  # waits for the thread's commit, then writes
            conn.execute("INSERT INTO threads (thread_key, generation) VALUES ('t', 1)")
        thread.join(5)
        assert second.events.thread_generation("t") == 1
    finally:
        first.close()
        second.close()
