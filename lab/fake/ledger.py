"""The fake DingTalk's delivery ledger: what became of every frame, and which callbacks it owes.

DingTalk's promise to a Stream Mode client is about callbacks, not sockets: each one goes out
again under a new frame messageId until its newest delivery is acked with code 200, or the
platform gives up. The lab judges the runtime on that bookkeeping (lost acks, duplicate
deliveries, ack latency), so it lives here with no HTTP or websocket in it, where it can be
read on its own. ``lab.fake.stream`` extends it with the sockets: it supplies the two hooks
(``_dispatch`` a frame to a connection, say whether a connection is ``_reachable``) and
reports what happened on the wire through ``_record_sent``, ``_record_ack`` and ``_stray``.

Everything runs on the fake's event loop; call it from that loop, not a thread.
"""

from __future__ import annotations

import asyncio
import json
import math
import secrets
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from agent.clock import Clock

FrameKind = Literal["callback", "ping", "disconnect", "raw"]
Render = Callable[[str, str], str]  # (frame messageId, connectionId) -> the frame's text


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
    # what the client's ack carried in ``data`` (a card click's answer: the card's change)
    ack_data: Any = field(default=None, repr=False)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        del data["sent_mono"], data["expect"], data["ack_data"]
        return data


@dataclass(eq=False)
class Outgoing:
    """A frame on its way out: the ledger makes it, the gateway writes it to a socket."""

    record: FrameRecord
    text: Callable[[str], str]  # connectionId -> frame text, rendered when it is written
    app_key: str | None = None  # whose connections may carry it (None: the default app's)


@dataclass(eq=False)
class _Callback:
    """A chatbot callback the platform owes the client until its newest delivery is acked."""

    msg_id: str
    render: Render
    app_key: str | None = None  # the robot's app whose connections it goes to
    latest: str = ""  # frame id of the newest delivery: the one whose ack settles it
    deliveries: int = 0
    redeliveries: int = 0  # automatic ones only, bounded by max_redeliveries
    acked: bool = False
    gave_up: bool = False
    timer: asyncio.TimerHandle | None = None

    @property
    def settled(self) -> bool:
        return self.acked or self.gave_up


def json_or_none(text: Any) -> Any:
    """Parse what a client sent; None, not an exception, for anything that is not JSON."""
    try:
        return json.loads(text)
    except (TypeError, ValueError, RecursionError):
        return None


def _summary(values: list[float]) -> dict[str, Any]:
    """Nearest-rank percentiles: with a handful of samples, interpolation would invent data."""
    ordered = sorted(values)

    def rank(q: float) -> float | None:
        return ordered[max(0, math.ceil(q * len(ordered)) - 1)] if ordered else None

    return {"count": len(ordered), "p50": rank(0.5), "p99": rank(0.99), "max": rank(1.0)}


class DeliveryLedger(ABC):
    """Frame records, owed callbacks, acks and redelivery timers, and waits on them.

    A callback not acked with code 200 within ``redelivery_delay_s`` (real seconds) of being
    sent goes out again under a new frame messageId, at most ``max_redeliveries`` times.
    Every change calls ``_notify``, so ``wait_until`` can wait without polling; the socket
    side calls it too when a connection comes or goes.
    """

    def __init__(
        self, clock: Clock, *, redelivery_delay_s: float = 60.0, max_redeliveries: int = 5
    ) -> None:
        self.clock = clock
        self.redelivery_delay_s = redelivery_delay_s
        self.max_redeliveries = max_redeliveries
        self.callbacks: dict[str, _Callback] = {}
        self.frames: dict[str, FrameRecord] = {}
        self.stray_acks: list[dict[str, Any]] = []
        self._changed = asyncio.Event()

    @abstractmethod
    def _dispatch(self, item: Outgoing) -> None:
        """Hand a new callback or raw frame to the socket side, to go out in order."""

    @abstractmethod
    def _reachable(self, connection_id: str | None) -> bool:
        """Could this connection still ack what it was sent? A dead or zombie one cannot."""

    def reset(self) -> None:
        """Forget one case's frames and owed callbacks, and stop their timers."""
        self._stop_timers()
        self.callbacks = {}
        self.frames = {}
        self.stray_acks = []

    def _stop_timers(self) -> None:
        """No redelivery fires after this, so the fake can shut down at once."""
        for callback in self.callbacks.values():
            if callback.timer is not None:
                callback.timer.cancel()
                callback.timer = None

    # ------------------------------------------------------------------ new frames

    def deliver(self, msg_id: str, render: Render, app_key: str | None = None) -> dict[str, Any]:
        """Send a callback (first time or again) under a fresh frame messageId, to a
        connection of ``app_key`` (the default app's when None)."""
        callback = self.callbacks.get(msg_id)
        if callback is None:
            callback = self.callbacks[msg_id] = _Callback(msg_id, render, app_key)
        return {"msg": msg_id, "frame_message_id": self._deliver(callback)}

    def _deliver(self, callback: _Callback) -> str:
        if callback.timer is not None:  # a newer delivery supersedes the older one's timer
            callback.timer.cancel()
            callback.timer = None
        frame_id = secrets.token_hex(16)
        callback.latest, callback.acked, callback.gave_up = frame_id, False, False
        callback.deliveries += 1
        record = FrameRecord(frame_id, "callback", callback.msg_id, callback.deliveries)
        self._emit(record, lambda conn_id: callback.render(frame_id, conn_id), callback.app_key)
        return frame_id

    def send_raw(self, frame: str) -> dict[str, Any]:
        """Send text as-is, never redelivered; its ``messageId``, if any, names its record."""
        parsed = json_or_none(frame)
        headers = parsed.get("headers") if isinstance(parsed, dict) else None
        frame_id = headers.get("messageId") if isinstance(headers, dict) else None
        if not isinstance(frame_id, str) or not frame_id or frame_id in self.frames:
            frame_id = f"raw-{secrets.token_hex(8)}"
        self._emit(FrameRecord(frame_id, "raw"), lambda _conn_id: frame)
        return {"frame_message_id": frame_id}

    def _system_frame(self, topic: Literal["ping", "disconnect"], data: Any) -> Outgoing:
        """A SYSTEM frame, recorded but not dispatched: it is meant for one connection only."""
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
        return Outgoing(self.frames[frame_id], lambda _conn_id: text)

    def _emit(
        self, record: FrameRecord, text: Callable[[str], str], app_key: str | None = None
    ) -> None:
        self.frames[record.frame_id] = record
        self._dispatch(Outgoing(record, text, app_key))
        self._notify()

    # ------------------------------------------------------------------ what the socket saw

    def _record_sent(self, record: FrameRecord, connection_id: str, *, swallowed: bool) -> None:
        """A frame was written (or a zombie swallowed it): stamp it, start its redelivery clock."""
        record.connection_id, record.sent_at = connection_id, self.clock.now()
        record.sent_mono, record.swallowed = time.monotonic(), swallowed
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

    def _record_ack(self, connection_id: str, text: str, *, zombie: bool) -> bool:
        """Settle the frame an ack names; False if the ack was unusable and kept as a stray."""
        ack = json_or_none(text)
        headers = ack.get("headers") if isinstance(ack, dict) else None
        frame_id = headers.get("messageId") if isinstance(headers, dict) else None
        if not isinstance(ack, dict) or not isinstance(frame_id, str):
            self._stray(connection_id, None, "malformed ack")
            return False
        if zombie:
            self._stray(connection_id, frame_id, "ack on a zombie connection")
            return False
        record = self.frames.get(frame_id)
        if record is None or record.ack_code is not None:
            self._stray(
                connection_id, frame_id, "unknown frame" if record is None else "duplicate ack"
            )
            return False
        record.ack_code, record.acked_at = ack.get("code"), self.clock.now()
        record.ack_data = json_or_none(ack.get("data"))
        if record.sent_mono is not None:
            record.latency_ms = round((time.monotonic() - record.sent_mono) * 1000, 3)
        if record.kind in ("ping", "disconnect"):
            record.echo_ok = json_or_none(ack.get("data")) == record.expect
        callback = self.callbacks.get(record.msg_id or "")
        if callback is not None and callback.latest == frame_id and record.ack_code == 200:
            callback.acked = True
            if callback.timer is not None:
                callback.timer.cancel()
                callback.timer = None
        self._acked(record)
        self._notify()
        return True

    @abstractmethod
    def _acked(self, record: FrameRecord) -> None:
        """Told every usable ack, once recorded (the gateway shows a click's answer)."""

    def _stray(self, connection_id: str, frame_id: str | None, reason: str) -> None:
        """An ack the platform cannot use is kept as evidence and otherwise ignored."""
        self.stray_acks.append(
            {"connection_id": connection_id, "frame_id": frame_id, "reason": reason}
        )

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

    # ------------------------------------------------------------------ evidence

    def _in_flight(self, record: FrameRecord) -> bool:
        """Sent to a client that could still ack it: a frame lost to a dead socket is not."""
        return (
            record.sent_at is not None
            and record.ack_code is None
            and self._reachable(record.connection_id)
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

    def _settled(self) -> bool:
        """No callback is owed and no delivery is left in a client's hands unacked."""
        return all(c.settled for c in self.callbacks.values()) and not any(
            self._in_flight(r) for r in self.frames.values() if r.kind == "callback"
        )

    def _evidence(self) -> dict[str, Any]:
        """The ledger's part of the stream's stats: owed callbacks, frames, strays, latency."""
        records = list(self.frames.values())
        latencies = [
            r.latency_ms for r in records if r.kind == "callback" and r.latency_ms is not None
        ]
        return {
            "unacked": sum(not c.settled for c in self.callbacks.values()),
            "frames": [r.to_dict() for r in records],
            "stray_acks": list(self.stray_acks),
            "ack_latency_ms": _summary(latencies),
        }

    # ------------------------------------------------------------------ waiting

    def _notify(self) -> None:
        """Wake every waiter: something it checks may have changed."""
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
