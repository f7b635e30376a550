"""How a lab harness in another process steers the fake DingTalk: the ``/_lab`` routes.

They expose what a harness in the same process calls directly (inject a message, arm a
fault, read what the platform received). They are not DingTalk traffic, which is why they
live apart from ``lab.fake.http`` and stay out of the platform's request log. They are typed
against ``Controlled``, what they need of a platform, so this module imports nothing of the
platform that serves them.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from aiohttp import web

from lab.fake.files import FakeFile, parse_files
from lab.fake.state import ReceivedMessage


class Controlled(Protocol):
    """The platform operations the ``/_lab`` routes drive (``FakeDingTalk`` has them all)."""

    received: list[ReceivedMessage]
    request_log: list[dict[str, Any]]
    files: dict[str, FakeFile]  # served under their download codes

    def arm_fault(self, spec: dict[str, Any]) -> object: ...

    def reset(self) -> None: ...

    def inject(self, send: dict[str, Any]) -> dict[str, Any]: ...

    def inject_raw(self, frame: str) -> dict[str, Any]: ...

    def redeliver(self, msg_id: str) -> dict[str, Any]: ...

    def send_ping(self) -> str | None: ...

    def stream_stats(self) -> dict[str, Any]: ...

    def workspace_view(self) -> dict[str, list[dict[str, Any]]]: ...


async def _body(request: web.Request) -> Any:
    """The JSON body, or None: each route words its own complaint about a bad one."""
    raw = await request.read()
    try:
        return json.loads(raw) if raw else None
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None


def _ok(**extra: Any) -> web.Response:
    return web.json_response({"ok": True, **extra})


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


class LabControl:
    """The ``/_lab/*`` routes, bound to one platform: JSON in, JSON out, no DingTalk shapes.

    They are not platform traffic, so ``lab.fake.http`` leaves them out of the request log.
    """

    def __init__(self, platform: Controlled) -> None:
        self.platform = platform

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/_lab/received", self.received),
            web.post("/_lab/faults", self.faults),
            web.post("/_lab/reset", self.reset),
            web.get("/_lab/requests", self.requests),
            web.post("/_lab/messages", self.messages),
            web.post("/_lab/frames", self.frames),
            web.post("/_lab/redeliver", self.redeliver),
            web.post("/_lab/ping", self.ping),
            web.get("/_lab/stream", self.stream),
            web.get("/_lab/workspace", self.workspace),
            web.post("/_lab/files", self.files),
        ]

    async def received(self, request: web.Request) -> web.Response:
        return web.json_response([m.to_dict() for m in self.platform.received])

    async def faults(self, request: web.Request) -> web.Response:
        try:
            self.platform.arm_fault(await _body(request))
        except ValueError as exc:
            return _error(400, str(exc))
        return _ok()

    async def reset(self, request: web.Request) -> web.Response:
        self.platform.reset()
        return _ok()

    async def requests(self, request: web.Request) -> web.Response:
        return web.json_response(self.platform.request_log)

    async def messages(self, request: web.Request) -> web.Response:
        """Body: a ``send`` step's short keys; the callback goes out over the stream."""
        try:
            return web.json_response(self.platform.inject(await _body(request)))
        except ValueError as exc:
            return _error(400, str(exc))

    async def frames(self, request: web.Request) -> web.Response:
        """Body ``{"frame": ...}``: a string goes out verbatim, anything else as its JSON."""
        body = await _body(request)
        if not isinstance(body, dict) or "frame" not in body:
            return _error(400, 'the body must be {"frame": <a string or any JSON>}')
        frame = body["frame"]
        text = frame if isinstance(frame, str) else json.dumps(frame, ensure_ascii=False)
        return web.json_response(self.platform.inject_raw(text))

    async def redeliver(self, request: web.Request) -> web.Response:
        body = await _body(request)
        msg = body.get("msg") if isinstance(body, dict) else None
        if not isinstance(msg, str) or not msg:
            return _error(400, 'the body must be {"msg": <a msgId sent earlier>}')
        try:
            return web.json_response(self.platform.redeliver(msg))
        except KeyError:
            return _error(404, f"no callback with msgId {msg!r} was sent")

    async def ping(self, request: web.Request) -> web.Response:
        frame_id = self.platform.send_ping()
        if frame_id is None:
            return _error(409, "no stream connection is open to ping")
        return web.json_response({"frame_message_id": frame_id})

    async def stream(self, request: web.Request) -> web.Response:
        return web.json_response(self.platform.stream_stats())

    async def workspace(self, request: web.Request) -> web.Response:
        """The to-dos and calendar events the fake holds, in staff ids, in creation order."""
        return web.json_response(self.platform.workspace_view())

    async def files(self, request: web.Request) -> web.Response:
        """Body: ``{code: {name, type, content | base64}}`` (a case's ``fixtures.files``):
        files a message sent next may carry, served under those download codes."""
        try:
            added = parse_files(await _body(request))
        except ValueError as exc:
            return _error(400, str(exc))
        self.platform.files.update(added)
        return _ok(codes=sorted(added))
