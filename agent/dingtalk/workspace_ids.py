"""Beneath the workspace client (agent/dingtalk/workspace.py): one authenticated call to
DingTalk's OpenAPI or oapi and what its answer means, and staff id ↔ unionId.

The calls go out on the transport's own client and token (``DingTalkTransport``), to the
base URLs the settings resolved (``openapi_base_url``; ``directory_base_url`` for oapi),
and keep the transport's rule about doubt: only what provably never reached DingTalk is
retried (no connection, a 429 or 403 ``QpsLimit``, a stale token), with the transport's
backoff. A read timeout or a 5xx after the request left is ``timeout_after_send``: a create
may have been applied, so it is never sent again here (read it back instead).

A write holds a place in the connection pool before its attempt is recorded
(``Departure``, taken by the act executor), so a stop can only cut it while its bytes may
be on the wire, never while it waits: ``Departure.may_have_arrived`` says which.
"""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any, Literal, NoReturn
from urllib.parse import quote

import httpx
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt

from agent.dingtalk.http_pool import PLACE, Place
from agent.dingtalk.openapi import TOKEN_ERRCODES, TokenError, json_object
from agent.dingtalk.transport import (
    _NOT_CONNECTED,
    _NOT_SENT,
    QPS_LIMIT_MIN_WAIT_S,
    DingTalkTransport,
    _retry_after,
    _Retryable,
    _throttled,
)

ErrorKind = Literal[
    "not_found", "forbidden", "throttled", "invalid", "timeout_after_send", "unavailable"
]
# oapi answers HTTP 200 with an errcode: no such user / unionId / department; no permission
# or outside the app's scope; -1 "system busy" (every oapi call here is a read).
_OAPI_NOT_FOUND = frozenset({60121, 60122, 60003})
_OAPI_FORBIDDEN = frozenset({60011, 50002})
_OAPI_BUSY = -1
# How the new-style APIs say "no such thing" on a 400 (todo: "task not exist").
_NOT_FOUND_WORDS = ("not exist", "notexist", "not found", "notfound")
ID_CACHE_LIMIT = 10_000  # people whose unionId is kept in memory


class Departure:
    """One write's place in the pool, held across its requests, and whether any of them
    may have reached DingTalk: set as a request's bytes go, put back when its answer (or
    its failure to connect) proves nothing was taken — as the transport does for sends."""

    def __init__(self, place: Place) -> None:
        self.place = place
        self.may_have_arrived = False


# The departure of the write this task is making (``WorkspaceClient.departure``). Only
# OpenAPI calls go on it: the oapi lookups may run in tasks of their own, which would
# inherit it, so they keep taking their own places.
DEPARTURE: contextvars.ContextVar[Departure | None] = contextvars.ContextVar(
    "dta_workspace_departure", default=None
)


class WorkspaceError(Exception):
    """A workspace call that did not give its answer. ``kind`` says what the caller may do:
    ``timeout_after_send`` may have been applied (read back before trying again);
    ``unavailable`` was not (no connection, no token)."""

    def __init__(self, kind: ErrorKind, status: int | None, code: str | None, message: str) -> None:
        super().__init__(f"{kind}: {message}" + (f" ({status} {code})" if status else ""))
        self.kind = kind
        self.status = status
        self.code = code
        self.message = message

    @property
    def maybe_applied(self) -> bool:
        return self.kind == "timeout_after_send"


def segment(value: str) -> str:
    """An id as one path segment: it can never change the host or the path around it."""
    if not value:
        raise WorkspaceError("invalid", None, None, "an empty id")
    return quote(value, safe="")


class WorkspaceCalls:
    """One call, its retries and its meaning, on the transport's client and token."""

    def __init__(self, transport: DingTalkTransport, oapi_base_url: str | None = None) -> None:
        self.transport = transport
        cfg = transport.config
        self.openapi_base_url = cfg.openapi_base_url
        # oapi is where the directory lookup goes; with identity lookups off the config has
        # none, and the OpenAPI's host is the fake's (or the caller names one).
        self.oapi_base_url = oapi_base_url or cfg.directory_base_url or cfg.openapi_base_url

    async def openapi(
        self,
        method: str,
        path: str,
        body: object | None = None,
        *,
        params: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        url = f"{self.openapi_base_url}{path}"
        return await self._call(method, url, body, params, headers or {}, oapi=False)

    async def oapi(self, path: str, body: object) -> dict[str, Any]:
        """An oapi POST; its ``result`` (errcode 0), else WorkspaceError."""
        data = await self._call("POST", f"{self.oapi_base_url}{path}", body, None, {}, oapi=True)
        result = data.get("result")
        if not isinstance(result, dict):
            raise WorkspaceError("invalid", 200, None, "oapi answered without a result")
        return result

    async def _call(
        self,
        method: str,
        url: str,
        body: object | None,
        params: dict[str, str] | None,
        headers: dict[str, str],
        *,
        oapi: bool,
    ) -> dict[str, Any]:
        try:
            response = await self._with_retries(method, url, body, params, headers, oapi)
        except _Retryable as exc:
            self._exhausted(exc)
        except (*_NOT_CONNECTED, *_NOT_SENT) as exc:
            raise WorkspaceError("unavailable", None, None, type(exc).__name__) from None
        except TokenError as exc:
            raise WorkspaceError("unavailable", None, None, f"no access token ({exc})") from None
        except httpx.HTTPError as exc:
            # After the request may have reached DingTalk: never resent blindly.
            message = f"{type(exc).__name__}: no usable answer after sending"
            raise WorkspaceError("timeout_after_send", None, None, message) from None
        return _answer(response, oapi)

    @staticmethod
    def _exhausted(exc: _Retryable) -> NoReturn:
        response = exc.response
        status = response.status_code if response is not None else None
        data = json_object(response) if response is not None else {}
        code = _code(data)
        if status == 401 or code in {str(c) for c in TOKEN_ERRCODES}:
            raise WorkspaceError("forbidden", status, code, "the access token was refused")
        raise WorkspaceError("throttled", status, code, "throttled; retries exhausted")

    async def _with_retries(
        self,
        method: str,
        url: str,
        body: object | None,
        params: dict[str, str] | None,
        headers: dict[str, str],
        oapi: bool,
    ) -> httpx.Response:
        transport = self.transport

        def wait(state: RetryCallState) -> float:
            exc = state.outcome.exception() if state.outcome else None
            return transport._backoff(exc, state.attempt_number)  # the sends' own backoff

        retrying = AsyncRetrying(
            retry=retry_if_exception_type((_Retryable, *_NOT_CONNECTED)),
            stop=stop_after_attempt(transport.config.send_retries + 1),
            wait=wait,
            sleep=transport.clock.sleep,
            reraise=True,
        )
        async for attempt in retrying:
            with attempt:
                response = await self._once(method, url, body, params, headers, oapi)
        return response

    async def _once(
        self,
        method: str,
        url: str,
        body: object | None,
        params: dict[str, str] | None,
        headers: dict[str, str],
        oapi: bool,
    ) -> httpx.Response:
        """One request; ``_Retryable`` for an answer that proves nothing was taken."""
        transport = self.transport
        # Its failures are "no token", never "maybe sent": nothing has left yet.
        token = await transport._token_for_send()
        sent = {"Accept": "application/json", **headers}
        query = dict(params or {})
        if oapi:
            query["access_token"] = token
        else:
            sent["x-acs-dingtalk-access-token"] = token
        departure = None if oapi else DEPARTURE.get()
        if departure is None:
            return self._answered(
                await transport.http.request(
                    method, url, json=body, params=query or None, headers=sent
                ),
                oapi,
            )
        # On the write's own place: from here the bytes leave at once.
        before, departure.may_have_arrived = departure.may_have_arrived, True
        try:
            response = await transport.http.request(
                method,
                url,
                json=body,
                params=query or None,
                headers=sent,
                extensions={PLACE: departure.place},
            )
        except (*_NOT_CONNECTED, *_NOT_SENT):
            departure.may_have_arrived = before
            raise
        try:
            return self._answered(response, oapi=False)
        except _Retryable:
            departure.may_have_arrived = before  # refused before anything was taken
            raise

    def _answered(self, response: httpx.Response, oapi: bool) -> httpx.Response:
        """The response, or ``_Retryable`` when it proves nothing was taken."""
        transport = self.transport
        if _throttled(response):
            floor = 0.0 if response.status_code == 429 else QPS_LIMIT_MIN_WAIT_S
            raise _Retryable(response, _retry_after(response, transport.clock.now()), floor)
        stale = oapi and json_object(response).get("errcode") in TOKEN_ERRCODES
        if response.status_code == 401 or stale:
            transport.forget_token()  # refused before anything was taken: a fresh token
            raise _Retryable(response, 0.0)
        return response


def _code(data: dict[str, Any]) -> str | None:
    code = data.get("code")
    if isinstance(code, str) and code:
        return code[:120]
    errcode = data.get("errcode")
    return str(errcode) if isinstance(errcode, int) and errcode != 0 else None


def _message(data: dict[str, Any], fallback: str) -> str:
    message = data.get("message") or data.get("errmsg")
    return message[:200] if isinstance(message, str) and message else fallback


def _answer(response: httpx.Response, oapi: bool) -> dict[str, Any]:
    """DingTalk's answer as data, or the WorkspaceError it amounts to."""
    status = response.status_code
    data = json_object(response)
    code, message = _code(data), _message(data, f"HTTP {status}")
    if 200 <= status < 300:
        errcode = data.get("errcode")
        if oapi and errcode != 0:
            raise WorkspaceError(_oapi_kind(errcode), status, code, message)
        if not data and response.content.strip() not in (b"", b"{}"):
            # A yes we cannot read: whatever it was, it may have been applied.
            raise WorkspaceError("timeout_after_send", status, None, "an unreadable answer")
        return data
    raise WorkspaceError(_http_kind(status, code, message), status, code, message)


def _oapi_kind(errcode: object) -> ErrorKind:
    if errcode in _OAPI_NOT_FOUND:
        return "not_found"
    if errcode in _OAPI_FORBIDDEN:
        return "forbidden"
    return "unavailable" if errcode == _OAPI_BUSY else "invalid"


def _http_kind(status: int, code: str | None, message: str) -> ErrorKind:
    words = f"{code or ''} {message}".lower()
    if status == 404 or (status == 400 and any(w in words for w in _NOT_FOUND_WORDS)):
        return "not_found"
    if status in (401, 403):
        return "forbidden"
    if status == 429:
        return "throttled"
    if 400 <= status < 500:
        return "invalid"
    return "timeout_after_send"  # a 5xx (or an odd status) after the body was sent


class StaffIds:
    """staff id ↔ unionId, remembered per client; concurrent askers share one lookup.

    The store's identity cache is not used: its rows are the ``Identity`` fields (name,
    title, department) and an extra key would break their reading (agent/run/identities.py).
    """

    def __init__(self, calls: WorkspaceCalls) -> None:
        self._calls = calls
        self._union: dict[str, str] = {}  # staff id → unionId, oldest first
        self._staff: dict[str, str] = {}  # unionId → staff id
        self._names: dict[str, str] = {}  # staff id → name, as the directory last said
        self._asking: dict[tuple[str, str], asyncio.Task[str]] = {}

    def learn(self, user_id: str, union_id: str) -> None:
        if not (user_id and union_id):
            return
        self._union.pop(user_id, None)
        self._union[user_id] = union_id
        self._staff[union_id] = user_id
        if len(self._union) > ID_CACHE_LIMIT:
            oldest = next(iter(self._union))
            self._staff.pop(self._union.pop(oldest), None)

    async def union_id(self, user_id: str) -> str:
        known = self._union.get(user_id)
        return known if known is not None else await self._shared("union", user_id)

    async def user_id(self, union_id: str) -> str:
        known = self._staff.get(union_id)
        return known if known is not None else await self._shared("staff", union_id)

    async def union_ids(self, user_ids: list[str]) -> list[str]:
        return list(await asyncio.gather(*(self.union_id(u) for u in user_ids)))

    async def staff_ids(self, union_ids: list[str]) -> list[str]:
        """The staff ids of the unionIds DingTalk gave; one that is nobody's here (an
        external contact, a person since removed) is left out, not guessed."""
        found = await asyncio.gather(*(self.user_id(u) for u in union_ids), return_exceptions=True)
        for item in found:
            if isinstance(item, BaseException) and getattr(item, "kind", None) != "not_found":
                raise item
        return [s for s in found if isinstance(s, str)]

    async def detail(self, user_id: str) -> dict[str, Any]:
        """The directory's entry (``/topapi/v2/user/get``); its unionId is remembered."""
        result = await self._calls.oapi(
            "/topapi/v2/user/get", {"userid": user_id, "language": "zh_CN"}
        )
        union = result.get("unionid")  # ``union_id`` may be empty; ``unionid`` is the one
        if isinstance(union, str):
            self.learn(user_id, union)
        name = result.get("name")
        if isinstance(name, str) and name:
            self._names.pop(user_id, None)
            self._names[user_id] = name
            if len(self._names) > ID_CACHE_LIMIT:
                del self._names[next(iter(self._names))]
        return result

    async def name(self, user_id: str) -> str | None:
        """The person's name from the directory (remembered), None when it cannot say."""
        known = self._names.get(user_id)
        if known is not None:
            return known
        try:
            await self.detail(user_id)
        except WorkspaceError:
            return None
        return self._names.get(user_id)

    async def _shared(self, way: str, key: str) -> str:
        task = self._asking.get((way, key))
        if task is None:
            ask = self._ask_union if way == "union" else self._ask_staff
            task = asyncio.ensure_future(ask(key))
            self._asking[(way, key)] = task
            task.add_done_callback(lambda _: self._asking.pop((way, key), None))
        # A caller that is cancelled leaves the lookup running for the others.
        return await asyncio.shield(task)

    async def _ask_union(self, user_id: str) -> str:
        await self.detail(user_id)
        union = self._union.get(user_id)
        if union is None:
            raise WorkspaceError("not_found", 200, None, f"no unionId for {user_id}")
        return union

    async def _ask_staff(self, union_id: str) -> str:
        result = await self._calls.oapi("/topapi/user/getbyunionid", {"unionid": union_id})
        user_id = result.get("userid")
        if result.get("contact_type") == 1 or not isinstance(user_id, str) or not user_id:
            # contact_type 1 is an external contact: not a staff id of this organisation.
            raise WorkspaceError("not_found", 200, None, f"no staff id for {union_id}")
        self.learn(user_id, union_id)
        return user_id
