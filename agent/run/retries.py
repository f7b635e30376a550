"""Runs waiting to go again: the store failed under them, or another replica holds their
thread. Each waits with back-off (doubling from its first wait, up to a most), and the
recovery pass (``Runtime.tick``) queues it again once its wait is over."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from agent.contracts import Event

log = logging.getLogger("dta.runtime")

RETRY_BASE_S = 0.5  # first wait before a run the store interrupted is driven again
RETRY_MAX_S = 30.0
THREAD_BUSY_WAIT_S = 0.2  # first wait when another replica is running the same thread
THREAD_BUSY_MAX_S = 2.0  # a person's next message waits no longer than this between looks


@dataclass
class _Retry:
    event: Event
    due: float
    tries: int


class RetryQueue:
    """The runs waiting out a store failure or a busy thread, by event id."""

    def __init__(self) -> None:
        self._waiting: dict[str, _Retry] = {}

    def __len__(self) -> int:
        return len(self._waiting)

    def __contains__(self, event_id: object) -> bool:
        return event_id in self._waiting

    def event_ids(self) -> set[str]:
        return set(self._waiting)

    def later(self, event: Event, exc: Exception | None, now: float) -> None:
        """The store failed under a run (``exc``), or another replica is working on the
        thread (None): the run stays ``working`` and goes again after a wait."""
        previous = self._waiting.get(event.event_id)
        tries = previous.tries + 1 if previous else 1
        base = RETRY_BASE_S if exc is not None else THREAD_BUSY_WAIT_S
        most = RETRY_MAX_S if exc is not None else THREAD_BUSY_MAX_S
        wait = min(most, base * 2 ** (tries - 1))
        self._waiting[event.event_id] = _Retry(event, now + wait, tries)
        if exc is None:
            log.info("thread busy on another replica", extra={"event_id": event.event_id})
            return
        log.warning(
            "store unavailable; run will be driven again",
            extra={"event_id": event.event_id, "in_s": wait, "error": str(exc)[:200]},
        )

    def take_due(self, now: float, force: bool = False) -> list[Event]:
        """The events whose wait is over (every one when ``force``), no longer waiting."""
        due = []
        for event_id, retry in list(self._waiting.items()):
            if force or retry.due <= now:
                del self._waiting[event_id]
                due.append(retry.event)
        return due

    def next_due(self) -> float | None:
        """When the soonest wait ends (None when nothing waits)."""
        return min((retry.due for retry in self._waiting.values()), default=None)
