"""DingTalk knowledge built from ``Settings``: the sync over the configured sources, the
asker's read rights, and what the grounding needs (the snapshots' sections, where a source
may be served). None of it exists without ``knowledge_sources``."""

from __future__ import annotations

from dataclasses import dataclass
from zoneinfo import ZoneInfo

from agent.clock import Clock
from agent.config import Settings
from agent.config.parts import KnowledgeSource
from agent.contracts import Event
from agent.dingtalk.knowledge_api import KnowledgeClient, blocks_to_sections
from agent.dingtalk.transport import DingTalkTransport
from agent.dingtalk.workspace import WorkspaceClient
from agent.knowledge.rights import ReadRights
from agent.knowledge.sections import Snapshots, fits, snapshot_sections
from agent.knowledge.sync import KnowledgeSync
from skills.retrieval.sections import Section
from storage import Store


@dataclass(frozen=True)
class KnowledgeParts:
    sync: KnowledgeSync
    rights: ReadRights
    snapshots: Snapshots  # the index's extra sections (KnowledgeBase(extra=…))
    timezone: ZoneInfo
    sources: dict[str, KnowledgeSource]  # by key: asked for every doc section ranked

    def serves(self, section: Section, event: Event) -> bool:
        """The operator's scope for the section's source (``agent/knowledge/sections.py``)."""
        doc = section.doc
        return doc is not None and fits(self.sources.get(doc.source), event)


def build_knowledge(
    settings: Settings, store: Store, clock: Clock, transport: DingTalkTransport
) -> KnowledgeParts | None:
    if not settings.knowledge_sources:
        return None
    client = KnowledgeClient(transport)
    directory = WorkspaceClient(transport, oapi_base_url=settings.directory_base_url)
    sync = KnowledgeSync(
        store=store,
        clock=clock,
        client=client,
        sources=settings.knowledge_sources,
        reader=settings.knowledge_reader,
        to_sections=blocks_to_sections,
    )
    rights = ReadRights(
        store=store,
        clock=clock,
        client=client,
        union_id=directory.union_id,
        ttl_s=settings.knowledge_permission_ttl_s,
    )
    sources = {source.key: source for source in settings.knowledge_sources}
    return KnowledgeParts(
        sync, rights, snapshot_sections(store), ZoneInfo(settings.timezone), sources
    )
