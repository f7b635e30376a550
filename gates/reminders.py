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
# The same words as a streamed card must not show even in part: a frame holds back a tail
# that could be the start of one (``gates.frames.unsafe_tail``).
EVERYONE_WORDS = ("@所有人", "@全体成员", "@全员", "＠所有人", "＠全体成员", "@all", "@everyone")


@dataclass(frozen=True)
class ReminderProblem:
    """Why a reminder may not be set (``detail``, for the receipt) and how the robot says
    so to the person (``say``), plainly: a switched-off capability is never a failure."""

    detail: str
    say: str


REMINDERS_OFF = "提醒功能还没开启，请联系管理员。"


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
) -> ReminderProblem | None:
    """Why the reminder may not be set, or None when it may."""
    if not limits.enabled:
        return ReminderProblem("no heartbeat is configured to deliver reminders", REMINDERS_OFF)
    if kind is not ActionKind.REPLY:
        return ReminderProblem("a reminder is confirmed with a reply", _NOT_SET)
    if reminder.user_id is not None and reminder.user_id != origin.user_id:
        return ReminderProblem(
            "a reminder is only for the person who asked",
            "提醒只能设给提出的人自己；要提醒别人，请让对方自己来设。",
        )
    if reminder.conversation_id not in (None, origin.conversation_id):
        return ReminderProblem(
            "a reminder is only for the conversation it was asked in",
            "提醒只能发在你提出它的这个会话里。",
        )
    if due is None:
        return ReminderProblem(f"unreadable time {reminder.at!r}", _NO_TIME)
    if due <= now:
        return ReminderProblem("the time has passed", "这个时间已经过去了，换一个之后的时间吧。")
    if due > now + limits.max_ahead_s:
        days = limits.max_ahead_s / 86_400
        return ReminderProblem(
            f"more than {days:g} days ahead", f"提醒最多只能设在 {days:g} 天以内。"
        )
    return None


_NOT_SET = "这个提醒没能设置好，请换个说法再试一次。"
_NO_TIME = "我没读懂提醒的时间，请说一个具体的时间，比如「明天上午10点」。"
