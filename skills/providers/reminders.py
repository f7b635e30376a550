"""The rules provider's reminders: 「明天上午10点提醒我交报销」, "remind me tomorrow at 10am to …".

A request to be reminded becomes one short reply that says when, carrying the reminder
(``ActionRequest.reminder``) for the action gate to check and the host to schedule; the
heartbeat delivers it. Times are read in the configured time zone, from the moment the
message was sent. Only "remind me" is read: reminding someone else is a message to a third
party, which the robot does not send. A request without a time we can read for certain
gets a short reply that shows the form, never a guess: no time, a day this reader does not
count (a weekday, next week, a date, 「每天」), hours that disagree with their part of the
day (「上午15点」, "13pm") or could be either night (「晚上2点」). An hour said without
上午/下午 is a waking hour (「3点」 is 15:00); a time that has passed is said to have passed.
"""

from __future__ import annotations

import re
from datetime import datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from skills.language import cn_number, say_when
from skills.providers.base import reply

_NUMBER = r"(?:\d{1,2}|[零一二两三四五六七八九十]{1,3})"
_DAYS = {"今天": 0, "今早": 0, "今晚": 0, "明天": 1, "明早": 1, "明晚": 1, "后天": 2}
_EVENING_DAYS = ("今晚", "明晚")
WAKING = (7, 21)  # the hours a time said without 上午/下午 (or am/pm) is read in

_ZH_WANTS = re.compile(r"提醒我")
# 「30分钟后」「两个半小时后」「1.5小时后」「1小时30分钟后」「半小时后」
_ZH_RELATIVE = re.compile(
    rf"(?:(?P<h>\d{{1,3}}(?:\.\d+)?|{_NUMBER})\s*个?\s*(?P<hh>半)?\s*(?:小时|钟头)"
    r"|(?P<half>半)\s*个?\s*(?:小时|钟头))?"
    rf"\s*(?:(?P<m>\d{{1,4}}|{_NUMBER})\s*分钟?)?\s*(?:之?后|以后)"
)
_ZH_DAY = re.compile(r"今天|今早|今晚|明天|明早|明晚|后天")
_ZH_CLOCK = re.compile(
    r"(?<![第\d.])(?P<day>今天|今早|今晚|明天|明早|明晚|后天)?\s*"
    r"(?P<period>凌晨|早上|早晨|上午|中午|下午|傍晚|晚上)?\s*"
    rf"(?P<hour>{_NUMBER})\s*(?:点|:|：)\s*(?P<minute>\d{{1,2}}|半|[一二三四五]?十[一二三四五六七八九]?)?\s*分?"
)
# Days this reader does not count (next week, a weekday, a date): asked about, never guessed.
_ZH_OTHER_DAY = re.compile(
    r"大后天|昨天|前天|每|下个?(?:周|星期|礼拜|月)|(?:周|星期|礼拜)[一二三四五六日天末]"
    r"|[\d零一二两三四五六七八九十]+\s*个?(?:天|日|号|月|周|星期|礼拜)(?:之?后|以后)?|月底|月初|年底"
)
_ZH_WHAT = re.compile(r"提醒我(?:一下)?[，,：:\s]*(?P<what>.*)$")

_EN_WANTS = re.compile(r"(?i)\bremind me\b")
_EN_RELATIVE = re.compile(
    r"(?i)\bin\s+(?:(?P<h>\d{1,3}(?:\.\d+)?|an?|one)\s*(?:hours?|hrs?)\b"
    r"(?:\s*(?:and\s+)?(?P<m2>\d{1,3})\s*(?:minutes?|mins?)\b)?"
    r"|(?P<m>\d{1,4})\s*(?:minutes?|mins?)\b|(?P<half>half\s+an\s+hour)\b)"
)
_EN_CLOCK = re.compile(
    r"(?i)\b(?P<day>today|tonight|tomorrow)?\s*(?:at\s+)?"
    r"(?P<hour>\d{1,2})(?::(?P<minute>\d{2}))?\s*(?P<ampm>am|pm|a\.m\.|p\.m\.)"
    r"(?:\s+(?P<after>today|tonight|tomorrow)\b)?"
    r"|\b(?P<day2>today|tonight|tomorrow)\s+at\s+(?P<hour2>\d{1,2})(?::(?P<minute2>\d{2}))?\b"
)
_EN_DAY = re.compile(r"(?i)\b(?:today|tonight|tomorrow)\b")
_EN_OTHER_DAY = re.compile(
    r"(?i)\b(?:day\s+after\s+tomorrow|yesterday|next\s+(?:week|month|year)|daily|weekly"
    r"|every\s+(?:day|morning|afternoon|evening|night|week|month|year|weekday|other|\d+)"
    r"|this\s+(?:week|weekend|month)"
    r"|(?:mon|tues?|wed(?:nes)?|thu(?:rs)?|fri|sat(?:ur)?|sun)(?:day)?|weekend"
    r"|in\s+(?:\d+|a|an|one|two|three)\s+(?:days?|weeks?|months?)"
    r"|jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|jun(?:e)?|jul(?:y)?|aug(?:ust)?"
    r"|sept?(?:ember)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?"
    r"|\d{1,2}(?:st|nd|rd|th)|\d{4}-\d{2}-\d{2}|\d{1,2}/\d{1,2})\b"
)
_EN_ON = re.compile(r"(?i)\s*(?:on\s+)?(?:the\s+)?")
_EN_WHAT = re.compile(r"(?i)\bto\s+(?P<what>.+?)\s*(?:[.!]|$)")

_NO_TIME_ZH = "要我什么时候提醒你？这样说就行：「明天上午10点提醒我交报销」。"
_NO_TIME_EN = (
    'When should I remind you? Say it like "remind me tomorrow at 10am to submit the report".'
)
_PASSED_ZH = "这个时间已经过了。要我什么时候提醒你？比如「明天上午10点提醒我交报销」。"
_PASSED_EN = "That time has already passed. When should I remind you instead?"


def wants_reminder(text: str) -> bool:
    return bool(_ZH_WANTS.search(text) or _EN_WANTS.search(text))


def reminder_reply(text: str, sent_at: float, tz: ZoneInfo, english: bool) -> dict[str, Any] | None:
    """The reply that sets a reminder, the short reply asking for a time, or None when
    the message does not ask to be reminded. A time that cannot be read for certain (a
    weekday, 「明天3点」 without 上午 or 下午, 「晚上2点」) is asked for, never guessed."""
    if not wants_reminder(text):
        return None
    parsed = _read_english(text, sent_at, tz) if english else _read_chinese(text, sent_at, tz)
    if parsed is None:
        return reply(_NO_TIME_EN if english else _NO_TIME_ZH)
    due, what = parsed
    if due <= sent_at:  # 「今天上午8点」 said at nine
        return reply(_PASSED_EN if english else _PASSED_ZH)
    when = say_when(due, sent_at, tz, english)
    if english:
        said = f"OK, I'll remind you {when}" + (f" to {what}." if what else ".")
    else:
        said = f"好的，{when} 提醒你" + (f"{what}。" if what else "。")
    at = datetime.fromtimestamp(due, tz).isoformat()
    return {**reply(said), "reminder": {"at": at, "text": what or said}}


# ------------------------------------------------------------------ Chinese


def _zh_relative(text: str) -> float | None:
    """Seconds from 「…之后」, or None when the text has none."""
    for match in _ZH_RELATIVE.finditer(text):
        hours, half, minutes = match.group("h"), match.group("half"), match.group("m")
        if hours is None and half is None and minutes is None:
            continue  # a bare 以后 (「提醒我以后…」) is no time
        amount = 0.0
        if hours is not None:
            amount += (float(hours) if hours[0].isdigit() else cn_number(hours)) * 3600
        if match.group("hh") or half:
            amount += 1800
        if minutes is not None:
            amount += cn_number(minutes) * 60
        return amount if amount > 0 else None
    return None


def _is_clock(match: re.Match[str], text: str) -> bool:
    """「多喝一点水」 is a quantity, not one o'clock (「一点钟」「下午一点」 are times)."""
    if match.group("hour") != "一" or match.group("day") or match.group("period"):
        return True
    return bool(match.group("minute")) or text[match.end() : match.end() + 1] == "钟"


def _zh_clock(text: str) -> re.Match[str] | None:
    return next((m for m in _ZH_CLOCK.finditer(text) if _is_clock(m, text)), None)


def _read_chinese(text: str, sent_at: float, tz: ZoneInfo) -> tuple[float, str] | None:
    what_match = _ZH_WHAT.search(text)
    what = what_match.group("what") if what_match else ""
    relative = _zh_relative(text)
    if relative is not None:
        return sent_at + relative, _strip(what)
    clock = _zh_clock(text)
    if clock is None:
        return None
    before = text[: clock.start()]
    if _ZH_OTHER_DAY.search(text[: clock.end()]):  # 「大后天」 holds 后天
        return None  # 「下周一10点」: a day we do not count
    day = clock.group("day")
    if day is None and (said := _ZH_DAY.findall(before)):
        day = said[-1]  # 「明天提醒我10点开会」
    hour = cn_number(clock.group("hour"))
    minute_text = clock.group("minute") or ""
    minute = 30 if minute_text == "半" else (cn_number(minute_text) if minute_text else 0)
    implied = "晚上" if day in _EVENING_DAYS else ("早上" if day in ("今早", "明早") else "")
    period = clock.group("period") or implied
    if minute > 59:
        return None
    if period:
        hour24 = _period_hour(period, hour)
        if hour24 is None:
            return None
        return _on_day(sent_at, tz, _DAYS.get(day or ""), hour24, minute), _strip(what)
    due = _bare_hour(sent_at, tz, _DAYS.get(day or ""), hour, minute)
    return None if due is None else (due, _strip(what))


def _period_hour(period: str, hour: int) -> int | None:
    """The hour on a 24-hour clock (24: midnight at the day's end); None when the two
    disagree (「上午15点」) or could mean either night (「晚上2点」)."""
    if period == "凌晨":
        return 0 if hour == 12 else (hour if hour <= 6 else None)
    if period in ("早上", "早晨", "上午"):
        return hour if hour <= 12 else None
    if period == "中午":
        return hour + 12 if hour in (1, 2) else (hour if hour in (11, 12, 13, 14) else None)
    if period in ("下午", "傍晚"):
        return hour + 12 if 1 <= hour <= 11 else (hour if 12 <= hour <= 23 else None)
    # 晚上 (and 今晚, 明晚): 「晚上12点」 is midnight at the end of that day
    if 5 <= hour <= 11:
        return hour + 12
    return 24 if hour == 12 else (hour if 17 <= hour <= 23 else None)


def _bare_hour(
    sent_at: float, tz: ZoneInfo, days: int | None, hour: int, minute: int
) -> float | None:
    """A time of day said without 上午/下午 is read as a waking hour (``WAKING``): 「3点」
    is 15:00, 「10点」 is 10:00, 「8点」 the next of 08:00 and 20:00 — never 03:00 or 22:00,
    which a person says as 凌晨3点 or 晚上10点."""
    if hour > 23:
        return None
    if hour == 0 or hour > 12:
        return _on_day(sent_at, tz, days, hour, minute)
    readings = [h for h in (hour, hour + 12) if WAKING[0] <= h <= WAKING[1]]
    if days is None or days == 0:
        moments = [
            local_day_at(sent_at, tz, day, h, minute)
            for day in ((0, 1) if days is None else (0,))
            for h in readings
        ]
        future = [moment for moment in moments if moment > sent_at]
        return min(future) if future else moments[0]  # 「今天8点」 at nine: passed, said so
    return local_day_at(sent_at, tz, days, readings[0], minute)


# ------------------------------------------------------------------ English


def _en_relative(text: str) -> float | None:
    match = _EN_RELATIVE.search(text)
    if match is None:
        return None
    if match.group("half"):
        return 1800.0
    if match.group("m"):
        return int(match.group("m")) * 60.0
    hours = match.group("h").lower()
    amount = 1.0 if hours in ("a", "an", "one") else float(hours)
    return amount * 3600 + int(match.group("m2") or 0) * 60


def _read_english(text: str, sent_at: float, tz: ZoneInfo) -> tuple[float, str] | None:
    what_match = _EN_WHAT.search(text)
    what = what_match.group("what") if what_match else ""
    relative = _en_relative(text)
    if relative is not None:
        return sent_at + relative, _strip_en(what)
    clock = _EN_CLOCK.search(text)
    if clock is None:
        return None
    before, after = text[: clock.start()], text[clock.end() :]
    after = after[_EN_ON.match(after).end() :]  # type: ignore[union-attr]
    if _EN_OTHER_DAY.search(text[: clock.end()]) or _EN_OTHER_DAY.match(after):
        return None  # "on Monday at 10am", "at 10am next week": not counted here
    day = (clock.group("day") or clock.group("after") or clock.group("day2") or "").lower()
    if not day and (said := _EN_DAY.findall(before)):
        day = said[-1].lower()
    hour = int(clock.group("hour") or clock.group("hour2"))
    minute = int(clock.group("minute") or clock.group("minute2") or 0)
    if minute > 59:
        return None
    days = {"today": 0, "tonight": 0, "tomorrow": 1}.get(day)
    ampm = (clock.group("ampm") or "").lower().replace(".", "")
    if ampm:
        if not 1 <= hour <= 12:
            return None  # "13pm", "0am"
        hour = hour % 12 + (12 if ampm == "pm" else 0)
        return _on_day(sent_at, tz, days, hour, minute), _strip_en(what)
    if day == "tonight":
        hour24 = _period_hour("晚上", hour)
        if hour24 is None:
            return None
        return _on_day(sent_at, tz, 0, hour24, minute), _strip_en(what)
    due = _bare_hour(sent_at, tz, days, hour, minute)
    return None if due is None else (due, _strip_en(what))


def _on_day(sent_at: float, tz: ZoneInfo, days: int | None, hour: int, minute: int) -> float:
    """That time on the named day (hour 24: midnight at its end); without a day, the next
    time the clock shows it."""
    if days is not None:
        return local_day_at(sent_at, tz, days + hour // 24, hour % 24, minute)
    today = local_day_at(sent_at, tz, hour // 24, hour % 24, minute)
    return today if today > sent_at else local_day_at(sent_at, tz, 1, hour % 24, minute)


def _strip(what: str) -> str:
    """The thing to be reminded of, without the time words that may follow 提醒我."""
    timed = _ZH_RELATIVE.sub(lambda m: m.group(0) if _zh_relative(m.group(0)) is None else "", what)
    cleaned = _ZH_CLOCK.sub(lambda m: "" if _is_clock(m, timed) else m.group(0), timed)
    return cleaned.strip(" ，,。.！!").strip()[:200]


def _strip_en(what: str) -> str:
    cleaned = _EN_CLOCK.sub("", _EN_RELATIVE.sub("", what))
    return cleaned.strip(" ,.!").strip()[:200]


def local_day_at(moment: float, tz: ZoneInfo, days: int, hour: int, minute: int) -> float:
    """Epoch seconds of ``hour:minute`` local time, ``days`` after ``moment``'s local day."""
    day = datetime.fromtimestamp(moment, tz).date() + timedelta(days=days)
    return datetime.combine(day, time(hour, minute), tzinfo=tz).timestamp()
