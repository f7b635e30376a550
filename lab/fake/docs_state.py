"""What the fake DingTalk holds of docs, knowledge bases and AI tables, and who may read
what. Pure data, like ``lab.fake.workspace_state`` (whose ``Workspace`` holds one of these):
the routes in ``lab.fake.docs`` translate the real shapes onto it.

- A **node** is a doc, a folder or an AI table in a knowledge base (``workspace``; the
  default ``ws-lab`` holds whatever names none). A doc may sit in a ``folder`` (a path,
  ``"HR/Leave"``, its folders made as needed) or under another doc (``parent``).
- **Readers**: a node with ``readers`` unset is readable by everyone; else by a unionId
  whose staff id is listed, or is a member of a listed group (``cid``; ``members``: the
  case's ``fixtures.group_members`` plus everyone who wrote in that group in the case's
  ``send`` steps). The lab's reader (``LAB_KNOWLEDGE_READER``) reads everything — except a
  node the ``docs`` fault's ``no_permission`` names, which nobody may read.
- A doc's blocks are DingTalk's ``{blockType, <blockType>: {...}}``, made from a case's
  short form (``{"heading": "…", "level": 2}``, ``{"paragraph": "…"}``, ``{"list": …}``,
  ``{"ordered": …}``, ``{"quote": …}``, ``{"table": [[…]]}``, ``{"unknown": …}``) or from
  ``text``: paragraphs at blank lines, one starting with ``#``s a heading of that level.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass, field
from typing import Any, Literal

from lab.fake.docs_faults import DocsFault

LAB_KNOWLEDGE_READER = "union-lab-reader"  # the unionId the lab reads knowledge as
DEFAULT_WORKSPACE = "ws-lab"
NODE_PAGE = 3  # the fake's largest page of nodes: small, so a reader must page
RECORD_PAGE = 3  # and of AI-table records
DOC_URL = "https://alidocs.dingtalk.com/i/nodes/{}"  # only ever shown, never fetched
_HEADING = re.compile(r"^(#{1,6})\s+(.*)$", re.DOTALL)
_SHORT_KINDS = {
    "heading": "heading",
    "paragraph": "paragraph",
    "list": "unorderedList",
    "ordered": "orderedList",
    "quote": "blockquote",
    "table": "table",
    "unknown": "unknown",
}

NodeKind = Literal["doc", "folder", "table"]


def root_id(workspace: str) -> str:
    return f"{workspace}-root"


def text_blocks(text: str) -> list[dict[str, Any]]:
    """A case's ``text`` as short-form blocks: paragraphs at blank lines, ``#`` headings."""
    items: list[dict[str, Any]] = []
    for part in re.split(r"\n\s*\n", text.strip()):
        heading = _HEADING.match(part.strip())
        if heading:
            items.append({"heading": heading.group(2).strip(), "level": len(heading.group(1))})
        elif part.strip():
            items.append({"paragraph": part.strip()})
    return items


def wire_blocks(items: list[dict[str, Any]], doc_id: str) -> list[dict[str, Any]]:
    """Short-form blocks as the blocks API answers them (``ValueError`` for a bad one)."""
    blocks = []
    for index, item in enumerate(items):
        kinds = [k for k in item if k in _SHORT_KINDS]
        if len(kinds) != 1:
            raise ValueError(f"block {index} needs one of {', '.join(_SHORT_KINDS)}: {item!r}")
        short = kinds[0]
        wire = _SHORT_KINDS[short]
        block: dict[str, Any] = {"blockType": wire, "index": index, "id": f"{doc_id}-b{index}"}
        value = item[short]
        if short == "heading":
            block[wire] = {"level": f"heading-{item.get('level', 1)}", "text": str(value)}
        elif short == "table":
            cells = [[str(c) for c in row] for row in value]
            block[wire] = {"rowSize": len(cells), "colSize": max(map(len, cells), default=0)}
            block[wire]["cells"] = cells
        elif short != "unknown":
            block[wire] = {"text": str(value)}
        blocks.append(block)
    return blocks


@dataclass
class FakeSheet:
    id: str
    name: str
    records: list[dict[str, Any]] = field(default_factory=list)  # notable's record shape


@dataclass
class FakeNode:
    id: str
    name: str
    kind: NodeKind
    workspace: str
    parent: str  # a node id; the workspace's root id at the top
    created_at: float
    modified_at: float
    readers: list[str] | None = None  # None: everyone
    blocks: list[dict[str, Any]] = field(default_factory=list)  # a doc's
    sheets: list[FakeSheet] = field(default_factory=list)  # an AI table's
    deleted: bool = False

    def answer(self, has_children: bool) -> dict[str, Any]:
        """The wiki's node shape (SDK wiki_2_0 nodes)."""
        extension = {"doc": "adoc", "table": "able"}.get(self.kind)
        body: dict[str, Any] = {
            "nodeId": self.id,
            "name": self.name,
            "type": "FOLDER" if self.kind == "folder" else "FILE",
            "workspaceId": self.workspace,
            "url": DOC_URL.format(self.id),
            "hasChildren": has_children,
            "createTimestamp": int(self.created_at * 1000),
            "modifiedTimestamp": int(self.modified_at * 1000),
        }
        if extension is not None:
            body |= {"extension": extension, "category": "ALIDOC"}
        return body


@dataclass
class Knowledge:
    """The knowledge bases, their nodes (in the order made) and the readers' groups."""

    nodes: dict[str, FakeNode] = field(default_factory=dict)
    workspaces: dict[str, str] = field(default_factory=dict)  # id -> name
    members: dict[str, set[str]] = field(default_factory=dict)  # cid -> staff ids
    forbidden: set[str] = field(default_factory=set)  # no_permission: nobody reads these
    throttled: int = 0
    retry_after: float | None = None
    slow: list[float] = field(default_factory=list)  # the next reads' delays, in order
    # page tokens: token -> (the query it continues, the offset it starts at)
    pages: dict[str, tuple[tuple[Any, ...], int]] = field(default_factory=dict)

    # ------------------------------------------------------------------ seeding

    def _workspace(self, workspace: str | None) -> str:
        name = workspace or DEFAULT_WORKSPACE
        self.workspaces.setdefault(name, name)
        return name

    def _folder(self, workspace: str, path: str, now: float) -> str:
        """The node id of a folder path in a workspace, its folders made as needed."""
        parent = root_id(workspace)
        for depth, name in enumerate(p for p in path.split("/") if p):
            folder_id = f"{workspace}-folder-{'-'.join(path.split('/')[: depth + 1])}"
            if folder_id not in self.nodes:
                self._add(FakeNode(folder_id, name, "folder", workspace, parent, now, now))
            parent = folder_id
        return parent

    def _add(self, node: FakeNode) -> None:
        if node.id in self.nodes:
            raise ValueError(f"two knowledge nodes share the id {node.id!r}")
        self.nodes[node.id] = node

    def _place(self, item: dict[str, Any], now: float) -> tuple[str, str]:
        workspace = self._workspace(item.get("workspace"))
        parent = item.get("parent")
        if parent is not None:
            held = self.nodes.get(parent)
            if held is None or held.workspace != workspace:
                raise ValueError(f"{item['id']!r}: no node {parent!r} in {workspace!r} above it")
            return workspace, parent
        return workspace, self._folder(workspace, item.get("folder") or "", now)

    def seed(
        self,
        docs: list[dict[str, Any]],
        tables: list[dict[str, Any]],
        members: dict[str, list[str]],
        now: float,
    ) -> None:
        """A case's ``fixtures.docs`` / ``fixtures.tables`` (checked by lab.eval) and its
        groups' members; a ``modified_at`` left out is ``now``."""
        for cid, staff in members.items():
            self.members.setdefault(cid, set()).update(staff)
        for item in docs:
            workspace, parent = self._place(item, now)
            at = float(item.get("modified_at", now))
            short = item["blocks"] if "blocks" in item else text_blocks(item.get("text", ""))
            node = FakeNode(item["id"], item["title"], "doc", workspace, parent, at, at)
            node.readers, node.blocks = item.get("readers"), wire_blocks(short, item["id"])
            self._add(node)
        for item in tables:
            workspace, parent = self._place(item, now)
            node = FakeNode(item["id"], item["name"], "table", workspace, parent, now, now)
            node.readers = item.get("readers")
            sheets = item.get("sheets") or [{"name": item["name"], "records": item["records"]}]
            for index, sheet in enumerate(sheets):
                sheet_id = sheet.get("id") or f"{item['id']}-sheet{index + 1}"
                records = [_record(r, i, sheet_id, now) for i, r in enumerate(sheet["records"])]
                node.sheets.append(FakeSheet(sheet_id, sheet["name"], records))
            node.modified_at = max(
                (r["lastModifiedTime"] / 1000 for s in node.sheets for r in s.records),
                default=now,
            )
            self._add(node)

    # ------------------------------------------------------------------ changes

    def arm(self, fault: DocsFault) -> None:
        unknown = [i for i in fault.deleted if i not in self.nodes]
        if unknown:
            raise ValueError(f"fault docs.deleted: no doc or table {', '.join(unknown)}")
        self.throttled += fault.throttled
        if fault.retry_after is not None:
            self.retry_after = fault.retry_after
        self.forbidden.update(fault.no_permission)
        for node_id in fault.deleted:
            self.delete(node_id)
        if fault.slow_s is not None:
            self.slow.extend([fault.slow_s] * fault.slow_times)

    def edit(self, doc_id: str, text: str, now: float) -> None:
        """A person rewrites a doc: its text replaced, modified now (``edit_doc``)."""
        node = self.nodes.get(doc_id)
        if node is None or node.kind != "doc" or node.deleted:
            raise ValueError(f"edit_doc: no doc {doc_id!r} to edit")
        node.blocks = wire_blocks(text_blocks(text), doc_id)
        node.modified_at = max(now, node.modified_at)

    def delete(self, node_id: str) -> None:
        node = self.nodes.get(node_id)
        if node is None:
            raise ValueError(f"no doc or table {node_id!r} to delete")
        node.deleted = True

    def take_throttle(self) -> bool:
        if self.throttled <= 0:
            return False
        self.throttled -= 1
        return True

    def take_delay(self) -> float:
        return self.slow.pop(0) if self.slow else 0.0

    # ------------------------------------------------------------------ reading

    def may_read(self, node: FakeNode, union: str, staff: str) -> bool:
        """Whether the person behind ``union`` (staff id ``staff``) may see the node (see
        the module's doc)."""
        if node.id in self.forbidden:
            return False
        if union == LAB_KNOWLEDGE_READER or node.readers is None:
            return True
        return any(r == staff or staff in self.members.get(r, ()) for r in node.readers)

    def live(self, node_id: str) -> FakeNode | None:
        node = self.nodes.get(node_id)
        return node if node is not None and not node.deleted else None

    def children(self, parent: str) -> list[FakeNode]:
        return [n for n in self.nodes.values() if n.parent == parent and not n.deleted]

    def page_token(self, query: tuple[Any, ...], offset: int) -> str:
        token = secrets.token_urlsafe(12)
        self.pages[token] = (query, offset)
        return token

    def page_offset(self, token: str | None, query: tuple[Any, ...]) -> int | None:
        """Where a page token goes on (0 with none); None for a token not given for it."""
        if not token:
            return 0
        held = self.pages.get(token)
        return held[1] if held is not None and held[0] == query else None


def _record(item: dict[str, Any], index: int, sheet_id: str, now: float) -> dict[str, Any]:
    at_ms = int(float(item.get("modified_at", now)) * 1000)
    return {
        "id": item.get("id") or f"{sheet_id}-rec{index + 1}",
        "fields": dict(item.get("fields") or {}),
        "createdTime": at_ms,
        "lastModifiedTime": at_ms,
    }
