"""Snapshots as sections to rank: each stored section of an active doc becomes a ``Section``
(``skills/retrieval/``) carrying its ``DocOrigin`` — source, doc, title, link, as-of — and
where a source may be served (``fits``), from the operator's ``scope``."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import replace

from agent.config.parts import KnowledgeSource
from agent.contracts import ConversationType, Event
from agent.contracts.knowledge import SnapshotDoc, SnapshotSection
from skills.retrieval.sections import DocOrigin, Section, parse_sections
from storage import Store


def as_section(doc: SnapshotDoc, section: SnapshotSection) -> Section:
    """One stored section as the index reads it: its last heading its own, the doc's title
    and the headings above it its trail."""
    heading = section.path[-1] if section.path else doc.title
    # the wire's paths start with the doc's title (a table's: its sheet)
    above = section.path[1:-1] if section.path[:1] == [doc.title] else section.path[:-1]
    parsed = parse_sections(doc.title, f"# {heading}\n\n{section.text}\n")[-1]
    origin = DocOrigin(
        source=doc.source,
        doc_id=doc.doc_id,
        title=doc.title,
        link=doc.url,
        as_of=section.modified_at if section.modified_at is not None else doc.modified_at,
        kind=doc.kind,
    )
    return replace(parsed, trail=(doc.title, *above), doc=origin)


Snapshots = Callable[[], tuple[Hashable, list[Section]]]


def snapshot_sections(store: Store) -> Snapshots:
    """What ``KnowledgeBase(extra=…)`` asks each time it refreshes: the snapshots'
    signature, and their sections when it moved (read only then)."""
    cache: dict[str, object] = {"signature": None, "sections": []}

    def read() -> tuple[Hashable, list[Section]]:
        signature = store.knowledge.signature()
        if signature != cache["signature"]:
            cache["sections"] = [as_section(d, s) for d, s in store.knowledge.sections()]
            cache["signature"] = signature
        return signature, list(cache["sections"])  # type: ignore[call-overload]

    return read


def fits(source: KnowledgeSource | None, event: Event) -> bool:
    """May the source's sections be served in the event's conversation at all (before any
    asker's right): ``dm``, ``groups``, a list of group cids; unset: DMs only. In a group,
    only a source the operator named for groups (or for this group) is served: everyone
    there would see it, and no probe can ask DingTalk about all of them at once."""
    if source is None:
        return False  # its source is no longer configured: nothing of it is served
    group = event.conversation.type is ConversationType.GROUP
    scope = source.scope
    if scope is None or scope == "dm":
        return not group
    if scope == "groups":
        return group
    return group and event.conversation.id in scope
