"""The robot app's typed reads of DingTalk docs, knowledge bases (wiki) and AI tables.

DingTalk has no robot identity for docs: every read names an ``operator`` — a person's
**unionId** — and succeeds only if that person can see the node
(../shared/dingtalk-knowledge-and-forms-apis.md §1.1, §2). Nothing stops an app token from
naming anyone, so whoever calls this decides whose rights a read uses; this module only
reads as told.

The requests go on the transport's client and app token (``WorkspaceCalls``: its base URL
``openapi_base_url``, timeouts, the ``x-acs-dingtalk-access-token`` header, and retries of
what provably never arrived — a 429 or a 403 ``QpsLimit`` with its Retry-After). Every read
is idempotent, so a timeout or a 5xx is simply ``unavailable``. Every failure is one
``KnowledgeError`` whose ``kind`` says what the caller may do.

    client = KnowledgeClient(transport)
    for node in await client.workspace_nodes("ws-1", reader_union_id): ...
"""

from __future__ import annotations

import logging
from typing import Any, Literal

from agent.dingtalk.knowledge_records import (
    DocBlock,
    DocNode,
    TableRecord,
    blocks_to_sections,
    doc_block,
    doc_node,
    table_record,
    text_or_none,
)
from agent.dingtalk.transport import DingTalkTransport
from agent.dingtalk.workspace_ids import DEPARTURE, WorkspaceCalls, WorkspaceError, segment

__all__ = [
    "DocBlock",
    "DocNode",
    "KnowledgeClient",
    "KnowledgeError",
    "TableRecord",
    "blocks_to_sections",
]

log = logging.getLogger("dta.knowledge")

KnowledgeErrorKind = Literal["no_permission", "not_found", "throttled", "unavailable", "invalid"]

NODES_MAX = 2_000  # nodes read from one knowledge base before stopping
DEPTH_MAX = 8  # folder levels read below a knowledge base's root
RECORDS_MAX = 5_000  # records read from one AI-table sheet before stopping
PAGES_MAX = 200  # pages asked for one listing: a platform that pages forever is cut off
NODE_PAGE = 50  # the wiki's largest ``maxResults``
RECORD_PAGE = 100  # notable's largest ``maxResults``


class KnowledgeError(Exception):
    """A knowledge read that did not give its answer. ``kind``: ``no_permission`` (the
    operator may not see it, or the app lacks the scope), ``not_found`` (no such node, or
    deleted; for an AI table also "no access", which DingTalk does not tell apart),
    ``throttled`` (retries exhausted), ``unavailable`` (no connection, a timeout, a 5xx,
    no token), ``invalid`` (the request or the answer made no sense)."""

    def __init__(
        self,
        kind: KnowledgeErrorKind,
        message: str,
        status: int | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(f"{kind}: {message}" + (f" ({status} {code})" if status else ""))
        self.kind: KnowledgeErrorKind = kind
        self.message = message
        self.status = status
        self.code = code


def _knowledge_error(exc: WorkspaceError) -> KnowledgeError:
    """The workspace call's failure as a knowledge read's."""
    kind: KnowledgeErrorKind
    if exc.kind == "forbidden":
        # 401: the app's token refused even after a fresh one; not the operator's rights
        kind = "unavailable" if exc.status == 401 else "no_permission"
    elif exc.kind == "not_found":
        kind = "not_found"
    elif exc.kind == "throttled":
        kind = "throttled"
    elif exc.kind == "invalid":
        kind = "invalid"
    else:  # unavailable, or a timeout / 5xx after sending: a read may simply be asked again
        kind = "unavailable"
    return KnowledgeError(kind, exc.message, exc.status, exc.code)


class KnowledgeClient:
    """Typed doc, wiki and AI-table reads, each as the ``operator`` (a unionId) names."""

    def __init__(self, transport: DingTalkTransport) -> None:
        self._calls = WorkspaceCalls(transport)

    async def _read(
        self,
        method: str,
        path: str,
        params: dict[str, str],
        body: object | None = None,
    ) -> dict[str, Any]:
        # A read never rides on a write's pool place: it takes its own.
        outer = DEPARTURE.set(None)
        try:
            return await self._calls.openapi(method, path, body, params=params)
        except WorkspaceError as exc:
            raise _knowledge_error(exc) from None
        finally:
            DEPARTURE.reset(outer)

    # ------------------------------------------------------------------ wiki

    async def workspace_nodes(self, workspace_id: str, operator: str) -> list[DocNode]:
        """Every node the operator can see in a knowledge base, level by level from its
        root (each top-level node's ``parent_id`` is the root's id), every page of every
        level; at most ``NODES_MAX`` nodes, ``DEPTH_MAX`` levels deep."""
        data = await self._read(
            "GET", f"/v2.0/wiki/workspaces/{_id(workspace_id)}", {"operatorId": _op(operator)}
        )
        workspace = data.get("workspace") if isinstance(data.get("workspace"), dict) else {}
        root = text_or_none(workspace.get("rootNodeId"))
        if root is None:
            raise KnowledgeError("invalid", f"knowledge base {workspace_id} has no root node")
        nodes: list[DocNode] = []
        level = [root]
        for _depth in range(DEPTH_MAX):
            below: list[str] = []
            for parent in level:
                for node in await self._children(parent, operator, NODES_MAX - len(nodes)):
                    nodes.append(node)
                    if node.has_children:
                        below.append(node.node_id)
                if len(nodes) >= NODES_MAX:
                    log.warning("knowledge base %s: stopped at %d nodes", workspace_id, NODES_MAX)
                    return nodes
            if not below:
                return nodes
            level = below
        log.warning("knowledge base %s: not read below %d levels", workspace_id, DEPTH_MAX)
        return nodes

    async def _children(self, parent: str, operator: str, room: int) -> list[DocNode]:
        """One node's children, every page (at most ``room`` of them)."""
        params = {"parentNodeId": parent, "operatorId": _op(operator), "maxResults": str(NODE_PAGE)}
        found: list[DocNode] = []
        for _ in range(PAGES_MAX):
            data = await self._read("GET", "/v2.0/wiki/nodes", params)
            for item in data.get("nodes") or []:
                node = doc_node(item, parent) if isinstance(item, dict) else None
                if node is not None and len(found) < room:
                    found.append(node)
            token = text_or_none(data.get("nextToken"))
            if token is None or len(found) >= room:
                break
            params = {**params, "nextToken": token}
        return found

    async def node(self, node_id: str, operator: str) -> DocNode:
        """One node (a doc's id is its node id, the last segment of its alidocs link)."""
        data = await self._read(
            "GET", f"/v2.0/wiki/nodes/{_id(node_id)}", {"operatorId": _op(operator)}
        )
        found = doc_node(data["node"]) if isinstance(data.get("node"), dict) else None
        if found is None:
            raise KnowledgeError("invalid", f"the answer for node {node_id} has no node")
        return found

    # ------------------------------------------------------------------ docs

    async def blocks(self, doc_id: str, operator: str) -> list[DocBlock]:
        """A doc's first-level blocks, in order (nesting, images and code are not in them:
        DingTalk gives only the top level, and unknown blocks without content)."""
        data = await self._read(
            "GET",
            f"/v1.0/doc/suites/documents/{_id(doc_id)}/blocks",
            {"operatorId": _op(operator)},
        )
        result = data.get("result") if isinstance(data.get("result"), dict) else {}
        items = result.get("data")
        if not isinstance(items, list):
            raise KnowledgeError("invalid", f"the blocks answer for {doc_id} has no data")
        return [doc_block(item) for item in items]

    async def can_read(self, doc_id: str, operator: str) -> bool:
        """Whether the operator may see the doc now: v1.0 infos/query's ``hasPermission``
        (False also for a doc it says is deleted). Only DingTalk's own answer about the doc
        is a yes or a no: a probe that fails in any way (a 403 for a missing app scope, a
        throttle, no answer for the doc) raises, so no one is told "you may not" on a
        guess."""
        _id(doc_id)  # refuses an empty id
        body = {"nodeIds": [doc_id], "operatorId": _op(operator)}
        data = await self._read("POST", "/v1.0/doc/workspaces/docs/infos/query", {}, body)
        for item in data.get("result") or []:
            if not isinstance(item, dict):
                continue
            info = item.get("nodeBO") if isinstance(item.get("nodeBO"), dict) else {}
            if info.get("nodeId") not in (None, doc_id):
                continue
            return item.get("hasPermission") is True and info.get("deleted") is not True
        raise KnowledgeError("not_found", f"no answer about {doc_id}")

    # ------------------------------------------------------------------ AI tables

    async def table_sheets(self, base_id: str, operator: str) -> list[tuple[str, str]]:
        """The AI table's sheets: (sheet id, name), in DingTalk's order."""
        data = await self._read(
            "GET", f"/v1.0/notable/bases/{_id(base_id)}/sheets", {"operatorId": _op(operator)}
        )
        sheets = []
        for item in data.get("value") or []:
            if isinstance(item, dict) and text_or_none(item.get("id")):
                sheets.append((str(item["id"]), text_or_none(item.get("name")) or str(item["id"])))
        return sheets

    async def table_records(self, base_id: str, sheet: str, operator: str) -> list[TableRecord]:
        """Every record of one sheet (by id or name), every page; at most ``RECORDS_MAX``."""
        path = f"/v1.0/notable/bases/{_id(base_id)}/sheets/{_id(sheet)}/records/list"
        params = {"operatorId": _op(operator)}
        body: dict[str, Any] = {"maxResults": RECORD_PAGE}
        records: list[TableRecord] = []
        for _ in range(PAGES_MAX):
            data = await self._read("POST", path, params, body)
            for item in data.get("records") or []:
                record = table_record(item)
                if record is not None:
                    records.append(record)
            if len(records) >= RECORDS_MAX:
                log.warning("AI table %s: stopped at %d records", base_id, RECORDS_MAX)
                return records[:RECORDS_MAX]
            token = text_or_none(data.get("nextToken"))
            if data.get("hasMore") is not True or token is None:
                break
            body = {"maxResults": RECORD_PAGE, "nextToken": token}
        return records


def _id(value: str) -> str:
    """An id as one path segment (or body value): never empty, never a path of its own."""
    try:
        return segment(value)
    except WorkspaceError:
        raise KnowledgeError("invalid", "an empty id") from None


def _op(operator: str) -> str:
    if not operator:
        raise KnowledgeError("invalid", "a knowledge read names no operator (unionId)")
    return operator
