"""The runtime, wired: store, ingest, gates, skills, provider, broker and dispatcher.

The daemon, the lab and the benchmarks all build a ``Runtime`` from ``Settings``; only the
clock, the HTTP client and (in the lab) the crash points differ.

    runtime = Runtime(settings)
    await runtime.start()               # reconcile what a crash left behind
    runtime.ingest(raw_frame)            # durable; returns what to ack
    await runtime.drain()                # wait for the runs to finish
    await runtime.aclose()
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import httpx

from agent.broker import Broker
from agent.clock import Clock, SystemClock
from agent.config import Settings
from agent.contracts import Event
from agent.crashpoints import CrashPoints
from agent.dispatcher import Dispatcher
from agent.ingest import FrameKind, Ingestor, IngestResult
from agent.invocation import InvocationBuilder, InvocationLimits
from agent.openapi import TransportConfig
from agent.pipeline import Pipeline
from agent.tasks import TaskKeeper
from agent.transport import DingTalkTransport
from gates.action import ActionGate, ActionPolicy
from gates.response import ResponseGate, ResponsePolicy
from skills.loader import SkillLibrary
from skills.providers.base import Provider
from skills.providers.command import CommandConfig, CommandProvider
from skills.providers.openai import OpenAIConfig, OpenAIProvider
from skills.providers.rules import RulesProvider
from storage import Store

log = logging.getLogger("dta.runtime")


def response_policy(settings: Settings) -> ResponsePolicy:
    return ResponsePolicy(
        paused=settings.paused,
        allow_users=frozenset(settings.allow_users),
        deny_users=frozenset(settings.deny_users),
        allow_conversations=frozenset(settings.allow_conversations),
        max_event_age_s=settings.max_event_age_s,
        supported_msgtypes=frozenset(settings.supported_msgtypes),
        robot_code=settings.robot_code,
    )


def action_policy(settings: Settings) -> ActionPolicy:
    return ActionPolicy(
        robot_code=settings.robot_code,
        write_budget_per_conversation_per_minute=settings.write_budget_per_conversation_per_minute,
        write_budget_per_day=settings.write_budget_per_day,
        max_reply_chars=settings.max_reply_chars,
        max_reply_chunks=settings.max_reply_chunks,
        has_openapi_credentials=settings.has_openapi_credentials,
        webhook_expiry_margin_s=settings.webhook_expiry_margin_s,
        secrets=tuple(settings.secret_values),
    )


def transport_config(settings: Settings) -> TransportConfig:
    secret = settings.client_secret.get_secret_value() if settings.client_secret else None
    return TransportConfig(
        openapi_base_url=settings.openapi_base_url,
        client_id=settings.client_id,
        client_secret=secret,
        robot_code=settings.robot_code,
        connect_timeout_s=settings.connect_timeout_s,
        read_timeout_s=settings.read_timeout_s,
        send_retries=settings.send_retries,
        max_retry_after_s=settings.max_retry_after_s,
        webhook_expiry_margin_s=settings.webhook_expiry_margin_s,
        max_connections=settings.http_max_connections,
        proxy=settings.http_proxy,
        directory_base_url=settings.directory_base_url if settings.identity_lookup else None,
        directory_timeout_s=settings.identity_timeout_s,
    )


def invocation_limits(settings: Settings) -> InvocationLimits:
    return InvocationLimits(
        max_text_chars=settings.max_text_chars,
        max_quote_chars=settings.max_quote_chars,
        burst_window_s=settings.burst_window_s,
        max_burst_messages=settings.max_burst_messages,
        identity_ttl_s=settings.identity_ttl_s,
    )


def build_provider(settings: Settings) -> Provider:
    if settings.provider == "openai":
        assert settings.openai_base_url and settings.openai_model  # checked by Settings
        key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
        config = OpenAIConfig(
            base_url=settings.openai_base_url,
            model=settings.openai_model,
            api_key=key,
            timeout_s=settings.openai_timeout_s,
            max_retries=settings.openai_max_retries,
            response_format=settings.openai_response_format,
        )
        return OpenAIProvider(config, settings.agent)
    if settings.provider == "command":
        return CommandProvider(
            CommandConfig(
                argv=tuple(settings.command),
                runs_root=settings.command_runs_root,
                timeout_s=settings.command_timeout_s,
                env=tuple(settings.command_env),
                keep_runs=settings.command_keep_runs,
            )
        )
    return RulesProvider(settings.agent, settings.knowledge_dir)


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
    ) -> None:
        self.settings = settings
        self.clock = clock or SystemClock()
        self.crash = crash or CrashPoints()
        self.store = Store(store_path or settings.store_path, settings.store_synchronous)
        self.response_gate = ResponseGate(response_policy(settings))
        self.ingestor = Ingestor(self.store, self.response_gate.engages)
        self.transport = DingTalkTransport(transport_config(settings), self.clock, http_client)
        self.broker = Broker(
            self.store, self.transport, self.clock, self.crash, settings.verify_by_readback
        )
        self.skills = skills or SkillLibrary(settings.skill_paths)
        self.pipeline = Pipeline(
            store=self.store,
            clock=self.clock,
            response_gate=self.response_gate,
            action_gate=ActionGate(action_policy(settings)),
            skills=self.skills,
            provider=provider or build_provider(settings),
            broker=self.broker,
            invocations=InvocationBuilder(
                self.store, self.clock, self.transport, invocation_limits(settings)
            ),
            tasks=TaskKeeper(self.store, self.clock),
            run_dir=settings.run_dir,
            ack_after_s=settings.ack_after_s,
        )
        self.dispatcher = Dispatcher(settings.max_concurrent_runs)
        # Told how long each event took from receipt to finished run (metrics).
        self.on_run_finished: Callable[[float], None] | None = None

    async def start(self) -> int:
        """Reconcile a previous crash, then queue every stored event not yet finished."""
        uncertain = self.broker.reconcile_interrupted()
        dropped = self.store.drop_unsent_intents()
        pending = self.store.pending_events()
        for event in pending:
            self.submit(event)
        if uncertain or dropped or pending:
            log.warning(
                "recovered after an unclean stop",
                extra={"uncertain": len(uncertain), "unsent": dropped, "resumed": len(pending)},
            )
        return len(pending)

    def ingest(self, raw: str | bytes, received_at: float | None = None) -> IngestResult:
        """Store a frame durably and queue its event; the caller acks after this returns."""
        result = self.ingestor.ingest(raw, self.clock.now() if received_at is None else received_at)
        if result.kind is FrameKind.EVENT and result.event is not None:
            self.crash.hit("after_ingest")
            self.submit(result.event, result.generation)
        return result

    def submit(self, event: Event, generation: int | None = None) -> None:
        """Queue the event's run on its thread; ``generation`` saves a read when known."""

        async def job() -> None:
            await self.pipeline.process(event, generation)
            if self.on_run_finished is not None:
                self.on_run_finished(max(0.0, self.clock.now() - event.received_at))

        self.dispatcher.submit(event.thread_key, job)

    async def drain(self) -> None:
        await self.dispatcher.join()

    async def aclose(self) -> None:
        await self.dispatcher.cancel(timeout=5)
        await self.transport.aclose()
        close = getattr(self.pipeline.provider, "aclose", None)
        if close is not None:
            await close()
        self.store.close()
