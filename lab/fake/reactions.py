"""The emotion reaction API: ``POST /v1.0/robot/emotion/reply`` puts a reaction on a
message the robot received, ``…/recall`` takes it off (``../shared/dingtalk-workspace-apis.md``
§7). Both answer ``{success: true}``; a message the robot never received is 400. What they
did is ``PlatformState.reactions`` (``expect.platform.reactions``); the fault target
``reaction`` covers both."""

from __future__ import annotations

import asyncio

from aiohttp import web

from lab.fake.http import Reject, _authenticate, _json_body, api_error, caller


async def _reaction(request: web.Request, recall: bool) -> web.Response:
    platform = _authenticate(request)
    body = await _json_body(request)
    if not isinstance(body, dict):
        raise Reject(api_error(400, "InvalidParameter", "the request body must be a JSON object"))
    fault = (platform.take_fault("reaction_recall") if recall else None) or platform.take_fault(
        "reaction"
    )
    if fault is not None:
        if fault.timeout:
            await asyncio.sleep(platform.timeout_fault_s)
        return web.json_response({"code": "ServiceUnavailable"}, status=fault.answer_status)
    msg_id = body.get("openMsgId")
    robot_code = caller(request).robot_code
    inbound = platform.inbound.get(msg_id) if isinstance(msg_id, str) else None
    if (
        body.get("robotCode") != robot_code
        or inbound is None
        or inbound.get("robotCode") != robot_code
    ):
        raise Reject(api_error(400, "invalidParameter.openMsgId", "消息不存在"))
    if recall:
        held = [r for r in platform.reactions if r["msg"] == msg_id and not r["recalled"]]
        if not held:
            raise Reject(api_error(400, "invalidParameter.emotion", "没有可撤回的表情"))
        held[-1]["recalled"] = True
    else:
        platform.reactions.append(
            {"msg": msg_id, "emotion": str(body.get("emotionName") or ""), "recalled": False}
        )
    return web.json_response({"success": True})


async def reply(request: web.Request) -> web.Response:
    return await _reaction(request, recall=False)


async def recall(request: web.Request) -> web.Response:
    return await _reaction(request, recall=True)


def reaction_routes() -> list[web.RouteDef]:
    return [
        web.post("/v1.0/robot/emotion/reply", reply),
        web.post("/v1.0/robot/emotion/recall", recall),
    ]
