"""The runtime, wired: store, ingest, gates, skills, provider, broker and dispatcher.

The daemon, the lab and the benchmarks all build a ``Runtime`` from ``Settings``; only the
clock, the HTTP client and (in the lab) the crash points differ.

    runtime = Runtime(settings)
    await runtime.start()               # reconcile what a crash left behind, queue the rest
    runtime.ingest(raw_frame)            # durable; returns what to ack
    await runtime.drain()                # wait for the runs in memory to finish
    await runtime.aclose()

The store is the queue. An acked event is work until its run has ended, and memory holds
only a bounded window of it (``max_queued_runs``): beyond that, events wait in the store.
``tick`` is the recovery pass — renew the leases of runs being worked on, drive again the
runs a failing store interrupted (with back-off), and pick up stored events without a
finished run. The daemon runs it in a loop (``start(recovery_loop=True)``); the lab calls
it as its virtual clock moves (``drain_store``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

import httpx

from agent.acts.approvals import settle_event
from agent.clock import Clock, SystemClock
from agent.components import build_heartbeat, build_parts, build_pipeline, open_store
from agent.config import Settings
from agent.contracts import Event
from agent.crashpoints import CrashPoints
from agent.dingtalk.ingest import FrameKind, Ingestor, IngestResult
from agent.dingtalk.transport import DingTalkTransport
from agent.knowledge.sync import sync_forever
from agent.run.dispatcher import Dispatcher
from agent.run.retries import RETRY_BASE_S, RETRY_MAX_S, RetryQueue
from agent.run.thread_claims import ThreadClaims
from agent.runtime_chores import RuntimeChores
from skills.loader import SkillLibrary
from skills.providers.base import Provider
from storage import Store
from storage.patience import is_transient

log = logging.getLogger("dta.runtime")


def owner_id() -> str:
    """This process as a run owner: readable (host and pid) and unique across restarts."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


class Runtime:
    def __init__(
        self,
        settings: Settings,
        *,
        clock: Clock | None = None,
        http_client: httpx.AsyncClient | None = None,
        provider: Provider | None = None,
        skills: SkillLibrary | None = None,
        crash: CrashPoints | None = None,
        store_path: Path | None = None,
        on_run_finished: Callable[[float], None] | None = None,
        transport: DingTalkTransport | None = None,
    ) -> None:
        self.settings = settings
        self.clock = clock or SystemClock()
        self.crash = crash or CrashPoints()
        self.owner = owner_id()
        self.store = (
            open_store(settings, self.owner)
            if store_path is None
            else Store(store_path, settings.store_synchronous, owner=self.owner)
        )
        parts = build_parts(
            settings,
            clock=self.clock,
            crash=self.crash,
            owner=self.owner,
            store=self.store,
            http_client=http_client,
            provider=provider,
            skills=skills,
            transport=transport,
        )
        self.response_gate, self.transport, self.broker = (
            parts.response_gate,
            parts.transport,
            parts.broker,
        )
        self.skills, self.cards, self.identities = parts.skills, parts.cards, parts.identities
        # Acts and approvals (agent/acts/): None unless a write tool is enabled.
        self.acts = parts.acts
        self.mcp = parts.mcp  # MCP servers as tool sources, connected at start
        self.knowledge = parts.knowledge  # DingTalk docs as sources, synced on a schedule
        # card clicks (approvals, forms, a streaming card's stop); forms waiting for askers
        self.clicks, self.forms = parts.clicks, parts.forms
        self.ingestor = Ingestor(
            self.store, self.response_gate.supersedes, settings.max_frame_bytes, self.clicks
        )
        self.pipeline = build_pipeline(settings, parts, self.owner)
        # Proactive work (agent/proactive/heartbeat.py): None unless heartbeat_interval_s is set.
        self.heartbeat = build_heartbeat(settings, parts, self.submit)
        carriers = self.pipeline.acting.carriers
        self.chores = RuntimeChores(self.store, self.clock, carriers, self.acts)
        # Every run in memory may be under way (the provider's places bound the expensive
        # part): a run waiting only for its turn would start its ack timer late.
        self.dispatcher = Dispatcher(settings.max_queued_runs)
        # Told how long each event took from receipt to finished run (metrics).
        self.on_run_finished = on_run_finished
        self._inflight: set[str] = set()  # queued or running, by event id
        self._threads = ThreadClaims(
            self.store, self.owner, self.clock, settings.run_lease_s, settings.max_event_age_s
        )
        self._retries = RetryQueue()  # interrupted by the store, or the thread was busy
        self._spilling = False  # memory is full: new events wait in the store, in order
        # While spilling, the pass that refills memory runs once a tenth of it is free,
        # not after every run: each pass reads a queue's worth of the store.
        limit = settings.max_queued_runs
        self._refill_at = limit - max(1, limit // 10)
        self._watermark = 0  # every stored event at or below this rowid has a finished run
        self._renewed_at = float("-inf")
        self._wake = asyncio.Event()
        self._loop_task: asyncio.Task[None] | None = None
        self._sync_task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Runtime:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    @property
    def queued(self) -> int:
        """Runs held in memory (queued or running) plus those waiting out a store failure."""
        return len(self._inflight) + len(self._retries)

    async def start(self, recovery_loop: bool = False) -> int:
        """Reconcile what a previous process left, then queue stored unfinished work.

        One daemon per SQLite store (its instance lock proves any earlier owner is dead),
        so every other owner's lease is void: its unfinished runs are taken over now, its
        open attempts become ``uncertain`` and its unsent intents are forgotten. On a store
        replicas share (PostgreSQL) nothing of another owner is touched here: a run is taken
        over only once its lease has expired, and its leftovers are reconciled then, run by
        run (``Pipeline``).
        """
        expired, uncertain, dropped = 0, [], 0
        if self.store.exclusive:
            expired = self.store.work.expire_leases(except_owner=self.owner)
            uncertain = self.broker.reconcile_interrupted()
            dropped = self.store.actions.drop_unsent_intents()
        if self.mcp is not None:  # before any run: their tools are offered from the start
            await self.mcp.start()
        # cards a stop left open, reactions whose recall was refused or cut: settled now
        await self.chores.sweep_carriers(everything=True)
        resumed = self.tick(force=True)
        if uncertain or dropped or expired or resumed:
            log.warning(
                "recovered after an unclean stop",
                extra={
                    "uncertain": len(uncertain),
                    "unsent": dropped,
                    "taken_over": expired,
                    "resumed": resumed,
                },
            )
        if recovery_loop:
            loop = asyncio.get_running_loop()
            self._loop_task = loop.create_task(self._recover_forever())
            if self.knowledge is not None:
                every = self.settings.knowledge_sync_s
                self._sync_task = loop.create_task(
                    sync_forever(self.knowledge.sync, self.clock, every)
                )
        return resumed

    def ingest(self, raw: str | bytes, received_at: float | None = None) -> IngestResult:
        """Store a frame durably and queue its event; the caller acks after this returns."""
        result = self.ingestor.ingest(raw, self.clock.now() if received_at is None else received_at)
        if result.kind is FrameKind.EVENT and result.event is not None:
            self.crash.hit("after_ingest")
            self.submit(result.event, result.generation)
        elif result.kind is FrameKind.CARD_CLICK and result.event is not None:
            self.submit(result.event)  # the decision, carried out by its own run
        return result

    def submit(self, event: Event, generation: int | None = None) -> bool:
        """Queue the event's run on its thread, if memory has room; else it waits in the
        store (durable already) and the recovery pass picks it up in arrival order.
        ``generation`` saves a read when known. False when it was left to the store."""
        if event.event_id in self._inflight or event.event_id in self._retries:
            return True
        if self._spilling or self.queued >= self.settings.max_queued_runs:
            if not self._spilling:
                log.warning("run queue full; new events wait in the store")
            self._spilling = True
            return False
        self._queue(event, generation)
        # The sender's directory lookup starts now, while the run waits for its turn; only
        # for an event the response gate engages on: silence costs DingTalk no call at all.
        if self.response_gate.engages(event, self.clock.now()):
            self.identities.prefetch(event)
        return True

    def _queue(self, event: Event, generation: int | None = None) -> None:
        self._inflight.add(event.event_id)

        async def job() -> None:
            held = False
            try:
                held = self._threads.claim(event)
                if not held:
                    self._retries.later(event, None, self.clock.now())
                    return
                run = await self.pipeline.process(event, generation)
            except Exception as exc:
                if not is_transient(exc):
                    raise
                self._retries.later(event, exc, self.clock.now())
                return
            finally:
                self._inflight.discard(event.event_id)
                if held and not self.store.exclusive:
                    self._threads.release(event.thread_key)
                if self._spilling and self.queued <= self._refill_at:
                    self._wake.set()
            if run is not None and run.state.is_finished and self.on_run_finished is not None:
                self.on_run_finished(max(0.0, self.clock.now() - event.received_at))
            if self.acts is not None and run is not None:
                # A run that voided an approval left its decision to carry out: at once.
                for settle in self._store_decisions():
                    self.submit(settle)

        self.dispatcher.submit(event.thread_key, job)

    # ------------------------------------------------------------------ recovery

    def tick(self, force: bool = False) -> int:
        """One recovery pass; returns how many runs it queued.

        Renews the leases of the runs in memory, queues the interrupted runs whose wait is
        over (all of them when ``force``), and picks up stored events without a finished
        run that nobody holds. Raises the store's error when the store is unavailable.
        """
        now = self.clock.now()
        if now - self._renewed_at >= self.settings.run_lease_s / 3:
            until = now + self.settings.run_lease_s
            self.store.work.renew_leases(self.owner, sorted(self._inflight), until)
            self.store.work.renew_threads(self.owner, self._threads.held(), until)
            self._renewed_at = now
        self.identities.flush()
        self._approvals_due()
        if self.forms is not None:  # forms past their time expired, their events stored
            self.forms.desk.expire_due()
        due = self._retries.take_due(now, force)
        for event in due:
            self._queue(event)
        return len(due) + self._pick_up_stored(now)

    def _approvals_due(self) -> None:
        """Expire the approvals whose time ran out, and store the event of every decision
        not carried out yet (a crash fell between them); the pick-up below runs them."""
        if self.acts is None:
            return
        self.acts.desk.expire_due()
        self._store_decisions()

    def _store_decisions(self) -> list[Event]:
        """The events of decided approvals not stored yet (stored now), to be run."""
        events = []
        for record in self.store.approvals.unsettled_approvals():
            run = self.store.events.get_run(record.event_id)
            if run is not None:
                event = settle_event(record, run, self.clock.now())
                if self.store.events.add_event(event, event.to_json(), supersedes=False).new:
                    events.append(event)
        return events

    def _pick_up_stored(self, now: float) -> int:
        room = self.settings.max_queued_runs - self.queued
        limit = self.queued + max(room, 0) + 100
        top = self.store.work.max_event_rowid()
        pending = self.store.work.unfinished_work(self._watermark, limit)
        self._watermark = pending[0].rowid - 1 if pending else max(self._watermark, top)
        queued = 0
        for item in pending:
            event_id = item.event_id
            if event_id in self._inflight or event_id in self._retries:
                continue
            if not item.free_for(self.owner, now):
                continue  # another owner's lease holds (replicas)
            if self.queued >= self.settings.max_queued_runs:
                self._spilling = True  # the rest waits for room, and new events behind it
                return queued
            event = self.store.events.get_event(event_id)
            if event is not None:
                self._queue(event)
                queued += 1
        if len(pending) < limit and self._spilling:
            log.info("run queue caught up with the store")
            self._spilling = False
        return queued

    async def sweep_cards(self, everything: bool = False) -> int:
        """Close AI cards left open by runs that have ended (card mode only)."""
        return await self.chores.sweep_carriers(("card",), everything)

    async def sweep_reactions(self, everything: bool = False) -> int:
        """Recall the working-signal reactions still owed (``RuntimeChores``)."""
        return await self.chores.sweep_carriers(("reaction",), everything)

    async def settle_acts(self) -> int:
        """Read back the acts left ``uncertain`` (a timeout, a crash after the call)."""
        return await self.chores.settle_acts()

    async def _recover_forever(self) -> None:
        """The daemon's recovery loop: a pass every ``recovery_interval_s``, sooner when a
        tenth of memory is free while events wait in the store, or when an interrupted run's
        wait is over."""
        failures = 0
        while True:
            wait = self.settings.recovery_interval_s
            try:
                self.tick()
                await self.chores.sweep_carriers()
                await self.settle_acts()
                failures = 0
            except Exception as exc:
                if not is_transient(exc):
                    log.exception("recovery pass failed")
                else:
                    log.warning("recovery pass: store unavailable", extra={"error": str(exc)})
                failures += 1
                wait = min(RETRY_MAX_S, RETRY_BASE_S * 2**failures)
            due = self._retries.next_due()
            if due is not None:
                wait = max(0.05, min(wait, due - self.clock.now()))
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                if self._spilling:
                    await asyncio.wait_for(self._wake.wait(), wait)
                else:
                    await asyncio.sleep(wait)

    async def drain(self) -> None:
        """Wait for the runs in memory to finish (a stop: nothing new is started), and the
        directory lookups they started."""
        await self.dispatcher.join()
        await self.identities.settle()

    async def drain_store(self, rounds: int = 20) -> None:
        """Work until no stored event lacks a finished run (the lab's "drain"): runs in
        memory, runs the store interrupted (their waits cut short) and events that waited
        in the store. Bounded, so a store that keeps failing cannot hang the caller."""
        for _ in range(rounds):
            await self.drain()
            await self.settle_acts()
            if self.tick(force=True) == 0 and not self._inflight:
                return
        await self.drain()

    async def aclose(self) -> None:
        if self._sync_task is not None:
            self._sync_task.cancel()
        if self._loop_task is not None:
            self._loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop_task
        held = sorted(self._inflight | self._retries.event_ids())
        await self.dispatcher.cancel(timeout=5)
        # What was left unfinished is let go at once rather than when the leases run out:
        # the next start, or another replica, takes it over without waiting.
        with contextlib.suppress(Exception):
            await self.identities.aclose()
        with contextlib.suppress(Exception):
            self.store.work.renew_leases(self.owner, held, 0.0)
            self.store.work.renew_threads(self.owner, self._threads.held(), 0.0)
        await self.transport.aclose()
        if self.mcp is not None:
            await self.mcp.aclose()
        close = getattr(self.pipeline.provider, "aclose", None)
        if close is not None:
            await close()
        self.store.close()
