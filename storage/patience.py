"""Writes that must not be lost: a locked database is waited out, without blocking the loop.

SQLite's own busy timeout already waits inside each statement. A receipt written right
after a send is worth more than that: if another process (a ``dta store prune``, a backup)
holds the lock for longer, the write is tried again a few times, sleeping asynchronously in
between so the stream connection keeps answering pings. Only then does the error surface —
and the open attempt left behind is reconciled as ``uncertain`` at the next start.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Callable
from typing import TypeVar

import psycopg
from tenacity import (
    AsyncRetrying,
    before_sleep_log,
    retry_if_exception_type,
    stop_after_attempt,
    stop_never,
    wait_exponential,
)

log = logging.getLogger("dta.store")

T = TypeVar("T")
# What the store raises while it cannot take writes for a while: SQLite's lock outlasted
# its timeout, the disk (or max_page_count) is full, an I/O error; PostgreSQL's server went
# away, a lock or statement timed out, a serialization failure or deadlock. The data is
# intact; waiting helps. (A corrupt SQLite file raises the parent class,
# sqlite3.DatabaseError: waiting does not.)
StoreUnavailable: tuple[type[Exception], ...] = (sqlite3.OperationalError, psycopg.OperationalError)


def is_transient(exc: BaseException) -> bool:
    """True for a store failure that may pass: the work waits and is tried again."""
    return isinstance(exc, StoreUnavailable)


async def patiently(write: Callable[[], T], attempts: int | None = 5, wait_s: float = 0.5) -> T:
    """Run ``write`` (one store transaction), retrying while the database is unavailable.

    ``attempts=None`` waits for as long as it takes (a receipt of something that may have
    reached the person is never given up while the daemon runs; a stop cancels the wait).
    The first try runs without the retry machinery: almost every write succeeds at once.
    """
    try:
        return write()
    except StoreUnavailable as exc:
        log.warning("store unavailable; trying again", extra={"error": str(exc)[:200]})
        if attempts == 1:
            raise
    await asyncio.sleep(wait_s)
    async for attempt in AsyncRetrying(
        retry=retry_if_exception_type(StoreUnavailable),
        stop=stop_after_attempt(attempts - 1) if attempts is not None else stop_never,
        wait=wait_exponential(multiplier=wait_s, max=8 * wait_s),
        before_sleep=before_sleep_log(log, logging.WARNING),
        reraise=True,
    ):
        with attempt:
            return write()
    raise AssertionError("unreachable: AsyncRetrying either returns or reraises")
