"""The fake DingTalk's HTTP face: DingTalk's routes, shapes and error styles, over aiohttp.

Two error styles coexist on the real platform and the runtime must read both: the old
``oapi`` endpoints (session webhooks, ``/topapi``) answer HTTP 200 with a nonzero
``errcode``, the new ``api`` endpoints (``/v1.0/...``) answer 4xx with ``{code, message}``.
A fault strikes only a request that is authentic and well-formed, so a runtime bug still
gets its real error instead of hiding behind an injected one.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
from collections.abc import Awaitable, Callable, Iterable
from functools import partial
from typing import Any, NoReturn

from aiohttp import web

from lab.fake.faults import QPS_LIMIT_CODE, Fault
from lab.fake.state import FakeApp, PlatformState

log = logging.getLogger(__name__)

PLATFORM: web.AppKey[PlatformState] = web.AppKey("dta_fake_platform")
MAX_BODY_BYTES = 20000
MAX_BODY_UPLOAD = 21 * 1024 * 1024  # a request body, a media upload included
MAX_OTO_USERS = 20
SESSION_GONE = (300001, "session 不存在")
DINGTALK_ID_MARK = "$:LWCP_v1:$"  # how a dingtalkId (senderId) begins, unlike a staff id

# Session-webhook msgtype -> the keys its part must carry (the first is the shown text).
_WEBHOOK_TYPES: dict[str, tuple[str, ...]] = {
    "text": ("content",),
    "markdown": ("text", "title"),
    "link": ("text", "title", "messageUrl"),
    "actionCard": ("text", "title"),
}
# OpenAPI msgKey -> (msgtype as a user sees it, keys msgParam must carry; first = shown text).
_MSG_KEYS: dict[str, tuple[str, tuple[str, ...]]] = {
    "sampleText": ("text", ("content",)),
    "sampleMarkdown": ("markdown", ("text", "title")),
    "sampleLink": ("link", ("text", "title", "messageUrl")),
    "sampleActionCard": ("actionCard", ("text", "title")),
    # a picture or a file uploaded before (lab/fake/media.py); the text shown is its name
    "sampleImageMsg": ("image", ("photoURL",)),
    "sampleFile": ("file", ("mediaId", "fileName", "fileType")),
}
# A file body on a session webhook: DingTalk wants a media id it never reads there (401102).
_WEBHOOK_MEDIA = ("file",)


class Reject(Exception):
    """Stop handling a request and answer this instead (DingTalk's refusal for it)."""

    def __init__(self, response: web.Response) -> None:
        super().__init__(response.status)
        self.response = response


def errcode(code: int, message: str, status: int = 200) -> web.Response:
    return web.json_response({"errcode": code, "errmsg": message}, status=status)


def api_error(status: int, code: str, message: str) -> web.Response:
    body = {"code": code, "message": message, "requestid": secrets.token_hex(8)}
    return web.json_response(body, status=status)


def _reject_api(status: int, code: str, message: str) -> NoReturn:
    raise Reject(api_error(status, code, message))


def _reject_errcode(code: int, message: str) -> NoReturn:
    raise Reject(errcode(code, message))


def _loads(raw: bytes) -> Any:
    """The parsed body, or None when it is not JSON (each endpoint words that its own way)."""
    try:
        return json.loads(raw) if raw else None
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None


async def _json_body(request: web.Request) -> Any:
    return _loads(await request.read())


def _nonempty_str(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


async def _faulted(
    platform: PlatformState,
    fault: Fault,
    keep: Callable[[], object] | None,
    body: Callable[[Fault], dict[str, Any]],
) -> web.Response:
    """Answer as the fault says; keep the message first when it was 'delivered' anyway."""
    if fault.delivered and keep is not None:
        keep()
    if fault.timeout:
        await asyncio.sleep(platform.timeout_fault_s)
    headers = {} if fault.retry_after is None else {"Retry-After": f"{fault.retry_after:g}"}
    return web.json_response(body(fault), status=fault.answer_status, headers=headers)


def _oapi_fault_body(fault: Fault) -> dict[str, Any]:
    return {"errcode": -1, "errmsg": f"系统繁忙 (HTTP {fault.answer_status})"}


def _api_fault_body(fault: Fault) -> dict[str, Any]:
    status = fault.answer_status
    if fault.qps_limit:  # DingTalk's own throttle: a 403 whose code names the QPS limit
        code, message = QPS_LIMIT_CODE, "请求的API超过了QPS限制 (injected fault)"
    else:
        code = {429: "Throttling", 504: "GatewayTimeout"}.get(status, "ServiceUnavailable")
        message = f"injected fault: HTTP {status}"
    return {"code": code, "message": message, "requestid": secrets.token_hex(8)}


# ---------------------------------------------------------------------------- token


async def access_token(request: web.Request) -> web.Response:
    platform = request.app[PLATFORM]
    body = await _json_body(request)
    if not isinstance(body, dict):
        _reject_api(400, "MissingappKey", "appKey is mandatory for this action.")
    app = platform.app_for_credentials(body.get("appKey"), body.get("appSecret"))
    if app is None:
        # Never echo what was sent: it may be the secret.
        _reject_api(400, "invalidClientIdOrSecret", "无效的clientId或者clientSecret")
    if platform.is_revoked(app.app_key):
        _reject_api(403, "Forbidden.AccessDenied.AccessTokenPermissionDenied", "应用凭证已失效")
    fault = platform.take_fault("token")
    if fault is not None:
        return await _faulted(platform, fault, None, _api_fault_body)
    token = platform.issue_token(app.app_key)
    return web.json_response({"accessToken": token, "expireIn": 7200})


# ---------------------------------------------------------------------------- webhook


def _webhook_message(body: Any) -> dict[str, Any]:
    """Validate a session-webhook body into the fields of a ReceivedMessage."""
    if not isinstance(body, dict):
        _reject_errcode(40035, "缺少参数 json")
    msgtype = body.get("msgtype")
    if not _nonempty_str(msgtype):
        _reject_errcode(40035, "缺少参数 msgtype")
    if msgtype in _WEBHOOK_MEDIA:
        _reject_errcode(401102, f"miss param : {msgtype}->mediaId")
    if msgtype not in _WEBHOOK_TYPES:
        _reject_errcode(40008, f"不合法的消息类型 {msgtype}")
    part = body.get(msgtype)
    if not isinstance(part, dict):
        _reject_errcode(40035, f"缺少参数 {msgtype}")
    for key in _WEBHOOK_TYPES[msgtype]:
        if not _nonempty_str(part.get(key)):
            _reject_errcode(40035, f"缺少参数 {msgtype}.{key}")
    at = body.get("at") or {}
    at_ids = (at.get("atUserIds") or []) if isinstance(at, dict) else None
    if not isinstance(at_ids, list) or not all(isinstance(u, str) for u in at_ids):
        _reject_errcode(40035, "参数错误 at.atUserIds")
    at_all = at.get("isAtAll", False)
    if not isinstance(at_all, bool):
        _reject_errcode(40035, "参数错误 at.isAtAll")
    by_dingtalk_id = at.get("atDingtalkIds") or []
    if not isinstance(by_dingtalk_id, list) or not all(isinstance(u, str) for u in by_dingtalk_id):
        _reject_errcode(40035, "参数错误 at.atDingtalkIds")
    return {
        "msgtype": msgtype,
        "text": part[_WEBHOOK_TYPES[msgtype][0]],
        "title": part.get("title") if msgtype != "text" else None,
        # atUserIds takes staff ids: a dingtalkId there resolves to nobody, so nobody is @-ed
        "at_user_ids": [u for u in at_ids if not u.startswith(DINGTALK_ID_MARK)],
        "at_dingtalk_ids": by_dingtalk_id,
        "at_all": at_all,
    }


async def send_by_session(request: web.Request) -> web.Response:
    platform = request.app[PLATFORM]
    session = platform.live_session(request.query.get("session"))
    if session is None:
        return errcode(*SESSION_GONE)
    raw = await request.read()
    if len(raw) > MAX_BODY_BYTES:
        return errcode(460101, f"消息内容超过 {MAX_BODY_BYTES} 字节")
    fields = _webhook_message(_loads(raw))
    users = [session.user_id] if session.conversation_type == "dm" and session.user_id else []

    keep = partial(
        platform.accept,
        channel="session_webhook",
        user_ids=users,
        conversation_id=session.conversation_id,
        conversation_type=session.conversation_type,
        robot_code=session.robot_code,
        **fields,
    )

    fault = platform.take_fault("webhook")
    if fault is not None:
        return await _faulted(platform, fault, keep, _oapi_fault_body)
    keep()
    if platform.send_latency_s:
        await asyncio.sleep(platform.send_latency_s)
    return errcode(0, "ok")


# ---------------------------------------------------------------------------- openapi


APP: web.RequestKey[FakeApp] = web.RequestKey("dta_fake_app", FakeApp)  # the token's app


def _authenticate(request: web.Request) -> PlatformState:
    """The platform, once the request's token is valid; the token's app is kept on the
    request (``caller``): a robot may speak only for itself."""
    platform = request.app[PLATFORM]
    app = platform.token_app(request.headers.get("x-acs-dingtalk-access-token"))
    if app is None:
        _reject_api(401, "InvalidAuthentication", "不合法的access_token")
    request[APP] = app
    return platform


def caller(request: web.Request) -> FakeApp:
    """The app an authenticated request's token speaks for."""
    return request[APP]


def _require(request: web.Request, body: Any, names: tuple[str, ...]) -> dict[str, Any]:
    """DingTalk's own wording for a missing parameter, then the robotCode check: the robot
    must be the one of the app whose token came with the request."""
    if not isinstance(body, dict):
        _reject_api(400, "InvalidParameter", "the request body must be a JSON object")
    for name in names:
        if body.get(name) in (None, "", []):
            _reject_api(400, f"Missing{name}", f"{name} is mandatory for this action.")
    if body["robotCode"] != caller(request).robot_code:
        _reject_api(400, "invalidParameter.robotCode", "robotCode 不存在或不属于该应用")
    return body


def _media_shown(
    platform: PlatformState, robot_code: str, msgtype: str, param: dict[str, Any]
) -> dict[str, Any]:
    """An image or file message: the media it names must be one this robot uploaded; what
    a user sees is the file (its name as the message's text)."""
    media_id = param["photoURL"] if msgtype == "image" else param["mediaId"]
    media = platform.media.get(media_id)
    if media is None or media.robot_code != robot_code:
        _reject_api(400, "invalidParameter.mediaId", f"mediaId 不存在: {str(media_id)[:40]}")
    name = media.name if msgtype == "image" else str(param["fileName"])
    return {"msgtype": msgtype, "text": name, "title": None, "media_id": media_id}


def _message_param(platform: PlatformState, body: dict[str, Any]) -> dict[str, Any]:
    """Parse ``msgKey`` + ``msgParam`` (a JSON *string*) into what a user would see (the
    body's robotCode was checked: it is the sender's)."""
    key = body["msgKey"]
    if key not in _MSG_KEYS:
        _reject_api(400, "invalidParameter.msgKey", f"msgKey {key!r} 不支持")
    msgtype, needed = _MSG_KEYS[key]
    raw = body["msgParam"]
    if not isinstance(raw, str):
        _reject_api(400, "invalidParameter.msgParam", "msgParam must be a JSON string")
    try:
        param = json.loads(raw)
    except json.JSONDecodeError:
        _reject_api(400, "invalidParameter.msgParam", "msgParam is not valid JSON")
    if not isinstance(param, dict):
        _reject_api(400, "invalidParameter.msgParam", "msgParam must hold a JSON object")
    for name in needed:
        if not _nonempty_str(param.get(name)):
            _reject_api(400, "invalidParameter.msgParam", f"msgParam.{name} is required for {key}")
    if msgtype in ("image", "file"):
        return _media_shown(platform, body["robotCode"], msgtype, param)
    return {"msgtype": msgtype, "text": param[needed[0]], "title": param.get("title")}


async def _openapi_send(request: web.Request, oto: bool) -> web.Response:
    """batchSend and groupMessages/send: the same checks, a different kind of target."""
    platform = _authenticate(request)
    target = "userIds" if oto else "openConversationId"
    body = _require(request, await _json_body(request), ("robotCode", target, "msgKey", "msgParam"))
    users, conversation = body.get("userIds"), body.get("openConversationId")
    if oto and (
        not isinstance(users, list)
        or not 1 <= len(users) <= MAX_OTO_USERS
        or not all(_nonempty_str(u) for u in users)
    ):
        _reject_api(
            400, "invalidParameter.userIds", f"userIds must list 1 to {MAX_OTO_USERS} staff ids"
        )
    if not oto and not _nonempty_str(conversation):
        _reject_api(400, "invalidParameter.openConversationId", "openConversationId 不合法")
    fields = _message_param(platform, body)
    key = secrets.token_urlsafe(24)
    # batchSend answers per recipient: flow-controlled or invalid ones get nothing.
    flow = [u for u in users if u in platform.flow_controlled] if oto else []
    invalid = [u for u in users if u in platform.invalid_users] if oto else []
    reached = [u for u in users if u not in flow and u not in invalid] if oto else []

    keep = partial(
        platform.accept,
        channel="openapi_oto" if oto else "openapi_group",
        conversation_id=None if oto else conversation,
        conversation_type="dm" if oto else "group",
        user_ids=reached,
        process_query_key=key,
        robot_code=body["robotCode"],
        **fields,
    )

    fault = platform.take_fault("openapi")
    if fault is not None:
        return await _faulted(platform, fault, keep, _api_fault_body)
    if reached or not oto:
        keep()
    if platform.send_latency_s:
        await asyncio.sleep(platform.send_latency_s)
    extra = {"invalidStaffIdList": invalid, "flowControlledStaffIdList": flow} if oto else {}
    return web.json_response({"processQueryKey": key, **extra})


async def oto_batch_send(request: web.Request) -> web.Response:
    return await _openapi_send(request, oto=True)


async def group_send(request: web.Request) -> web.Response:
    return await _openapi_send(request, oto=False)


async def oto_read_status(request: web.Request) -> web.Response:
    platform = _authenticate(request)
    _require(request, dict(request.query), ("robotCode", "processQueryKey"))
    message = platform.by_query_key(request.query["processQueryKey"], "openapi_oto")
    if message is None:
        _reject_api(400, "invalidParameter.processQueryKey", "processQueryKey 不存在")
    return web.json_response(
        {
            "sendStatus": "SUCCESS",
            "readStatus": {"readUserIdList": [], "unreadUserIdList": list(message.user_ids)},
        }
    )


async def group_query(request: web.Request) -> web.Response:
    platform = _authenticate(request)
    body = _require(
        request, await _json_body(request), ("robotCode", "openConversationId", "processQueryKey")
    )
    message = platform.by_query_key(body["processQueryKey"], "openapi_group")
    if message is None or message.conversation_id != body["openConversationId"]:
        _reject_api(400, "invalidParameter.processQueryKey", "processQueryKey 不存在")
    return web.json_response({"sendStatus": "SUCCESS", "readUserIds": [], "hasMore": False})


# ---------------------------------------------------------------------------- identity


async def user_get(request: web.Request) -> web.Response:
    platform = request.app[PLATFORM]
    if not platform.token_valid(request.query.get("access_token")):
        return errcode(40014, "不合法的access_token")
    body = await _json_body(request)
    userid = body.get("userid") if isinstance(body, dict) else None
    if not _nonempty_str(userid):
        return errcode(40035, "缺少参数 userid")
    fault = platform.take_fault("identity")
    if fault is not None:
        return await _faulted(platform, fault, None, _oapi_fault_body)
    detail = platform.user_detail(userid)
    if detail is None:
        return errcode(60121, "找不到该用户")
    return web.json_response({"errcode": 0, "errmsg": "ok", "result": detail})


# ---------------------------------------------------------------------------- app


@web.middleware
async def _guard(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Turn refusals and unknown routes into DingTalk-style JSON, and log every call."""
    try:
        response = await handler(request)
    except Reject as exc:
        response = exc.response
    except web.HTTPException as exc:
        if exc.status in (404, 405):
            response = api_error(
                404,
                "InvalidAction.NotFound",
                "Specified api is not found, please check your url and method.",
            )
        else:
            response = api_error(exc.status, exc.reason, exc.text or exc.reason)
    except Exception:
        log.exception("fake DingTalk failed on %s %s", request.method, request.path)
        response = api_error(500, "InternalError", "the fake DingTalk failed; see its log")
    if not request.path.startswith("/_lab/"):  # control calls are not platform traffic
        request.app[PLATFORM].log_request(request.method, request.path, response.status)
    return response


def build_app(
    platform: PlatformState, extra_routes: Iterable[web.RouteDef] = ()
) -> web.Application:
    """DingTalk's HTTP routes on ``platform``, plus ``extra_routes`` (the Stream Mode
    gateway's and the ``/_lab`` controls, which the caller owns)."""
    # room for a 20 MB media upload (aiohttp takes 1 MB by default)
    app = web.Application(middlewares=[_guard], client_max_size=MAX_BODY_UPLOAD)
    app[PLATFORM] = platform
    app.router.add_post("/v1.0/oauth2/accessToken", access_token)
    app.router.add_post("/robot/sendBySession", send_by_session)
    app.router.add_post("/v1.0/robot/oToMessages/batchSend", oto_batch_send)
    app.router.add_post("/v1.0/robot/groupMessages/send", group_send)
    app.router.add_get("/v1.0/robot/oToMessages/readStatus", oto_read_status)
    app.router.add_post("/v1.0/robot/groupMessages/query", group_query)
    app.router.add_post("/topapi/v2/user/get", user_get)
    app.add_routes(list(extra_routes))
    return app


async def serve(
    platform: PlatformState,
    host: str,
    port: int,
    extra_routes: Iterable[web.RouteDef] = (),
    on_shutdown: Callable[[], Awaitable[None]] | None = None,
) -> tuple[web.AppRunner, str]:
    """Start serving; returns the runner (``cleanup()`` stops it) and the base URL.

    ``on_shutdown`` runs after the listening socket and idle connections are closed, so a
    client's instant reconnect cannot slip in and hold the shutdown up (the stream uses it).
    """
    app = build_app(platform, extra_routes)
    if on_shutdown is not None:
        app.on_shutdown.append(lambda _app: on_shutdown())
    # A timeout fault keeps a handler asleep; shutdown waits for it a little, no longer.
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=platform.timeout_fault_s + 1.0)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    real_port = runner.addresses[0][1]
    shown_host = f"[{host}]" if ":" in host else host
    return runner, f"http://{shown_host}:{real_port}"
