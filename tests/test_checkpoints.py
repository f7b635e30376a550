"""WAL checkpoints on their own thread: the store's commits stop doing them, the thread
does them, and stopping hands them back."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from storage import Store
from storage.backends.sqlite_checkpoints import RESTART_FRAMES, WalCheckpoints


def _write(store: Store, rows: int) -> None:
    with store.db._tx() as conn:
        conn.executemany(
            "INSERT INTO quarantine (received_at, frame_message_id, reason, error, raw)"
            " VALUES (?, ?, 'not_json', '', ?)",
            [(0.0, f"f{i}", "x" * 2000) for i in range(rows)],
        )


def _autocheckpoint(store: Store) -> int:
    return int(store.conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0])


def test_commits_leave_checkpoints_to_the_thread(tmp_path):
    path = tmp_path / "dta.db"
    with Store(path) as store:
        checkpoints = WalCheckpoints(store.db, interval_s=0.05)
        checkpoints.start()
        try:
            assert _autocheckpoint(store) == 0
            before = os.path.getsize(path)
            for _ in range(20):  # well past SQLite's own 1,000-page threshold
                _write(store, 200)
            # Only a checkpoint moves pages from the log into the database file.
            wanted = before + 4_000_000
            deadline = time.monotonic() + 5
            while os.path.getsize(path) < wanted and time.monotonic() < deadline:
                time.sleep(0.05)
            assert os.path.getsize(path) >= wanted
            assert checkpoints.failures == 0
        finally:
            checkpoints.stop()
        assert _autocheckpoint(store) == 1000  # commits checkpoint again


def test_without_the_thread_the_database_file_waits_for_a_checkpoint(tmp_path):
    path = tmp_path / "dta.db"
    with Store(path) as store:
        store.db.set_autocheckpoint(False)
        before = os.path.getsize(path)
        for _ in range(20):
            _write(store, 200)
        time.sleep(0.2)
        assert os.path.getsize(path) == before  # everything still in the log


def test_postgresql_and_memory_stores_have_nothing_to_checkpoint():
    with Store(":memory:") as store:
        checkpoints = WalCheckpoints(store.db)
        assert not checkpoints.applies
        checkpoints.start()
        checkpoints.stop()


def test_the_write_probe_never_checkpoints(tmp_path):
    """The daemon's readiness probe commits every second; a checkpoint in its commit would
    hold up every writer (the daemon leaves checkpoints to their thread)."""
    path = tmp_path / "dta.db"
    with Store(path) as store:
        store.db.set_autocheckpoint(False)
        for _ in range(20):  # past SQLite's 1,000-page threshold for a commit to checkpoint
            _write(store, 200)
        before = os.path.getsize(path)
        assert store.probe().ok
        assert os.path.getsize(path) == before


def test_a_long_log_is_started_over_while_writers_keep_writing(tmp_path):
    """Writers that never pause would keep a passively checkpointed log from ever starting
    over; past ``RESTART_FRAMES`` the thread holds them once and restarts it."""
    path = tmp_path / "dta.db"
    wal = Path(f"{path}-wal")
    stop = threading.Event()
    batches = [0]
    enough = 5 * RESTART_FRAMES * 4096 / (20 * 2000)  # batches for five logs' worth of pages

    def write() -> None:
        with Store(path) as writer:
            writer.db.set_autocheckpoint(False)
            while not stop.is_set():
                _write(writer, 20)
                batches[0] += 1
                time.sleep(0.001)  # a steady stream, about as many pages a second as a burst

    with Store(path) as store:
        checkpoints = WalCheckpoints(store.db, interval_s=0.02)
        checkpoints.start()
        writer = threading.Thread(target=write)
        writer.start()
        largest = 0
        try:
            # until that much went through (however slow the machine), not for a fixed time
            deadline = time.monotonic() + 90
            while batches[0] < enough and time.monotonic() < deadline:
                largest = max(largest, wal.stat().st_size if wal.exists() else 0)
                time.sleep(0.02)
        finally:
            stop.set()
            writer.join()
            checkpoints.stop()
        written = store.conn.execute("SELECT COUNT(*) FROM quarantine").fetchone()[0]
    pages_written = written * 2000 / 4096  # about: each row is 2 kB of text
    assert pages_written > 4 * RESTART_FRAMES  # far more than one log's worth went through
    assert largest < 3 * RESTART_FRAMES * 4096  # yet the log stayed about one restart long
