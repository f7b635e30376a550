"""A recurring job in a person's words (pure): 「每周一早上9点把我本周的待办汇总发我」 read as a
cron schedule and an instruction; 「我有哪些定时任务」; 「取消每周汇总」; and the host's words back.

Like 「取消提醒」, these are the host's to honour whichever provider runs: a schedule is read
here, deterministically, in the configured zone, and confirmed back in words with the next
three run times, so a misread is seen at once. What the job then does each time is the
instruction, answered by the provider as if the owner had just asked it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from agent.contracts.jobs import schedule_error
from skills.language import cn_number

_WEEKDAYS = {"一": 1, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6, "日": 0, "天": 0, "七": 0}
_WEEKDAY_NAMES = "日一二三四五六"
_NUM = r"(?:\d{1,2}|[零〇一二两三四五六七八九十]{1,3})"

# 每天 / 每日 / 每个工作日 / 工作日 / 每周一(和周三) / 每周一到周五 / 每月1号 / 每月15日
_DAYS = re.compile(
    r"^(?:请|麻烦)?(?:帮我)?(?:在)?"
    r"(?P<days>每(?:一)?天|每日|每个?工作日|工作日(?:每天)?"
    r"|每(?:个)?(?:周|星期|礼拜)(?P<wd>[一二三四五六日天七])"
    r"(?:(?:到|至|-|~)(?:周|星期|礼拜)?(?P<wd_to>[一二三四五六日天七])"
    r"|(?P<wd_more>(?:[、和,，及](?:周|星期|礼拜)?[一二三四五六日天七])+))?"
    rf"|每(?:个)?月(?P<dom>{_NUM})(?:号|日))"
)
_PART = r"(?P<part>早上|早晨|上午|中午|下午|傍晚|晚上|夜里)?"
_CLOCK = re.compile(
    rf"^\s*{_PART}\s*(?:(?P<h>{_NUM})\s*(?:点|時|时)(?:\s*(?P<half>半)|\s*(?P<m>{_NUM})\s*分?)?"
    r"|(?P<hh>\d{1,2})[:：](?P<mm>\d{2}))"
)
_NAMED_TIMES = (  # a time said by what happens then
    (re.compile(r"^\s*下班(?:前|之前)"), (17, 30)),
    (re.compile(r"^\s*(?:上班(?:前|之前|时)|一早)"), (9, 0)),
)
_EN = re.compile(
    r"^(?:please\s+)?every\s+(?P<days>day|weekday|monday|tuesday|wednesday|thursday|friday"
    r"|saturday|sunday)\s+at\s+(?P<h>\d{1,2})(?::(?P<m>\d{2}))?\s*(?P<ampm>am|pm)?\b",
    re.IGNORECASE,
)
_EN_DAYS = {"monday": "1", "tuesday": "2", "wednesday": "3", "thursday": "4", "friday": "5",
            "saturday": "6", "sunday": "0"}  # fmt: skip

_LIST = re.compile(
    r"^(?:请|麻烦)?(?:帮我)?(?:看看|查看|列出|列一下|看下|看一下)?(?:我(?:的|有)?(?:哪些|什么)?)"
    r"(?:定时任务|定期任务|周期任务|定时提醒)(?:有哪些|都有什么|有什么)?[?？吗呢]*\s*$"
    r"|^(?:查看|列出)(?:定时任务|定期任务)\s*$"
    r"|^(?i:(?:list|show)\s+my\s+(?:jobs|scheduled\s+tasks)|what\s+are\s+my\s+(?:jobs|scheduled"
    r"\s+tasks))[?\s]*$"
)
_CANCEL = re.compile(
    r"^(?:请|麻烦)?(?:帮我)?(?:取消|删除|删掉|停止|停掉|关掉|不用再)(?:掉)?(?P<what>.+?)[\s!！。.~～]*$"
    r"|^(?i:(?:please\s+)?(?:cancel|stop|delete)\s+(?:my\s+|the\s+)?(?P<what_en>.+?)[\s!.]*)$"
)
_JOB_WORDS = re.compile(r"定时任务|定期任务|周期任务|scheduled\s+tasks?|jobs?", re.IGNORECASE)
# 「每天早上9点上班对吗？」 asks about a schedule; it asks for nothing to be done
_QUESTION = re.compile(r"(?:吗|呢|么|对不对|是不是|好不好)?[?？]\s*$|(?:吗|呢)\s*$")
# ... unless it asks for something each time (「告诉我今天有什么会？」)
_ASKS = re.compile(
    r"(?:请|麻烦)?(?:帮我|给我|告诉我|发我|提醒我|通知我|看看|查查?|汇总|总结|列出|统计)"
)
_ORDINAL = re.compile(r"第?\s*(\d{1,2})\s*(?:个|条|号)?")


@dataclass(frozen=True)
class JobWords:
    schedule: str  # cron
    instruction: str


def read_job(text: str) -> JobWords | None:
    """A recurring job in ``text``, or None: 「每…<时间><要做的事>」 / "every … at …"."""
    text = text.strip()
    english = _EN.match(text)
    if english is not None:
        return _english(english, text)
    days = _DAYS.match(text)
    if days is None:
        return None
    rest = text[days.end() :]
    clock = _clock(rest)
    if clock is None:
        return None
    (hour, minute), used = clock
    instruction = rest[used:].lstrip(" ，,、：:").strip()
    if not instruction or hour > 23 or minute > 59:
        return None
    if _QUESTION.search(instruction) and not _ASKS.match(instruction):
        return None
    schedule = f"{minute} {hour} {_day_fields(days)}"
    return None if schedule_error(schedule) else JobWords(schedule, instruction)


def is_list(text: str) -> bool:
    return bool(_LIST.match(text.strip()))


def cancel_words(text: str) -> str | None:
    """What 「取消每周汇总」 wants cancelled (「每周汇总」), or None when it is not a cancel."""
    match = _CANCEL.match(text.strip())
    if match is None:
        return None
    return (match.group("what") or match.group("what_en") or "").strip() or None


def names_jobs(what: str) -> bool:
    """「定时任务」 / "my jobs": all of them, or one by number (「第2个定时任务」)."""
    return bool(_JOB_WORDS.search(what))


def ordinal(what: str) -> int | None:
    match = _ORDINAL.search(_JOB_WORDS.sub("", what))
    return int(match.group(1)) if match else None


def overlap(what: str, job_words: str) -> float:
    """The share of the characters of ``what`` (past the filler) the job's words hold:
    「每周汇总」 names 「每周一 09:00 把我本周的待办汇总发我」 (1.0); 「明天下午的会议」 does not
    name 「每天 09:00 汇总今天的会议」 (0.5), whatever a few shared characters say."""
    filler = set("的我把每个一下那这定时任务吧了")
    said = [ch for ch in dict.fromkeys(what) if ch not in filler and not ch.isspace()]
    if len(said) < 2:
        return 0.0
    return sum(1 for ch in said if ch in job_words) / len(said)


# ---------------------------------------------------------------------- reading the parts


def _clock(rest: str) -> tuple[tuple[int, int], int] | None:
    for pattern, at in _NAMED_TIMES:
        named = pattern.match(rest)
        if named is not None:
            return at, named.end()
    match = _CLOCK.match(rest)
    if match is None:
        return None
    if match.group("hh") is not None:
        hour, minute = int(match.group("hh")), int(match.group("mm"))
    else:
        hour = cn_number(match.group("h"))
        minute = 30 if match.group("half") else cn_number(match.group("m") or "0")
    part = match.group("part")
    if part in ("晚上", "夜里") and hour == 12:
        hour = 0  # 「晚上12点」: midnight
    elif (part in ("下午", "傍晚", "晚上", "夜里") and hour < 12) or (part == "中午" and hour < 6):
        hour += 12
    return (hour, minute), match.end()


def _day_fields(days: re.Match[str]) -> str:
    """The cron fields after minute and hour: day-of-month, month, day-of-week."""
    said = days.group("days")
    if days.group("dom"):
        return f"{cn_number(days.group('dom'))} * *"
    if "工作日" in said:
        return "* * 1-5"
    if days.group("wd"):
        first = _WEEKDAYS[days.group("wd")]
        if days.group("wd_to"):
            last = _WEEKDAYS[days.group("wd_to")] or 7  # 「到周日」: cron's 7, after Saturday
            # 「周五到周一」 runs over the weekend: Friday to Saturday, then Sunday to Monday
            return f"* * {first}-{last}" if first < last else f"* * {first}-6,0-{last % 7}"
        more = [_WEEKDAYS[ch] for ch in days.group("wd_more") or "" if ch in _WEEKDAYS]
        return "* * " + ",".join(str(d) for d in dict.fromkeys([first, *more]))
    return "* * *"


def _english(match: re.Match[str], text: str) -> JobWords | None:
    hour, minute = int(match.group("h")), int(match.group("m") or 0)
    ampm = (match.group("ampm") or "").lower()
    if ampm == "pm" and hour < 12:
        hour += 12
    elif ampm == "am" and hour == 12:
        hour = 0
    instruction = text[match.end() :].lstrip(" ,:;").strip()
    if not instruction or hour > 23 or minute > 59:
        return None
    days = match.group("days").lower()
    dow = {"day": "*", "weekday": "1-5"}.get(days, _EN_DAYS.get(days, "*"))
    return JobWords(f"{minute} {hour} * * {dow}", instruction)


# ---------------------------------------------------------------------- the host's words


def describe(schedule: str, english: bool = False) -> str:
    """A schedule as a person says it (「每周一 09:00」), or the cron itself when unusual."""
    fields = schedule.split()
    if len(fields) != 5 or not (fields[0].isdigit() and fields[1].isdigit()):
        return f"cron {schedule}"
    minute, hour, dom, month, dow = fields
    clock = f"{int(hour):02d}:{int(minute):02d}"
    if month != "*" or (dom != "*" and dow != "*"):
        return f"cron {schedule}"
    if dom != "*":
        return f"monthly on day {dom} at {clock}" if english else f"每月 {dom} 日 {clock}"
    days = _days_of(dow)
    if days is None:
        return f"cron {schedule}"
    if dow == "*" or len(set(days)) == 7:
        return f"every day at {clock}" if english else f"每天 {clock}"
    if days == [1, 2, 3, 4, 5]:
        return f"every weekday at {clock}" if english else f"每个工作日 {clock}"
    if english:
        names = [("Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat")[d] for d in days]
        return f"every {', '.join(names)} at {clock}"
    return "每周" + "、".join("周" + _WEEKDAY_NAMES[d] for d in days)[1:] + f" {clock}"
    return f"cron {schedule}"


def _days_of(dow: str) -> list[int] | None:
    """A day-of-week field as the days it names, in its order (7 is Sunday, as 0)."""
    if dow == "*":
        return list(range(7))
    days: list[int] = []
    for part in dow.split(","):
        first, _, last = part.partition("-")
        if not first.isdigit() or (last and not last.isdigit()):
            return None
        span = range(int(first), int(last or first) + 1)
        days.extend(d % 7 for d in span if 0 <= d <= 7)
    return list(dict.fromkeys(days)) or None


def say_moment(moment: float, tz: ZoneInfo, english: bool = False) -> str:
    local = datetime.fromtimestamp(moment, tz)
    clock = f"{local.hour:02d}:{local.minute:02d}"
    weekday = (local.weekday() + 1) % 7
    if english:
        return local.strftime("%a %b %d ") + clock
    return f"{local.month}月{local.day}日（周{_WEEKDAY_NAMES[weekday]}）{clock}"
