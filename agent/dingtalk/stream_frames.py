"""One Stream Mode frame, from the socket to durable and acked: decode, check, ingest, ack.

Whatever a frame is, it never ends the connection: frames are read as bytes and decoded
here, so a frame that is not UTF-8 (binary, or a text frame a proxy mangled) is quarantined
instead of failing the socket; frames up to ``max_frame_bytes`` are read and larger ones up to
the socket's ceiling (``ConnectorConfig.socket_max_bytes``) are quarantined with only their
head kept, and acked when their messageId can be found. The ``--record`` sink is called for
every frame, and its failures are counted and logged, never allowed to stop storing and
acking. A frame is acked only once it is stored; one that fails to be stored is left unacked
for DingTalk to redeliver (the store dedupes it then).

The connection's lifecycle (opening, keepalive, backoff, readiness, stop) is
agent/dingtalk/connector.py; it hands every frame it reads to ``FrameHandler.handle``.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

import websockets

from agent.contracts import Event
from agent.dingtalk.frame_parsing import FrameKind, ParsedFrame, frame_text, parse_frame
from agent.dingtalk.ingest import Ingestor, IngestResult
from agent.logs import FailureLog

if TYPE_CHECKING:
    from agent.dingtalk.stream_stats import ConnectorStats

log = logging.getLogger("dta.connector")

# Told each new event and its thread generation (from the ingest transaction).
EventSink = Callable[[Event, int], None]
# Told every frame as received: text, or bytes when it is not UTF-8 or over the size limit.
FrameSink = Callable[[str | bytes, float], None]


class FrameHandler:
    """The connector's frames: made durable (ingest), then acked, counted in ``stats``.

    ``accepting`` is the connector's readiness check; ``ingestor`` is set on the
    connector's thread, where its store lives, before the first frame."""

    def __init__(
        self,
        *,
        sdk: ModuleType,
        stats: ConnectorStats,
        max_frame_bytes: int,
        accepting: Callable[[], bool],
        on_event: EventSink,
        on_frame: FrameSink | None = None,
        on_ack: Callable[[float], None] | None = None,
        on_disconnect: Callable[[Any], None] | None = None,
    ) -> None:
        self.sdk = sdk
        # Told by DingTalk this socket will go (SYSTEM disconnect): the connector opens the
        # next one and closes this one once that is up. None: close it at once.
        self.on_disconnect = on_disconnect
        self.stats = stats
        self.max_frame_bytes = max_frame_bytes
        self.accepting = accepting
        self.on_event = on_event
        self.on_frame = on_frame
        self.on_ack = on_ack
        self.ingestor: Ingestor | None = None
        self._sink_failures = FailureLog(log, "frame sink failed; the frame is still ingested")

    async def handle(self, client: Any, ws: Any, data: str | bytes) -> None:
        """Make the frame durable, then ack it. A failure here never ends the connection."""
        received_at = time.time()
        started = time.perf_counter()
        self.stats.last_frame_at = received_at
        if not self.accepting():
            # Neither stored nor acked: DingTalk delivers it again, to a connection that
            # can take it. Closing this one is what makes it go elsewhere.
            self.stats.refused_while_paused += 1
            await ws.close(code=1000, reason="not accepting frames")
            return
        raw = frame_text(data, self.max_frame_bytes) if isinstance(data, bytes) else data
        self._record(raw, received_at)
        parsed = parse_frame(raw, received_at, self.max_frame_bytes)  # never raises
        if parsed.kind is not FrameKind.EVENT:  # events are counted once stored (new or dup)
            self.stats.frames[parsed.kind.value] += 1
        try:
            if parsed.kind is FrameKind.QUARANTINED:
                assert self.ingestor is not None
                result = self.ingestor.store_parsed(parsed, raw, received_at)
                if result.frame_message_id:
                    # Acked so DingTalk stops redelivering what can never be parsed.
                    await ws.send(json.dumps(self.ack(result.frame_message_id, "quarantined")))
            elif parsed.kind in (FrameKind.EVENT, FrameKind.CARD_CLICK):
                # A chatbot callback: durable first, then acked as the SDK acks a callback.
                # A card click is decided first: its ack carries what the card shows.
                assert isinstance(raw, str)
                result = self._ingest(parsed, raw, received_at)
                await ws.send(json.dumps(self.ack(parsed.frame_message_id, result.response)))
            else:
                # SYSTEM (ping, disconnect) and other topics: the SDK's own routing.
                assert parsed.document is not None  # parsed whole, or it would be quarantined
                client.websocket = ws  # the SDK acks on its client's socket: this frame's
                outcome = await client.route_message(parsed.document)
                if outcome == client.TAG_DISCONNECT:
                    # DingTalk is about to close this connection: the next one opens first,
                    # and this one closes once that one is up, so no push falls between.
                    if self.on_disconnect is not None:
                        self.on_disconnect(ws)
                    else:
                        await ws.close()
        except websockets.exceptions.ConnectionClosed:
            raise
        except Exception:
            # Not acked: DingTalk delivers it again, and the store dedupes it then.
            log.exception("frame not ingested", extra={"frame_kind": parsed.kind.value})
            return
        seconds = time.perf_counter() - started
        self.stats.ack_seconds.append(seconds)
        if self.on_ack is not None:
            self.on_ack(seconds)

    def _record(self, raw: str | bytes, received_at: float) -> None:
        """Hand the frame to the ``--record`` sink; whatever it does, ingest goes on."""
        if self.on_frame is None:
            return
        try:
            self.on_frame(raw, received_at)
        except Exception as exc:
            self.stats.frame_sink_failures += 1
            self._sink_failures.failed(exc)
        else:
            self._sink_failures.succeeded()

    def _ingest(self, parsed: ParsedFrame, raw: str, received_at: float) -> IngestResult:
        """Store a callback durably (a new event, or a counted duplicate) and hand a new
        event to the pipeline (a card click's decision, too)."""
        assert self.ingestor is not None
        result = self.ingestor.store_parsed(parsed, raw, received_at)
        self.stats.frames[result.kind.value] += 1
        runs = result.kind in (FrameKind.EVENT, FrameKind.CARD_CLICK)
        if runs and result.event is not None:
            try:
                self.on_event(result.event, result.generation)
            except RuntimeError:
                # The pipeline's loop is gone (shutting down); the event is stored and
                # will be picked up at the next start.
                log.warning("pipeline not running; event left for recovery")
        return result

    def ack(self, frame_message_id: str | None, response: Any) -> dict[str, Any]:
        """The SDK's ack (its ``AckMessage``, as its callback handlers fill it in)."""
        ack = self.sdk.AckMessage()
        ack.code = self.sdk.AckMessage.STATUS_OK
        ack.headers.message_id = frame_message_id
        ack.headers.content_type = "application/json"
        ack.message = "OK"
        ack.data = {"response": response}
        return ack.to_dict()
