"""Talking to DingTalk: the session webhook and the robot OpenAPI, over async httpx.

The transport knows HTTP and DingTalk's answers, not policy. Its one hard rule is about
doubt: it retries only what provably never reached DingTalk (a connection that was never
made, a 429 or a 403 ``QpsLimit`` the platform answered before accepting anything, a 401 for
a stale token). A timeout or a 5xx after the request went out may have been delivered, so it
reports ``uncertain`` and leaves the decision to a human or a readback, never to a blind
resend.

Where a message may go and what it says (webhook origins, channel choice, request bodies)
is agent/dingtalk/addressing.py; the transport inherits it.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from datetime import UTC
from email.utils import parsedate_to_datetime
from typing import Any

import httpx
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt

from agent.clock import Clock
from agent.contracts import AttemptOutcome, Channel, Evidence
from agent.dingtalk.addressing import Addressing, OutboundRequest, allowed_origins, webhook_origin
from agent.dingtalk.media_upload import UploadFailed, upload_media
from agent.dingtalk.openapi import DingTalkAPI, TokenError, TransportConfig, json_object

# Errors that prove the request never reached DingTalk: retried (connecting) or failed.
# (A send holds its pool place before it starts, so it never waits for one and never
# meets PoolTimeout; it stays here for a client handed in without our pool.)
_NOT_CONNECTED = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
_NOT_SENT = (httpx.UnsupportedProtocol, httpx.ProxyError, httpx.LocalProtocolError)
# DingTalk's answer when a session webhook no longer exists (seen in field reports).
SESSION_GONE_ERRCODE = 300001
# The robot webhooks' "send too fast" (errcode on an HTTP 200): refused, so not delivered.
SEND_TOO_FAST_ERRCODE = 130101
# The OpenAPI's throttling: HTTP 403 whose ``code`` contains this (e.g.
# ``Forbidden.AccessDenied.QpsLimitForApi``). Other 403s (no permission, the monthly
# ``ApiCountLimitForOrg`` quota) are definite failures that a retry cannot change.
QPS_LIMIT_MARK = "QpsLimit"
# QPS limits are counted per second: a retry sooner than that meets the same full window.
QPS_LIMIT_MIN_WAIT_S = 1.0
log = logging.getLogger("dta.transport")
TOKEN_MARGIN_S = 300.0  # refresh tokens five minutes early, as the SDK does

__all__ = [
    "Delivery",
    "DingTalkTransport",
    "OutboundRequest",
    "allowed_origins",
    "webhook_origin",
]


@dataclass
class Delivery:
    """The outcome of one attempt on one channel."""

    outcome: AttemptOutcome
    evidence: Evidence
    session_gone: bool = False  # a definite "this webhook no longer exists"
    upload_failed: bool = False  # an attachment DingTalk's media upload did not take


class _Retryable(Exception):
    """Raised inside the retry loop for answers that prove nothing was delivered."""

    def __init__(
        self, response: httpx.Response | None, wait_s: float | None, min_wait_s: float = 0.0
    ) -> None:
        super().__init__("retryable")
        self.response = response
        self.wait_s = wait_s
        self.min_wait_s = min_wait_s


def _throttled(response: httpx.Response) -> bool:
    """DingTalk's "too fast": the request was refused before anything was accepted."""
    status = response.status_code
    if status == 429:
        return True
    if status == 403:
        code = json_object(response).get("code")
        return isinstance(code, str) and QPS_LIMIT_MARK in code
    if status == 200:
        return json_object(response).get("errcode") == SEND_TOO_FAST_ERRCODE
    return False


def _refused_recipients(data: dict[str, Any]) -> str | None:
    """DingTalk's per-recipient no, in its own words (``flowControlledStaffIdList``: sent
    too often to that person; ``invalidStaffIdList``: no such person for this robot)."""
    said = []
    for field, meaning in (
        ("flowControlledStaffIdList", "flow-controlled"),
        ("invalidStaffIdList", "invalid staff id"),
    ):
        ids = data.get(field)
        if isinstance(ids, list) and ids:
            said.append(f"{meaning} ({field}: {', '.join(map(str, ids))[:200]})")
    return "; ".join(said) or None


def _retry_after(response: httpx.Response, clock_now: float) -> float | None:
    value = response.headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        try:
            moment = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if moment.tzinfo is None:  # "-0000" means UTC, not the local time zone
            moment = moment.replace(tzinfo=UTC)
        return max(0.0, moment.timestamp() - clock_now)


class DingTalkTransport(Addressing, DingTalkAPI):
    """Delivery: which channel and what body (``Addressing``), how many tries, and what the
    answer means."""

    def __init__(
        self, config: TransportConfig, clock: Clock, client: httpx.AsyncClient | None = None
    ) -> None:
        super().__init__(config, clock, client)
        self.webhook_origins = allowed_origins(config.webhook_origins)

    async def prepare(self, channel: Channel) -> None:
        """Fetch what a send on ``channel`` needs before its attempt is recorded (the
        OpenAPI token), so a stop or a crash in that wait never leaves an attempt that
        may or may not have left: a failure here is met again, and classified, by the send.
        """
        if channel in (Channel.OPENAPI_OTO, Channel.OPENAPI_GROUP):
            with contextlib.suppress(TokenError, httpx.HTTPError):
                await self.access_token()

    # ------------------------------------------------------------------ delivery

    async def deliver(self, request: OutboundRequest) -> Delivery:
        """Send on the request's channel; why that channel was chosen, when it was not the
        obvious one (``request.note``), leads the evidence's detail. An attachment is
        uploaded first, once: a send retried after it reuses the media id."""
        upload = request.upload
        if upload is not None and upload.media_id is None:
            try:
                media_id = await upload_media(
                    self, self.config.oapi_base_url, upload, request.place
                )
            except UploadFailed as exc:
                evidence = Evidence(
                    channels_tried=[request.channel],
                    http_status=exc.http_status,
                    errcode=exc.errcode,
                    errmsg=exc.errmsg,
                    detail=f"media upload failed: {exc.detail}"[:500],
                )
                return Delivery(AttemptOutcome.FAILED, evidence, upload_failed=True)
            request.uploaded(media_id)
        delivery = await self._deliver(request)
        if upload is not None:
            delivery.evidence.media_id = upload.media_id
        if request.note:
            detail = delivery.evidence.detail
            delivery.evidence.detail = f"{request.note}; {detail}" if detail else request.note
        return delivery

    async def _deliver(self, request: OutboundRequest) -> Delivery:
        evidence = Evidence(channels_tried=[request.channel])
        foreign = (
            self._foreign_webhook(request.url)
            if request.channel is Channel.SESSION_WEBHOOK
            else None
        )
        if foreign is not None:
            # channel_for never picks such a webhook; a caller that built one anyway still
            # must not reach it. Nothing was sent, so this is a definite failure.
            evidence.detail = foreign
            return Delivery(AttemptOutcome.FAILED, evidence)
        tries = [0]
        try:
            response = await self._send_with_retries(request, tries)
        except _Retryable as exc:
            # Still refused after every retry: DingTalk never took it.
            evidence.retries = tries[0] - 1
            evidence.detail = "retries exhausted"
            if exc.response is not None:
                code = self._read_answer(exc.response, evidence).get("code")
                if isinstance(code, str) and QPS_LIMIT_MARK in code:
                    evidence.detail = f"throttled ({code[:80]}); retries exhausted"
            return Delivery(AttemptOutcome.FAILED, evidence)
        except (*_NOT_CONNECTED, *_NOT_SENT) as exc:
            evidence.retries = tries[0] - 1
            evidence.error = type(exc).__name__
            evidence.detail = "the request never left; nothing was sent"
            return Delivery(AttemptOutcome.FAILED, evidence)
        except TokenError as exc:
            evidence.error = "TokenError"
            evidence.detail = str(exc)
            return Delivery(AttemptOutcome.FAILED, evidence)
        except httpx.HTTPError as exc:
            # Anything else happened after the request may have reached DingTalk (a
            # timeout, a dropped connection, an unreadable answer): never resend blindly.
            evidence.retries = tries[0] - 1
            evidence.error = type(exc).__name__
            evidence.detail = "no usable answer after sending; delivery unknown"
            return Delivery(AttemptOutcome.UNCERTAIN, evidence)
        evidence.retries = tries[0] - 1
        return self._classify(response, evidence, request.channel)

    async def _send_with_retries(
        self, request: OutboundRequest, tries: list[int]
    ) -> httpx.Response:
        """Send; retry only what provably never reached DingTalk (counted in ``tries``).

        The first try runs outside tenacity: almost every send succeeds at once, and the
        retry machinery costs more than the request on a fast network.
        """
        tries[0] = 1
        try:
            return await self._send_once(request)
        except (_Retryable, *_NOT_CONNECTED) as first:
            if self.config.send_retries == 0:
                raise
            await self.clock.sleep(self._backoff(first, 1))

        def wait(state: RetryCallState) -> float:
            exc = state.outcome.exception() if state.outcome else None
            return self._backoff(exc, state.attempt_number + 1)

        retrying = AsyncRetrying(
            retry=retry_if_exception_type((_Retryable, *_NOT_CONNECTED)),
            stop=stop_after_attempt(self.config.send_retries),
            wait=wait,
            sleep=self.clock.sleep,
            reraise=True,
        )
        async for attempt in retrying:
            with attempt:
                tries[0] += 1
                response = await self._send_once(request)
        return response

    def _backoff(self, exc: BaseException | None, tries_so_far: int) -> float:
        """DingTalk's Retry-After when it gave one, else exponential (at least a throttle's
        window); capped."""
        hinted = exc.wait_s if isinstance(exc, _Retryable) else None
        floor = exc.min_wait_s if isinstance(exc, _Retryable) else 0.0
        fallback = max(min(0.2 * (2 ** (tries_so_far - 1)), 5.0), floor)
        return min(hinted if hinted is not None else fallback, self.config.max_retry_after_s)

    async def _send_once(self, request: OutboundRequest) -> httpx.Response:
        """One POST; raises ``_Retryable`` for an answer that proves nothing was taken."""
        headers = {"Content-Type": "application/json"}
        if request.needs_token:
            headers["x-acs-dingtalk-access-token"] = await self._token_for_send()
        # The send holds its pool place (the broker reserved it), so from here the bytes
        # leave at once: no wait for a place lies between this mark and the wire.
        request.may_have_arrived = True
        try:
            response = await self.post(request.url, request.body, headers, place=request.place)
        except (*_NOT_CONNECTED, *_NOT_SENT):
            request.may_have_arrived = False
            raise
        # An answer came back: whether it is a yes is for _classify; a throttle or a 401 is
        # a no.
        throttled = _throttled(response)
        request.may_have_arrived = response.status_code != 401 and not throttled
        if throttled:
            # Refused for speed, not content: nothing was accepted, so waiting and sending
            # again cannot duplicate. A 403 QpsLimit rarely says how long; its window is 1 s.
            floor = 0.0 if response.status_code == 429 else QPS_LIMIT_MIN_WAIT_S
            raise _Retryable(response, _retry_after(response, self.clock.now()), floor)
        if response.status_code == 401:
            # A stale token was refused before anything was accepted: fetch a new one.
            self.forget_token()
            raise _Retryable(response, 0.0)
        return response

    async def _token_for_send(self) -> str:
        """The token; nothing has been sent yet, so its failures are never "uncertain".
        A token refused or unreachable (credentials revoked for a while, the endpoint
        down) is asked for again with back-off for ``token_wait_s``: the send stays owed
        rather than failed while the robot cannot yet speak."""
        deadline = self.clock.now() + self.config.token_wait_s
        pause = 0.5
        while True:
            try:
                return await self.access_token()
            except _NOT_CONNECTED:
                raise  # retried like any connection that was never made
            except (httpx.HTTPError, TokenError) as exc:
                if self.clock.now() + pause > deadline:
                    if isinstance(exc, TokenError):
                        raise
                    raise TokenError(f"token request failed: {type(exc).__name__}") from None
                log.warning("no access token yet; asking again", extra={"wait_s": pause})
            await self.clock.sleep(pause)
            pause = min(pause * 2, 5.0)

    @staticmethod
    def _read_answer(response: httpx.Response, evidence: Evidence) -> dict[str, Any]:
        data = json_object(response)
        evidence.http_status = response.status_code
        errcode = data.get("errcode")
        if isinstance(errcode, int):
            evidence.errcode = errcode
        message = data.get("errmsg") or data.get("message") or data.get("code")
        if isinstance(message, str):
            evidence.errmsg = message[:200]
        key = data.get("processQueryKey")
        if isinstance(key, str):
            evidence.process_query_key = key
        return data

    def _classify(self, response: httpx.Response, evidence: Evidence, channel: Channel) -> Delivery:
        """What DingTalk's answer proves. ``accepted`` needs DingTalk's own yes: errcode 0
        from a webhook, a processQueryKey from the OpenAPI. Anything else that is not a
        definite no (a redirect, an HTML page, a 5xx) leaves delivery unknown."""
        data = self._read_answer(response, evidence)
        status = response.status_code
        if 400 <= status < 500:
            return Delivery(AttemptOutcome.FAILED, evidence)
        if status >= 300 or status < 200:
            evidence.detail = evidence.detail or f"unexpected HTTP {status}"
            return Delivery(AttemptOutcome.UNCERTAIN, evidence)
        errcode = data.get("errcode")
        if errcode not in (0, None):
            gone = errcode == SESSION_GONE_ERRCODE
            return Delivery(AttemptOutcome.FAILED, evidence, session_gone=gone)
        refused = _refused_recipients(data)
        if refused:
            # batchSend's per-recipient answer: these people got nothing, whatever the key.
            evidence.detail = refused
            return Delivery(AttemptOutcome.FAILED, evidence)
        proof = (
            errcode == 0 if channel is Channel.SESSION_WEBHOOK else bool(evidence.process_query_key)
        )
        if not proof:
            evidence.detail = "DingTalk's answer did not confirm the message"
            return Delivery(AttemptOutcome.UNCERTAIN, evidence)
        return Delivery(AttemptOutcome.ACCEPTED, evidence)
