"""Acts, approvals and tool sources (``agent/acts/``, ``agent/tools/``), built when a write
tool is enabled or an MCP server is configured; the enabled tools a run offers."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from agent.acts.approval_card import ApprovalCards
from agent.acts.approvals import ApprovalDesk
from agent.acts.clicks import ClickDesk
from agent.acts.executor import ActExecutor
from agent.acts.form_card import FormCards
from agent.acts.forms import FormDesk
from agent.acts.runner import ActRunner
from agent.cards.api import CardAPI
from agent.clock import Clock
from agent.config import Settings
from agent.crashpoints import CrashPoints
from agent.dingtalk.transport import DingTalkTransport
from agent.dingtalk.workspace import WorkspaceClient
from agent.run.broker import Broker
from agent.tools.builtin import BUILTIN
from agent.tools.catalog import ToolCatalog
from agent.tools.mcp.sources import McpSources
from agent.tools.registry import ToolBox
from storage import Store


@dataclass(frozen=True)
class ActParts:
    """Acts and approvals (agent/acts/): built when a write tool is enabled."""

    runner: ActRunner
    desk: ApprovalDesk
    cards: ApprovalCards | None  # None: approvals by text code


@dataclass(frozen=True)
class FormParts:
    """Ask-user forms (agent/acts/forms.py): always a desk; cards with a template."""

    desk: FormDesk
    cards: FormCards | None  # None: a form is a numbered question answered in words


def build_forms(settings: Settings, store: Store, clock: Clock, broker: Broker) -> FormParts:
    """The form desk and (with a template and a robot code) the form cards."""
    template = settings.form_card_template_id
    cards = None
    if template and settings.robot_code:
        api = CardAPI(broker.transport, settings.robot_code, template, "question")
        cards = FormCards(api, store, clock, broker, settings.timezone)
    return FormParts(FormDesk(store, clock), cards)


def build_clicks(
    settings: Settings, store: Store, acts: ActParts | None, forms: FormParts | None = None
) -> ClickDesk | None:
    """What decides card clicks: approvals, form cards' submits, and the stop button of
    streaming reply cards (None: no card has buttons here)."""
    with_forms = forms is not None and forms.cards is not None
    if acts is None and settings.reply_mode != "card" and not with_forms:
        return None
    desk = acts.desk if acts is not None else None
    form_desk = forms.desk if forms is not None and with_forms else None
    return ClickDesk(store, desk, paused=settings.paused, forms=form_desk)


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
    with_cards = bool(template and settings.robot_code)
    desk = ApprovalDesk(store, clock, settings.approval_timeout_s, with_cards, settings.timezone)
    cards = None
    if with_cards:
        assert template is not None and settings.robot_code is not None
        api = CardAPI(broker.transport, settings.robot_code, template, "status")
        # a card DingTalk will not take: the same prompt in words, with its text code
        in_words = partial(desk.prompt, cards=False)
        cards = ApprovalCards(api, store, clock, broker, settings.timezone, in_words)
    runner = ActRunner(
        store=store,
        clock=clock,
        desk=desk,
        executor=ActExecutor(store, workspace, broker, crash, mcp, settle_s=settings.act_settle_s),
        reads=workspace,
        approval_timeout_s=settings.approval_timeout_s,
        repeat_window_s=settings.act_repeat_window_s,
        catalog=ToolCatalog(mcp),
    )
    return ActParts(runner, desk, cards)


def tool_box(
    settings: Settings, transport: DingTalkTransport, mcp: McpSources | None
) -> ToolBox | None:
    """The enabled tools: the workspace's over the robot app's own calls, and the MCP
    servers' (None: none enabled)."""
    if not settings.tools:
        return None
    workspace = WorkspaceClient(transport, oapi_base_url=settings.directory_base_url)
    return ToolBox(list(settings.tools), workspace, ToolCatalog(mcp))
