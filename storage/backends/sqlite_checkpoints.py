"""The daemon's WAL checkpoints, on a thread of their own.

SQLite copies the write-ahead log back into the database file (a checkpoint) inside the
commit that finds the log past ``wal_autocheckpoint`` pages, and in ``synchronous=normal``
that commit also waits for two ``fsync`` calls: measured on this project's machines, one
commit in a hundred took 15-20 ms instead of 60 µs, and the loop waited that long with
every run on it. ``WalCheckpoints`` does the checkpoints instead, passively (never holding
up a writer or a reader), from its own connection on its own thread, so the daemon's
writers only append to the log. The thread spends its time in SQLite's C code, which runs
without the interpreter lock.

    checkpoints = WalCheckpoints(store)     # the store's own commits stop checkpointing
    checkpoints.start()
    ...
    checkpoints.stop()                      # one last checkpoint; commits checkpoint again

A writer starts the log over from its beginning only when the log was wholly copied as its
transaction began, which, with the daemon's two threads writing all the time, a checkpoint
running beside them almost never leaves: the log would grow without end (87 MB in five
seconds at 200 messages a second, measured). So once it passes ``RESTART_FRAMES``, the
thread holds this process's writers between two of their transactions and checkpoints the
rest in ``RESTART`` mode, after which the next writer starts the log over. The passive
checkpoint just before leaves only what was written meanwhile, so the writers wait for one
small copy and its syncs, about once a second under a burst.

Only for a SQLite file; the lab and the benchmarks' pipeline keep SQLite's inline default.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading

from agent.logs import FailureLog
from storage.backends.sqlite import SqliteBackend
from storage.base import StoreBase

log = logging.getLogger("dta.store")

# How often the log is checkpointed. Often and small: while a checkpoint syncs the files,
# a commit that grows the log can wait for the file system's journal, so the shorter each
# sync the shorter that wait (ack p99 at 200 msgs/s, three runs each: 4-9 ms at 0.05 s,
# 7-12 ms at 0.1 s, 9-14 ms at 0.25 s, 17-132 ms at 1 s). A log with nothing new costs
# nothing: no pages to copy, no sync.
INTERVAL_S = 0.05
RESTART_FRAMES = 4096  # a log this long (16 MiB at 4 KiB pages) is started over
# How long the restart waits for another process's writer or a reader; then it is left for
# the next look (this process's writers are held meanwhile, so never long).
RESTART_WAIT_MS = 100


class WalCheckpoints:
    def __init__(self, store: StoreBase, interval_s: float = INTERVAL_S) -> None:
        self.store = store
        self.interval_s = interval_s
        # A locked or full store fails every look: one warning a minute, and one when cleared.
        self._failures = FailureLog(log, "WAL checkpoint failed; commits append to the log")
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def failures(self) -> int:
        return self._failures.failures

    @property
    def applies(self) -> bool:
        return isinstance(self.store.engine, SqliteBackend) and self.store.engine.file is not None

    def start(self) -> None:
        """Take the checkpoints over from the store's own commits (they keep them if this
        cannot open its connection)."""
        if not self.applies or self._thread is not None:
            return
        try:
            conn = sqlite3.connect(
                self.store.path,
                isolation_level=None,
                timeout=RESTART_WAIT_MS / 1000,
                check_same_thread=False,
            )
        except sqlite3.Error as exc:
            log.warning("WAL checkpoints left to commits", extra={"error": str(exc)})
            return
        self.store.set_autocheckpoint(False)
        self._thread = threading.Thread(
            target=self._run, args=(conn,), name="dta-wal-checkpoints", daemon=True
        )
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._stopping.set()
        thread.join(timeout_s)
        with contextlib.suppress(sqlite3.Error):  # a store gone or broken says so itself
            self.store.set_autocheckpoint(True)

    def _run(self, conn: sqlite3.Connection) -> None:
        try:
            while not self._stopping.wait(self.interval_s):
                self._once(conn)
            self._once(conn)  # a last one on the way out
        finally:
            conn.close()

    def _once(self, conn: sqlite3.Connection) -> None:
        """A passive checkpoint (it copies what no reader still needs and waits for nobody),
        and a restart of the log once it has grown long."""
        try:
            _, logged, _ = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            if logged >= RESTART_FRAMES:
                with self.store.writers_held():
                    conn.execute("PRAGMA wal_checkpoint(RESTART)").fetchone()
        except sqlite3.Error as exc:
            # A locked, full or vanished store: the daemon's store monitor reports and
            # acts on it; checkpoints go on at the next interval.
            self._failures.failed(exc)
        else:
            self._failures.succeeded()
