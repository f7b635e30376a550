"""The fake DingTalk a harness drives: its rules served over HTTP and Stream Mode.

``FakeDingTalk`` is the top of the ``lab.fake`` package. It is the platform's state
(``lab.fake.state``) plus what serves it: the HTTP routes (``lab.fake.http``), the Stream
Mode gateway (``lab.fake.stream``), the callbacks a user's message becomes
(``lab.fake.callbacks``) and the ``/_lab`` routes (``lab.fake.control``). Those modules know
only the state, never this class, so imports run one way and a harness still drives the
whole platform through one object::

    async with FakeDingTalk(clock) as fake:
        fake.inject({"msg": "m1", "from": "u1", "text": "hi"})
"""

from __future__ import annotations

from collections.abc import Iterable
from types import TracebackType
from typing import Any, Self

from agent.clock import Clock
from lab.fake.calendar import calendar_routes
from lab.fake.callbacks import (
    CARD_CALLBACK_TOPIC,
    build_callback,
    callback_frame,
    card_click_data,
)
from lab.fake.cards import card_routes, shown_text
from lab.fake.control import LabControl
from lab.fake.docs import docs_routes
from lab.fake.downloads import download_routes
from lab.fake.faults import Fault, ParsedFaults
from lab.fake.http import serve
from lab.fake.media import media_routes
from lab.fake.reactions import reaction_routes
from lab.fake.state import (
    SESSION_TTL_S,
    TOKEN_TTL_S,
    Channel,
    ConversationKind,
    PlatformState,
    ReceivedMessage,
    Session,
)
from lab.fake.stream import StreamGateway
from lab.fake.workspace import workspace_routes

__all__ = [
    "SESSION_TTL_S",
    "TOKEN_TTL_S",
    "Channel",
    "ConversationKind",
    "FakeDingTalk",
    "Fault",
    "ParsedFaults",
    "ReceivedMessage",
    "Session",
]


class FakeDingTalk(PlatformState):
    """A DingTalk platform small enough to reason about and strict enough to catch bugs.

    ``start()``/``stop()`` serve it on 127.0.0.1; ``async with`` does both, so a harness
    that fails half-way still frees the port and closes the stream's sockets.
    """

    def __init__(
        self,
        clock: Clock,
        app_key: str = "dta-lab-app",
        app_secret: str = "dta-lab-secret",
        robot_code: str = "dta-lab-robot",
        chatbot_user_id: str = "$:LWCP_v1:$dta-lab-bot",
        corp_id: str = "dinglabcorp",
        timeout_fault_s: float = 2.0,
        users: dict[str, dict[str, Any]] | None = None,
        *,
        redelivery_delay_s: float = 60.0,
        max_redeliveries: int = 5,
        ping_interval_s: float | None = None,
        ticket_ttl_s: float = 90.0,
        send_latency_s: float = 0.0,
        spread: bool = False,
    ) -> None:
        super().__init__(
            clock,
            app_key,
            app_secret,
            robot_code,
            chatbot_user_id,
            corp_id,
            timeout_fault_s,
            users,
            send_latency_s=send_latency_s,
        )
        self._server: Any = None  # the aiohttp runner, owned by lab.fake.http
        self.stream = StreamGateway(
            self,
            redelivery_delay_s=redelivery_delay_s,
            max_redeliveries=max_redeliveries,
            ping_interval_s=ping_interval_s,
            ticket_ttl_s=ticket_ttl_s,
            spread=spread,
        )

    # ------------------------------------------------------------------ lifecycle

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Serve the platform over HTTP; returns the base URL (the real port, if 0 was asked)."""
        if self._server is not None:
            raise RuntimeError("the fake DingTalk is already running")
        routes = [
            *self.stream.routes(),
            *LabControl(self).routes(),
            *download_routes(),
            *card_routes(),
            *reaction_routes(),
            *media_routes(),
            *workspace_routes(),
            *calendar_routes(),
            *docs_routes(),
        ]
        self._server, self._base_url = await serve(
            self, host, port, routes, on_shutdown=self.stream.close
        )
        await self.stream.start()
        return self._base_url

    async def stop(self) -> None:
        """Stop serving; the stream's sockets close during the server's shutdown."""
        if self._server is not None:
            server, self._server = self._server, None
            await server.cleanup()
        await self.stream.close()  # idempotent; stops timers even if it never served

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.stop()

    def reset(self) -> None:
        """Forget one case's state and frames. Issued tokens survive: real tokens are not
        revoked; open stream connections survive too."""
        self._forget()
        self.stream.reset()

    # ------------------------------------------------------------------ faults

    def arm_fault(self, spec: dict[str, Any], robot: str | None = None) -> ParsedFaults:
        """Arm a lab-case fault spec; ``ValueError`` says what is wrong with a bad one. A
        stream fault strikes ``robot``'s connection (the default robot's when None)."""
        parsed = super().arm_fault(spec)
        app = self.app_for_robot(robot)
        if app is None:
            raise ValueError(f"no robot {robot!r} on this platform")
        if parsed.docs is not None:
            self.workspace.knowledge.arm(parsed.docs)
        self.stream.apply_faults(
            drop=parsed.drop,
            zombie=parsed.zombie,
            refuse_s=parsed.refuse_s,
            disconnect=parsed.disconnect,
            app_key=app.app_key,
        )
        return parsed

    # ------------------------------------------------------------------ stream

    def inject(self, send: dict[str, Any]) -> dict[str, Any]:
        """Push a chatbot callback built from a ``send`` step, as DingTalk does when a user
        writes: queued until a client connects, redelivered until acked.

        Returns ``{"msg": msgId, "frame_message_id": ...}``; ``ValueError`` for a bad step.
        """
        return self._deliver(build_callback(self, send, self.clock.now()))

    def redeliver(self, msg_id: str) -> dict[str, Any]:
        """Send an earlier callback again under a new frame messageId (``KeyError`` if none)."""
        data = self.inbound.get(msg_id)
        if data is None:
            raise KeyError(msg_id)
        return self._deliver(data)

    def _deliver(self, data: dict[str, Any]) -> dict[str, Any]:
        def render(frame_id: str, connection_id: str) -> str:
            return callback_frame(data, frame_id, now=self.clock.now(), connection_id=connection_id)

        return self.stream.deliver(str(data["msgId"]), render, self._app_key_of(data))

    def _app_key_of(self, data: dict[str, Any]) -> str:
        """The app whose connections a callback goes to: the robot it was sent to."""
        app = self.app_for_robot(data.get("robotCode")) or self.app_for_robot(None)
        assert app is not None
        return app.app_key

    def click_data(
        self,
        msg_id: str,
        by: str,
        choice: str,
        out_track_id: str | None = None,
        values: dict[str, Any] | None = None,
        reason: str | None = None,
    ) -> tuple[dict[str, Any], Any]:
        """The card callback of ``by`` pressing ``choice`` on the card sent for ``msg_id``
        (its ``msg_id`` variable; or the card ``out_track_id``, a reply card, which has
        none), and that card; ``ValueError`` when there is none."""
        for card in reversed(self.cards):
            if card.data.get("msg_id") == msg_id or card.out_track_id == out_track_id:
                data = card_click_data(
                    card.out_track_id, by, choice, card.space, values=values, reason=reason
                )
                return data, card
        raise ValueError(f"click: no card was sent for message {msg_id!r}")

    def click(
        self,
        msg_id: str,
        by: str,
        choice: str,
        out_track_id: str | None = None,
        values: dict[str, Any] | None = None,
        reason: str | None = None,
    ) -> dict[str, Any]:
        """Deliver a click over the stream as DingTalk does (redelivered until acked); what
        the ack answers is put on the card by ``show_click_acks``."""
        data, card = self.click_data(msg_id, by, choice, out_track_id, values, reason)
        app = self.app_for_robot(card.message.robot_code) or self.app_for_robot(None)
        assert app is not None
        self._click_seq += 1
        key = f"click-{self._click_seq}"
        self._clicks.append((key, card, by))

        def render(frame_id: str, connection_id: str) -> str:
            return callback_frame(
                data,
                frame_id,
                now=self.clock.now(),
                connection_id=connection_id,
                topic=CARD_CALLBACK_TOPIC,
            )

        return self.stream.deliver(key, render, app.app_key)

    def show_click_acks(self) -> None:
        """Put what each acked click's answer says on its card (once)."""
        for key, card, by in list(self._clicks):
            callback = self.stream.callbacks.get(key)
            record = self.stream.frames.get(callback.latest) if callback else None
            if record is None or record.ack_data is None:
                continue
            self._clicks.remove((key, card, by))
            answer = record.ack_data.get("response") if isinstance(record.ack_data, dict) else None
            self.show_click_answer(card, by, answer)

    @staticmethod
    def show_click_answer(card: Any, clicker: str, answer: Any) -> None:
        """What a click's ack put on the card: its shared data, or the clicker's own view."""
        if not isinstance(answer, dict):
            return
        shared = (answer.get("cardData") or {}).get("cardParamMap") or {}
        private = (answer.get("userPrivateData") or {}).get("cardParamMap") or {}
        card.data = {**card.data, **{k: str(v) for k, v in shared.items()}}
        if private:
            card.private[clicker] = {**card.private.get(clicker, {}), **private}
        if shared and card.key is None and not card.frames:
            card.message.text = shown_text(card.data)

    def inject_raw(self, frame: str) -> dict[str, Any]:
        """Send a text frame exactly as given (malformed on purpose, say); never redelivered."""
        return self.stream.send_raw(frame)

    def send_ping(self) -> str | None:
        """A SYSTEM ping to the current connection; its frame id, or None with none open."""
        return self.stream.send_ping()

    def send_disconnect(self) -> str | None:
        """Ask the current client to reconnect; new frames wait for its next connection."""
        return self.stream.send_system("disconnect", {"reason": "lab request"})

    def stream_stats(self) -> dict[str, Any]:
        """Connections, frame records and ack latency: what ``GET /_lab/stream`` answers."""
        return self.stream.stats()

    @property
    def connected(self) -> bool:
        return self.stream.connected

    async def wait_connected(self, timeout: float, robots: Iterable[str] = ()) -> bool:
        """True once the default robot's client (or each of ``robots``') is connected."""
        keys = [app.app_key for code in robots if (app := self.app_for_robot(code))] or [None]
        return await self.stream.wait_until(
            lambda: all(self.stream.connected_of(key) for key in keys), timeout
        )

    async def wait_acked(self, msg_ids: Iterable[str], timeout: float) -> bool:
        """True once every delivery of each msgId that a client could ack has been acked."""
        return await self.stream.wait_acked(msg_ids, timeout)

    async def wait_idle(self, timeout: float) -> bool:
        """True once nothing is queued and no callback is waiting for its ack."""
        return await self.stream.wait_until(self.stream.idle, timeout)
