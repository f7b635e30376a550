"""DingTalk's emotion reaction on a person's message: the working signal of ``ack_style =
"reaction"``, put when a run takes a while and recalled when it ends.

    POST /v1.0/robot/emotion/reply   {robotCode, openMsgId, openConversationId,
                                      emotionType: 2, emotionName, textEmotion{…}}
    POST /v1.0/robot/emotion/recall  the same body

The body is what peers send (``../shared/dingtalk-workspace-apis.md`` §7; unverified by
DingTalk's docs): ``emotionType`` 2 with a text emotion. The answer is ``{success}``; anything
else is a failure this module reports and never raises: a reaction must never delay or
block the answer it stands in for.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from agent.contracts import Origin
from agent.dingtalk.openapi import DingTalkAPI, TokenError, json_object

REPLY_PATH = "/v1.0/robot/emotion/reply"
RECALL_PATH = "/v1.0/robot/emotion/recall"
# The text emotion every peer sends (emotionId and background as they use them).
EMOTION_ID = "2659900"
BACKGROUND_ID = "im_bg_1"


@dataclass(frozen=True)
class ReactionAnswer:
    ok: bool
    http_status: int | None = None
    detail: str | None = None


def reaction_body(robot_code: str, target: Origin, msg_id: str, name: str) -> dict[str, object]:
    return {
        "robotCode": robot_code,
        "openMsgId": msg_id,
        "openConversationId": target.conversation_id,
        "emotionType": 2,
        "emotionName": name,
        "textEmotion": {
            "emotionId": EMOTION_ID,
            "emotionName": name,
            "text": name,
            "backgroundId": BACKGROUND_ID,
        },
    }


class ReactionAPI:
    def __init__(self, api: DingTalkAPI, robot_code: str) -> None:
        self.api = api
        self.robot_code = robot_code

    async def put(self, target: Origin, msg_id: str, name: str) -> ReactionAnswer:
        return await self._call(REPLY_PATH, reaction_body(self.robot_code, target, msg_id, name))

    async def recall(self, target: Origin, msg_id: str, name: str) -> ReactionAnswer:
        return await self._call(RECALL_PATH, reaction_body(self.robot_code, target, msg_id, name))

    async def _call(self, path: str, body: dict[str, object]) -> ReactionAnswer:
        try:
            token = await self.api.access_token()
            response = await self.api.http.post(
                f"{self.api.config.openapi_base_url}{path}",
                json=body,
                headers={"x-acs-dingtalk-access-token": token},
            )
        except (httpx.HTTPError, TokenError) as exc:
            return ReactionAnswer(False, detail=type(exc).__name__)
        data = json_object(response)
        if response.status_code == 200 and data.get("success") is True:
            return ReactionAnswer(True, 200)
        detail = str(data.get("message") or data.get("code") or "no success in the answer")
        return ReactionAnswer(False, response.status_code, detail[:200])
