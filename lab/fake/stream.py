"""The fake DingTalk's Stream Mode gateway: tickets, the websocket, frames, acks, redelivery.

The real ``dingtalk-stream`` client connects here exactly as it would to DingTalk: it opens a
connection over HTTP, upgrades ``/connect?ticket=...`` to a websocket, reads frames and acks
them. The runtime's worst bugs live in that conversation (lost acks, duplicate deliveries,
silent sockets), so the gateway keeps evidence of every frame and misbehaves on demand:
it drops the socket, goes silent as a zombie, refuses connections, asks the client to leave.

Everything runs on the fake's event loop; call the Python API from that loop, not a thread.
"""

from __future__ import annotations

import asyncio
import json
import math
import secrets
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from aiohttp import WSMsgType, web

from lab.fake.http import api_error

if TYPE_CHECKING:
    from lab.fake.platform import FakeDingTalk

FrameKind = Literal["callback", "ping", "disconnect", "raw"]
Render = Callable[[str, str], str]  # (frame messageId, connectionId) -> the frame's text
_DONE = (WSMsgType.CLOSING, WSMsgType.CLOSED, WSMsgType.ERROR)


@dataclass
class FrameRecord:
    """What became of one frame: the evidence a lab case reads about the stream."""

    frame_id: str
    kind: FrameKind
    msg_id: str | None = None
    delivery: int = 1  # 1 for the first delivery of a callback, 2 for the next, ...
    connection_id: str | None = None  # None while it waits for a connection
    sent_at: float | None = None  # platform clock
    acked_at: float | None = None  # platform clock
    ack_code: Any = None
    latency_ms: float | None = None  # real time, send to ack
    echo_ok: bool | None = None  # SYSTEM frames: did the ack carry our data back?
    swallowed: bool = False  # "sent" to a zombie: the client never saw it
    sent_mono: float | None = field(default=None, repr=False)
    expect: Any = field(default=None, repr=False)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        del data["sent_mono"], data["expect"]
        return data


@dataclass(eq=False)
class _Outgoing:
    record: FrameRecord
    text: Callable[[str], str]  # connectionId -> frame text, rendered when it is written


@dataclass(eq=False)
class Connection:
    """One accepted websocket, as the platform sees it."""

    id: str
    ws: web.WebSocketResponse
    transport: asyncio.BaseTransport | None
    subscriptions: list[dict[str, str]]
    open: bool = True
    zombie: bool = False
    draining: bool = False  # told to disconnect: it gets no new frames
    sent: int = 0
    acked: int = 0
    outbox: deque[_Outgoing] = field(default_factory=deque)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    handler: asyncio.Task[Any] | None = None  # the aiohttp handler task serving it

    def to_dict(self) -> dict[str, Any]:
        keys = ("id", "open", "zombie", "draining", "sent", "acked", "subscriptions")
        return {key: getattr(self, key) for key in keys}


@dataclass(eq=False)
class _Callback:
    """A chatbot callback the platform owes the client until its newest delivery is acked."""

    msg_id: str
    render: Render
    latest: str = ""  # frame id of the newest delivery: the one whose ack settles it
    deliveries: int = 0
    redeliveries: int = 0  # automatic ones only, bounded by max_redeliveries
    acked: bool = False
    gave_up: bool = False
    timer: asyncio.TimerHandle | None = None

    @property
    def settled(self) -> bool:
        return self.acked or self.gave_up


@dataclass
class _Ticket:
    expires_at: float
    subscriptions: list[dict[str, str]]


def _subscriptions_ok(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(s, dict) and all(isinstance(s.get(k), str) and s[k] for k in ("type", "topic"))
        for s in value
    )


def _json(text: Any) -> Any:
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return None


def _summary(values: list[float]) -> dict[str, Any]:
    """Nearest-rank percentiles: with a handful of samples, interpolation would invent data."""
    ordered = sorted(values)

    def rank(q: float) -> float | None:
        return ordered[max(0, math.ceil(q * len(ordered)) - 1)] if ordered else None

    return {"count": len(ordered), "p50": rank(0.5), "p99": rank(0.99), "max": rank(1.0)}


def _unavailable() -> web.Response:
    return api_error(503, "ServiceUnavailable", "the stream gateway is refusing connections")


class StreamGateway:
    """DingTalk's side of Stream Mode: who is connected, what was sent, what was acked.

    A callback not acked with code 200 within ``redelivery_delay_s`` (real seconds) goes out
    again under a new frame messageId, as DingTalk does, at most ``max_redeliveries`` times.
    Frames go to the newest open connection; with none open they wait, in order.
    """

    def __init__(
        self,
        platform: FakeDingTalk,
        *,
        redelivery_delay_s: float = 60.0,
        max_redeliveries: int = 5,
        ping_interval_s: float | None = None,
        ticket_ttl_s: float = 90.0,
    ) -> None:
        self.platform = platform
        self.clock = platform.clock
        self.redelivery_delay_s = redelivery_delay_s
        self.max_redeliveries = max_redeliveries
        self.ping_interval_s = ping_interval_s
        self.ticket_ttl_s = ticket_ttl_s
        self.tickets: dict[str, _Ticket] = {}
        self.connections: list[Connection] = []
        self.callbacks: dict[str, _Callback] = {}
        self._serial = 0
        self._changed = asyncio.Event()
        self._ping_task: asyncio.Task[None] | None = None
        self._closing = False  # stopping: a client's instant reconnect must not get in
        self.reset()

    def reset(self) -> None:
        """Forget one case's frames; open connections and unused tickets survive."""
        for callback in self.callbacks.values():
            if callback.timer is not None:
                callback.timer.cancel()
        self.callbacks = {}
        self.frames: dict[str, FrameRecord] = {}
        self.queue: deque[_Outgoing] = deque()
        self.stray_acks: list[dict[str, Any]] = []
        self.refuse_until = 0.0
        self.connections = [c for c in self.connections if c.open]
        for conn in self.connections:
            conn.sent = conn.acked = 0
            conn.outbox.clear()

    # ------------------------------------------------------------------ lifecycle

    def routes(self) -> list[web.RouteDef]:
        return [
            web.post("/v1.0/gateway/connections/open", self.handle_open),
            web.get("/connect", self.handle_connect),
        ]

    async def start(self) -> None:
        self._closing = False
        if self.ping_interval_s and self._ping_task is None:
            self._ping_task = asyncio.create_task(self._ping_every(self.ping_interval_s))

    async def close(self) -> None:
        """Close every socket and stop every timer, so the server can shut down at once."""
        self._closing = True
        task, self._ping_task = self._ping_task, None
        if task is not None:
            task.cancel()
            await asyncio.wait([task])
        for callback in self.callbacks.values():
            if callback.timer is not None:
                callback.timer.cancel()
                callback.timer = None
        await asyncio.gather(*(self._close(c) for c in self.connections if c.open))
        handlers = [c.handler for c in self.connections if c.handler and not c.handler.done()]
        if handlers:  # each ends once its socket is closed; the server then stops at once
            await asyncio.wait(handlers, timeout=2.0)

    async def _close(self, conn: Connection) -> None:
        if conn.zombie:  # a dead peer would never complete a close handshake
            self._cut(conn)
            return
        try:
            await asyncio.wait_for(conn.ws.close(code=1001, message=b"going away"), 1.0)
        except (TimeoutError, ConnectionError):
            self._cut(conn)

    @staticmethod
    def _cut(conn: Connection) -> None:
        """End the connection with no close handshake, as a network failure would."""
        conn.open = False
        if conn.transport is not None:
            conn.transport.close()

    # ------------------------------------------------------------------ HTTP side

    @property
    def refusing(self) -> bool:
        return self._closing or time.monotonic() < self.refuse_until

    async def handle_open(self, request: web.Request) -> web.Response:
        """``POST /v1.0/gateway/connections/open``: credentials in, a one-use ticket out."""
        body = _json(await request.read())
        if not isinstance(body, dict):
            return api_error(400, "InvalidParameter", "the request body must be a JSON object")
        if not _subscriptions_ok(body.get("subscriptions")):
            return api_error(
                400, "InvalidParameter.subscriptions", "subscriptions must list {type, topic}"
            )
        if not self.platform.credentials_match(body.get("clientId"), body.get("clientSecret")):
            # Never echo what was sent: it may be the secret.
            return api_error(401, "InvalidAuthentication", "clientId or clientSecret is invalid")
        if self.refusing:  # a fault strikes only a request that would otherwise succeed
            return _unavailable()
        ticket = secrets.token_urlsafe(24)
        self.tickets[ticket] = _Ticket(
            self.clock.now() + self.ticket_ttl_s, list(body["subscriptions"])
        )
        endpoint = "ws" + self.platform.base_url.removeprefix("http") + "/connect"
        return web.json_response({"endpoint": endpoint, "ticket": ticket})

    async def handle_connect(self, request: web.Request) -> web.StreamResponse:
        """``GET /connect?ticket=...``: the websocket; it lives as long as this handler runs."""
        key = request.query.get("ticket", "")
        ticket = self.tickets.get(key)
        if ticket is None or self.clock.now() >= ticket.expires_at:
            self.tickets.pop(key, None)
            return api_error(401, "InvalidAuthentication", "the ticket is unknown, used or expired")
        if self.refusing:
            return _unavailable()
        ws = web.WebSocketResponse(autoping=False, autoclose=False, heartbeat=None, timeout=1.0)
        if not ws.can_prepare(request).ok:
            return api_error(400, "InvalidParameter", "expected a websocket upgrade")
        del self.tickets[key]
        await ws.prepare(request)
        if self._closing:  # close() began while the upgrade was under way
            await ws.close(code=1001, message=b"going away")
            return ws
        self._serial += 1
        conn_id = f"conn-{self._serial}-{secrets.token_hex(6)}"
        conn = Connection(conn_id, ws, request.transport, ticket.subscriptions)
        conn.handler = asyncio.current_task()
        self.connections.append(conn)
        writer = asyncio.create_task(self._write(conn))
        self._route()
        self._notify()
        try:
            await self._read(conn)
        finally:
            conn.open = False
            writer.cancel()
            await asyncio.wait([writer])
            # Unsent callbacks wait for the next connection; a ping meant for this one dies.
            leftover = [item for item in conn.outbox if item.record.kind in ("callback", "raw")]
            conn.outbox.clear()
            self.queue.extendleft(reversed(leftover))
            self._route()
            self._notify()
        return ws

    async def _read(self, conn: Connection) -> None:
        """Acks in; websocket pings answered by hand, so a zombie can leave them unanswered."""
        while True:
            msg = await conn.ws.receive()
            if msg.type is WSMsgType.TEXT:
                self._on_ack(conn, msg.data)
            elif msg.type is WSMsgType.PING and not conn.zombie:
                try:
                    await conn.ws.pong(msg.data)
                except ConnectionError:
                    return
            elif msg.type is WSMsgType.CLOSE:
                if conn.zombie:
                    self._cut(conn)
                else:
                    await conn.ws.close(drain=False)
                return
            elif msg.type in _DONE:
                return
            elif msg.type is WSMsgType.BINARY:
                self._stray(conn, None, "binary frame")

    async def _write(self, conn: Connection) -> None:
        """The one writer per socket, so frames leave in the order they were queued."""
        while conn.open:
            await conn.wake.wait()
            conn.wake.clear()
            while conn.outbox and conn.open:
                item = conn.outbox[0]
                try:
                    await self._send(conn, item)
                except ConnectionError:
                    return  # the reader sees the end too and requeues what is left
                if conn.outbox and conn.outbox[0] is item:  # reset() may have emptied it
                    conn.outbox.popleft()

    async def _send(self, conn: Connection, item: _Outgoing) -> None:
        record = item.record
        if not conn.zombie:
            await conn.ws.send_str(item.text(conn.id))
        record.connection_id, record.sent_at = conn.id, self.clock.now()
        record.sent_mono, record.swallowed = time.monotonic(), conn.zombie
        conn.sent += 1
        callback = self.callbacks.get(record.msg_id or "")
        if (
            record.kind == "callback"
            and callback is not None
            and callback.latest == record.frame_id
        ):
            loop = asyncio.get_running_loop()
            callback.timer = loop.call_later(
                self.redelivery_delay_s, self._due, callback, record.frame_id
            )
        self._notify()

    # ------------------------------------------------------------------ acks

    def _on_ack(self, conn: Connection, text: str) -> None:
        ack = _json(text)
        headers = ack.get("headers") if isinstance(ack, dict) else None
        frame_id = headers.get("messageId") if isinstance(headers, dict) else None
        if not isinstance(ack, dict) or not isinstance(frame_id, str):
            self._stray(conn, None, "malformed ack")
            return
        if conn.zombie:
            self._stray(conn, frame_id, "ack on a zombie connection")
            return
        record = self.frames.get(frame_id)
        if record is None or record.ack_code is not None:
            self._stray(conn, frame_id, "unknown frame" if record is None else "duplicate ack")
            return
        record.ack_code, record.acked_at = ack.get("code"), self.clock.now()
        if record.sent_mono is not None:
            record.latency_ms = round((time.monotonic() - record.sent_mono) * 1000, 3)
        conn.acked += 1
        if record.kind in ("ping", "disconnect"):
            record.echo_ok = _json(ack.get("data")) == record.expect
        callback = self.callbacks.get(record.msg_id or "")
        if callback is not None and callback.latest == frame_id and record.ack_code == 200:
            callback.acked = True
            if callback.timer is not None:
                callback.timer.cancel()
                callback.timer = None
        self._notify()

    def _stray(self, conn: Connection, frame_id: str | None, reason: str) -> None:
        """An ack the platform cannot use is kept as evidence and otherwise ignored."""
        self.stray_acks.append({"connection_id": conn.id, "frame_id": frame_id, "reason": reason})

    def _due(self, callback: _Callback, frame_id: str) -> None:
        """The redelivery timer: no ack in time, so DingTalk sends the callback again."""
        callback.timer = None
        if self.callbacks.get(callback.msg_id) is not callback or callback.latest != frame_id:
            return
        if callback.acked:
            return
        if callback.redeliveries >= self.max_redeliveries:
            callback.gave_up = True
            self._notify()
            return
        callback.redeliveries += 1
        self._deliver(callback)

    # ------------------------------------------------------------------ sending

    def deliver(self, msg_id: str, render: Render) -> dict[str, Any]:
        """Send a callback (first time or again) under a fresh frame messageId."""
        callback = self.callbacks.get(msg_id)
        if callback is None:
            callback = self.callbacks[msg_id] = _Callback(msg_id, render)
        return {"msg": msg_id, "frame_message_id": self._deliver(callback)}

    def _deliver(self, callback: _Callback) -> str:
        if callback.timer is not None:  # a newer delivery supersedes the older one's timer
            callback.timer.cancel()
            callback.timer = None
        frame_id = secrets.token_hex(16)
        callback.latest, callback.acked, callback.gave_up = frame_id, False, False
        callback.deliveries += 1
        record = FrameRecord(frame_id, "callback", callback.msg_id, callback.deliveries)
        self._enqueue(record, lambda conn_id: callback.render(frame_id, conn_id))
        return frame_id

    def send_raw(self, frame: str) -> dict[str, Any]:
        """Send text as-is, never redelivered; its ``messageId``, if any, names its record."""
        parsed = _json(frame)
        headers = parsed.get("headers") if isinstance(parsed, dict) else None
        frame_id = headers.get("messageId") if isinstance(headers, dict) else None
        if not isinstance(frame_id, str) or not frame_id or frame_id in self.frames:
            frame_id = f"raw-{secrets.token_hex(8)}"
        self._enqueue(FrameRecord(frame_id, "raw"), lambda _conn_id: frame)
        return {"frame_message_id": frame_id}

    def send_system(self, topic: Literal["ping", "disconnect"], data: Any) -> str | None:
        """A SYSTEM frame to the current connection (None if there is none): never queued."""
        conn = self.current
        if conn is None:
            return None
        frame_id = secrets.token_hex(16)
        text = json.dumps(
            {
                "specVersion": "1.0",
                "type": "SYSTEM",
                "headers": {
                    "messageId": frame_id,
                    "topic": topic,
                    "contentType": "application/json",
                    "time": str(round(self.clock.now() * 1000)),
                },
                "data": json.dumps(data),
            }
        )
        self.frames[frame_id] = FrameRecord(frame_id, topic, expect=data)
        conn.outbox.append(_Outgoing(self.frames[frame_id], lambda _conn_id: text))
        conn.wake.set()
        conn.draining = conn.draining or topic == "disconnect"
        self._notify()
        return frame_id

    def send_ping(self) -> str | None:
        return self.send_system("ping", {"opaque": secrets.token_hex(8)})

    async def _ping_every(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            self.send_ping()

    def _enqueue(self, record: FrameRecord, text: Callable[[str], str]) -> None:
        self.frames[record.frame_id] = record
        self.queue.append(_Outgoing(record, text))
        self._route()
        self._notify()

    def _route(self) -> None:
        """Hand waiting frames to the current connection (a zombie swallows them)."""
        conn = self.current
        if conn is not None and self.queue:
            conn.outbox.extend(self.queue)
            self.queue.clear()
            conn.wake.set()

    @property
    def current(self) -> Connection | None:
        """The newest open connection not told to leave: where frames and faults go."""
        for conn in reversed(self.connections):
            if conn.open and not conn.draining:
                return conn
        return None

    # ------------------------------------------------------------------ faults

    def apply_faults(
        self, *, drop: bool, zombie: bool, refuse_s: float | None, disconnect: bool
    ) -> None:
        """Strike the current connection; with none open, only the refusal has an effect."""
        if refuse_s is not None:
            self.refuse_until = max(self.refuse_until, time.monotonic() + refuse_s)
        conn = self.current
        if conn is not None and zombie:
            conn.zombie = True
        if conn is not None and drop:
            self._cut(conn)
            self._notify()
        if disconnect:
            self.send_system("disconnect", {"reason": "lab fault"})

    # ------------------------------------------------------------------ evidence, waiting

    @property
    def connected(self) -> bool:
        """A client holds a connection that can take frames (not a zombie, not leaving)."""
        conn = self.current
        return conn is not None and not conn.zombie

    def _in_flight(self, record: FrameRecord) -> bool:
        """Sent to a client that could still ack it: a frame lost to a dead socket is not."""
        conn = next((c for c in self.connections if c.id == record.connection_id), None)
        return (
            record.sent_at is not None
            and record.ack_code is None
            and conn is not None
            and conn.open
            and not conn.zombie
        )

    def acked(self, msg_id: str) -> bool:
        """The newest delivery of ``msg_id`` got a 200 and no older one is still being worked on."""
        callback = self.callbacks.get(msg_id)
        return (
            callback is not None
            and callback.acked
            and not any(
                self._in_flight(r)
                for r in self.frames.values()
                if r.kind == "callback" and r.msg_id == msg_id
            )
        )

    def queued(self) -> int:
        return len(self.queue) + sum(len(c.outbox) for c in self.connections if c.open)

    def idle(self) -> bool:
        return (
            not self.queued()
            and all(c.settled for c in self.callbacks.values())
            and not any(self._in_flight(r) for r in self.frames.values() if r.kind == "callback")
        )

    def stats(self) -> dict[str, Any]:
        records = list(self.frames.values())
        latencies = [
            r.latency_ms for r in records if r.kind == "callback" and r.latency_ms is not None
        ]
        return {
            "connected": self.connected,
            "connections": [c.to_dict() for c in self.connections],
            "unacked": sum(not c.settled for c in self.callbacks.values()),
            "queued": self.queued(),
            "frames": [r.to_dict() for r in records],
            "stray_acks": list(self.stray_acks),
            "ack_latency_ms": _summary(latencies),
        }

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_until(self, check: Callable[[], bool], timeout: float) -> bool:
        """Wait, without polling, until ``check()`` holds; False if it still fails at timeout."""

        async def watch() -> None:
            while not check():
                changed = self._changed  # taken before awaiting, so no change is missed
                await changed.wait()

        try:
            await asyncio.wait_for(watch(), timeout)
        except TimeoutError:
            return check()
        return True

    async def wait_acked(self, msg_ids: Iterable[str], timeout: float) -> bool:
        wanted = list(msg_ids)
        return await self.wait_until(lambda: all(self.acked(m) for m in wanted), timeout)
