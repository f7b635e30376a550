"""The parts a pipeline runs with and the pipeline itself, the store, the broker, the cards
and the heartbeat."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import httpx

from agent.acts.clicks import ClickDesk
from agent.acts.steps import ActSteps
from agent.cards.api import CardAPI
from agent.cards.broker import CardBroker
from agent.cards.pacing import CardPacer
from agent.cards.stream import CardReplies
from agent.carriers.approval_card import ApprovalCardCarrier
from agent.carriers.attachments import AttachmentCarrier
from agent.carriers.cards import CardCarrier
from agent.carriers.form_card import FormCardCarrier
from agent.carriers.messages import MessageCarrier
from agent.carriers.reaction import ReactionCarrier
from agent.clock import Clock
from agent.components.acts import (
    ActParts,
    FormParts,
    build_acts,
    build_clicks,
    build_forms,
    build_mcp,
    tool_box,
)
from agent.components.knowledge import KnowledgeParts, build_knowledge
from agent.components.own_events import build_jobs, build_own_events, build_proactive
from agent.components.policies import (
    action_policy,
    document_limits,
    invocation_limits,
    media_limits,
    model_limits,
    response_policy,
    schedule_policy,
    store_schema,
    transport_config,
)
from agent.components.providers import build_provider, rules_provider
from agent.config import Settings
from agent.contracts import Event
from agent.crashpoints import CrashPoints
from agent.dingtalk.reactions import ReactionAPI
from agent.dingtalk.transport import DingTalkTransport
from agent.proactive.heartbeat import Heartbeat
from agent.proactive.job_beat import JobBeat
from agent.proactive.job_config import keep_declared_jobs
from agent.proactive.jobs import JobWork
from agent.proactive.work import ProactiveWork
from agent.run.acting import Acting
from agent.run.answering import ACK_TEXT, Answering
from agent.run.broker import Broker
from agent.run.carriers import Carrier, Carriers
from agent.run.documents import DocumentReader
from agent.run.endings import Endings
from agent.run.forgetting import Forgetting
from agent.run.form_replies import FormReplies
from agent.run.grounding import Grounder, GroundingLimits
from agent.run.identities import IdentityDirectory
from agent.run.invocation import InvocationBuilder
from agent.run.media import MediaFetcher
from agent.run.metering import ModelMeter
from agent.run.own_events import Hands
from agent.run.pipeline import LeaseTerms, Pipeline, SkillSource
from agent.run.reactions import ReactionSignal
from agent.run.spacing import SendSpacing
from agent.run.tasks import TaskKeeper
from agent.tools.mcp.sources import McpSources
from gates.action import ActionGate
from gates.response import ResponseGate
from skills.loader import SkillLibrary
from skills.providers.base import Provider
from skills.retrieval.folder import KnowledgeBase
from storage import Store


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
        broker.transport,
        settings.robot_code,
        settings.card_template_id,
        settings.card_content_key,
        feedback=settings.feedback_buttons,
    )
    pacer = CardPacer(
        store,
        clock,
        settings.card_frame_interval_ms / 1000,
        settings.card_frames_per_second,
        crash,
    )
    cards = CardBroker(
        store, clock, api, pacer, broker, settings.card_stall_s, settings.card_block_chars
    )
    return CardReplies(cards, gate, crash, settings.card_stall_s)


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
    proactive: ProactiveWork  # due items, operator sends, 「取消提醒」 (the heartbeat's too)
    jobs: JobWork  # recurring jobs: in words, and each due slot's run
    acts: ActParts | None = None  # workspace writes and their approvals (None: no write tool)
    clicks: ClickDesk | None = None  # card clicks: approvals, a streaming card's stop
    mcp: McpSources | None = None  # MCP servers as tool sources (started with the runtime)
    forms: FormParts | None = None  # ask-user forms: their desk, and cards with a template
    knowledge: KnowledgeParts | None = None  # DingTalk docs as sources (knowledge_sources)


def build_pipeline(settings: Settings, parts: PipelineParts, owner: str) -> Pipeline:
    """One event's way from the gate to its receipts, with its invocation builder (the
    directory and media behind it), its task keeper and every limit from ``settings``."""
    store, clock, transport = parts.store, parts.clock, parts.transport
    docs = parts.knowledge  # DingTalk docs beside the folder (None: none configured)
    # the grounding's, and forgetting's: the folder, and the DingTalk snapshots
    knowledge = KnowledgeBase(settings.knowledge_dir, docs.snapshots if docs else None)
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
            docs.serves if docs else None,
            docs.timezone if docs else None,
        ),
        documents=DocumentReader(document_limits(settings)),
        rights=docs.rights if docs else None,
    )
    reactions = build_reactions(settings, parts)
    acting = build_acting(settings, parts, reactions)
    endings = Endings(store=store, clock=clock, broker=parts.broker, acting=acting)
    return Pipeline(
        store=store,
        clock=clock,
        response_gate=parts.response_gate,
        skills=parts.skills,
        answering=build_answering(settings, parts, invocations, acting, knowledge),
        acting=acting,
        endings=endings,
        own=build_own_events(
            parts.proactive,
            parts.jobs,
            store,
            clock,
            parts.acts,
            Hands(acting, endings),
            parts.forms,
        ),
        tasks=TaskKeeper(store, clock),
        lease=LeaseTerms(owner, settings.run_lease_s),
        stream=parts.cards,
        forms=FormReplies(store, clock),
    )


def build_acting(
    settings: Settings, parts: PipelineParts, reactions: ReactionSignal | None
) -> Acting:
    """The acting step: requests to receipts, through the carriers and with the acts
    (agent/acts/) where write tools are enabled."""
    acts = parts.acts
    return Acting(
        store=parts.store,
        clock=parts.clock,
        action_gate=parts.action_gate,
        broker=parts.broker,
        carriers=build_carriers(settings, parts, reactions),
        acts=ActSteps(parts.store, acts.runner) if acts is not None else None,
        form_timeout_s=settings.form_timeout_s,
    )


def build_carriers(
    settings: Settings, parts: PipelineParts, reactions: ReactionSignal | None
) -> Carriers:
    """The forms a message may go in (agent/carriers/), in the order they claim a request:
    an AI card for the answer in card mode, an approval card for a confirm and a form card
    for an ask with a form where their templates are set, a reaction for the ack with
    ack_style = "reaction"; pictures and files; and text or Markdown for everything else."""
    rows: list[Carrier] = []
    if parts.cards is not None:
        rows.append(CardCarrier(parts.cards))
    if parts.acts is not None and parts.acts.cards is not None:
        rows.append(ApprovalCardCarrier(parts.acts.cards))
    if parts.forms is not None and parts.forms.cards is not None:
        rows.append(FormCardCarrier(parts.forms.cards))
    if reactions is not None:
        rows.append(ReactionCarrier(reactions))
    rows.append(AttachmentCarrier(parts.broker))
    return Carriers(rows, fallback=MessageCarrier(parts.broker, settings.reply_mode))


def build_answering(
    settings: Settings,
    parts: PipelineParts,
    invocations: InvocationBuilder,
    acting: Acting,
    knowledge: KnowledgeBase,
) -> Answering:
    """The answering step: the provider asked (streamed into cards where it can), the ack,
    the fallback, the meter, 「忘掉…」, the tools and the person's earlier acts."""
    store, clock = parts.store, parts.clock
    return Answering(
        clock=clock,
        provider=parts.provider,
        invocations=invocations,
        acting=acting,
        cards=parts.cards,
        ack_after_s=settings.ack_after_s,
        provider_slots=settings.max_concurrent_runs,
        run_dir=settings.run_dir,
        fallback=parts.fallback,
        meter=ModelMeter(store, clock, model_limits(settings)),
        forgetting=Forgetting(store, knowledge, settings.agent.name),
        tools=tool_box(settings, parts.transport, parts.mcp),
        earlier=parts.acts.runner.earlier if parts.acts is not None else None,
        ack_text=ack_text(settings),
    )


def ack_text(settings: Settings) -> str | None:
    """What the run's ack says: the short text, a reaction's name, or nothing at all."""
    if settings.ack_style == "none":
        return None
    return settings.ack_reaction if settings.ack_style == "reaction" else ACK_TEXT


def build_reactions(settings: Settings, parts: PipelineParts) -> ReactionSignal | None:
    """``ack_style = "reaction"``: the ack as an emotion on the person's message."""
    if settings.ack_style != "reaction" or not settings.robot_code:
        return None
    api = ReactionAPI(parts.transport, settings.robot_code)
    return ReactionSignal(parts.store, parts.clock, parts.broker, api)


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
    transport: DingTalkTransport | None = None,
) -> PipelineParts:
    """Everything a runtime's pipeline runs with, from ``settings``; ``provider``,
    ``skills`` and ``transport`` given by the lab or a daemon that built them already (the
    benchmark's transport answers without the wire)."""
    if transport is None:
        transport = DingTalkTransport(transport_config(settings), clock, http_client)
    broker = build_broker(settings, store, transport, clock, crash)
    action_gate = ActionGate(action_policy(settings))
    mcp = build_mcp(settings)
    acts = build_acts(settings, store, clock, broker, crash, mcp)
    forms = build_forms(settings, store, clock, broker)
    return PipelineParts(
        store=store,
        clock=clock,
        response_gate=ResponseGate(response_policy(settings)),
        action_gate=action_gate,
        skills=skills or SkillLibrary(settings.skill_paths, settings.tools),
        provider=provider or build_provider(settings),
        broker=broker,
        transport=transport,
        cards=build_cards(settings, store, clock, broker, action_gate, crash),
        identities=IdentityDirectory(store, clock, transport, settings.identity_ttl_s),
        fallback=None if settings.provider == "rules" else rules_provider(settings),
        proactive=build_proactive(settings, store, clock),
        jobs=build_jobs(settings, store, clock),
        acts=acts,
        clicks=build_clicks(settings, store, acts, forms),
        mcp=mcp,
        forms=forms,
        knowledge=build_knowledge(settings, store, clock, transport),
    )


def build_heartbeat(
    settings: Settings,
    parts: PipelineParts,
    submit: Callable[[Event, int | None], bool],
) -> Heartbeat | None:
    """The runtime's heartbeat (agent/proactive/heartbeat.py), or None when
    ``heartbeat_interval_s`` is not set."""
    if settings.heartbeat_interval_s is None:
        return None
    policy = schedule_policy(settings)
    jobs = JobBeat(
        store=parts.store,
        clock=parts.clock,
        policy=policy,
        catch_up_s=settings.job_catch_up_s,
        decide=parts.response_gate.decide,
    )
    keep_declared_jobs(parts.store, settings.jobs, settings.robot_code, parts.clock.now(), policy)
    return Heartbeat(
        store=parts.store,
        clock=parts.clock,
        policy=policy,
        gate=parts.response_gate,
        proactive=parts.proactive,
        submit=submit,
        robot_code=settings.robot_code,
        jobs=jobs,
    )
