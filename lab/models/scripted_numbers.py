"""The numbers the lab's scripted models read: Arabic and Chinese numbers, dates, times
and durations relative to ``now``, and plain arithmetic worked out exactly."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal, InvalidOperation

# ----------------------------------------------------------------------------- time

_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7}
_DIGITS |= {"八": 8, "九": 9}
_WEEKDAYS = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}
NUMBER = r"\d+|[零〇一二两三四五六七八九十]+"


def number(text: str) -> int | None:
    """An Arabic or Chinese number up to 99."""
    if text.isdigit():
        return int(text)
    if text and all(c in _DIGITS or c == "十" for c in text):
        if "十" not in text:
            return _DIGITS[text[-1]] if len(text) == 1 else None
        tens, _, ones = text.partition("十")
        return (_DIGITS.get(tens, 1) if tens else 1) * 10 + (_DIGITS.get(ones, 0) if ones else 0)
    return None


_DAY = re.compile(
    rf"(?P<rel>今天|明天|后天|大后天)|(?P<next>下个?)?(?:周|星期|礼拜)(?P<wd>[一二三四五六日天])"
    rf"|(?:(?P<month>{NUMBER})月)?(?P<mday>{NUMBER})[日号]"
)
_CLOCK = re.compile(
    rf"(?P<part>上午|早上|中午|下午|晚上|傍晚)?\s*(?P<hour>{NUMBER})\s*(?:[点时:：]\s*"
    rf"(?P<minute>半|{NUMBER}(?:分)?)?)"
)


@dataclass(frozen=True)
class When:
    moment: datetime
    span: tuple[int, int]  # where the text says it


def _day(text: str, now: datetime) -> tuple[datetime, tuple[int, int]] | None:
    found = _DAY.search(text)
    if found is None:
        return None
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    if found.group("rel"):
        shift = {"今天": 0, "明天": 1, "后天": 2, "大后天": 3}[found.group("rel")]
        return today + timedelta(days=shift), found.span()
    if found.group("wd"):
        ahead = (_WEEKDAYS[found.group("wd")] - today.weekday()) % 7
        if found.group("next"):
            ahead = 7 - today.weekday() + _WEEKDAYS[found.group("wd")]
        return today + timedelta(days=ahead), found.span()
    month = number(found.group("month")) if found.group("month") else today.month
    day = number(found.group("mday"))
    if not month or not day or not (1 <= month <= 12 and 1 <= day <= 31):
        return None
    try:
        moment = today.replace(month=month, day=day)
    except ValueError:
        return None
    if moment < today:
        moment = moment.replace(year=moment.year + 1)
    return moment, found.span()


def when(text: str, now: datetime | None) -> When | None:
    """A day and a time of day the text gives, relative to ``now``; None without a time of
    day (a day alone is not a time to meet or to be reminded at)."""
    if now is None:
        return None
    clock = _CLOCK.search(text)
    hour = number(clock.group("hour")) if clock else None
    if clock is None or hour is None or hour > 24:
        return None
    minute_text = clock.group("minute") or ""
    minute = 30 if minute_text == "半" else number(minute_text.rstrip("分")) or 0
    part = clock.group("part") or ""
    if part in {"下午", "晚上", "傍晚"} and hour < 12:
        hour += 12
    if part == "中午" and hour < 6:
        hour += 12
    found = _day(text, now)
    day, span = found if found else (now.replace(hour=0, minute=0, second=0, microsecond=0), None)
    moment = day.replace(hour=hour % 24, minute=min(minute, 59))
    if found is None and moment <= now:
        moment += timedelta(days=1)
    start = min(span[0], clock.start()) if span else clock.start()
    end = max(span[1], clock.end()) if span else clock.end()
    if text[end : end + 1] in {"前", "之"}:
        end += 2 if text[end : end + 2] == "之前" else 1
    return When(moment, (start, end))


def duration(text: str) -> timedelta | None:
    if "半小时" in text or "半个小时" in text:
        return timedelta(minutes=30)
    found = re.search(rf"({NUMBER})\s*(?:个)?(小时|分钟)", text)
    if found is None:
        return None
    amount = number(found.group(1)) or 0
    return timedelta(hours=amount) if found.group(2) == "小时" else timedelta(minutes=amount)


def iso(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds")


# ----------------------------------------------------------------------------- arithmetic

_OPERATORS = {"+": "+", "＋": "+", "加": "+", "-": "-", "－": "-", "减": "-", "减去": "-"}
_OPERATORS |= {"×": "*", "x": "*", "X": "*", "*": "*", "乘": "*", "乘以": "*"}
_OPERATORS |= {"÷": "/", "/": "/", "除以": "/"}
_EXPRESSION = re.compile(
    r"\(?\s*\d+(?:\.\d+)?(?:\s*(?:乘以|除以|减去|[+＋\-－×xX*÷/加减乘])\s*\(?\s*\d+(?:\.\d+)?\s*\)?)+"
)


def arithmetic(text: str) -> tuple[str, Decimal] | None:
    """The first expression of numbers and operators in the text and its exact value."""
    found = _EXPRESSION.search(text)
    if found is None:
        return None
    shown = found.group(0).strip()
    tokens = re.findall(r"\d+(?:\.\d+)?|乘以|除以|减去|[+＋\-－×xX*÷/加减乘()]", shown)
    try:
        return shown, _evaluate([_OPERATORS.get(t, t) for t in tokens])
    except (InvalidOperation, ZeroDivisionError, IndexError, ValueError):
        return None


def _evaluate(tokens: list[str]) -> Decimal:
    """Numbers with + - * / and brackets, the usual precedence, in exact decimals."""
    position = 0

    def atom() -> Decimal:
        nonlocal position
        token = tokens[position]
        position += 1
        if token == "(":
            value = sum_()
            position += 1  # the closing bracket
            return value
        return Decimal(token)

    def product() -> Decimal:
        nonlocal position
        value = atom()
        while position < len(tokens) and tokens[position] in {"*", "/"}:
            operator = tokens[position]
            position += 1
            value = value * atom() if operator == "*" else value / atom()
        return value

    def sum_() -> Decimal:
        nonlocal position
        value = product()
        while position < len(tokens) and tokens[position] in {"+", "-"}:
            operator = tokens[position]
            position += 1
            value = value + product() if operator == "+" else value - product()
        return value

    value = sum_()
    if position != len(tokens):
        raise ValueError("tokens left over")
    return value


def plain_number(value: Decimal) -> str:
    text = f"{value.quantize(Decimal('0.0001')).normalize():f}"
    return text
