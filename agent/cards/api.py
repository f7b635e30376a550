"""DingTalk's AI card endpoints: create and deliver, stream a frame, set the finished state.

Three calls, on the OpenAPI's client and token (``agent.dingtalk.openapi``):

- ``POST /v1.0/card/instances/createAndDeliver`` — the card, into the origin's space
  (``dtv1.card//IM_GROUP.<conversation>`` or ``dtv1.card//IM_ROBOT.<staff id>``), under an
  ``outTrackId`` the caller chooses: the only handle there is for later updates. DingTalk
  answers per space in ``result.deliverResults[].success``, which is read, not assumed.
- ``PUT /v1.0/card/streaming`` — one frame: ``isFull`` (the whole text so far), ``guid``
  unique per call, ``key`` the template's streaming variable (another key is answered 500
  ``unknownError``), ``isFinalize`` on the last frame.
- ``PUT /v1.0/card/instances`` — card data by key (``updateCardDataByKey``: without it the
  keys not sent are wiped): ``flowStatus`` "3" finished, "5" failed. Every value a string.

This module says what each answer proves and nothing more (``CardAnswer``); pacing, retries
and what a card does next are ``agent.cards.pacing`` and ``agent.cards.broker``. Like the transport,
it never calls an answer it cannot read a success: a timeout or a 5xx after the request left
is ``uncertain``.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import httpx

from agent.contracts import CardReason, ConversationType, Origin, canonical_json, sha256_text
from agent.dingtalk.openapi import DingTalkAPI, TokenError, json_object

CREATE_PATH = "/v1.0/card/instances/createAndDeliver"
STREAM_PATH = "/v1.0/card/streaming"
UPDATE_PATH = "/v1.0/card/instances"
FLOW_INPUTTING = "2"  # a card is created on the answer's first words: it is being written
FLOW_FINISHED = "3"
FLOW_FAILED = "5"
# The template shows its feedback buttons (action ids feedback_up / feedback_down) while this
# variable is "on": DingTalk's own like/dislike component fires no callback.
FEEDBACK_KEY, FEEDBACK_ON = "feedback", "on"
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, TokenError)


class CardOutcome(StrEnum):
    OK = "ok"  # DingTalk took it
    THROTTLED = "throttled"  # 403 QpsLimit or 429: nothing was taken; wait and send again
    NOT_SENT = "not_sent"  # no connection, no token: nothing left this machine
    REFUSED = "refused"  # a definite no: nothing was taken
    UNCERTAIN = "uncertain"  # it may have been taken (a timeout, a 5xx, an odd answer)


@dataclass(frozen=True)
class CardAnswer:
    outcome: CardOutcome
    http_status: int | None = None
    code: str | None = None  # DingTalk's own code, e.g. "param.templateUnpublished"
    detail: str | None = None
    carrier_id: str | None = None  # the delivered message's id (createAndDeliver)

    @property
    def ok(self) -> bool:
        return self.outcome is CardOutcome.OK

    @property
    def retryable(self) -> bool:
        """Provably not taken, and worth another try after a wait."""
        return self.outcome in (CardOutcome.THROTTLED, CardOutcome.NOT_SENT)

    @property
    def reason(self) -> CardReason:
        """Why the card cannot carry the answer, for a refusal (the receipt's reason)."""
        code = (self.code or "").lower()
        if self.http_status == 403 and "permission" in code:
            return CardReason.NO_PERMISSION
        if "unpublished" in code:
            return CardReason.TEMPLATE_UNPUBLISHED
        if self.http_status == 500 and code == "unknownerror":
            return CardReason.KEY_MISMATCH
        if self.outcome is CardOutcome.THROTTLED:
            return CardReason.THROTTLED
        return CardReason.REFUSED

    def describe(self) -> str:
        shown = " ".join(str(p) for p in (self.http_status, self.code) if p is not None)
        words = f"{self.outcome.value} ({shown})" if shown else self.outcome.value
        return f"{words}: {self.detail}" if self.detail else words


def open_space_id(target: Origin) -> str | None:
    """Where the card goes: the group, or the one-to-one chat with the sender's staff id
    (None for a sender DingTalk gave no staff id: there is no such space to deliver to)."""
    if target.conversation_type is ConversationType.GROUP:
        return f"dtv1.card//IM_GROUP.{target.conversation_id}"
    return f"dtv1.card//IM_ROBOT.{target.user_id}" if target.has_staff_id else None


class CardAPI:
    """The three card calls for one robot and one template."""

    def __init__(
        self,
        api: DingTalkAPI,
        robot_code: str,
        template_id: str,
        content_key: str,
        feedback: bool = False,
    ) -> None:
        self.api = api
        self.robot_code = robot_code
        self.template_id = template_id
        self.content_key = content_key
        # an answer's card shows its 👍 / 👎 buttons (agent/acts/feedback.py takes a press)
        self.feedback = feedback

    def create_body(self, out_track_id: str, target: Origin, space: str) -> dict[str, Any]:
        params = {"flowStatus": FLOW_INPUTTING}
        if self.feedback:
            params[FEEDBACK_KEY] = FEEDBACK_ON
        body: dict[str, Any] = {
            "cardTemplateId": self.template_id,
            "outTrackId": out_track_id,
            "cardData": {"cardParamMap": params},
            "callbackType": "STREAM",
            "openSpaceId": space,
            "userIdType": 1,
            "imGroupOpenSpaceModel": {"supportForward": True},
            "imRobotOpenSpaceModel": {"supportForward": True},
        }
        if target.conversation_type is ConversationType.GROUP:
            model: dict[str, Any] = {"robotCode": self.robot_code}
            if target.has_staff_id:  # @ the asker, as a text reply in a group does
                model["atUserIds"] = {target.user_id: target.nick or target.user_id}
            body["imGroupOpenDeliverModel"] = model
        else:
            model = {"spaceType": "IM_ROBOT", "robotCode": self.robot_code}
            body["imRobotOpenDeliverModel"] = model
        return body

    @staticmethod
    def digest(body: dict[str, Any]) -> str:
        return sha256_text(canonical_json(body))[:32]

    async def create(self, body: dict[str, Any]) -> CardAnswer:
        answer, data = await self._call("POST", CREATE_PATH, body)
        if not answer.ok:
            return answer
        result = data.get("result") if isinstance(data.get("result"), dict) else {}
        spaces = result.get("deliverResults") if isinstance(result, dict) else None
        if data.get("success") is False or not isinstance(spaces, list) or not spaces:
            return CardAnswer(CardOutcome.UNCERTAIN, answer.http_status, None, "no delivery result")
        failed = [s for s in spaces if not (isinstance(s, dict) and s.get("success") is True)]
        if failed:
            first = failed[0] if isinstance(failed[0], dict) else {}
            detail = str(first.get("errorMsg") or "the space refused the card")[:200]
            return CardAnswer(CardOutcome.REFUSED, answer.http_status, "deliverFailed", detail)
        carrier = spaces[0].get("carrierId")
        carrier = carrier if isinstance(carrier, str) else None
        return CardAnswer(CardOutcome.OK, answer.http_status, carrier_id=carrier)

    async def frame(self, out_track_id: str, text: str, final: bool) -> CardAnswer:
        body = {
            "outTrackId": out_track_id,
            "guid": secrets.token_hex(16),
            "key": self.content_key,
            "content": text,
            "isFull": True,
            "isFinalize": final,
            "isError": False,
        }
        answer, _ = await self._call("PUT", STREAM_PATH, body)
        return answer

    async def set_state(self, out_track_id: str, flow_status: str, text: str | None) -> CardAnswer:
        """The card's flow status (and, with it, its final text) by key: nothing else is
        touched."""
        params = {"flowStatus": flow_status}
        if text is not None:
            params[self.content_key] = text
        body = {
            "outTrackId": out_track_id,
            "cardData": {"cardParamMap": params},
            "cardUpdateOptions": {"updateCardDataByKey": True},
        }
        answer, _ = await self._call("PUT", UPDATE_PATH, body)
        return answer

    async def update(self, out_track_id: str, params: dict[str, str]) -> CardAnswer:
        """Card variables by key (an approval card's ``status``, say); the rest stays."""
        body = {
            "outTrackId": out_track_id,
            "cardData": {"cardParamMap": params},
            "cardUpdateOptions": {"updateCardDataByKey": True},
        }
        answer, _ = await self._call("PUT", UPDATE_PATH, body)
        return answer

    async def _call(
        self, method: str, path: str, body: dict[str, Any]
    ) -> tuple[CardAnswer, dict[str, Any]]:
        """One call; a stale token (401) is fetched again and the call made once more."""
        for attempt in (1, 2):
            try:
                token = await self.api.access_token()
                response = await self.api.http.request(
                    method,
                    f"{self.api.config.openapi_base_url}{path}",
                    json=body,
                    headers={"x-acs-dingtalk-access-token": token},
                )
            except _NOT_SENT as exc:
                return CardAnswer(CardOutcome.NOT_SENT, detail=type(exc).__name__), {}
            except httpx.HTTPError as exc:
                detail = f"{type(exc).__name__}: no usable answer after sending"
                return CardAnswer(CardOutcome.UNCERTAIN, detail=detail), {}
            if response.status_code == 401 and attempt == 1:
                self.api.forget_token()
                continue
            data = json_object(response)
            return _classify(response.status_code, data), data
        raise AssertionError("unreachable")  # pragma: no cover


def _classify(status: int, data: dict[str, Any]) -> CardAnswer:
    code = data.get("code")
    code = code[:120] if isinstance(code, str) else None
    message = data.get("message")
    detail = message[:200] if isinstance(message, str) else None
    scopes = (data.get("accessdenieddetail") or {}).get("requiredScopes")
    if isinstance(scopes, list) and scopes:
        detail = f"needs permission {', '.join(map(str, scopes))}"
    if status == 429 or (status == 403 and code is not None and "QpsLimit" in code):
        return CardAnswer(CardOutcome.THROTTLED, status, code, detail)
    if 200 <= status < 300:
        if data.get("success") is False or data.get("result") is False:
            return CardAnswer(CardOutcome.UNCERTAIN, status, code, "DingTalk did not confirm it")
        return CardAnswer(CardOutcome.OK, status, code)
    if status == 500 and code == "unknownError":
        # DingTalk's answer to a key that is not the template's streaming variable: a
        # definite no (nothing was written), unlike other 5xx.
        return CardAnswer(CardOutcome.REFUSED, status, code, detail)
    if 400 <= status < 500:
        return CardAnswer(CardOutcome.REFUSED, status, code, detail)
    return CardAnswer(CardOutcome.UNCERTAIN, status, code, detail or json.dumps(data)[:200])
