"""What the knowledge calls return (``agent/dingtalk/knowledge_api.py``): doc-tree nodes,
a doc's first-level blocks and AI-table records, typed; how DingTalk's JSON is read into
them (a value of the wrong shape reads as nothing, never as an error); and a doc's blocks
as sections a retriever can hold (``blocks_to_sections``).

Shapes: ../shared/dingtalk-knowledge-and-forms-apis.md §1.3 (wiki nodes), §1.4 (blocks:
``{blockType, <blockType>: {...}}``), §2 (notable records).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

NodeKind = Literal["doc", "folder", "table", "file"]

# The node extensions that are an online doc (read by blocks) or an AI table (notable).
DOC_EXTENSIONS = frozenset({"adoc", "alidoc"})
TABLE_EXTENSIONS = frozenset({"able"})
SECTION_CHARS = 1200  # a section's text is split at paragraph boundaries to about this
_LEVEL = re.compile(r"(\d+)")
# Where a paragraph too long for one section is best cut: after a sentence or a line.
_CUT_AFTER = ("\n", "。", "！", "？", ". ", "! ", "? ", "；", "; ")


@dataclass(frozen=True)
class DocNode:
    node_id: str
    name: str
    kind: NodeKind
    url: str | None
    modified_at: float | None  # epoch seconds
    workspace_id: str | None
    parent_id: str | None
    has_children: bool


@dataclass(frozen=True)
class DocBlock:
    kind: str  # heading | paragraph | list | quote | table | other
    text: str
    level: int | None = None  # a heading's level (1 = the top)
    ordered: bool = False  # a list item of a numbered list


@dataclass(frozen=True)
class TableRecord:
    record_id: str
    fields: dict[str, Any]
    modified_at: float | None  # epoch seconds


def text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def epoch_s(value: Any) -> float | None:
    """A DingTalk time as epoch seconds: an int of milliseconds (or seconds, when small
    enough to be those), or an ISO-8601 string (the wiki's ``modifiedTime`` is minute-precise,
    ``"2026-03-04T17:51Z"``); None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) / 1000.0 if value > 100_000_000_000 else float(value)
    if isinstance(value, str) and value:
        if value.isdigit():
            return epoch_s(int(value))
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


def node_kind(data: dict[str, Any]) -> NodeKind:
    """A wiki node's kind from its ``type`` and ``extension`` (``category`` when it has no
    extension: an ``ALIDOC`` is a doc)."""
    if str(data.get("type") or "").upper() == "FOLDER":
        return "folder"
    extension = str(data.get("extension") or "").lower()
    if extension in DOC_EXTENSIONS:
        return "doc"
    if extension in TABLE_EXTENSIONS:
        return "table"
    if not extension and str(data.get("category") or "").upper() == "ALIDOC":
        return "doc"
    return "file"


def doc_node(data: dict[str, Any], parent_id: str | None = None) -> DocNode | None:
    """A wiki node (``nodes[i]`` or ``node``); None for one without an id."""
    node_id = text_or_none(data.get("nodeId"))
    if node_id is None:
        return None
    modified = epoch_s(data.get("modifiedTimestamp"))
    if modified is None:
        modified = epoch_s(data.get("modifiedTime"))
    return DocNode(
        node_id=node_id,
        name=text_or_none(data.get("name")) or node_id,
        kind=node_kind(data),
        url=text_or_none(data.get("url")),
        modified_at=modified,
        workspace_id=text_or_none(data.get("workspaceId")),
        parent_id=parent_id or text_or_none(data.get("parentNodeId")),
        has_children=data.get("hasChildren") is True,
    )


def _cell_text(cell: Any) -> str:
    if isinstance(cell, str):
        return cell.strip()
    if isinstance(cell, dict):
        return str(cell.get("text") or cell.get("value") or "").strip()
    return "" if cell is None else str(cell)


def table_text(cells: Any) -> str:
    """A table's cells as ``|``-separated rows, one a line (empty rows left out)."""
    if not isinstance(cells, list):
        return ""
    rows = []
    for row in cells:
        values = [_cell_text(c) for c in row] if isinstance(row, list) else [_cell_text(row)]
        if any(values):
            rows.append(" | ".join(values))
    return "\n".join(rows)


def doc_block(data: Any) -> DocBlock:
    """One first-level block; a kind this reader does not know (images, code, embeds come
    as ``unknown`` with no content) is ``other`` with no text."""
    if not isinstance(data, dict):
        return DocBlock("other", "")
    block_type = str(data.get("blockType") or "")
    body = data.get(block_type) if isinstance(data.get(block_type), dict) else {}
    text = str(body.get("text") or "").strip()
    if block_type == "heading":
        match = _LEVEL.search(str(body.get("level") or ""))
        return DocBlock("heading", text, int(match.group(1)) if match else 1)
    if block_type == "paragraph":
        return DocBlock("paragraph", text)
    if block_type in ("unorderedList", "orderedList"):
        return DocBlock("list", text, ordered=block_type == "orderedList")
    if block_type == "blockquote":
        return DocBlock("quote", text)
    if block_type == "table":
        return DocBlock("table", table_text(body.get("cells")))
    return DocBlock("other", "")


def table_record(data: Any) -> TableRecord | None:
    if not isinstance(data, dict) or text_or_none(data.get("id")) is None:
        return None
    fields = data.get("fields") if isinstance(data.get("fields"), dict) else {}
    return TableRecord(str(data["id"]), dict(fields), epoch_s(data.get("lastModifiedTime")))


# ---------------------------------------------------------------------------- sections


def _rendered(blocks: list[DocBlock]) -> list[str]:
    """A section's blocks as paragraphs of text (a list's items numbered in their run)."""
    parts: list[str] = []
    number = 0
    for block in blocks:
        number = number + 1 if block.kind == "list" and block.ordered else 0
        if not block.text:
            continue
        if block.kind == "list":
            parts.append(f"{number}. {block.text}" if block.ordered else f"- {block.text}")
        elif block.kind == "quote":
            parts.append("> " + block.text)
        else:
            parts.append(block.text)
    return parts


def _cut(paragraph: str, limit: int) -> list[str]:
    """A paragraph longer than ``limit`` in pieces, each cut after a sentence when one
    ends in its second half, else at the limit."""
    pieces = []
    while len(paragraph) > limit:
        window = paragraph[:limit]
        ends = [window.rfind(mark) + len(mark) for mark in _CUT_AFTER if mark in window]
        at = max((e for e in ends if e > limit // 2), default=limit)
        pieces.append(paragraph[:at].strip())
        paragraph = paragraph[at:].strip()
    return [*pieces, paragraph] if paragraph else pieces


def _chunks(parts: list[str], limit: int) -> list[str]:
    """Paragraphs packed into texts of at most ``limit`` characters, split only between
    paragraphs (or inside one longer than the limit)."""
    chunks: list[str] = []
    current = ""
    for part in parts:
        for piece in _cut(part, limit):
            if current and len(current) + 2 + len(piece) > limit:
                chunks.append(current)
                current = ""
            current = f"{current}\n\n{piece}" if current else piece
    return [*chunks, current] if current else chunks


def blocks_to_sections(
    title: str, blocks: list[DocBlock], limit: int = SECTION_CHARS
) -> list[tuple[list[str], str]]:
    """A doc as sections: (its path — the title, then the headings above it —, its text),
    in document order. A section ends at the next heading of any level; a long one is
    split at paragraph boundaries into texts of at most ``limit`` characters, each with
    the same path. Sections with no text (a heading straight after another) are left out.
    """
    sections: list[tuple[list[str], str]] = []
    headings: list[tuple[int, str]] = []  # the open headings, outermost first
    body: list[DocBlock] = []

    def close() -> None:
        path = [title, *(text for _, text in headings)]
        sections.extend((list(path), chunk) for chunk in _chunks(_rendered(body), limit))
        body.clear()

    for block in blocks:
        if block.kind == "heading" and block.text:
            close()
            level = block.level or 1
            while headings and headings[-1][0] >= level:
                headings.pop()
            headings.append((level, block.text))
        elif block.kind != "heading":
            body.append(block)
    close()
    return sections
