"""``dta knowledge sync``: one sync of the configured DingTalk sources into the configured
store, by a transport of its own (no connector, no runs: a daemon may be running on the
same store, and its snapshots are the same rows)."""

from __future__ import annotations

from agent.clock import SystemClock
from agent.components.build import open_store
from agent.components.knowledge import build_knowledge
from agent.components.policies import transport_config
from agent.config import Settings
from agent.contracts.knowledge import SourceState
from agent.dingtalk.transport import DingTalkTransport


async def sync_once(settings: Settings) -> list[SourceState]:
    clock = SystemClock()
    transport = DingTalkTransport(transport_config(settings), clock)
    try:
        with open_store(settings) as store:
            parts = build_knowledge(settings, store, clock, transport)
            return [] if parts is None else await parts.sync.sync()
    finally:
        await transport.aclose()
