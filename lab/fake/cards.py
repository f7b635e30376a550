"""The fake DingTalk's AI card endpoints, with per-card state and the card faults.

- ``POST /v1.0/card/instances/createAndDeliver`` — a card in a group
  (``dtv1.card//IM_GROUP.<cid>``, ``imGroupOpenDeliverModel.robotCode`` = this robot) or in
  the one-to-one chat with a staff id (``dtv1.card//IM_ROBOT.<id>``, ``imRobotOpenDeliverModel
  .spaceType`` = ``IM_ROBOT``); answers ``result.deliverResults[]`` per space, a space it does
  not know as ``success: false`` inside an HTTP 200, as DingTalk does.
- ``PUT /v1.0/card/streaming`` — a frame: ``isFull`` replaces the content, otherwise it is
  appended; ``isFinalize`` ends the streaming.
- ``PUT /v1.0/card/instances`` — card data, merged by key with ``updateCardDataByKey``,
  replaced without; ``flowStatus`` "3" finished, "5" failed (every value must be a string).

Any template id and key are accepted unless a fault says otherwise: ``card_create`` /
``card_stream`` / ``card_update`` with ``qps_limit`` (403 ``QpsLimitForApi``), ``error``
``template_unpublished`` (400 ``param.templateUnpublished``), ``no_permission`` (403
``AccessTokenPermissionDenied`` naming the scope), ``unknown_error`` (500 ``unknownError``,
DingTalk's answer to a key that is not the template's streaming variable), ``timeout``, or
any ``status``. An update to a card while another update to it is being applied is refused
with 403, as DingTalk refuses concurrent updates to one card.

Assumption, stated because it is unverified: a second create with an ``outTrackId`` already
used makes a second visible card here (the worst case), so a runtime that creates twice is
caught by the case's card count.
"""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

from aiohttp import web

from lab.fake.card_state import FakeCard
from lab.fake.faults import QPS_LIMIT_CODE, Fault
from lab.fake.http import Reject, _authenticate, _json_body, api_error, caller
from lab.fake.state import PlatformState

GROUP_SPACE = "dtv1.card//IM_GROUP."
ROBOT_SPACE = "dtv1.card//IM_ROBOT."
# Unverified stand-in: DingTalk's exact code for a concurrent update is not documented.
CONCURRENT_CODE = "Forbidden.AccessDenied.ConcurrentUpdate"
_SCOPES = {
    "card_create": "Card.Instance.Write",
    "card_stream": "Card.Streaming.Write",
    "card_update": "Card.Instance.Write",
}


def _reject(status: int, code: str, message: str) -> Reject:
    return Reject(api_error(status, code, message))


async def _body(request: web.Request, names: tuple[str, ...]) -> dict[str, Any]:
    body = await _json_body(request)
    if not isinstance(body, dict):
        raise _reject(400, "InvalidParameter", "the request body must be a JSON object")
    for name in names:
        if body.get(name) in (None, "", []):
            raise _reject(400, f"Missing{name}", f"{name} is mandatory for this action.")
    return body


def _param_map(body: dict[str, Any]) -> dict[str, str]:
    data = body.get("cardData")
    params = data.get("cardParamMap") if isinstance(data, dict) else None
    if not isinstance(params, dict):
        raise _reject(400, "MissingcardData.cardParamMap", "cardData.cardParamMap is mandatory")
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in params.items()):
        raise _reject(400, "invalidParameter.cardParamMap", "every cardParamMap value is a string")
    return dict(params)


async def _faulted(platform: PlatformState, fault: Fault, call: str) -> web.Response:
    if fault.timeout:
        await asyncio.sleep(platform.timeout_fault_s)
    if fault.qps_limit:
        body: dict[str, Any] = {"code": QPS_LIMIT_CODE, "message": "请求的API超过了QPS限制"}
    elif fault.error == "template_unpublished":
        body = {"code": "param.templateUnpublished", "message": "param.templateUnpublished"}
    elif fault.error == "no_permission":
        body = {
            "code": "Forbidden.AccessDenied.AccessTokenPermissionDenied",
            "message": "没有调用该接口的权限",
            "accessdenieddetail": {"requiredScopes": [_SCOPES[call]]},
        }
    elif fault.error == "unknown_error":
        body = {"code": "unknownError", "message": "unknownError"}
    else:
        body = {"code": "ServiceUnavailable", "message": f"injected fault: {fault.answer_status}"}
    body["requestid"] = secrets.token_hex(8)
    headers = {} if fault.retry_after is None else {"Retry-After": f"{fault.retry_after:g}"}
    return web.json_response(body, status=fault.answer_status, headers=headers)


def _card(platform: PlatformState, out_track_id: Any) -> FakeCard:
    for card in reversed(platform.cards):
        if card.out_track_id == out_track_id:
            return card
    raise _reject(400, "invalidParameter.outTrackId", "卡片不存在 (no card with this outTrackId)")


async def create_and_deliver(request: web.Request) -> web.Response:
    platform = _authenticate(request)
    body = await _body(request, ("cardTemplateId", "outTrackId", "openSpaceId", "cardData"))
    params = _param_map(body)
    fault = platform.take_fault("card_create")
    if fault is not None and not fault.delivered:
        return await _faulted(platform, fault, "card_create")
    space = str(body["openSpaceId"])
    group = body.get("imGroupOpenDeliverModel") or {}
    robot = body.get("imRobotOpenDeliverModel") or {}
    robot_code = caller(request).robot_code  # a robot delivers only as itself
    if space.startswith(GROUP_SPACE) and group.get("robotCode") == robot_code:
        kind, conversation, users = "group", space.removeprefix(GROUP_SPACE), []
        at = list((group.get("atUserIds") or {}).keys())
    elif space.startswith(ROBOT_SPACE) and robot.get("spaceType") == "IM_ROBOT":
        kind, conversation, users, at = "dm", None, [space.removeprefix(ROBOT_SPACE)], []
    else:
        result = {"spaceId": space, "success": False, "errorMsg": "spaceId is illegal"}
        return web.json_response({"success": True, "result": {"deliverResults": [result]}})
    message = platform.accept(
        channel="card",
        conversation_id=conversation,
        conversation_type=kind,
        user_ids=users,
        msgtype="card",
        text=shown_text(params),
        at_user_ids=at,
        robot_code=robot_code,
    )
    card = FakeCard(
        seq=len(platform.cards) + 1,
        out_track_id=str(body["outTrackId"]),
        template_id=str(body["cardTemplateId"]),
        space=space,
        conversation_type=kind,
        conversation_id=conversation,
        user_ids=users,
        at_user_ids=at,
        created_at=platform.clock.now(),
        message=message,
        data=params,
        flow_status=params.get("flowStatus", "1"),
    )
    platform.cards.append(card)
    if fault is not None:  # taken, but answered as the fault says
        return await _faulted(platform, fault, "card_create")
    carrier = secrets.token_urlsafe(16)
    delivered = {"spaceType": kind, "spaceId": space, "success": True, "carrierId": carrier}
    result = {"outTrackId": card.out_track_id, "deliverResults": [delivered]}
    return web.json_response({"success": True, "result": result})


async def _apply(platform: PlatformState, card: FakeCard, change: Any) -> None:
    """Apply one update, refusing any other update to the same card meanwhile."""
    if card.busy:
        raise _reject(403, CONCURRENT_CODE, "该卡片正在更新中，请勿并发更新")
    card.busy = True
    try:
        if platform.card_latency_s:
            await asyncio.sleep(platform.card_latency_s)
        change()
    finally:
        card.busy = False


async def streaming(request: web.Request) -> web.Response:
    platform = _authenticate(request)
    body = await _body(request, ("outTrackId", "guid", "key"))
    content = body.get("content")
    if not isinstance(content, str):
        raise _reject(400, "Missingcontent", "content is mandatory for this action.")
    fault = platform.take_fault("card_stream")  # throttle and scope come before the card
    if fault is not None and not fault.delivered:
        return await _faulted(platform, fault, "card_stream")
    card = _card(platform, body["outTrackId"])

    def frame() -> None:
        text = content if body.get("isFull") is True else card.content + content
        final = body.get("isFinalize") is True
        card.frames.append({"content": text, "final": final, "at": platform.clock.now()})
        card.key = str(body["key"])
        card.show(text)
        card.finalized = card.finalized or final

    await _apply(platform, card, frame)
    if fault is not None:
        return await _faulted(platform, fault, "card_stream")
    return web.json_response({"success": True, "result": True})


async def update(request: web.Request) -> web.Response:
    platform = _authenticate(request)
    body = await _body(request, ("outTrackId", "cardData"))
    params = _param_map(body)
    fault = platform.take_fault("card_update")
    if fault is not None and not fault.delivered:
        return await _faulted(platform, fault, "card_update")
    card = _card(platform, body["outTrackId"])
    options = body.get("cardUpdateOptions") or {}

    def change() -> None:
        by_key = isinstance(options, dict) and options.get("updateCardDataByKey") is True
        card.data = {**card.data, **params} if by_key else params
        card.flow_status = card.data.get("flowStatus", card.flow_status)
        if card.key is not None and card.key in params:
            card.show(params[card.key])
        elif card.key is None and not card.frames:
            card.message.text = shown_text(card.data)
        card.finalized = card.finalized or card.flow_status in ("3", "5")

    await _apply(platform, card, change)
    if fault is not None:
        return await _faulted(platform, fault, "card_update")
    return web.json_response({"success": True, "result": True})


def shown_text(params: dict[str, str]) -> str:
    """What a card that streams nothing shows: its variables (an approval card's action,
    object, status); an AI card starts blank and shows its frames."""
    return "\n".join(v for k, v in params.items() if k not in ("flowStatus", "msg_id") and v)


def card_routes() -> list[web.RouteDef]:
    return [
        web.post("/v1.0/card/instances/createAndDeliver", create_and_deliver),
        web.put("/v1.0/card/streaming", streaming),
        web.put("/v1.0/card/instances", update),
    ]
