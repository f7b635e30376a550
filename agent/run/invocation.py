"""Build the enriched invocation a behavior skill sees for one run.

Three things beyond the message itself, each saying where it came from:

- **quote** — what the message replies to: from the callback when DingTalk sent the
  content, else from our own records (an earlier inbound event by msgId, or our own reply
  through the outbound index by processQueryKey). If nobody has the content — a quoted
  robot card arrives empty — it is marked ``missing`` with the reason, never invented.
- **burst** — the same person's earlier messages in this conversation within the burst
  window, oldest first, so three quick lines are read as one request.
- **identity** — name, title and department from the staff directory (cached, looked up
  as soon as the run is queued: ``agent.run.identities``); when the lookup fails the
  envelope's nick, marked ``source: envelope``.
- **knowledge** — the sections of the knowledge folder and the published memory of this
  conversation that match the message (``agent.run.grounding``), or what was searched.
- **media** — the message's pictures, files, video and audio (and its quote's), fetched
  here, after the response gate engaged, by ``agent.run.media`` (never at ingest).

Long text, quotes and bursts are cut to configured sizes and say so (``truncated``).
Sources explain; they never grant authority.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from agent.clock import Clock
from agent.contracts import (
    Burst,
    BurstMessage,
    EnrichedInvocation,
    Event,
    Identity,
    QuotedMessage,
    RecentExchange,
    ResponseDecision,
    Run,
    TaskCheckpoint,
    Turn,
)
from agent.dingtalk.readers import quoted_text
from agent.dingtalk.transport import DingTalkTransport
from agent.run.forgetting import after_last_forget
from agent.run.grounding import Grounder
from agent.run.identities import IdentityDirectory
from agent.run.media import MediaFetcher
from storage import Store

log = logging.getLogger("dta.invocation")


@dataclass(frozen=True)
class InvocationLimits:
    max_text_chars: int
    max_quote_chars: int
    burst_window_s: float
    max_burst_messages: int
    identity_ttl_s: float
    context_window_s: float
    context_turns: int


def _cut(text: str, limit: int) -> tuple[str, bool, int | None]:
    if len(text) <= limit:
        return text, False, None
    return text[:limit], True, len(text)


def _missing_reason(from_robot: bool, author: str | None) -> str:
    """Why a quote has no content, without claiming more than the callback says."""
    if from_robot:
        return "the quoted robot message arrived without content and is not in our records"
    if author:
        return "the quoted message arrived without content and is not in our records"
    return "the quote names no sender and no content, and the message is not in our records"


# DingTalk stamps createAt in milliseconds: a file and a line sent together share it.
SAME_INSTANT_S = 0.001


class InvocationBuilder:
    def __init__(
        self,
        store: Store,
        clock: Clock,
        transport: DingTalkTransport | None,
        limits: InvocationLimits,
        media: MediaFetcher | None = None,
        identities: IdentityDirectory | None = None,
        grounder: Grounder | None = None,
    ) -> None:
        self.store = store
        self.clock = clock
        self.transport = transport
        self.limits = limits
        self.media = media
        self.grounder = grounder
        # Staff-directory answers, cached and looked up early (agent/run/identities.py): the
        # runtime's own, which it starts on as soon as a run is queued.
        self.identities = identities or IdentityDirectory(
            store, clock, transport, limits.identity_ttl_s
        )

    async def build(
        self,
        event: Event,
        run: Run,
        decision: ResponseDecision | None = None,
        continuation: TaskCheckpoint | None = None,
    ) -> EnrichedInvocation:
        text, truncated, original = _cut(event.text, self.limits.max_text_chars)
        media = (
            await self.media.fetch(event, run.run_id, self.earlier_with_media(event))
            if self.media is not None
            else []
        )
        quote = self.quote(event)
        if quote is not None:
            quote.media = [m.media_id for m in media if m.part_of == "quote"]
        recent = self.recent(event)
        knowledge = self.grounder.ground(event, text, recent) if self.grounder else None
        return EnrichedInvocation(
            run_id=run.run_id,
            event=event,
            response_gate=decision,
            text=text,
            text_truncated=truncated,
            text_original_length=original,
            identity=await self.identity(event),
            quote=quote,
            burst=self.burst(event),
            recent=recent,
            knowledge=knowledge,
            allowed_actions=run.allowed_actions,
            continuation=continuation,
            media=media,
        )

    # ------------------------------------------------------------------ quote

    def quote(self, event: Event) -> QuotedMessage | None:
        raw = event.quote
        if not raw:
            return None
        replied: dict[str, Any] = raw.get("repliedMsg") or {}
        older: dict[str, Any] = raw.get("quoteMessage") or {}
        msg_id = replied.get("msgId") or older.get("msgId") or raw.get("originalMsgId")
        author = replied.get("senderId") or older.get("senderId")
        created = replied.get("createdAt")
        older_text = older.get("text")
        text = quoted_text(replied) or (
            older_text.get("content", "") if isinstance(older_text, dict) else ""
        )
        if not isinstance(text, str):
            text = ""
        source = "callback"
        found: dict[str, Any] = {}
        earlier = self.store.get_event(str(msg_id)) if (not text and msg_id) else None
        if earlier is not None and earlier.conversation.id != event.conversation.id:
            earlier = None  # never pull another conversation's text into this run
        if earlier is not None:
            text, source = earlier.text, "store:event"
            author = earlier.actor.dingtalk_id or earlier.actor.user_id
            found = {"author_nick": earlier.actor.nick, "created_at": earlier.created_at}
        pqk = raw.get("originalProcessQueryKey")
        ours = self.store.outbound(process_query_key=pqk) if not text else None
        if ours is not None and ours["conversation_id"] != event.conversation.id:
            ours = None
        if ours is not None:
            text, source = ours["text"], "store:outbound"
            author = event.robot.chatbot_user_id
            found = {"created_at": ours["sent_at"]}
        from_robot = bool(author and author == event.robot.chatbot_user_id)
        has_media = any(a.get("part_of") == "quote" for a in event.attachments)
        missing = None
        if not text and not has_media:
            source = "callback"
            missing = _missing_reason(from_robot, author)
        cut, truncated, original = _cut(text, self.limits.max_quote_chars)
        return QuotedMessage(
            source=source,
            msg_id=str(msg_id) if msg_id else None,
            author_id=author,
            author_nick=found.get("author_nick") or older.get("senderNick"),
            created_at=found.get("created_at")
            or (created / 1000.0 if isinstance(created, int | float) else None),
            msgtype=replied.get("msgType") or older.get("msgtype"),
            text=cut or None,
            from_robot=from_robot,
            truncated=truncated,
            original_length=original,
            missing=missing,
        )

    # ------------------------------------------------------------------ burst

    def burst(self, event: Event) -> Burst | None:
        if self.limits.burst_window_s <= 0 or self.limits.max_burst_messages <= 0:
            return None
        earlier = [
            e
            for e in self.store.events_between(
                event.conversation.id,
                event.actor.user_id,
                event.created_at - self.limits.burst_window_s,
                event.created_at,
            )
            if e.event_id != event.event_id
        ]
        if not earlier:
            return None
        kept = earlier[-self.limits.max_burst_messages :]
        return Burst(
            source="store:events",
            messages=[
                BurstMessage(
                    msg_id=e.event_id,
                    text=e.text[: self.limits.max_quote_chars],
                    created_at=e.created_at,
                )
                for e in kept
            ],
            truncated=len(kept) < len(earlier),
            original_length=len(earlier) if len(kept) < len(earlier) else None,
        )

    def earlier_with_media(self, event: Event) -> Event | None:
        """For a message with no media of its own, the person's latest earlier message
        here within the burst window that had some: 「帮我看下这个文件」 means that file,
        whether it came together (its run superseded by this one) or seconds before."""
        if event.attachments or self.limits.burst_window_s <= 0:
            return None
        earlier = self.store.events_between(
            event.conversation.id,
            event.actor.user_id,
            event.created_at - self.limits.burst_window_s,
            event.created_at + SAME_INSTANT_S,  # sent together: the same createAt
        )
        with_media = [e for e in earlier if e.attachments and e.event_id != event.event_id]
        return with_media[-1] if with_media else None

    def recent(self, event: Event) -> RecentExchange | None:
        """The person's last turns with the robot here (before this message), each with
        what was actually delivered in answer, from the store."""
        limits = self.limits
        if limits.context_window_s <= 0 or limits.context_turns <= 0:
            return None
        rows = self.store.recent_exchange(
            event.conversation.id,
            event.actor.user_id,
            event.created_at - limits.context_window_s,
            event.created_at,
            event.event_id,
            limits.context_turns,
        )
        if not rows:
            return None
        cut = limits.max_quote_chars
        turns = [
            Turn(msg_id=msg, said=said[:cut], at=at, reply=reply[:cut] if reply else None)
            for msg, said, at, reply in rows
        ]
        turns = after_last_forget(turns)  # 「忘掉…」: what came before it is not shown again
        if not turns:
            return None
        return RecentExchange(source="store:events+outbound", turns=turns)

    # ------------------------------------------------------------------ identity

    async def identity(self, event: Event) -> Identity:
        return await self.identities.identity(event)
