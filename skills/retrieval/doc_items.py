"""A run's DingTalk doc items (``KnowledgeItem`` of kind ``dingtalk``) as sections a provider
can match a question against, and how an answer cites one: its title, that it is a DingTalk
doc (or AI table), as of when, and its link."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from zoneinfo import ZoneInfo

from agent.contracts import EnrichedInvocation, KnowledgeItem
from skills.retrieval.sections import DocOrigin, Section, parse_sections


def doc_sections(invocation: EnrichedInvocation) -> list[Section]:
    """The invocation's DingTalk items as sections (the asker may read each: the host
    filtered the others out before the provider was asked)."""
    grounding = invocation.knowledge
    items = [i for i in grounding.items if i.kind == "dingtalk"] if grounding else []
    return [_section(item) for item in items]


def _section(item: KnowledgeItem) -> Section:
    title = item.file or "钉钉文档"
    heading = item.section or title
    parsed = parse_sections(title, f"# {heading}\n\n{item.content}\n")[-1]
    origin = DocOrigin(
        source="",
        doc_id=item.doc_id or "",
        title=title,
        link=item.link,
        as_of=item.as_of_epoch,
    )
    return replace(parsed, trail=(title,), doc=origin, own=item.content)


def cited(section: Section, tz: ZoneInfo, english: bool) -> tuple[str, str]:
    """(where, link line) for an answer from a DingTalk doc's section:
    「《差旅制度》（钉钉文档，更新于 11月28日）」 and the doc's link."""
    doc = section.doc
    assert doc is not None
    link = f"\n{doc.link}" if doc.link else ""
    day = datetime.fromtimestamp(doc.as_of, tz) if doc.as_of is not None else None
    if english:
        when = f", updated {day.strftime('%b %d')}" if day else ""
        return f'"{doc.title}" (DingTalk doc{when})', link
    when = f"，更新于 {day.month}月{day.day}日" if day else ""
    return f"《{doc.title}》（钉钉文档{when}）", link
