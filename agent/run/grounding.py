"""What the team's knowledge and this conversation's memory hold on a message.

A model given nothing answers from its general knowledge, uncited; a model given three
weak sections answers from them anyway. So a run is given only the sections that match
(``KnowledgeBase.retrieve``, BM25 over bigrams), each as a sourced ``KnowledgeItem`` (file,
section, a hash of the whole section, whether it was cut), and when none match, what was
searched — "3 files (41 sections): nothing on 「年会」" — so the model can say so.

Published memory is served only in the conversation it was learned in (its scope): a
fact a person told the robot in a DM never reaches a group. A memory someone asked to
forget (a tombstone candidate naming it in ``supersedes``, proposed or published) is
withdrawn at once, before anyone reviews the tombstone.

A follow-up such as 「那差旅呢？」 says too little to search on its own: when it finds
nothing, the person's previous turn is searched with it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Protocol
from zoneinfo import ZoneInfo

from agent.contracts import (
    ConversationType,
    Event,
    Grounding,
    KnowledgeItem,
    MemoryCandidate,
    MemoryStatus,
    RecentExchange,
    sha256_text,
)
from skills.language import clean_text
from skills.retrieval.bm25 import Bm25Index, Hit
from skills.retrieval.folder import KnowledgeBase
from skills.retrieval.sections import Section, parse_sections
from storage import Store


@dataclass(frozen=True)
class GroundingLimits:
    items: int  # at most this many items (fewer when fewer match)
    item_chars: int  # each item's content is cut to this many characters


def withdrawn_ids(memories: list[MemoryCandidate]) -> frozenset[str]:
    """Memories of a scope that a tombstone (not rejected by review) names."""
    return frozenset(
        superseded
        for m in memories
        if m.status is not MemoryStatus.REJECTED
        for superseded in m.supersedes
    )


def _memory_section(memory: MemoryCandidate) -> Section:
    """A published memory kept only in the store, as a section to rank."""
    text = f"# {memory.title}\n\n{memory.content}\n"
    section = parse_sections(f"memory:{memory.candidate_id}", text)[-1]
    return replace(section, trail=(), memory_id=memory.candidate_id, scope=memory.scope_id)


# May a DingTalk doc's section be served in this event's conversation (the operator's scope)
Serves = Callable[[Section, Event], bool]


class ReadRights(Protocol):
    """The asker's right to read a DingTalk doc (``agent/knowledge/rights.py``)."""

    async def may_read(
        self, user_id: str, doc_id: str, modified_at: float | None
    ) -> bool | None: ...


async def readable_only(grounding: Grounding, event: Event, rights: ReadRights) -> Grounding:
    """The grounding without the DingTalk docs the asker may not read: their sections never
    reach the model, only their count (the answer may say a source exists they cannot
    open). In a group every section served was named for it by the operator (``Serves``);
    the asker's own right is asked in a DM."""
    # one probe per doc: an AI table's records share their table's right (its newest
    # record's time stands for the table)
    docs: dict[str, float | None] = {}
    for item in grounding.items:
        if item.kind == "dingtalk" and item.doc_id is not None:
            known, now = docs.get(item.doc_id), item.as_of_epoch
            docs[item.doc_id] = max(filter(None, (known, now)), default=None)
    if not docs or event.conversation.type is ConversationType.GROUP:
        return grounding
    answers = {
        doc_id: await rights.may_read(event.actor.user_id, doc_id, as_of)
        for doc_id, as_of in docs.items()
    }
    denied = {doc for doc, allowed in answers.items() if allowed is False}
    unchecked = {doc for doc, allowed in answers.items() if allowed is None}
    if not denied and not unchecked:
        return grounding
    kept = [i for i in grounding.items if i.doc_id not in denied | unchecked]
    update = {"items": kept, "unreadable": len(denied), "unchecked": len(unchecked)}
    return grounding.model_copy(update=update)


class Grounder:
    def __init__(
        self,
        knowledge: KnowledgeBase,
        store: Store,
        limits: GroundingLimits,
        agent_name: str,
        serves: Serves | None = None,
        timezone: ZoneInfo | None = None,
    ) -> None:
        self.knowledge = knowledge
        self.store = store
        self.limits = limits
        self.agent_name = agent_name
        self.serves = serves or (lambda section, event: False)
        self.timezone = timezone or ZoneInfo("Asia/Shanghai")

    def ground(self, event: Event, text: str, recent: RecentExchange | None) -> Grounding:
        scope = event.conversation.id
        memories = self.store.context.memory_in_scope(scope)
        withdrawn = withdrawn_ids(memories)
        published = [
            m
            for m in memories
            if m.status is MemoryStatus.PUBLISHED
            and m.kind != "tombstone"
            and m.candidate_id not in withdrawn
        ]
        query = clean_text(text, self.agent_name)

        def visible(section: Section) -> bool:
            if section.doc is not None:
                return self.serves(section, event)
            return section.visible_in(scope, withdrawn)

        hits = self._search(query, visible, published)
        if not hits and recent is not None and recent.turns:
            query = f"{recent.turns[-1].said} {query}"
            hits = self._search(query, visible, published)
        files = self.knowledge.file_count
        sections = sum(1 for s in self.knowledge.sections if s.own)  # those searched
        grounding = Grounding(
            source="knowledge_dir" if self.knowledge.configured else "none",
            query=query,
            files=files,
            sections=sections,
            memories=len(published),
            items=[self._item(h) for h in hits],
            withdrawn=sorted(withdrawn),
            docs=self.knowledge.doc_count,
        )
        if not self.knowledge.configured and not published:
            grounding.missing = "no knowledge folder is configured and nothing is remembered here"
        elif not hits:
            grounding.nothing_found = (
                f"searched {files} files ({sections} sections) and {len(published)} memories"
                f" of this conversation: nothing on 「{query[:60]}」"
            )
        return grounding

    def _search(
        self, query: str, visible: Callable[[Section], bool], published: list[MemoryCandidate]
    ) -> list[Hit]:
        k = self.limits.items
        hits = self.knowledge.retrieve(query, k, visible)
        seen = {h.section.memory_id for h in hits}
        kept = [m for m in published if m.candidate_id not in seen]
        # Kept only in the store: ranked on their own (their scores do not compare with
        # the folder's), and first, as what was said in this very conversation.
        remembered = Bm25Index([_memory_section(m) for m in kept]).search(query, k) if kept else []
        return (remembered + hits)[:k]

    def _item(self, hit: Hit) -> KnowledgeItem:
        section = hit.section
        limit = self.limits.item_chars
        content = section.own
        cut = len(content) > limit
        if section.doc is not None:
            return self._doc_item(section, content, cut, limit)
        if section.memory_id is not None:
            ref, kind, file = f"memory:{section.memory_id}", "memory", None
            if not section.source.startswith("memory:"):
                file = section.source  # published into the knowledge folder
        else:
            anchor = f"#{section.heading}" if section.level else ""
            ref, kind, file = f"{section.source}{anchor}", "knowledge", section.source
        return KnowledgeItem(
            ref=ref,
            kind=kind,
            file=file,
            section=section.heading if section.level else None,
            content=content[:limit] if cut else content,
            sha256=sha256_text(content)[:16],
            truncated=cut,
            original_length=len(content) if cut else None,
            scope=section.scope,
        )

    def _doc_item(self, section: Section, content: str, cut: bool, limit: int) -> KnowledgeItem:
        """A DingTalk doc's (or AI table's) section: cited by its title, link and as-of."""
        doc = section.doc
        assert doc is not None
        as_of = None
        if doc.as_of is not None:
            as_of = datetime.fromtimestamp(doc.as_of, self.timezone).strftime("%Y-%m-%d %H:%M")
        return KnowledgeItem(
            ref=f"dingtalk:{doc.doc_id}#{section.heading}",
            kind="dingtalk",
            file=doc.title,
            section=section.heading if section.heading != doc.title else None,
            content=content[:limit] if cut else content,
            sha256=sha256_text(content)[:16],
            truncated=cut,
            original_length=len(content) if cut else None,
            doc_id=doc.doc_id,
            link=doc.link,
            as_of=as_of,
            as_of_epoch=doc.as_of,
        )
