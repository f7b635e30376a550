"""From a raw Stream Mode frame to a stored Event, a counted duplicate, or quarantine.

The frame is parsed by ``parse_frame`` (``agent/dingtalk/frame_parsing.py``, pure);
``Ingestor.ingest`` stores the outcome durably and returns what the connector needs to ack.
Only after ``ingest`` returns may the frame be acked: an event that is stored but not yet
processed is picked up again on restart.

A frame that cannot be read whole is still answered: one over the size limit, or one that is
not UTF-8, is quarantined (what of it is kept: ``kept_text``) with its frame ``messageId``, so
the connector can ack it and DingTalk stops redelivering what would never parse.
"""

from __future__ import annotations

import base64
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from agent.contracts import CardClick, Event, QuarantineReason
from agent.dingtalk.callback import callback_to_event
from agent.dingtalk.card_callback import parse_click
from agent.dingtalk.frame_parsing import (
    BOT_MESSAGE_TOPIC,
    CARD_CALLBACK_TOPIC,
    KEPT_HEAD_CHARS,
    FrameKind,
    ParsedFrame,
    click_data,
    frame_size,
    frame_text,
    parse_frame,
    peek_frame_message_id,
)
from storage import Store

# The parsing names are re-exported: importers of agent.dingtalk.ingest keep working.
__all__ = [
    "BOT_MESSAGE_TOPIC",
    "CARD_CALLBACK_TOPIC",
    "KEPT_HEAD_CHARS",
    "ClickHandler",
    "FrameKind",
    "IngestResult",
    "Ingestor",
    "ParsedFrame",
    "Supersedes",
    "callback_to_event",
    "click_data",
    "frame_size",
    "frame_text",
    "kept_text",
    "parse_frame",
    "peek_frame_message_id",
]

# msgIds this ingestor stored lately: a redelivery of one is looked for before storing.
RECENT_IDS = 4_096


@dataclass(frozen=True)
class IngestResult:
    kind: FrameKind
    frame_message_id: str | None
    event: Event | None = None
    generation: int = 0
    reason: QuarantineReason | None = None
    error: str | None = None
    response: Any = "OK"  # what the ack carries (a card click's immediate card change)


def kept_text(reason: QuarantineReason, raw: str | bytes) -> str:
    """What the quarantine table keeps of a refused frame: all of it, unless that is unsafe.

    A frame over the size limit keeps only its head (the store must not grow by megabytes
    per redelivery); a frame that is not UTF-8 is kept whole in base64, since no text form
    of it is both storable and faithful.
    """
    if reason is QuarantineReason.FRAME_TOO_LARGE:
        head = raw[:KEPT_HEAD_CHARS]
        return head.decode("utf-8", errors="replace") if isinstance(head, bytes) else head
    if reason is QuarantineReason.NOT_UTF8 and isinstance(raw, bytes):
        return base64.b64encode(raw).decode("ascii")
    return raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw


# Does this new event supersede the older runs of its thread? (see Ingestor)
Supersedes = Callable[[Event, float], bool]


class ClickHandler(Protocol):
    """What decides a card click (``agent.acts.clicks.ClickDesk``)."""

    def receive(self, click: CardClick) -> Any: ...


class Ingestor:
    """Durable ingest over one store connection (one per thread).

    Only a request in words the robot will actually answer supersedes older work in its
    thread: a picture, a blank @ or a stale message must not make a pending answer stale.
    ``supersedes`` says which (``ResponseGate.supersedes``); without it, any DM or @.

    A msgId is looked for before it is stored only when this ingestor stored it lately (a
    redelivery while running); any other frame is inserted straight away, and the insert
    finds the rare duplicate (one from before a restart, or another replica's) itself.
    """

    def __init__(
        self,
        store: Store,
        supersedes: Supersedes | None = None,
        max_frame_bytes: int | None = None,
        clicks: ClickHandler | None = None,
    ) -> None:
        self.store = store
        self.supersedes = supersedes
        self.max_frame_bytes = max_frame_bytes
        # Decides a click on an approval card against this store (agent/acts/clicks.py).
        self.clicks = clicks
        self._recent: OrderedDict[str, None] = OrderedDict()

    def ingest(self, raw: str | bytes, received_at: float) -> IngestResult:
        parsed = parse_frame(raw, received_at, self.max_frame_bytes)
        return self.store_parsed(parsed, raw, received_at)

    def store_parsed(
        self, parsed: ParsedFrame, raw: str | bytes, received_at: float
    ) -> IngestResult:
        """Make a parsed frame durable: a new event, a counted duplicate, or quarantine."""
        if parsed.kind is FrameKind.QUARANTINED:
            assert parsed.reason is not None
            frame_id = parsed.frame_message_id
            self.store.events.quarantine(
                kept_text(parsed.reason, raw),
                parsed.reason.value,
                parsed.error or "",
                received_at,
                frame_id,
            )
            return IngestResult(
                FrameKind.QUARANTINED, frame_id, reason=parsed.reason, error=parsed.error
            )
        text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
        if parsed.kind is FrameKind.CARD_CLICK:
            return self._click(parsed, text, received_at)
        if parsed.kind is not FrameKind.EVENT:
            return IngestResult(parsed.kind, parsed.frame_message_id)
        assert parsed.event is not None
        bumps = self.supersedes(parsed.event, received_at) if self.supersedes else None
        event_id = parsed.event.event_id
        try:
            inserted = self.store.events.add_event(
                parsed.event, text, bumps, look_first=event_id in self._recent
            )
        except (ValueError, UnicodeError) as exc:
            # Parsed, yet not storable (e.g. a lone surrogate escaped in the JSON): keep the
            # raw frame in quarantine rather than refusing it forever.
            error = f"cannot be stored: {exc}"[:500]
            self.store.events.quarantine(
                text, QuarantineReason.BAD_FIELD.value, error, received_at, parsed.frame_message_id
            )
            return IngestResult(
                FrameKind.QUARANTINED,
                parsed.frame_message_id,
                reason=QuarantineReason.BAD_FIELD,
                error=error,
            )
        self._recent[event_id] = None
        if len(self._recent) > RECENT_IDS:
            self._recent.popitem(last=False)
        kind = FrameKind.EVENT if inserted.new else FrameKind.DUPLICATE
        return IngestResult(kind, parsed.frame_message_id, parsed.event, inserted.generation)

    def _click(self, parsed: ParsedFrame, text: str, received_at: float) -> IngestResult:
        """A card click, decided now (the ack carries what the card shows at once); one
        that is not a valid click is quarantined, with its reason."""
        frame_id = parsed.frame_message_id or ""
        try:
            click = parse_click(click_data(parsed.document), frame_id, received_at)
        except ValueError as exc:
            error = str(exc)[:500]
            self.store.events.quarantine(
                text, QuarantineReason.BAD_FIELD.value, error, received_at, frame_id
            )
            return IngestResult(
                FrameKind.QUARANTINED, frame_id, reason=QuarantineReason.BAD_FIELD, error=error
            )
        if self.clicks is None:  # no approvals here: nothing to decide
            return IngestResult(FrameKind.IGNORED, frame_id)
        answer = self.clicks.receive(click)
        generation = getattr(answer, "generation", 0)  # a form's event: its thread's
        return IngestResult(
            FrameKind.CARD_CLICK, frame_id, answer.event, generation, response=answer.response
        )
