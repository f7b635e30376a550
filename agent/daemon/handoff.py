"""Events from the connector's thread to the runtime's loop: in order, one wake-up a batch.

The connector stores and acks frames on its own thread, so an ack never waits behind the
pipeline. Each stored event still has to reach the loop that runs it. Waking the loop once
per event (``call_soon_threadsafe`` writes to its self-pipe every time) costs a system call
and a loop iteration per message under a burst; here events queue up while a hand-over is
pending and the loop takes all of them in one callback.

The thread that acks also competes for the interpreter lock with the loop: every SQLite
statement of the ingest releases it and must win it back. ``ACK_SWITCH_INTERVAL_S`` makes
the loop offer the lock sooner than Python's default 5 ms, so an ack waits behind a busy
pipeline for about a millisecond per statement rather than five.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable

from agent.contracts import Event

log = logging.getLogger("dta.connector")

ACK_SWITCH_INTERVAL_S = 0.001


class Handoff:
    """Call it from any thread with ``(event, generation)``; ``deliver`` runs on ``loop``."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, deliver: Callable[[Event, int], object]
    ) -> None:
        self._loop = loop
        self._deliver = deliver
        self._lock = threading.Lock()
        self._pending: list[tuple[Event, int]] = []
        self._scheduled = False

    def __call__(self, event: Event, generation: int) -> None:
        """Queue the event; raises ``RuntimeError`` when the loop is closed (the event is
        stored: the next start picks it up)."""
        with self._lock:
            self._pending.append((event, generation))
            if self._scheduled:
                return
            self._scheduled = True
        try:
            self._loop.call_soon_threadsafe(self._drain)
        except RuntimeError:
            with self._lock:
                self._scheduled = False
            raise

    def _drain(self) -> None:
        with self._lock:
            batch, self._pending = self._pending, []
            self._scheduled = False
        for event, generation in batch:
            try:
                self._deliver(event, generation)
            except Exception:  # one bad hand-over must not drop the rest of the batch
                log.exception("event not handed over; it waits in the store for recovery")
