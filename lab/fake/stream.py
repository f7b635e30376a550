"""The fake DingTalk's Stream Mode gateway: tickets, the websocket, and faults on it.

The real ``dingtalk-stream`` client connects here exactly as it would to DingTalk: it opens a
connection over HTTP, upgrades ``/connect?ticket=...`` to a websocket, reads frames and acks
them. The runtime's worst bugs live in that conversation (lost acks, duplicate deliveries,
silent sockets), so the gateway misbehaves on demand: it drops the socket, goes silent as a
zombie, refuses connections, asks the client to leave.

Only the sockets live here. The record of every frame and the callbacks still owed are the
``lab.fake.ledger.DeliveryLedger`` this gateway extends, so each half can be read on its own.

Everything runs on the fake's event loop; call the Python API from that loop, not a thread.
"""

from __future__ import annotations

import asyncio
import logging
import random
import secrets
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Literal

from aiohttp import WSMsgType, web

from lab.fake.http import api_error
from lab.fake.ledger import DeliveryLedger, FrameRecord, Outgoing, json_or_none
from lab.fake.state import PlatformState

_DONE = (WSMsgType.CLOSING, WSMsgType.CLOSED, WSMsgType.ERROR)

log = logging.getLogger("dta.lab.fake.stream")


@dataclass(eq=False)
class Connection:
    """One accepted websocket, as the platform sees it."""

    id: str
    ws: web.WebSocketResponse
    transport: asyncio.BaseTransport | None
    subscriptions: list[dict[str, str]]
    app_key: str  # the app whose credentials opened it: it carries that robot's frames
    open: bool = True
    zombie: bool = False
    draining: bool = False  # told to disconnect: it gets no new frames
    sent: int = 0
    acked: int = 0
    outbox: deque[Outgoing] = field(default_factory=deque)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    handler: asyncio.Task[Any] | None = None  # the aiohttp handler task serving it
    # Real (monotonic) times it opened and closed: whether a client's next connection was
    # up before the old one went (a SYSTEM disconnect's hand-over) shows here.
    opened_mono: float = field(default_factory=time.monotonic)
    closed_mono: float | None = None

    def to_dict(self) -> dict[str, Any]:
        keys = ("id", "app_key", "open", "zombie", "draining", "sent", "acked", "subscriptions")
        return {key: getattr(self, key) for key in keys}


@dataclass
class _Ticket:
    expires_at: float
    subscriptions: list[dict[str, str]]
    app_key: str


def _subscriptions_ok(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(s, dict) and all(isinstance(s.get(k), str) and s[k] for k in ("type", "topic"))
        for s in value
    )


def _unavailable() -> web.Response:
    return api_error(503, "ServiceUnavailable", "the stream gateway is refusing connections")


class StreamGateway(DeliveryLedger):
    """DingTalk's side of Stream Mode: who is connected, what was sent, what was acked.

    Frames go to the newest open connection; with none open they wait, in order. A callback
    not acked with code 200 within ``redelivery_delay_s`` (real seconds) goes out again under
    a new frame messageId, as DingTalk does, at most ``max_redeliveries`` times: that promise
    and the evidence of every frame are the inherited ``DeliveryLedger``'s.
    """

    def __init__(
        self,
        platform: PlatformState,
        *,
        redelivery_delay_s: float = 60.0,
        max_redeliveries: int = 5,
        ping_interval_s: float | None = None,
        ticket_ttl_s: float = 90.0,
        spread: bool = False,
        seed: int = 0,
    ) -> None:
        super().__init__(
            platform.clock, redelivery_delay_s=redelivery_delay_s, max_redeliveries=max_redeliveries
        )
        self.platform = platform
        self.ping_interval_s = ping_interval_s
        self.ticket_ttl_s = ticket_ttl_s
        # DingTalk with several connections of one app: each push goes to one of them at
        # random (its Stream FAQ), redeliveries included. Off: the newest takes everything.
        self.spread = spread
        self._rng = random.Random(seed)
        self.tickets: dict[str, _Ticket] = {}
        self.connections: list[Connection] = []
        self.queue: deque[Outgoing] = deque()  # frames waiting for a connection, in order
        self.refuse_until = 0.0
        self._serial = 0
        self._ping_task: asyncio.Task[None] | None = None
        self._closing = False  # stopping: a client's instant reconnect must not get in
        self.reset()

    def _acked(self, record: FrameRecord) -> None:
        # A card click's ack carries what the card shows at once, as DingTalk applies it.
        show = getattr(self.platform, "show_click_acks", None)
        if show is not None and record.ack_data is not None:
            show()

    def reset(self) -> None:
        """Forget one case's frames; open connections and unused tickets survive."""
        super().reset()
        self.queue = deque()
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
        self._stop_timers()
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
        body = json_or_none(await request.read())
        if not isinstance(body, dict):
            return api_error(400, "InvalidParameter", "the request body must be a JSON object")
        if not _subscriptions_ok(body.get("subscriptions")):
            return api_error(
                400, "InvalidParameter.subscriptions", "subscriptions must list {type, topic}"
            )
        app = self.platform.app_for_credentials(body.get("clientId"), body.get("clientSecret"))
        if app is None:
            # Never echo what was sent: it may be the secret.
            return api_error(401, "InvalidAuthentication", "clientId or clientSecret is invalid")
        if self.refusing:  # a fault strikes only a request that would otherwise succeed
            return _unavailable()
        ticket = secrets.token_urlsafe(24)
        self.tickets[ticket] = _Ticket(
            self.clock.now() + self.ticket_ttl_s, list(body["subscriptions"]), app.app_key
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
        conn = Connection(conn_id, ws, request.transport, ticket.subscriptions, ticket.app_key)
        conn.handler = asyncio.current_task()
        self.connections.append(conn)
        writer = asyncio.create_task(self._write(conn))
        self._route()
        self._notify()
        try:
            await self._read(conn)
        finally:
            conn.open = False
            conn.closed_mono = time.monotonic()
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
                if self._record_ack(conn.id, msg.data, zombie=conn.zombie):
                    conn.acked += 1
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
                self._stray(conn.id, None, "binary frame")

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
                except (UnicodeError, ValueError):
                    # A frame that cannot be put on the wire (e.g. a lone surrogate in a
                    # raw frame): drop it, as a real gateway would, and keep the socket.
                    log.warning("fake gateway dropped an unsendable frame")
                if conn.outbox and conn.outbox[0] is item:  # reset() may have emptied it
                    conn.outbox.popleft()

    async def _send(self, conn: Connection, item: Outgoing) -> None:
        if not conn.zombie:
            await conn.ws.send_str(item.text(conn.id))
        conn.sent += 1
        self._record_sent(item.record, conn.id, swallowed=conn.zombie)

    # ------------------------------------------------------------------ routing

    def send_system(self, topic: Literal["ping", "disconnect"], data: Any) -> str | None:
        """A SYSTEM frame to the current connection (None if there is none): never queued."""
        conn = self.current
        if conn is None:
            return None
        item = self._system_frame(topic, data)
        conn.outbox.append(item)
        conn.wake.set()
        conn.draining = conn.draining or topic == "disconnect"
        self._notify()
        return item.record.frame_id

    def send_ping(self) -> str | None:
        return self.send_system("ping", {"opaque": secrets.token_hex(8)})

    async def _ping_every(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            self.send_ping()

    def _dispatch(self, item: Outgoing) -> None:
        """The ledger's hook: frames wait in order, then go to the current connection."""
        self.queue.append(item)
        self._route()

    def _route(self) -> None:
        """Hand waiting frames to their app's current connection (a zombie swallows them),
        or with ``spread`` each frame to a random open one of its app; frames of an app with
        no connection keep waiting, in order."""
        if not self.queue:
            return
        waiting: deque[Outgoing] = deque()
        woken: set[int] = set()
        while self.queue:
            item = self.queue.popleft()
            targets = self._targets(item.app_key)
            if not targets:
                waiting.append(item)
                continue
            conn = self._rng.choice(targets) if self.spread else targets[-1]
            conn.outbox.append(item)
            woken.add(id(conn))
        self.queue = waiting
        for conn in self.connections:
            if id(conn) in woken:
                conn.wake.set()

    def _targets(self, app_key: str | None) -> list[Connection]:
        """The open connections of an app not told to leave, oldest first."""
        app = app_key or self.platform.app_key
        return [c for c in self.connections if c.open and not c.draining and c.app_key == app]

    @property
    def current(self) -> Connection | None:
        """The default app's newest open connection not told to leave: where its frames and
        faults go."""
        return self.current_of(None)

    def current_of(self, app_key: str | None) -> Connection | None:
        targets = self._targets(app_key)
        return targets[-1] if targets else None

    def _reachable(self, connection_id: str | None) -> bool:
        """The ledger's hook: is this connection still able to ack what it was sent?"""
        conn = next((c for c in self.connections if c.id == connection_id), None)
        return conn is not None and conn.open and not conn.zombie

    # ------------------------------------------------------------------ faults

    def apply_faults(
        self,
        *,
        drop: bool,
        zombie: bool,
        refuse_s: float | None,
        disconnect: bool,
        app_key: str | None = None,
    ) -> None:
        """Strike the current connection (of ``app_key``'s robot; the default app's when
        None); with none open, only the refusal has an effect. A refusal refuses every
        robot's new connections: the gateway is shared."""
        if refuse_s is not None:
            self.refuse_until = max(self.refuse_until, time.monotonic() + refuse_s)
        conn = self.current_of(app_key)
        if conn is not None and zombie:
            conn.zombie = True
        if conn is not None and drop:
            self._cut(conn)
            self._notify()
        if disconnect:
            self.send_system("disconnect", {"reason": "lab fault"})

    # ------------------------------------------------------------------ evidence

    @property
    def connected(self) -> bool:
        """A client holds a connection that can take frames (not a zombie, not leaving)."""
        return self.connected_of(None)

    def connected_of(self, app_key: str | None) -> bool:
        """The same for one app's robot (the default app's for None)."""
        conn = self.current_of(app_key)
        return conn is not None and not conn.zombie

    def queued(self) -> int:
        return len(self.queue) + sum(len(c.outbox) for c in self.connections if c.open)

    def idle(self) -> bool:
        """Nothing waits to be written and the ledger owes nothing."""
        return not self.queued() and self._settled()

    def stats(self) -> dict[str, Any]:
        evidence = self._evidence()  # unacked, frames, stray_acks, ack_latency_ms
        return {
            "connected": self.connected,
            "connections": [c.to_dict() for c in self.connections],
            "unacked": evidence.pop("unacked"),
            "queued": self.queued(),
            **evidence,
        }
