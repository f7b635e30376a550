"""The fake DingTalk's workspace endpoints: directory search, unionId lookup, to-do.

Shapes are the real OpenAPI's (../shared/dingtalk-workspace-apis.md, sections 1–3); the
calendar is in ``lab.fake.calendar``. The directory search answers staff ids, the to-do
API takes and answers unionIds only, and every ``/v1.0`` call needs the header
``x-acs-dingtalk-access-token``:

- ``POST /v1.0/contact/users/search`` ``{queryWord, offset, size ≤ 20}`` →
  ``{hasMore, totalCount, list: [userId…]}`` (names in ``fixtures.users`` by substring).
- ``POST /topapi/user/getbyunionid?access_token=`` ``{unionid}`` → ``result.userid``.
- ``POST /v1.0/todo/users/{unionId}/tasks`` (create), ``GET …/tasks/{taskId}``,
  ``GET …/tasks/sources/{sourceId}``, ``PUT …/tasks/{taskId}``, ``DELETE …/tasks/{taskId}``,
  ``POST …/tasks/list``. An absent or deleted to-do is HTTP 400 "task not exist" (b57).

Faults (``lab.fake.faults``): ``directory_search``, ``todo_create``, ``todo_get`` (get and
by source), ``todo_update`` (update and delete), ``todo_list``, with ``status``,
``timeout``, ``qps_limit``, ``retry_after``, ``times``, ``delivered`` (writes only) or
``error``: ``no_permission`` (403 ``Forbidden.AccessDenied`` naming the scope),
``throttled`` (429 ``Throttling``), ``applied_then_timeout`` (writes only: applied, then
no answer within the client's read timeout), ``applied_late`` with ``after_s`` (writes
only: no answer within the read timeout, or its 5xx ``status`` at once, and applied
``after_s`` seconds later on the fake's clock). Like every fault they strike only a request
that is authentic and well-formed.

The mode ``{"todo_create": {"dedupe": false}}`` (also ``calendar_create``) is a platform
that keeps every create: a repeated ``sourceId`` makes a second to-do instead of answering
the first. Every workspace request first applies the ``applied_late`` writes now due.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable
from typing import Any

from aiohttp import web

from lab.fake.faults import Fault, FaultTarget
from lab.fake.http import (
    PLATFORM,
    Reject,
    _api_fault_body,
    _authenticate,
    _json_body,
    _nonempty_str,
    _reject_api,
    errcode,
)
from lab.fake.state import PlatformState
from lab.fake.workspace_state import FakeTodo

SEARCH_MAX = 20  # the search's largest page (b57)
TODO_SCOPES = {"write": "Todo.Todo.Write", "read": "Todo.Todo.Read"}


def authentic(request: web.Request) -> PlatformState:
    """The platform, for a request with a valid token; the late writes due by now are
    applied first, so this request sees them."""
    platform = _authenticate(request)
    platform.workspace.settle(platform.clock.now())
    return platform


def take_fault(platform: PlatformState, target: FaultTarget) -> Fault | None:
    """``platform.take_fault`` for a workspace call: the oldest armed failure for
    ``target``, passing over the modes armed with it (which are never used up)."""
    for fault in platform.faults:
        if fault.target == target and not fault.is_mode:
            fault.remaining -= 1
            if fault.remaining <= 0:
                platform.faults.remove(fault)
            return fault
    return None


def dedupes(platform: PlatformState, target: FaultTarget) -> bool:
    """Whether a create repeating its token answers the first object (the fake's default)
    or makes another (``dedupe: false``, a platform that keeps every create): the mode
    armed last for ``target`` says."""
    modes = [f.dedupe for f in platform.faults if f.target == target and f.dedupe is not None]
    return modes[-1] if modes else True


async def answer_fault(
    platform: PlatformState, fault: Fault, keep: Callable[[], object] | None, scope: str
) -> web.Response:
    """Answer as a workspace fault says; apply the call first when it was ``delivered``,
    or keep it for later when it is ``applied_late``."""
    if fault.delivered and keep is not None:
        keep()
    late = fault.error == "applied_late"
    if late and keep is not None:
        now = platform.clock.now()
        platform.workspace.apply_later(now + (fault.after_s or 0.0), keep, platform.clock.now)
    if fault.timeout:
        # applied_then_timeout and applied_late must outlast the client's read timeout; a
        # plain timeout fault is the fake's usual slow gateway.
        stalled = fault.error == "applied_then_timeout" or late
        await asyncio.sleep(platform.workspace_stall_s if stalled else platform.timeout_fault_s)
    if fault.error == "no_permission":
        body = {
            "code": "Forbidden.AccessDenied",
            "message": f"没有调用该接口的权限，接口权限申请参考: {scope} (injected fault)",
            "requestid": secrets.token_hex(8),
        }
    else:
        body = _api_fault_body(fault)
    headers = {} if fault.retry_after is None else {"Retry-After": f"{fault.retry_after:g}"}
    return web.json_response(body, status=fault.answer_status, headers=headers)


async def body_object(request: web.Request, *, optional: bool = False) -> dict[str, Any]:
    body = await _json_body(request)
    if body is None and optional:
        return {}
    if not isinstance(body, dict):
        _reject_api(400, "InvalidParameter", "the request body must be a JSON object")
    return body


def require(body: dict[str, Any], names: tuple[str, ...]) -> None:
    for name in names:
        if body.get(name) in (None, "", []):
            _reject_api(400, f"Missing{name}", f"{name} is mandatory for this action.")


def id_list(body: dict[str, Any], name: str) -> list[str]:
    value = body.get(name, [])
    if not isinstance(value, list) or not all(_nonempty_str(v) for v in value):
        _reject_api(400, f"InvalidParameter.{name}", f"{name} must be a list of unionIds")
    return list(value)


def _int(body: dict[str, Any], name: str) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        _reject_api(400, f"InvalidParameter.{name}", f"{name} must be milliseconds since 1970")
    return value


def _text(body: dict[str, Any], name: str) -> str | None:
    value = body.get(name)
    if value is not None and not isinstance(value, str):
        _reject_api(400, f"InvalidParameter.{name}", f"{name} must be a string")
    return value


# ---------------------------------------------------------------------------- directory


async def user_search(request: web.Request) -> web.Response:
    platform = authentic(request)
    body = await body_object(request)
    require(body, ("queryWord",))
    word, offset, size = body["queryWord"], body.get("offset"), body.get("size")
    if not _nonempty_str(word):
        _reject_api(400, "InvalidParameter.queryWord", "queryWord must be a non-empty string")
    for name, value, low in (("offset", offset, 0), ("size", size, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            _reject_api(400, f"InvalidParameter.{name}", f"{name} must be an integer >= {low}")
    if size > SEARCH_MAX:
        _reject_api(400, "InvalidParameter.size", f"size must be at most {SEARCH_MAX}")
    fault = take_fault(platform, "directory_search")
    if fault is not None:
        return await answer_fault(platform, fault, None, "qyapi_addresslist_search")
    found = [uid for uid, user in platform.users.items() if word in str(user.get("name", ""))]
    page = found[offset : offset + size]
    return web.json_response(
        {"hasMore": offset + size < len(found), "totalCount": len(found), "list": page}
    )


async def user_by_union(request: web.Request) -> web.Response:
    """oapi ``/topapi/user/getbyunionid``: 200 with an errcode, the oapi way."""
    platform = request.app[PLATFORM]
    if not platform.token_valid(request.query.get("access_token")):
        return errcode(40014, "不合法的access_token")
    body = await _json_body(request)
    union = body.get("unionid") if isinstance(body, dict) else None
    if not _nonempty_str(union):
        return errcode(40035, "缺少参数 unionid")
    fault = take_fault(platform, "identity")
    if fault is not None:
        return await answer_fault(platform, fault, None, "qyapi_get_member")
    user_id = platform.staff_id(union)
    if user_id is None:
        return errcode(60122, "不存在的unionid")
    result = {"contact_type": 0, "userid": user_id}
    return web.json_response({"errcode": 0, "errmsg": "ok", "result": result})


# ---------------------------------------------------------------------------- to-do


def _task_absent() -> web.Response:
    # b57 saw a GET after delete answer HTTP 400 "task not exist"; the code is a guess.
    body = {"code": "InvalidParameter", "message": "task not exist"}
    return web.json_response({**body, "requestid": secrets.token_hex(8)}, status=400)


def _held(platform: PlatformState, request: web.Request) -> FakeTodo:
    todo = platform.workspace.todo(request.match_info["taskId"])
    if todo is None:
        raise Reject(_task_absent())
    return todo


def _todo_fields(body: dict[str, Any]) -> dict[str, Any]:
    """The fields a create or an update may set, checked; only those given."""
    fields: dict[str, Any] = {}
    if "subject" in body:
        if not _nonempty_str(body["subject"]):
            _reject_api(400, "InvalidParameter.subject", "subject must be a non-empty string")
        fields["subject"] = body["subject"]
    if "description" in body:
        fields["description"] = _text(body, "description")
    if "dueTime" in body:
        fields["due_ms"] = _int(body, "dueTime")
    if "executorIds" in body:
        fields["executors"] = id_list(body, "executorIds")
    if "participantIds" in body:
        fields["participants"] = id_list(body, "participantIds")
    if "done" in body:
        if not isinstance(body["done"], bool):
            _reject_api(400, "InvalidParameter.done", "done must be true or false")
        fields["done"] = body["done"]
    return fields


async def todo_create(request: web.Request) -> web.Response:
    platform = authentic(request)
    creator = request.match_info["unionId"]
    body = await body_object(request)
    require(body, ("subject",))
    fields = _todo_fields(body)
    fields.pop("done", None)  # a new to-do is open
    source_id = _text(body, "sourceId") or None
    now_ms = int(platform.clock.now() * 1000)
    dedupe = dedupes(platform, "todo_create")

    def keep() -> FakeTodo:
        # The fake's choice, since the real behaviour is unconfirmed (workspace-apis §3):
        # a second create with a sourceId this creator already used returns that to-do —
        # unless the platform keeps every create (``dedupe: false``).
        if source_id is not None and dedupe:
            held = platform.workspace.todo_by_source(creator, source_id)
            if held is not None:
                return held
        rest = {k: v for k, v in fields.items() if k != "subject"}
        return platform.workspace.add_todo(
            creator, fields["subject"], now_ms, source_id=source_id, **rest
        )

    fault = take_fault(platform, "todo_create")
    if fault is not None:
        return await answer_fault(platform, fault, keep, TODO_SCOPES["write"])
    return web.json_response(keep().answer())


async def todo_get(request: web.Request) -> web.Response:
    platform = authentic(request)
    todo = _held(platform, request)
    fault = take_fault(platform, "todo_get")
    if fault is not None:
        return await answer_fault(platform, fault, None, TODO_SCOPES["read"])
    return web.json_response(todo.answer())


async def todo_by_source(request: web.Request) -> web.Response:
    platform = authentic(request)
    union, source_id = request.match_info["unionId"], request.match_info["sourceId"]
    fault = take_fault(platform, "todo_get")
    if fault is not None:
        return await answer_fault(platform, fault, None, TODO_SCOPES["read"])
    todo = platform.workspace.todo_by_source(union, source_id)
    return _task_absent() if todo is None else web.json_response(todo.answer())


async def todo_update(request: web.Request) -> web.Response:
    platform = authentic(request)
    todo = _held(platform, request)
    fields = _todo_fields(await body_object(request))

    def keep() -> None:
        for name, value in fields.items():
            setattr(todo, name, value)

    fault = take_fault(platform, "todo_update")
    if fault is not None:
        return await answer_fault(platform, fault, keep, TODO_SCOPES["write"])
    keep()
    return web.json_response({"result": True, "requestId": secrets.token_hex(8)})


async def todo_delete(request: web.Request) -> web.Response:
    platform = authentic(request)
    todo = _held(platform, request)

    def keep() -> None:
        todo.deleted = True

    fault = take_fault(platform, "todo_update")
    if fault is not None:
        return await answer_fault(platform, fault, keep, TODO_SCOPES["write"])
    keep()
    return web.json_response({"result": True, "requestId": secrets.token_hex(8)})


async def todo_list(request: web.Request) -> web.Response:
    """The to-dos whose executors include the path's unionId (``isDone`` filters)."""
    platform = authentic(request)
    body = await body_object(request, optional=True)
    done = body.get("isDone")
    if done is not None and not isinstance(done, bool):
        _reject_api(400, "InvalidParameter.isDone", "isDone must be true or false")
    fault = take_fault(platform, "todo_list")
    if fault is not None:
        return await answer_fault(platform, fault, None, TODO_SCOPES["read"])
    cards = [t.card() for t in platform.workspace.todos_of(request.match_info["unionId"], done)]
    return web.json_response({"todoCards": cards, "totalCount": len(cards)})


def workspace_routes() -> list[web.RouteDef]:
    tasks = "/v1.0/todo/users/{unionId}/tasks"
    return [
        web.post("/v1.0/contact/users/search", user_search),
        web.post("/topapi/user/getbyunionid", user_by_union),
        web.post(f"{tasks}/list", todo_list),  # before {taskId}: "list" is no task id
        web.get(tasks + "/sources/{sourceId}", todo_by_source),
        web.post(tasks, todo_create),
        web.get(tasks + "/{taskId}", todo_get),
        web.put(tasks + "/{taskId}", todo_update),
        web.delete(tasks + "/{taskId}", todo_delete),
    ]
