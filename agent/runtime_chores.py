"""The recovery pass's chores beside the queue (``agent/runtime.py``): what stops left on the
carriers settled (AI cards of ended runs closed, reactions still owed recalled), acts left
``uncertain`` read back (and their askers told). A chore that fails returns 0: a store outage is the
next pass's to retry, said nowhere; anything else is logged with its traceback."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence

from agent.acts.executor import Resolved
from agent.acts.settle import checked_event
from agent.clock import Clock
from agent.components import ActParts
from agent.contracts import ActionIntent, ReceiptStatus
from agent.run.carriers import Carriers
from storage import Store
from storage.patience import is_transient

log = logging.getLogger("dta.runtime")


class RuntimeChores:
    """What the recovery pass does beside queueing runs (``Runtime.tick``'s companions)."""

    def __init__(
        self, store: Store, clock: Clock, carriers: Carriers, acts: ActParts | None
    ) -> None:
        self.store = store
        self.clock = clock
        self.carriers = carriers
        self.acts = acts

    async def sweep_carriers(self, msgtypes: Sequence[str] = (), everything: bool = False) -> int:
        """What stops left on the carriers (those of ``msgtypes``, or all), settled: AI
        cards of ended runs closed, working-signal reactions still on people's messages
        recalled with back-off (``everything``: each once now, at start-up)."""
        return await self.carriers.sweep(everything, msgtypes)

    async def settle_acts(self) -> int:
        """Read back the acts left ``uncertain`` (a timeout, a crash after the call)."""
        acts = self.acts
        if acts is None:
            return 0
        return await _unless_failed(
            lambda: acts.runner.executor.settle_uncertain(self._tell_checked),
            "reading back uncertain acts failed",
        )

    async def _tell_checked(self, intent: ActionIntent, resolved: Resolved) -> None:
        """An act its asker was told is not confirmed has been read back: they are owed a
        word (its event is stored once; the pick-up runs it)."""
        if resolved.was is not ReceiptStatus.UNCERTAIN:
            return
        # stored even while the act's own run is still answering: it queues behind that
        # run on the asker's thread, so the word promised there is never lost
        event = checked_event(intent, self.clock.now())
        self.store.events.add_event(event, event.to_json(), supersedes=False)


async def _unless_failed(chore: Callable[[], Awaitable[int]], failed: str) -> int:
    """The chore's count, or 0 when it failed (logged unless the store is down)."""
    try:
        return await chore()
    except Exception as exc:
        if not is_transient(exc):
            log.exception(failed)
        return 0
