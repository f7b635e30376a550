"""Every component built from ``Settings`` in one place: each default is written once, in
``agent/config.py``, and this module turns settings into the parts' own small configs.

    runtime = Runtime(settings)                # uses the builders below
    provider = build_provider(settings)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from zoneinfo import ZoneInfo

import httpx

from agent.acts.approval_card import ApprovalCards
from agent.acts.approvals import ApprovalDesk
from agent.acts.clicks import ClickDesk
from agent.acts.executor import ActExecutor
from agent.acts.runner import ActRunner
from agent.cards.api import CardAPI
from agent.cards.broker import CardBroker
from agent.cards.pacing import CardPacer
from agent.cards.stream import CardReplies
from agent.clock import Clock
from agent.config import ConfigError, Settings
from agent.contracts import Event
from agent.contracts.quiet_hours import parse_quiet_hours
from agent.contracts.tools import BUILTIN
from agent.crashpoints import CrashPoints
from agent.dingtalk.connector import ConnectorConfig
from agent.dingtalk.openapi import TransportConfig
from agent.dingtalk.transport import DingTalkTransport
from agent.dingtalk.workspace import WorkspaceClient
from agent.mcp.catalog import ToolCatalog
from agent.mcp.sources import McpSources
from agent.proactive.heartbeat import Heartbeat
from agent.proactive.schedule import SchedulePolicy
from agent.run.broker import Broker
from agent.run.forgetting import Forgetting
from agent.run.grounding import Grounder, GroundingLimits
from agent.run.identities import IdentityDirectory
from agent.run.invocation import InvocationBuilder, InvocationLimits
from agent.run.media import MediaFetcher, MediaLimits
from agent.run.metering import ModelLimits, ModelMeter
from agent.run.pipeline import Pipeline, SkillSource
from agent.run.spacing import SendSpacing
from agent.run.tasks import TaskKeeper
from agent.run.tooling import ToolBox
from gates.action import ActionGate, ActionPolicy
from gates.response import ResponseGate, ResponsePolicy
from skills.loader import SkillLibrary
from skills.providers.base import Provider
from skills.providers.command import CommandConfig, CommandProvider
from skills.providers.openai import OpenAIConfig, OpenAIProvider
from skills.providers.openai_stream import StreamingOpenAIProvider
from skills.providers.rules import RulesProvider
from skills.retrieval.folder import KnowledgeBase
from storage import Store
from storage.backends.postgres import schema_for


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
        reminders=settings.heartbeat_interval_s is not None,
        max_reminder_days=settings.max_reminder_days,
        timezone=settings.timezone,
        follow_ups=settings.heartbeat_interval_s is not None
        and settings.follow_up_after_s is not None,
        tools=frozenset(settings.tools),
        max_acts_per_run=settings.max_acts_per_run,
        act_budget_per_conversation_per_day=settings.act_budget_per_conversation_per_day,
        act_budget_per_day=settings.act_budget_per_day,
    )


def schedule_policy(settings: Settings) -> SchedulePolicy:
    quiet = parse_quiet_hours(settings.quiet_hours) if settings.quiet_hours else None
    return SchedulePolicy(
        interval_s=settings.heartbeat_interval_s,
        follow_up_after_s=settings.follow_up_after_s,
        max_follow_ups=settings.max_follow_ups,
        task_expiry_s=settings.task_expiry_s,
        quiet_hours=quiet,
        timezone=ZoneInfo(settings.timezone),
        max_reminder_days=settings.max_reminder_days,
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
        webhook_origins=tuple(settings.webhook_origins),
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
        context_window_s=settings.context_window_s,
        context_turns=settings.context_turns,
    )


def media_limits(settings: Settings) -> MediaLimits:
    return MediaLimits(
        media_dir=settings.media_dir,
        max_download_bytes=settings.max_download_bytes,
        download_timeout_s=settings.download_timeout_s,
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
            vision=settings.openai_vision,
            max_file_chars=settings.max_file_chars,
            max_tool_steps=settings.max_tool_steps,
        )
        if settings.reply_mode == "card":  # the answer fills its card as the model writes
            return StreamingOpenAIProvider(config, settings.agent)
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
    return rules_provider(settings)


def rules_provider(settings: Settings) -> RulesProvider:
    """The rules provider: configured, or the fallback of a model (its knowledge, its
    arithmetic, its honest "I can't answer that now")."""
    return RulesProvider(settings.agent, settings.knowledge_dir, ZoneInfo(settings.timezone))


def model_limits(settings: Settings) -> ModelLimits:
    return ModelLimits(
        per_person_per_day=settings.model_tokens_per_person_per_day,
        per_conversation_per_day=settings.model_tokens_per_conversation_per_day,
        per_month=settings.model_tokens_per_month,
        prices={name: (p.input, p.output) for name, p in settings.model_prices.items()},
        timezone=settings.timezone,
    )


def build_cards(
    settings: Settings,
    store: Store,
    clock: Clock,
    broker: Broker,
    gate: ActionGate,
    crash: CrashPoints,
) -> CardReplies | None:
    """Card mode's parts (None in text and markdown mode); the broker delivers replies
    approved as cards through them."""
    if settings.reply_mode != "card":
        return None
    assert settings.robot_code and settings.card_template_id  # checked by Settings
    api = CardAPI(
        broker.transport, settings.robot_code, settings.card_template_id, settings.card_content_key
    )
    pacer = CardPacer(
        store, clock, settings.card_frame_interval_ms / 1000, settings.card_frames_per_second
    )
    cards = CardBroker(
        store, clock, api, pacer, broker, settings.card_stall_s, settings.card_block_chars
    )
    return CardReplies(cards, gate, crash, settings.card_stall_s)


def connector_config(settings: Settings) -> ConnectorConfig:
    if not (settings.client_id and settings.client_secret):
        raise ConfigError(
            "client_id / client_secret: required to connect (set DINGTALK_CLIENT_ID and"
            " DINGTALK_CLIENT_SECRET, or client_id/client_secret in dta.toml)"
        )
    return ConnectorConfig(
        endpoint=settings.openapi_base_url,
        client_id=settings.client_id,
        client_secret=settings.client_secret.get_secret_value(),
        store_path=settings.store_target,
        store_schema=store_schema(settings),
        store_synchronous=settings.store_synchronous,
        store_busy_timeout_s=settings.store_busy_timeout_s,
        ping_interval_s=settings.stream_ping_interval_s,
        ping_timeout_s=settings.stream_ping_timeout_s,
        open_timeout_s=settings.open_connection_timeout_s,
        backoff_base_s=settings.reconnect_backoff_base_s,
        backoff_max_s=settings.reconnect_backoff_max_s,
        max_frame_bytes=settings.max_frame_bytes,
    )


def store_schema(settings: Settings) -> str | None:
    """The PostgreSQL schema of this robot's records (None for SQLite)."""
    if not settings.store_url:
        return None
    return settings.store_schema or schema_for(settings.robot_code)


def open_store(settings: Settings, owner: str | None = None) -> Store:
    """The configured store: SQLite at ``store_path``, or PostgreSQL at ``store_url``;
    ``owner``: the run owner a daemon writes for (its writes of a run are fenced by it)."""
    return Store(
        settings.store_target,
        settings.store_synchronous,
        busy_timeout_s=settings.store_busy_timeout_s,
        schema=store_schema(settings),
        owner=owner,
    )


def build_broker(
    settings: Settings,
    store: Store,
    transport: DingTalkTransport,
    clock: Clock,
    crash: CrashPoints,
) -> Broker:
    return Broker(
        store,
        transport,
        clock,
        crash,
        settings.verify_by_readback,
        SendSpacing(settings.send_gap_s),
    )


@dataclass(frozen=True)
class PipelineParts:
    """The parts a pipeline runs with, built before it (``Runtime`` holds them too)."""

    store: Store
    clock: Clock
    response_gate: ResponseGate
    action_gate: ActionGate
    skills: SkillSource
    provider: Provider
    broker: Broker
    transport: DingTalkTransport
    cards: CardReplies | None
    identities: IdentityDirectory  # the sender's details, looked up as soon as a run queues
    # answers when the model is over its budget or down (None: the provider is rules)
    fallback: Provider | None
    acts: ActParts | None = None  # workspace writes and their approvals (None: no write tool)
    mcp: McpSources | None = None  # MCP servers as tool sources (started with the runtime)


@dataclass(frozen=True)
class ActParts:
    """Acts and approvals (agent/acts/): built when a write tool is enabled."""

    runner: ActRunner
    desk: ApprovalDesk
    cards: ApprovalCards | None  # None: approvals by text code
    clicks: ClickDesk


def writes_enabled(settings: Settings) -> bool:
    """A write tool is enabled: a built-in one, or an MCP tool not classed a read."""
    reads = {f"mcp.{s.name}.{tool}" for s in settings.mcp_servers for tool in s.reads}
    return any(
        BUILTIN[name].effect == "write" if name in BUILTIN else name not in reads
        for name in settings.tools
    )


def build_mcp(settings: Settings) -> McpSources | None:
    return McpSources(settings.mcp_servers) if settings.mcp_servers else None


def build_acts(
    settings: Settings,
    store: Store,
    clock: Clock,
    broker: Broker,
    crash: CrashPoints,
    mcp: McpSources | None,
) -> ActParts | None:
    """The act runner, the approval desk and (with a template) the approval cards."""
    if not writes_enabled(settings):
        return None
    workspace = WorkspaceClient(broker.transport, oapi_base_url=settings.directory_base_url)
    template = settings.approval_card_template_id
    cards = None
    if template and settings.robot_code:
        api = CardAPI(broker.transport, settings.robot_code, template, "status")
        cards = ApprovalCards(api, store, clock, broker)
    desk = ApprovalDesk(store, clock, settings.approval_timeout_s, cards is not None)
    runner = ActRunner(
        store=store,
        clock=clock,
        desk=desk,
        executor=ActExecutor(store, workspace, clock, crash, mcp),
        reads=workspace,
        approval_timeout_s=settings.approval_timeout_s,
        catalog=ToolCatalog(mcp),
    )
    return ActParts(runner, desk, cards, ClickDesk(store, desk))


def build_pipeline(settings: Settings, parts: PipelineParts, owner: str) -> Pipeline:
    """One event's way from the gate to its receipts, with its invocation builder (the
    directory and media behind it), its task keeper and every limit from ``settings``."""
    store, clock, transport = parts.store, parts.clock, parts.transport
    knowledge = KnowledgeBase(settings.knowledge_dir)  # the grounding's, and forgetting's
    invocations = InvocationBuilder(
        store,
        clock,
        transport,
        invocation_limits(settings),
        MediaFetcher(transport, media_limits(settings)),
        parts.identities,
        Grounder(
            knowledge,
            store,
            GroundingLimits(settings.knowledge_items, settings.knowledge_item_chars),
            settings.agent.name,
        ),
    )
    return Pipeline(
        store=store,
        clock=clock,
        response_gate=parts.response_gate,
        action_gate=parts.action_gate,
        skills=parts.skills,
        provider=parts.provider,
        broker=parts.broker,
        invocations=invocations,
        tasks=TaskKeeper(store, clock),
        run_dir=settings.run_dir,
        ack_after_s=settings.ack_after_s,
        provider_slots=settings.max_concurrent_runs,
        owner=owner,
        lease_s=settings.run_lease_s,
        reply_form=settings.reply_mode,
        cards=parts.cards,
        schedule=schedule_policy(settings),
        fallback=parts.fallback,
        meter=ModelMeter(store, clock, model_limits(settings)),
        forgetting=Forgetting(store, knowledge, settings.agent.name),
        tools=tool_box(settings, transport, parts.mcp),
        acts=parts.acts,
    )


def tool_box(
    settings: Settings, transport: DingTalkTransport, mcp: McpSources | None
) -> ToolBox | None:
    """The enabled tools: the workspace's over the robot app's own calls, and the MCP
    servers' (None: none enabled)."""
    if not settings.tools:
        return None
    workspace = WorkspaceClient(transport, oapi_base_url=settings.directory_base_url)
    return ToolBox(list(settings.tools), workspace, ToolCatalog(mcp))


def build_parts(
    settings: Settings,
    *,
    clock: Clock,
    crash: CrashPoints,
    owner: str,
    store: Store,
    http_client: httpx.AsyncClient | None,
    provider: Provider | None,
    skills: SkillSource | None,
) -> PipelineParts:
    """Everything a runtime's pipeline runs with, from ``settings``; ``provider`` and
    ``skills`` given by the lab or a daemon that built them already."""
    transport = DingTalkTransport(transport_config(settings), clock, http_client)
    broker = build_broker(settings, store, transport, clock, crash)
    action_gate = ActionGate(action_policy(settings))
    mcp = build_mcp(settings)
    return PipelineParts(
        store=store,
        clock=clock,
        response_gate=ResponseGate(response_policy(settings)),
        action_gate=action_gate,
        skills=skills or SkillLibrary(settings.skill_paths),
        provider=provider or build_provider(settings),
        broker=broker,
        transport=transport,
        cards=build_cards(settings, store, clock, broker, action_gate, crash),
        identities=IdentityDirectory(store, clock, transport, settings.identity_ttl_s),
        fallback=None if settings.provider == "rules" else rules_provider(settings),
        acts=build_acts(settings, store, clock, broker, crash, mcp),
        mcp=mcp,
    )


def build_heartbeat(
    settings: Settings,
    parts: PipelineParts,
    pipeline: Pipeline,
    submit: Callable[[Event, int | None], bool],
) -> Heartbeat | None:
    """The runtime's heartbeat (agent/proactive/heartbeat.py), or None when
    ``heartbeat_interval_s`` is not set."""
    if settings.heartbeat_interval_s is None:
        return None
    return Heartbeat(
        store=parts.store,
        clock=parts.clock,
        policy=schedule_policy(settings),
        gate=parts.response_gate,
        proactive=pipeline.proactive,
        submit=submit,
        robot_code=settings.robot_code,
    )
