"""The fake DingTalk's doc, knowledge-base (wiki) and AI-table reads.

Shapes are the real OpenAPI's (../shared/dingtalk-knowledge-and-forms-apis.md §1, §2); the
state and its reader rules are ``lab.fake.docs_state``. Every call needs the header
``x-acs-dingtalk-access-token`` and names an ``operatorId`` — a unionId (400
``MissingoperatorId`` without one, 400 ``paramError`` for a staff id of the directory):

- ``GET /v2.0/wiki/workspaces/{workspaceId}`` → ``{workspace{workspaceId, name, rootNodeId,
  type, url}}``.
- ``GET /v2.0/wiki/nodes?parentNodeId&maxResults&nextToken`` → ``{nodes[…], nextToken}``:
  the children the operator may see, at most ``NODE_PAGE`` a page (fewer than asked, so a
  reader must follow ``nextToken``).
- ``GET /v2.0/wiki/nodes/{nodeId}`` → ``{node}``.
- ``GET /v1.0/doc/suites/documents/{docKey}/blocks`` → ``{result{data[…]}, success}``; a
  table or folder is 400 ``InvalidRequest.InputArgs.Invalid`` ("doc key is illegal").
- ``POST /v1.0/doc/workspaces/docs/infos/query`` ``{nodeIds ≤ 20, operatorId}`` →
  ``{result[{nodeBO{nodeId, name, url, docType, lastEditTime, deleted}, workspaceBO,
  hasPermission}]}`` (an unknown id is left out).
- ``GET /v1.0/notable/bases/{baseId}/sheets`` → ``{value[{id, name}]}``.
- ``POST /v1.0/notable/bases/{baseId}/sheets/{sheet}/records/list`` ``{maxResults ≤ 100,
  nextToken}`` → ``{records[…], hasMore, nextToken}``, at most ``RECORD_PAGE`` a page.

A node the operator may not see is 403 ``Forbidden.AccessDenied`` (docs and wiki); a
deleted or unknown one 404 ``documentNotFound`` (the fake's word: DingTalk's is not known).
An AI table says 400 ``invalidRequest.document.notFound`` for all three, as DingTalk does.
The ``docs`` fault (lab.fake.docs_faults) throttles (429 ``Throttling``) or slows every one
of these calls; ``lab.fake.calls`` counts blocks and record reads as ``doc_read``, probes
as ``permission`` and the rest as ``doc_list``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from lab.fake.docs_state import DOC_URL, NODE_PAGE, RECORD_PAGE, FakeNode, Knowledge, root_id
from lab.fake.http import Reject, _authenticate, _json_body, _reject_api, api_error
from lab.fake.state import PlatformState
from lab.fake.workspace_state import shown_staff

BATCH_MAX = 20  # infos/query's largest nodeIds
RECORDS_ASK_MAX = 100  # notable's largest maxResults


class Reader:
    """One knowledge request's platform, knowledge and operator, faults applied."""

    def __init__(self, platform: PlatformState, operator: str) -> None:
        self.platform = platform
        self.knowledge: Knowledge = platform.workspace.knowledge
        self.operator = operator
        self.staff = shown_staff(platform.users, operator)

    def may_read(self, node: FakeNode) -> bool:
        return self.knowledge.may_read(node, self.operator, self.staff)

    def doc_node(self, node_id: str) -> FakeNode:
        """A live node the operator may see: else 404, or 403 when they may not."""
        node = self.knowledge.live(node_id)
        if node is None:
            _reject_api(404, "documentNotFound", f"node {node_id} does not exist")
        if not self.may_read(node):
            _reject_api(403, "Forbidden.AccessDenied", "the operator has no permission")
        return node

    def table(self, base_id: str) -> FakeNode:
        node = self.knowledge.live(base_id)
        if node is None or node.kind != "table" or not self.may_read(node):
            _reject_api(400, "invalidRequest.document.notFound", "document not found")
        return node

    def answer(self, node: FakeNode) -> dict[str, Any]:
        return node.answer(bool(self.knowledge.children(node.id)))


async def reader(request: web.Request, operator: Any = None) -> Reader:
    """The request's reader once its token and operator are good, after any ``docs``
    fault: a slow answer waits (real seconds), a throttled one is refused."""
    platform = _authenticate(request)
    if operator is None:
        operator = request.query.get("operatorId")
    if not isinstance(operator, str) or not operator:
        _reject_api(400, "MissingoperatorId", "operatorId is mandatory for this action.")
    if operator in platform.users:
        _reject_api(400, "paramError", "operatorId must be a unionId, not a userId")
    knowledge = platform.workspace.knowledge
    delay = knowledge.take_delay()
    if delay:
        await asyncio.sleep(delay)
    if knowledge.take_throttle():
        response = api_error(429, "Throttling", "Request was denied due to flow control.")
        if knowledge.retry_after is not None:
            response.headers["Retry-After"] = f"{knowledge.retry_after:g}"
        raise Reject(response)
    return Reader(platform, operator)


async def workspace_get(request: web.Request) -> web.Response:
    read = await reader(request)
    workspace = request.match_info["workspaceId"]
    name = read.knowledge.workspaces.get(workspace)
    if name is None:
        _reject_api(404, "documentNotFound", f"workspace {workspace} does not exist")
    body = {
        "workspaceId": workspace,
        "name": name,
        "rootNodeId": root_id(workspace),
        "type": "TEAM",
        "url": f"https://alidocs.dingtalk.com/i/spaces/{workspace}/overview",
    }
    return web.json_response({"workspace": body})


def _page_size(value: str | None, most: int) -> int:
    if value is None:
        return most
    if not value.isdigit() or not 1 <= int(value) <= most:
        _reject_api(400, "InvalidParameter.maxResults", f"maxResults must be 1 to {most}")
    return int(value)


async def nodes_list(request: web.Request) -> web.Response:
    read = await reader(request)
    parent = request.query.get("parentNodeId")
    if not parent:
        _reject_api(400, "MissingparentNodeId", "parentNodeId is mandatory for this action.")
    size = min(_page_size(request.query.get("maxResults"), 50), NODE_PAGE)
    roots = {root_id(w) for w in read.knowledge.workspaces}
    if parent not in roots:
        read.doc_node(parent)  # 404 for no such node, 403 for one the operator may not see
    seen = [n for n in read.knowledge.children(parent) if read.may_read(n)]
    query = ("nodes", parent, read.operator)
    offset = read.knowledge.page_offset(request.query.get("nextToken"), query)
    if offset is None:
        _reject_api(400, "InvalidParameter.nextToken", "nextToken is invalid")
    page = seen[offset : offset + size]
    body: dict[str, Any] = {"nodes": [read.answer(n) for n in page]}
    if offset + size < len(seen):
        body["nextToken"] = read.knowledge.page_token(query, offset + size)
    return web.json_response(body)


async def node_get(request: web.Request) -> web.Response:
    read = await reader(request)
    node = read.doc_node(request.match_info["nodeId"])
    return web.json_response({"node": read.answer(node)})


async def blocks_get(request: web.Request) -> web.Response:
    read = await reader(request)
    node = read.doc_node(request.match_info["docKey"])
    if node.kind != "doc":
        _reject_api(400, "InvalidRequest.InputArgs.Invalid", "doc key is illegal")
    return web.json_response({"result": {"data": node.blocks}, "success": True})


async def infos_query(request: web.Request) -> web.Response:
    body = await _json_body(request)
    if not isinstance(body, dict):
        _reject_api(400, "InvalidParameter", "the request body must be a JSON object")
    read = await reader(request, body.get("operatorId"))
    ids = body.get("nodeIds")
    if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
        _reject_api(400, "MissingnodeIds", "nodeIds is mandatory for this action.")
    if len(ids) > BATCH_MAX:
        _reject_api(400, "InvalidParameter.nodeIds", f"at most {BATCH_MAX} nodeIds")
    result = []
    for node_id in ids:
        node = read.knowledge.nodes.get(node_id)
        if node is None:
            continue
        info = {
            "nodeId": node.id,
            "name": node.name,
            "url": DOC_URL.format(node.id),
            "docType": {"doc": "alidoc", "table": "able"}.get(node.kind, "folder"),
            "lastEditTime": int(node.modified_at * 1000),
            "deleted": node.deleted,
        }
        name = read.knowledge.workspaces[node.workspace]
        workspace = {"workspaceId": node.workspace, "name": name}
        has = read.may_read(node)
        result.append({"nodeBO": info, "workspaceBO": workspace, "hasPermission": has})
    return web.json_response({"result": result})


async def sheets_list(request: web.Request) -> web.Response:
    read = await reader(request)
    table = read.table(request.match_info["baseId"])
    return web.json_response({"value": [{"id": s.id, "name": s.name} for s in table.sheets]})


async def records_list(request: web.Request) -> web.Response:
    read = await reader(request)
    table = read.table(request.match_info["baseId"])
    wanted = request.match_info["sheet"]
    sheet = next((s for s in table.sheets if wanted in (s.id, s.name)), None)
    if sheet is None:
        _reject_api(400, "invalidRequest.sheet.notFound", f"sheet {wanted} not found")
    body = await _json_body(request)
    body = body if isinstance(body, dict) else {}
    asked = body.get("maxResults", RECORDS_ASK_MAX)
    if isinstance(asked, bool) or not isinstance(asked, int) or not 1 <= asked <= 100:
        _reject_api(400, "InvalidParameter.maxResults", "maxResults must be 1 to 100")
    size = min(asked, RECORD_PAGE)
    query = ("records", table.id, sheet.id, read.operator)
    offset = read.knowledge.page_offset(body.get("nextToken"), query)
    if offset is None:
        _reject_api(400, "InvalidParameter.nextToken", "nextToken is invalid")
    more = offset + size < len(sheet.records)
    answer: dict[str, Any] = {"records": sheet.records[offset : offset + size], "hasMore": more}
    if more:
        answer["nextToken"] = read.knowledge.page_token(query, offset + size)
    return web.json_response(answer)


def docs_routes() -> list[web.RouteDef]:
    notable = "/v1.0/notable/bases/{baseId}/sheets"
    return [
        web.get("/v2.0/wiki/workspaces/{workspaceId}", workspace_get),
        web.get("/v2.0/wiki/nodes", nodes_list),
        web.get("/v2.0/wiki/nodes/{nodeId}", node_get),
        web.get("/v1.0/doc/suites/documents/{docKey}/blocks", blocks_get),
        web.post("/v1.0/doc/workspaces/docs/infos/query", infos_query),
        web.get(notable, sheets_list),
        web.post(notable + "/{sheet}/records/list", records_list),
    ]
