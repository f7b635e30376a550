"""The action gate's checks on what proactive work adds to a request (pure).

A reminder a provider proposes (``ActionRequest.reminder``) is for the person who asked, in
the conversation they asked in, at a readable time in the future no further ahead than the
operator allows, and only where a heartbeat runs to deliver it. Separately, nothing the
robot sends may @ everyone: an operator's ``dta send`` goes through the same check.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from agent.contracts import ActionKind, Origin, ReminderProposal

# "@所有人", "@全体成员", "@all", "@everyone": DingTalk readers take these as everyone.
_EVERYONE = re.compile(r"[@＠]\s*(?:所有人|全体成员|全员|(?i:all|everyone)\b)")


@dataclass(frozen=True)
class ReminderLimits:
    enabled: bool  # a heartbeat is configured to deliver reminders
    max_ahead_s: float


def mentions_everyone(text: str) -> bool:
    return bool(_EVERYONE.search(text))


def reminder_time(at: str, timezone: str) -> float | None:
    """``at`` (ISO 8601) in epoch seconds; a time without an offset is read in
    ``timezone``. None when it cannot be read."""
    try:
        moment = datetime.fromisoformat(at)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=ZoneInfo(timezone))
    return moment.timestamp()


def reminder_problem(
    reminder: ReminderProposal,
    kind: ActionKind,
    origin: Origin,
    due: float | None,
    now: float,
    limits: ReminderLimits,
) -> str | None:
    """Why the reminder may not be set, or None when it may."""
    if not limits.enabled:
        return "no heartbeat is configured to deliver reminders"
    if kind is not ActionKind.REPLY:
        return "a reminder is confirmed with a reply"
    if reminder.user_id is not None and reminder.user_id != origin.user_id:
        return "a reminder is only for the person who asked"
    if reminder.conversation_id not in (None, origin.conversation_id):
        return "a reminder is only for the conversation it was asked in"
    if due is None:
        return f"unreadable time {reminder.at!r}"
    if due <= now:
        return "the time has passed"
    if due > now + limits.max_ahead_s:
        return f"more than {limits.max_ahead_s / 86_400:g} days ahead"
    return None
