"""The rules provider's reminders: 「明天上午10点提醒我交报销」, "remind me tomorrow at 10am to …".

A request to be reminded becomes one short reply that says when, carrying the reminder
(``ActionRequest.reminder``) for the action gate to check and the host to schedule; the
heartbeat delivers it. Times are read in the configured time zone, from the moment the
message was sent. Only "remind me" is read: reminding someone else is a message to a third
party, which the robot does not send. A request without a time we can read gets a short
reply that shows the form, never a guess.
"""

from __future__ import annotations

import re
from datetime import datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from skills.providers.base import reply

_CN_DIGITS = {"零": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7,
              "八": 8, "九": 9}  # fmt: skip
_NUMBER = r"(?:\d{1,2}|[零一二两三四五六七八九十]{1,3})"
_DAYS = {"今天": 0, "今晚": 0, "明天": 1, "明早": 1, "明晚": 1, "后天": 2}
_AFTERNOON = ("下午", "傍晚", "晚上", "今晚", "明晚")

_ZH_WANTS = re.compile(r"提醒我")
_ZH_RELATIVE = re.compile(rf"(?P<n>{_NUMBER}|半)\s*(?P<unit>分钟|个?小时)(?:之?后|以后)")
_ZH_CLOCK = re.compile(
    r"(?P<day>今天|今晚|明天|明早|明晚|后天)?\s*"
    r"(?P<period>凌晨|早上|早晨|上午|中午|下午|傍晚|晚上)?\s*"
    rf"(?P<hour>{_NUMBER})\s*(?:点|:|：)\s*(?P<minute>\d{{1,2}}|半|[一二三四五]?十[一二三四五六七八九]?)?\s*分?"
)
_ZH_WHAT = re.compile(r"提醒我(?:一下)?[，,：:\s]*(?P<what>.*)$")

_EN_WANTS = re.compile(r"(?i)\bremind me\b")
_EN_RELATIVE = re.compile(r"(?i)\bin\s+(?P<n>\d{1,3})\s*(?P<unit>minutes?|mins?|hours?|hrs?)\b")
_EN_CLOCK = re.compile(
    r"(?i)\b(?P<day>today|tonight|tomorrow)?\s*(?:at\s+)?"
    r"(?P<hour>\d{1,2})(?::(?P<minute>\d{2}))?\s*(?P<ampm>am|pm|a\.m\.|p\.m\.)"
    r"|\b(?P<day2>today|tomorrow)\s+at\s+(?P<hour2>\d{1,2})(?::(?P<minute2>\d{2}))?\b"
)
_EN_WHAT = re.compile(r"(?i)\bto\s+(?P<what>.+?)\s*(?:[.!]|$)")

_NO_TIME_ZH = "要我什么时候提醒你？这样说就行：「明天上午10点提醒我交报销」。"
_NO_TIME_EN = (
    'When should I remind you? Say it like "remind me tomorrow at 10am to submit the report".'
)


def _number(text: str) -> int:
    """Arabic or Chinese numerals up to 59 (十, 十二, 二十, 三十五…)."""
    if text.isdigit():
        return int(text)
    if "十" in text:
        tens, _, ones = text.partition("十")
        return (_CN_DIGITS.get(tens, 1) if tens else 1) * 10 + (_CN_DIGITS.get(ones, 0))
    return _CN_DIGITS.get(text, 0)


def wants_reminder(text: str) -> bool:
    return bool(_ZH_WANTS.search(text) or _EN_WANTS.search(text))


def reminder_reply(text: str, sent_at: float, tz: ZoneInfo, english: bool) -> dict[str, Any] | None:
    """The reply that sets a reminder, the short reply asking for a time, or None when
    the message does not ask to be reminded."""
    if not wants_reminder(text):
        return None
    parsed = _read_english(text, sent_at, tz) if english else _read_chinese(text, sent_at, tz)
    if parsed is None:
        return reply(_NO_TIME_EN if english else _NO_TIME_ZH)
    due, what = parsed
    when = say_when(due, sent_at, tz, english)
    if english:
        said = f"OK, I'll remind you {when}" + (f" to {what}." if what else ".")
    else:
        said = f"好的，{when} 提醒你" + (f"{what}。" if what else "。")
    at = datetime.fromtimestamp(due, tz).isoformat()
    return {**reply(said), "reminder": {"at": at, "text": what or said}}


def _read_chinese(text: str, sent_at: float, tz: ZoneInfo) -> tuple[float, str] | None:
    what_match = _ZH_WHAT.search(text)
    what = what_match.group("what") if what_match else ""
    relative = _ZH_RELATIVE.search(text)
    if relative is not None:
        amount = 0.5 if relative.group("n") == "半" else _number(relative.group("n"))
        unit = 60 if relative.group("unit") == "分钟" else 3600
        return sent_at + amount * unit, _strip(what)
    clock = _ZH_CLOCK.search(text)
    if clock is None:
        return None
    hour = _number(clock.group("hour"))
    minute_text = clock.group("minute") or ""
    minute = 30 if minute_text == "半" else (_number(minute_text) if minute_text else 0)
    day, period = clock.group("day"), clock.group("period") or ""
    evening = period in _AFTERNOON or day in ("今晚", "明晚")
    if (evening and hour < 12) or (period == "中午" and hour < 3):
        hour += 12
    if hour > 23 or minute > 59:
        return None
    return _on_day(sent_at, tz, _DAYS.get(day or ""), hour, minute), _strip(what)


def _read_english(text: str, sent_at: float, tz: ZoneInfo) -> tuple[float, str] | None:
    what_match = _EN_WHAT.search(text)
    what = what_match.group("what") if what_match else ""
    relative = _EN_RELATIVE.search(text)
    if relative is not None:
        unit = 60 if relative.group("unit").lower().startswith("m") else 3600
        return sent_at + int(relative.group("n")) * unit, _strip_en(what)
    clock = _EN_CLOCK.search(text)
    if clock is None:
        return None
    day = (clock.group("day") or clock.group("day2") or "").lower()
    hour = int(clock.group("hour") or clock.group("hour2"))
    minute = int(clock.group("minute") or clock.group("minute2") or 0)
    ampm = (clock.group("ampm") or "").lower().replace(".", "")
    if ampm == "pm" and hour < 12:
        hour += 12
    elif ampm == "am" and hour == 12:
        hour = 0
    if hour > 23 or minute > 59:
        return None
    days = {"today": 0, "tonight": 0, "tomorrow": 1}.get(day)
    return _on_day(sent_at, tz, days, hour, minute), _strip_en(what)


def _on_day(sent_at: float, tz: ZoneInfo, days: int | None, hour: int, minute: int) -> float:
    """That time on the named day; without a day, the next time the clock shows it."""
    if days is not None:
        return local_day_at(sent_at, tz, days, hour, minute)
    today = local_day_at(sent_at, tz, 0, hour, minute)
    return today if today > sent_at else local_day_at(sent_at, tz, 1, hour, minute)


def _strip(what: str) -> str:
    """The thing to be reminded of, without the time words that may follow 提醒我."""
    cleaned = _ZH_CLOCK.sub("", _ZH_RELATIVE.sub("", what))
    return cleaned.strip(" ，,。.！!").strip()[:200]


def _strip_en(what: str) -> str:
    cleaned = _EN_CLOCK.sub("", _EN_RELATIVE.sub("", what))
    return cleaned.strip(" ,.!").strip()[:200]


def local_day_at(moment: float, tz: ZoneInfo, days: int, hour: int, minute: int) -> float:
    """Epoch seconds of ``hour:minute`` local time, ``days`` after ``moment``'s local day."""
    day = datetime.fromtimestamp(moment, tz).date() + timedelta(days=days)
    return datetime.combine(day, time(hour, minute), tzinfo=tz).timestamp()


def say_when(moment: float, now: float, tz: ZoneInfo, english: bool = False) -> str:
    """How a person says when ``moment`` is, seen from ``now``: 今天/明天/后天 or a date."""
    local, today = datetime.fromtimestamp(moment, tz), datetime.fromtimestamp(now, tz)
    offset = (local.date() - today.date()).days
    clock = f"{local.hour:02d}:{local.minute:02d}"
    if english:
        day = {0: "today", 1: "tomorrow"}.get(offset, local.strftime("%Y-%m-%d"))
        return f"{day} at {clock}"
    day = {0: "今天", 1: "明天", 2: "后天"}.get(offset, f"{local.month}月{local.day}日")
    return f"{day} {clock}"
