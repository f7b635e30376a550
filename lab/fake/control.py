"""How a lab harness steers the fake DingTalk: the fault-spec language and the ``/_lab`` routes.

A case file arms faults with a small JSON language (``{"webhook": {"status": 500}}``,
``{"stream": {"zombie": true}}``); it is parsed here, whole, before anything is armed, so a
typo is named instead of silently testing nothing. The ``/_lab/*`` routes expose the same
controls to a harness in another process. Neither is DingTalk traffic, which is why they
live apart from ``lab.fake.http``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, cast

from aiohttp import web

if TYPE_CHECKING:
    from lab.fake.platform import FakeDingTalk

FaultTarget = Literal["webhook", "openapi", "token", "identity"]

# Which inner keys each fault target understands; anything else is a typo in a case file.
_FAULT_KEYS: dict[str, frozenset[str]] = {
    "webhook": frozenset({"status", "times", "delivered", "timeout", "retry_after", "expired"}),
    "openapi": frozenset({"status", "times", "delivered", "timeout", "retry_after"}),
    "token": frozenset({"status", "times", "timeout", "retry_after"}),
    "identity": frozenset({"status", "times", "timeout"}),
}
_STREAM_KEYS = frozenset({"drop", "zombie", "refuse_s"})


@dataclass
class Fault:
    """An armed failure for the next ``remaining`` requests that would otherwise succeed."""

    target: FaultTarget
    remaining: int = 1
    status: int | None = None
    timeout: bool = False
    delivered: bool = False
    retry_after: float | None = None

    @property
    def answer_status(self) -> int:
        """A timeout that is finally answered looks like a gateway giving up."""
        return self.status if self.status is not None else 504


@dataclass
class ParsedFaults:
    faults: list[Fault] = field(default_factory=list)
    webhook_expired: bool | None = None
    disconnect: bool = False
    drop: bool = False  # stream: cut the current connection without a close handshake
    zombie: bool = False  # stream: the current connection goes silent
    refuse_s: float | None = None  # stream: refuse new connections for this many real seconds


def _bool(target: str, key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"fault {target}.{key} must be true or false, got {value!r}")
    return value


def _seconds(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float) and value >= 0


def _parse_target(target: str, inner: Any, parsed: ParsedFaults) -> None:
    if not isinstance(inner, dict):
        raise ValueError(f"fault {target!r} must be an object, got {inner!r}")
    unknown = sorted(set(inner) - _FAULT_KEYS[target])
    if unknown:
        raise ValueError(f"fault {target!r}: unknown key(s) {', '.join(map(repr, unknown))}")
    if "expired" in inner:
        others = sorted(set(inner) - {"expired"})
        if others:
            raise ValueError(f"fault webhook.expired cannot be combined with {others}")
        parsed.webhook_expired = _bool(target, "expired", inner["expired"])
        return
    status = inner.get("status")
    if status is not None and (
        isinstance(status, bool) or not isinstance(status, int) or not 400 <= status <= 599
    ):
        raise ValueError(f"fault {target}.status must be an HTTP error status, got {status!r}")
    times = inner.get("times", 1)
    if isinstance(times, bool) or not isinstance(times, int) or times < 1:
        raise ValueError(f"fault {target}.times must be a positive integer, got {times!r}")
    retry_after = inner.get("retry_after")
    if retry_after is not None and not _seconds(retry_after):
        raise ValueError(f"fault {target}.retry_after must be seconds >= 0, got {retry_after!r}")
    timeout = _bool(target, "timeout", inner.get("timeout", False))
    delivered = _bool(target, "delivered", inner.get("delivered", False))
    if status is None and not timeout:
        raise ValueError(f"fault {target!r} needs 'status' or 'timeout': true")
    parsed.faults.append(
        Fault(
            cast(FaultTarget, target),
            times,
            status,
            timeout,
            delivered,
            None if retry_after is None else float(retry_after),
        )
    )


def _parse_stream(inner: Any, parsed: ParsedFaults) -> None:
    """``drop`` and ``zombie`` are one-shot actions on the current connection, so only
    ``true`` means anything; together they contradict each other (a cut socket is not silent).
    """
    if not isinstance(inner, dict) or not inner:
        raise ValueError(f"fault 'stream' must be a non-empty object, got {inner!r}")
    unknown = sorted(set(inner) - _STREAM_KEYS)
    if unknown:
        raise ValueError(f"fault 'stream': unknown key(s) {', '.join(map(repr, unknown))}")
    for key in ("drop", "zombie"):
        if key in inner and inner[key] is not True:
            raise ValueError(f"fault stream.{key} must be true, got {inner[key]!r}")
    if "drop" in inner and "zombie" in inner:
        raise ValueError("fault stream.drop and stream.zombie exclude each other")
    refuse = inner.get("refuse_s")
    if "refuse_s" in inner and (not _seconds(refuse) or refuse == 0):
        raise ValueError(f"fault stream.refuse_s must be seconds > 0, got {refuse!r}")
    parsed.drop, parsed.zombie = "drop" in inner, "zombie" in inner
    parsed.refuse_s = None if refuse is None else float(refuse)


def parse_fault_spec(spec: Any) -> ParsedFaults:
    """Check a whole spec before arming any of it, so a bad spec changes nothing."""
    if not isinstance(spec, dict) or not spec:
        raise ValueError(f"a fault spec must be a non-empty object, got {spec!r}")
    parsed = ParsedFaults()
    for target, inner in spec.items():
        if target == "disconnect":
            if inner is not True:
                raise ValueError(f"fault 'disconnect' must be true, got {inner!r}")
            parsed.disconnect = True
        elif target == "stream":
            _parse_stream(inner, parsed)
        elif target in _FAULT_KEYS:
            _parse_target(target, inner, parsed)
        else:
            known = ", ".join([*_FAULT_KEYS, "stream", "disconnect"])
            raise ValueError(f"unknown fault {target!r} (known: {known})")
    return parsed


# ---------------------------------------------------------------------------- routes


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

    def __init__(self, platform: FakeDingTalk) -> None:
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
