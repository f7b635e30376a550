"""Messages to one chat go one after another, ``send_gap_s`` apart.

DingTalk may show messages sent to one conversation within about a second of each other in
the wrong order (../shared/dingtalk-platform.md). So the broker takes a conversation's turn
before each message to it: the message starts no sooner than ``gap_s`` after the one before
it there was done (so it arrives at least that long after it). Other conversations never wait on it.
Real time on purpose (the loop's clock): it is the screen's order, not the lab's clock.

    spacing = SendSpacing(1.0)
    async with spacing.turn(conversation_id):
        ...send...
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class SendSpacing:
    def __init__(self, gap_s: float) -> None:
        self.gap_s = gap_s
        self._locks: dict[str, asyncio.Lock] = {}
        # conversation -> the loop time its next send may start, oldest first: what has
        # passed is forgotten as new sends come, so memory holds about a gap's worth
        self._next: OrderedDict[str, float] = OrderedDict()

    @asynccontextmanager
    async def turn(self, conversation_id: str) -> AsyncIterator[None]:
        if self.gap_s <= 0:
            yield
            return
        lock = self._locks.get(conversation_id)
        if lock is None:
            lock = self._locks[conversation_id] = asyncio.Lock()
        async with lock:
            loop = asyncio.get_running_loop()
            wait = self._next.get(conversation_id, 0.0) - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            try:
                yield
            finally:
                # Counted from the end of this send: DingTalk had it by then, so the next
                # one arrives at least ``gap_s`` after it, however long this one took.
                self._next[conversation_id] = loop.time() + self.gap_s
                self._next.move_to_end(conversation_id)
        self._forget_passed(asyncio.get_running_loop().time())

    def _forget_passed(self, now: float) -> None:
        """Drop the conversations whose gap has passed and that nobody is sending to."""
        while self._next:
            conversation_id, at = next(iter(self._next.items()))
            lock = self._locks.get(conversation_id)
            if at > now or (lock is not None and lock.locked()):
                return
            del self._next[conversation_id]
            self._locks.pop(conversation_id, None)
