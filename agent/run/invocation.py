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
  here, after the response gate engaged, by ``agent.run.media`` (never at ingest);
- **documents** — the text of the PDF, Word and Excel files among them, page by page, sheet
  by sheet or section by section (``agent.run.documents``), or why it could not be read.

Long text, quotes and bursts are cut to configured sizes and say so (``truncated``).
Sources explain; they never grant authority.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any, NamedTuple
from zoneinfo import ZoneInfo

from agent.clock import Clock
from agent.contracts import (
    Burst,
    BurstMessage,
    EnrichedInvocation,
    Event,
    FormAnswer,
    Identity,
    LocalNow,
    MediaItem,
    QuotedMessage,
    RecentExchange,
    ResponseDecision,
    Run,
    TaskCheckpoint,
    Turn,
)
from agent.dingtalk.readers import quoted_text
from agent.dingtalk.transport import DingTalkTransport
from agent.run.documents import DocumentReader
from agent.run.forgetting import after_last_forget
from agent.run.grounding import Grounder, ReadRights, readable_only
from agent.run.identities import IdentityDirectory
from agent.run.media import MediaFetcher
from gates.action_case import words_of
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
    timezone: str = "Asia/Shanghai"  # the team's: how "now" is said to a model
    # the AI label the robot's replies carry: earlier replies are shown to a model without
    # it (it is the host's mark, not what the model said)
    ai_label: str | None = None


def _cut(text: str, limit: int) -> tuple[str, bool, int | None]:
    if len(text) <= limit:
        return text, False, None
    return text[:limit], True, len(text)


class _QuoteText(NamedTuple):
    """A quote's text and where it came from, with what that source says of its author."""

    text: str
    source: str  # "callback", "store:event" or "store:outbound"
    author: str | None
    author_nick: str | None = None
    created_at: float | None = None


def _callback_text(replied: dict[str, Any], older: dict[str, Any]) -> str:
    """The quoted text as the callback carries it: the newer ``repliedMsg``, else the older
    ``quoteMessage``'s text content."""
    older_text = older.get("text")
    text = quoted_text(replied) or (
        older_text.get("content", "") if isinstance(older_text, dict) else ""
    )
    return text if isinstance(text, str) else ""


def _missing_reason(from_robot: bool, author: str | None) -> str:
    """Why a quote has no content, without claiming more than the callback says."""
    if from_robot:
        return "the quoted robot message arrived without content and is not in our records"
    if author:
        return "the quoted message arrived without content and is not in our records"
    return "the quote names no sender and no content, and the message is not in our records"


# DingTalk stamps createAt in milliseconds: a file and a line sent together share it.
SAME_INSTANT_S = 0.001


_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_WEEKDAYS_ZH = "一二三四五六日"


def local_now(now: float, timezone: str) -> LocalNow:
    """``now`` in the team's zone, as a model needs it to write a time."""
    return _local_second(int(now), timezone)


@lru_cache(maxsize=8)
def _local_second(now: int, timezone: str) -> LocalNow:
    # to the second, as it is shown: a burst's runs share it
    local = datetime.fromtimestamp(now, ZoneInfo(timezone))
    day = local.weekday()
    return LocalNow(
        iso=local.isoformat(timespec="seconds"),
        date=local.date().isoformat(),
        weekday=f"{_WEEKDAYS[day]} (星期{_WEEKDAYS_ZH[day]})",
        time=local.strftime("%H:%M"),
        timezone=timezone,
    )


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
        documents: DocumentReader | None = None,
        rights: ReadRights | None = None,
    ) -> None:
        self.store = store
        self.rights = rights  # who may read a DingTalk doc (None: no DingTalk knowledge)
        self.clock = clock
        self.transport = transport
        self.limits = limits
        self.media = media
        self.grounder = grounder
        self.documents = documents  # reads the PDF, Word and Excel files among the media
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
        nearby = self._nearby(event)  # one read for the burst and the media its words take
        media = await self._media(event, run, nearby)
        documents = await self.documents.read(media) if self.documents and media else []
        quote = self.quote(event)
        if quote is not None:
            quote.media = [m.media_id for m in media if m.part_of == "quote"]
        recent = self.recent(event)
        knowledge = self.grounder.ground(event, text, recent) if self.grounder else None
        if knowledge is not None and self.rights is not None:
            knowledge = await readable_only(knowledge, event, self.rights)
        return EnrichedInvocation(
            run_id=run.run_id,
            event=event,
            response_gate=decision,
            text=text,
            text_truncated=truncated,
            text_original_length=original,
            identity=await self.identity(event),
            quote=quote,
            burst=self.burst(event, nearby),
            recent=recent,
            knowledge=knowledge,
            allowed_actions=run.allowed_actions,
            continuation=continuation,
            media=media,
            documents=documents,
            now=local_now(self.clock.now(), self.limits.timezone),
            form=self.form_answer(event),
        )

    def form_answer(self, event: Event) -> FormAnswer | None:
        """The form this event answered, as trusted data: the values its asker submitted,
        checked against its fields when they came (``agent/acts/forms.py``)."""
        record = self.store.forms.answered_by(event.event_id)
        if record is None or record.values is None or record.submitted_by is None:
            return None
        return FormAnswer(
            form_id=record.form_id,
            asked_in=record.event_id,
            question=record.question,
            fields={item.name: item.label for item in record.spec.fields},
            values=record.values,
            submitted_by=record.submitted_by,
        )

    async def _media(
        self, event: Event, run: Run, nearby: list[Event] | None = None
    ) -> list[MediaItem]:
        """The message's media and those of the burst its words take; a file whose own run
        fetched it is copied from that run, not downloaded a second time."""
        if self.media is None:
            return []
        earlier = self.earlier_with_media(event, nearby)
        had = self.store.events.get_run(earlier.event_id) if earlier is not None else None
        return await self.media.fetch(event, run.run_id, earlier, had.run_id if had else None)

    # ------------------------------------------------------------------ quote

    def quote(self, event: Event) -> QuotedMessage | None:
        raw = event.quote
        if not raw:
            return None
        replied: dict[str, Any] = raw.get("repliedMsg") or {}
        older: dict[str, Any] = raw.get("quoteMessage") or {}
        msg_id = replied.get("msgId") or older.get("msgId") or raw.get("originalMsgId")
        created = replied.get("createdAt")
        author = replied.get("senderId") or older.get("senderId")
        found = _QuoteText(_callback_text(replied, older), "callback", author)
        if not found.text:
            pqk = raw.get("originalProcessQueryKey")
            found = self._quote_from_store(event, msg_id, pqk) or found
        text, source, author = found.text, found.source, found.author
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
            author_nick=found.author_nick or older.get("senderNick"),
            created_at=found.created_at
            or (created / 1000.0 if isinstance(created, int | float) else None),
            msgtype=replied.get("msgType") or older.get("msgtype"),
            text=cut or None,
            from_robot=from_robot,
            truncated=truncated,
            original_length=original,
            missing=missing,
        )

    def _quote_from_store(
        self, event: Event, msg_id: Any, process_query_key: Any
    ) -> _QuoteText | None:
        """What our records hold of a quote whose callback carries no text: the earlier event
        by its msgId, else our own reply by its processQueryKey; this conversation's only,
        never another conversation's text pulled into this run."""
        found = None
        earlier = self.store.events.get_event(str(msg_id)) if msg_id else None
        if earlier is not None and earlier.conversation.id == event.conversation.id:
            author = earlier.actor.dingtalk_id or earlier.actor.user_id
            found = _QuoteText(
                earlier.text, "store:event", author, earlier.actor.nick, earlier.created_at
            )
            if found.text:
                return found
        ours = self.store.context.outbound(process_query_key=process_query_key)
        if ours is not None and ours["conversation_id"] == event.conversation.id:
            robot = event.robot.chatbot_user_id
            return _QuoteText(ours["text"], "store:outbound", robot, None, ours["sent_at"])
        return found

    # ------------------------------------------------------------------ burst

    def _nearby(self, event: Event) -> list[Event] | None:
        """The person's messages here from a burst window before ``event`` to the same
        instant as it (what ``burst`` and ``earlier_with_media`` read), or None when
        there is no burst window."""
        if self.limits.burst_window_s <= 0:
            return None
        return self.store.context.events_between(
            event.conversation.id,
            event.actor.user_id,
            event.created_at - self.limits.burst_window_s,
            event.created_at + SAME_INSTANT_S,  # sent together: the same createAt
            excluding=event.event_id,
        )

    def burst(self, event: Event, nearby: list[Event] | None = None) -> Burst | None:
        """``nearby``: ``_nearby(event)`` when already read."""
        if self.limits.burst_window_s <= 0 or self.limits.max_burst_messages <= 0:
            return None
        window = self._nearby(event) if nearby is None else nearby
        earlier = [
            e for e in window if e.created_at < event.created_at and e.event_id != event.event_id
        ]
        # 「忘掉…」: the person's messages before it are not shown again either
        earlier = after_last_forget(earlier, lambda e: e.text)
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

    def earlier_with_media(self, event: Event, nearby: list[Event] | None = None) -> Event | None:
        """For a message with no media of its own, the person's latest earlier message
        here within the burst window that had some: 「帮我看下这个文件」 means that file,
        whether it came together (its run superseded by this one) or seconds before.
        ``nearby``: ``_nearby(event)`` when already read."""
        if event.attachments or self.limits.burst_window_s <= 0:
            return None
        earlier = self._nearby(event) if nearby is None else nearby
        earlier = after_last_forget(earlier, lambda e: e.text)  # a forgotten file too
        with_media = [e for e in earlier if e.attachments and e.event_id != event.event_id]
        return with_media[-1] if with_media else None

    def recent(self, event: Event) -> RecentExchange | None:
        """The person's last turns with the robot here (before this message), each with
        what was actually delivered in answer, from the store."""
        limits = self.limits
        if limits.context_window_s <= 0 or limits.context_turns <= 0:
            return None
        rows = self.store.context.recent_exchange(
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
            Turn(
                msg_id=msg,
                said=said[:cut],
                at=at,
                reply=words_of(reply, limits.ai_label)[:cut] if reply else None,
                earlier=_before(event.created_at - at),
            )
            for msg, said, at, reply in rows
        ]
        turns = after_last_forget(turns)  # 「忘掉…」: what came before it is not shown again
        if not turns:
            return None
        return RecentExchange(source="store:events+outbound", turns=turns)

    # ------------------------------------------------------------------ identity

    async def identity(self, event: Event) -> Identity:
        return await self.identities.identity(event)


def _before(seconds: float) -> str:
    """「12 minutes before this message」: how old an earlier turn's data is."""
    minutes = max(0, round(seconds / 60))
    if minutes < 1:
        return "under a minute before this message"
    if minutes < 120:
        return f"{minutes} minutes before this message"
    return f"{round(minutes / 60)} hours before this message"
