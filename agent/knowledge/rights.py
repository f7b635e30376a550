"""Who may read a doc: DingTalk's answer for the asker, before any of its sections reaches a
model.

The asker's staff id becomes a unionId (the directory), and DingTalk is asked whether that
unionId may read the doc (``KnowledgeClient.can_read``, a permission probe). The answer is
kept per asker and doc for ``knowledge_permission_ttl_s`` and only while the doc's modified
time is the one it was given for. A probe that fails (throttled, unavailable) is neither yes
nor no (``None``): the section is not shown on a guess, and the asker is not told they may
not read what they perhaps may. Only an engaged run asks (a silenced event never gets
here), and only about the docs its search found.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

from agent.clock import Clock
from storage import Store

log = logging.getLogger("dta.knowledge")


class CanRead(Protocol):
    async def can_read(self, doc_id: str, operator: str) -> bool: ...


class ReadRights:
    def __init__(
        self,
        *,
        store: Store,
        clock: Clock,
        client: CanRead,
        union_id: Callable[[str], Awaitable[str]],
        ttl_s: float,
    ) -> None:
        self.store = store
        self.clock = clock
        self.client = client
        self.union_id = union_id  # staff id → unionId (the directory)
        self.ttl_s = ttl_s

    async def may_read(self, user_id: str, doc_id: str, modified_at: float | None) -> bool | None:
        """True or False as DingTalk says; None when it could not be asked."""
        try:
            union = await self.union_id(user_id)
        except Exception as exc:  # no unionId (an external sender, the directory down)
            log.info("no unionId for the asker", extra={"error": type(exc).__name__})
            return None
        now = self.clock.now()
        known = self.store.knowledge.read_right(union, doc_id)
        if known is not None:
            allowed, as_of, checked_at = known
            if as_of == modified_at and now - checked_at < self.ttl_s:
                return allowed
        try:
            allowed = await self.client.can_read(doc_id, union)
        except Exception as exc:
            log.warning("permission probe failed", extra={"doc": doc_id, "error": str(exc)})
            return None  # not remembered: the next run asks again
        self.store.knowledge.remember_read_right(union, doc_id, allowed, modified_at, now)
        return allowed
