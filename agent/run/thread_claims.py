"""With replicas on one store, a thread's runs stay serial across processes: a run first
claims its thread's lease in the store, in arrival order (in one process the dispatcher
already keeps them so, and an exclusive store needs no claim). The leases held are renewed
by the recovery pass and let go when their run ends or the runtime stops."""

from __future__ import annotations

import logging

from agent.clock import Clock
from agent.contracts import Event
from storage import Lease, Store

log = logging.getLogger("dta.runtime")


class ThreadClaims:
    """This owner's thread leases in a shared store."""

    def __init__(
        self, store: Store, owner: str, clock: Clock, lease_s: float, max_event_age_s: float
    ) -> None:
        self.store = store
        self.owner = owner
        self.clock = clock
        self.lease_s = lease_s
        self.max_event_age_s = max_event_age_s
        self._held: set[str] = set()

    def held(self) -> list[str]:
        """The thread keys whose leases this owner holds, sorted."""
        return sorted(self._held)

    def claim(self, event: Event) -> bool:
        """Take the event's thread in the store, if nobody else's run of it comes first. A
        message whose claim fails waits; the next one of the same person cannot go before
        it either, since its own claim sees this one unfinished."""
        if self.store.exclusive:
            return True
        now = self.clock.now()
        lease = Lease(self.owner, now + self.lease_s, now)
        since = now - self.max_event_age_s  # older ones are stale: they cannot wait
        if not self.store.work.claim_thread(event.thread_key, lease, event.event_id, since):
            return False
        self._held.add(event.thread_key)
        return True

    def release(self, thread_key: str) -> None:
        self._held.discard(thread_key)
        try:
            self.store.work.release_thread(thread_key, self.owner)
        except Exception as exc:  # an unreleased lease simply expires: said, not raised
            log.warning(
                "thread lease not released; it expires on its own",
                extra={"thread_key": thread_key, "error": str(exc)[:200]},
            )
