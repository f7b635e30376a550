"""Acts, approvals and tool sources (``agent/acts/``, ``agent/tools/``), built when a write
tool is enabled or an MCP server is configured; the enabled tools a run offers."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from agent.acts.approval_card import ApprovalCards
from agent.acts.approvals import ApprovalDesk
from agent.acts.clicks import ClickDesk
from agent.acts.executor import ActExecutor
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


def build_clicks(settings: Settings, store: Store, acts: ActParts | None) -> ClickDesk | None:
    """What decides card clicks: approvals, and the stop button of streaming reply cards
    (None: no card has buttons here)."""
    if acts is None and settings.reply_mode != "card":
        return None
    return ClickDesk(store, acts.desk if acts is not None else None, paused=settings.paused)


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
