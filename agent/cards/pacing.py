"""When a card call may go: one card's calls spaced out, the whole app's under one budget.

DingTalk throttles the card APIs per app (HTTP 403 ``QpsLimit`` once two or three people
stream at once, in peers' trackers). So every card call — create, frame, finished state —
first takes a slot in a per-second budget kept in the store, where every replica on the
same database counts against the same number, and a card's frames stay at least
``interval_s`` apart. A call DingTalk still throttles provably took nothing: it waits (at
least the throttle's one-second window, doubling) and goes again. For a frame, "again"
means the text as it is by then: a frame carries the full text so far, so the frames that
came in between are merged into it, never lost. Nothing is recorded as sent while a call
waits here: its attempt is stored only as it leaves (agent/cards/broker.py).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable

from agent.cards.api import CardAnswer
from agent.clock import Clock
from agent.crashpoints import CrashPoints
from storage import Store

THROTTLE_WAIT_S = 1.0  # a QPS window is one second: sooner meets the same full window
MAX_WAIT_S = 8.0


class CardPacer:
    def __init__(
        self,
        store: Store,
        clock: Clock,
        interval_s: float,
        per_second: float,
        crash: CrashPoints | None = None,
    ) -> None:
        self.store = store
        self.clock = clock
        self.crash = crash or CrashPoints()
        self.interval_s = interval_s
        # Budgets under one call per second are counted over longer windows.
        self.window_s = max(1, math.ceil(1 / per_second))
        self.limit = max(1, round(per_second * self.window_s))

    async def slot(self) -> None:
        """Wait for a slot in the app-wide budget (every process on the store shares it)."""
        while True:
            now = self.clock.now()
            window = int(now // self.window_s)
            if self.store.cards.take_card_slot(window, self.limit):
                return
            self.crash.hit("card_call_waits")
            await self.clock.sleep(max(0.001, (window + 1) * self.window_s - now))

    async def call(
        self,
        last_call: list[float] | None,
        send: Callable[[], Awaitable[CardAnswer]],
        deadline: float | None = None,
        give_up: Callable[[], bool] | None = None,
    ) -> tuple[CardAnswer, int]:
        """Make one card call when its turn comes, and again after a wait while DingTalk
        provably took nothing (throttled, never sent) — until ``deadline`` passes or
        ``give_up()`` says the call no longer matters. Returns the last answer and how many
        times it was refused for speed.

        ``last_call`` holds the card's last frame time (a slot shared with the caller), so
        its intermediate frames keep their interval; None for the calls that open and close
        a card, which go as soon as the app's budget allows. ``send`` is called afresh each
        time: a frame sends the text as it is by then.
        """
        tries = 0
        while True:
            if last_call is not None:
                wait = last_call[0] + self.interval_s - self.clock.now()
                if wait > 0:
                    await self.clock.sleep(wait)
            await self.slot()
            if last_call is not None:
                last_call[0] = self.clock.now()
            answer = await send()
            if not answer.retryable:
                return answer, tries
            tries += 1
            late = deadline is not None and self.clock.now() >= deadline
            if late or (give_up is not None and give_up()):
                return answer, tries
            self.crash.hit("card_call_waits")
            await self.clock.sleep(min(MAX_WAIT_S, THROTTLE_WAIT_S * 2 ** (tries - 1)))
