"""Who wrote the message: the staff directory's name, title and department, cached.

A first-time sender costs one directory call; after that the answer is reused for
``identity_ttl_s`` (a "not in the directory" answer for an hour). Four things keep that
call, and the cache, off the critical path:

- ``prefetch`` starts the lookup as soon as an event the robot will answer is queued, so it
  runs while the event waits for its turn and its run opens; the invocation awaits it;
- concurrent runs of the same person share one call;
- the store's cache is read into memory once, and every answer since is kept there too, so
  a message asks the store nothing about its sender (up to ``MEMORY_LIMIT`` people; past
  that, and on a store replicas share, a sender not in memory is looked for in the store);
- answers are written to the store's cache in batches (``flush``, from the runtime's
  recovery pass and at shutdown, or once enough have gathered). It is a cache: a crash
  loses at most one batch of answers, which are asked for again.

When the lookup fails the identity is the envelope's nick, marked ``source: envelope`` with
the reason in ``missing``; it never stops the run.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from agent.clock import Clock
from agent.contracts import Event, Identity
from agent.dingtalk.openapi import DirectoryError
from agent.dingtalk.transport import DingTalkTransport
from storage import Store

log = logging.getLogger("dta.identity")

NEGATIVE_TTL_S = 3600.0  # how long "not in the directory" is believed
FLUSH_AT = 256  # answers gathered in memory before they are written without waiting
MEMORY_LIMIT = 5_000  # people whose answers are kept in memory (about 400 bytes each)


class IdentityDirectory:
    def __init__(
        self, store: Store, clock: Clock, transport: DingTalkTransport | None, ttl_s: float
    ) -> None:
        self.store = store
        self.clock = clock
        self.transport = transport
        self.ttl_s = ttl_s
        # user id → (identity fields, when they count as fetched): answers not yet written
        self._unwritten: dict[str, tuple[dict[str, Any], float]] = {}
        self._lookups: dict[str, asyncio.Task[dict[str, Any]]] = {}
        # Every answer had, oldest first: the store's cache as read once, then each new one.
        self._memory: dict[str, tuple[dict[str, Any], float]] | None = None
        # Whether memory holds all the store's cache has (so a miss needs no store read):
        # never with replicas, which fill the cache too, nor once memory overflowed.
        self._complete = False

    @property
    def enabled(self) -> bool:
        config = self.transport.config if self.transport is not None else None
        return config is not None and bool(
            config.directory_base_url and config.has_openapi_credentials
        )

    def prefetch(self, event: Event) -> None:
        """Start looking the sender up now, for a message directed at the robot (a DM or an
        @: what the response gate engages on, without deciding it twice). Outside a running
        loop (tests queueing by hand) the run looks it up itself."""
        if not (self.enabled and event.addressed):
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return
        if self._known(event.actor.user_id) is None:
            self._lookup(event)

    async def identity(self, event: Event) -> Identity:
        actor = event.actor
        envelope = Identity(source="envelope", user_id=actor.user_id, name=actor.nick)
        if not self.enabled:
            return envelope
        known, source = self._known(actor.user_id), "directory:cache"
        if known is None:
            known, source = await asyncio.shield(self._lookup(event)), "directory"
        if known.get("missing"):
            source = "envelope"
        return Identity(source=source, user_id=actor.user_id, **known)

    def flush(self) -> int:
        """Write the answers gathered in memory to the store's cache; returns how many."""
        if not self._unwritten:
            return 0
        batch, self._unwritten = self._unwritten, {}
        try:
            self.store.context.cache_identities(batch)
        except Exception:
            # Kept for the next flush; newer answers for the same person win.
            self._unwritten = {**batch, **self._unwritten}
            raise
        return len(batch)

    async def settle(self) -> None:
        """Wait for the lookups in flight (the lab judges only once nothing is under way)."""
        while self._lookups:
            await asyncio.gather(*list(self._lookups.values()), return_exceptions=True)

    async def aclose(self) -> None:
        """Stop lookups still in flight and write what was gathered."""
        lookups = list(self._lookups.values())
        for task in lookups:
            task.cancel()
        await asyncio.gather(*lookups, return_exceptions=True)
        self.flush()

    def _known(self, user_id: str) -> dict[str, Any] | None:
        """A fresh answer already had: in memory, else (unless memory has them all) in the
        store's cache."""
        now = self.clock.now()
        memory = self._remembered()
        held = memory.get(user_id)
        if held is not None and held[1] > now - self.ttl_s:
            return held[0]
        if self._complete:
            return None
        return self.store.context.cached_identity(user_id, now - self.ttl_s)

    def _remembered(self) -> dict[str, tuple[dict[str, Any], float]]:
        if self._memory is None:
            fresh_after = self.clock.now() - self.ttl_s
            cached = self.store.context.cached_identities(fresh_after, MEMORY_LIMIT + 1)
            self._complete = self.store.exclusive and len(cached) <= MEMORY_LIMIT
            self._memory = dict(list(cached.items())[:MEMORY_LIMIT])
        return self._memory

    def _lookup(self, event: Event) -> asyncio.Task[dict[str, Any]]:
        user_id = event.actor.user_id
        task = self._lookups.get(user_id)
        if task is None:
            task = asyncio.ensure_future(self._ask(event))
            self._lookups[user_id] = task
            task.add_done_callback(lambda _: self._lookups.pop(user_id, None))
        return task

    async def _ask(self, event: Event) -> dict[str, Any]:
        assert self.transport is not None
        actor = event.actor
        now = self.clock.now()
        try:
            detail = await self.transport.user_detail(actor.user_id)
        except DirectoryError as exc:
            log.info("directory lookup failed", extra={"error": str(exc)})
            missing = {"name": actor.nick, "missing": f"directory lookup failed: {exc}"}
            if exc.definite:
                # The directory said no (e.g. an external contact): remember that for an
                # hour, not the full TTL, so each of their messages does not ask again.
                self._remember(actor.user_id, missing, now - max(0.0, self.ttl_s - NEGATIVE_TTL_S))
            return missing
        found = {
            "name": detail.get("name") or actor.nick,
            "title": detail.get("title") or None,
            "department": "、".join(str(d) for d in detail.get("dept_names") or []) or None,
        }
        self._remember(actor.user_id, found, now)
        return found

    def _remember(self, user_id: str, found: dict[str, Any], fetched_at: float) -> None:
        self._unwritten[user_id] = (found, fetched_at)
        memory = self._remembered()
        memory.pop(user_id, None)  # newest last, so the oldest go first
        memory[user_id] = (found, fetched_at)
        if len(memory) > MEMORY_LIMIT:
            del memory[next(iter(memory))]
            self._complete = False  # the store has what memory let go
        if len(self._unwritten) >= FLUSH_AT:
            try:
                self.flush()
            except Exception as exc:  # a cache: the run goes on, the next flush tries again
                log.warning("identity cache not written", extra={"error": str(exc)[:200]})
