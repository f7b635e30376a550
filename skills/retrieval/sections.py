"""A folder's Markdown split into sections: a heading and the text under it.

Headings inside fenced code blocks are ignored. A block that ``dta memory publish`` wrote
starts with a marker naming the candidate and the conversation it was learned in; its
section carries both (``memory_id``, ``scope``), and ``Section.visible_in`` keeps it out of
every other conversation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from skills.retrieval.terms import terms

_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
# ``agent.run.memory.marker``; older blocks had no scope in the marker, only in the footnote
_MEMORY_MARKER = re.compile(r"^\s*<!-- dta:memory (\S+)(?: scope=(\S+))? -->\s*$")
_FOOTNOTE_SCOPE = re.compile(r"· scope (\S+) ·")


@dataclass(frozen=True)
class DocOrigin:
    """Where a section snapshotted from DingTalk comes from (``agent/knowledge/``): its source,
    doc, title and link, as of when, and where the operator lets it be served."""

    source: str  # the knowledge source's key ("wiki:<workspace>", "doc:<id>", "table:<base>")
    doc_id: str
    title: str
    link: str | None
    as_of: float | None
    kind: str = "doc"  # doc | table


@dataclass(frozen=True)
class Section:
    """A heading and the text under it, up to the next heading of the same or higher level."""

    source: str  # path relative to the knowledge folder, e.g. "hr/leave.md"
    heading: str
    level: int  # 0 for the text before a file's first heading
    content: str
    heading_terms: frozenset[str]  # the section's own heading
    title_terms: frozenset[str]  # own heading, enclosing headings and the file name
    all_terms: frozenset[str]
    trail: tuple[str, ...] = ()  # the file name and the enclosing headings, outermost first
    # A published memory (``dta memory publish`` marks its block): the candidate, and the
    # conversation it was learned in, outside of which it is never served.
    memory_id: str | None = None
    scope: str | None = None
    # the text under the heading up to the next heading of any level (``content`` runs on
    # through the subsections): what a ranked search indexes, so a parent never repeats
    # its children
    own: str = ""
    doc: DocOrigin | None = None  # a DingTalk doc's or AI table's (None: the folder's)

    def visible_in(self, scope: str, withdrawn: frozenset[str] = frozenset()) -> bool:
        """May a run in conversation ``scope`` be given this section?"""
        if self.memory_id is None:
            return True
        return self.scope == scope and self.memory_id not in withdrawn


def parse_sections(source: str, text: str) -> list[Section]:
    """Split Markdown into sections; headings inside fenced code blocks are ignored."""
    lines = text.splitlines()
    headings: list[tuple[int, int, str]] = []  # (line index, level, title)
    fenced = False
    for index, line in enumerate(lines):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        match = None if fenced else _HEADING.match(line)
        if match:
            headings.append((index, len(match.group(1)), match.group(2).strip()))

    title = Path(source).stem
    sections: list[Section] = []
    first = headings[0][0] if headings else len(lines)
    _add(sections, source, title, 0, lines[:first], [title])
    trail: list[tuple[int, str]] = []  # enclosing headings, for context terms
    for position, (start, level, heading) in enumerate(headings):
        end = len(lines)
        for later_start, later_level, _ in headings[position + 1 :]:
            if later_level <= level:
                end = later_start
                break
        trail = [(lvl, h) for lvl, h in trail if lvl < level]
        context = [title, *(h for _, h in trail)]
        body = lines[start + 1 : end]
        own_end = headings[position + 1][0] if position + 1 < len(headings) else len(lines)
        own = _text(lines[start + 1 : own_end])
        memory = _memory_marker(lines, start)
        _add(sections, source, heading, level, body, context, heading, memory, own)
        trail.append((level, heading))
    return sections


def _memory_marker(lines: list[str], heading_at: int) -> tuple[str, str | None] | None:
    """The published memory a heading starts, from the marker line just above it."""
    index = heading_at - 1
    while index >= 0 and not lines[index].strip():
        index -= 1
    match = _MEMORY_MARKER.match(lines[index]) if index >= 0 else None
    return (match.group(1), match.group(2)) if match else None


def _add(
    sections: list[Section],
    source: str,
    heading: str,
    level: int,
    body_lines: list[str],
    context: list[str],
    own_heading: str = "",
    memory: tuple[str, str | None] | None = None,
    own: str | None = None,
) -> None:
    content = _text(body_lines)
    if not content:
        return
    memory_id, scope = memory or (None, None)
    if memory_id is not None and scope is None:
        footnote = _FOOTNOTE_SCOPE.search(content)
        scope = footnote.group(1) if footnote else ""  # unknown scope: served nowhere
    heading_terms = frozenset(terms(own_heading))
    title_terms = heading_terms | frozenset(terms(" ".join(context)))
    all_terms = title_terms | frozenset(terms(content))
    sections.append(
        Section(
            source,
            heading,
            level,
            content,
            heading_terms,
            title_terms,
            all_terms,
            tuple(context),
            memory_id,
            scope,
            content if own is None else own,
        )
    )


def _text(lines: list[str]) -> str:
    return "\n".join(line for line in lines if not _MEMORY_MARKER.match(line)).strip()
