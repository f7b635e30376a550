"""What each figure pattern's match is worth: its kind, its unit, its value and its step
(for the rules of ``gates/figure_patterns.py``; what is and is not a figure is said in
``gates/figures.py``)."""

from __future__ import annotations

import re
from decimal import Decimal

from gates.figure_numbers import _CN_DIGIT, _number, _small, _unit

MONTH_NAMES = [
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
]  # fmt: skip
MONTH_OF = {name[:3]: i for i, name in enumerate(MONTH_NAMES, 1)}
EN_NUMBER = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20,
    "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "ninety": 90, "hundred": 100,
}  # fmt: skip
# A time's 「3点」 that is a count of points: 「有3点需要注意」.
_POINTS = re.compile(
    r"\s*(?:建议|原因|理由|要求|意见|内容|事项|说明|注意|需要|问题|要点|好处|区别|不同)"
)

Rows = list[tuple[str, str, Decimal, Decimal]]
_ONE = Decimal(1)


def date(y: int, m: int, d: int) -> Rows:
    if not (m <= 12 and d <= 31 and (y == 0 or 1900 <= y <= 2100)) or not (y or m or d):
        return []
    return [("date", "date", Decimal(y * 10000 + m * 100 + d), _ONE)]


def clock(hour: int, minute: int, period: str | None, explicit: bool) -> Rows:
    """A time of day; without 上午/下午/am/pm, 3:00 may be either half of the day."""
    if hour > 24 or minute > 59:
        return []
    if period is not None:
        pm = period.lower().startswith("p") or period in ("中午", "下午", "傍晚", "晚上")
        pm = pm or period in ("夜里", "夜间", "今晚", "明晚")
        if pm and hour < 12 and not (period == "中午" and hour >= 11):
            hour += 12
        elif not pm and hour == 12 and period != "中午":
            hour = 0
    unit = "clock12" if period is None and not explicit and 1 <= hour <= 12 else "clock"
    return [("time", unit, Decimal(hour * 60 + minute), _ONE)]


def measure(number: str, unit: str, half: str | None = None) -> Rows:
    """A number with a unit word (180 美元, 两晚, 3 天半)."""
    parsed = _number(number)
    if parsed is None:
        return []
    value, step = parsed
    kind, canonical = _unit(unit)
    if kind == "count" and number.strip() == "一":
        return []  # 一个问题, 再试一次: an article, not a count someone gave
    if kind == "amount" and unit.startswith("块") and number.strip() == "一":
        return []  # 一块去: together
    return [(kind, canonical, value + (Decimal("0.5") if half else 0), step)]


def skip(_: re.Match[str]) -> Rows:
    return []


def year_of(written: str) -> int:
    """A year in digits or in Chinese digits one by one (二〇二六)."""
    if written.isdigit():
        return int(written)
    return int("".join(str(_CN_DIGIT[c]) for c in written))


def ymd(m: re.Match[str]) -> Rows:
    day = _small(m.group(3)) if m.group(3) else 0
    return date(year_of(m.group(1)), _small(m.group(2)) or 99, 99 if day is None else day)


def year(m: re.Match[str]) -> Rows:
    y = year_of(m.group(1))
    if 1900 <= y <= 2100:
        return date(y, 0, 0)
    return [("duration", "year", Decimal(y), _ONE)]


def month_day(m: re.Match[str]) -> Rows:
    return date(0, _small(m.group(1)) or 99, _small(m.group(2)) or 99)


def day(m: re.Match[str]) -> Rows:
    return date(0, 0, _small(m.group(1)) or 99)


def month(m: re.Match[str]) -> Rows:
    if m.group(1) == "两":  # 两月: two months, never February
        return [("duration", "month", Decimal(2), _ONE)]
    return date(0, _small(m.group(1)) or 99, 0)


def slash(m: re.Match[str]) -> Rows:
    return date(0, int(m.group(1)) or 99, int(m.group(2)) or 99)


def english_date(m: re.Match[str]) -> Rows:
    """Dec 5, 2026 · 5 December 2026 · December 2026 (named groups: the rules differ)."""
    found = m.groupdict()
    month = MONTH_OF[found["month"].rstrip(".")[:3]]
    return date(int(found.get("year") or 0), month, int(found.get("day") or 0))


def colon_time(m: re.Match[str]) -> Rows:
    period = m.group(1) or m.group(4)
    hour = m.group(2)
    return clock(int(hour), int(m.group(3)), period, hour.startswith("0") or int(hour) > 12)


def ampm_time(m: re.Match[str]) -> Rows:
    return clock(int(m.group(2)), 0, m.group(3), True)


def cn_time(m: re.Match[str]) -> Rows:
    """下午3点, 15点30分, 三点半, 9点整."""
    period, after = m.group("period"), m.group("after")
    minute_written = m.group("minute") or m.group("minute2")
    said = period is not None or after is not None or minute_written is not None
    # 两点/一点 alone are points or "a little"; 3点 before 需要注意 is a count of points.
    if not said and (m.group("digits") is None or _POINTS.match(m.string, m.end())):
        return []
    hour = _small(m.group("digits") or m.group("cn"))
    minute = {"半": 30, "一刻": 15, "三刻": 45}.get(after or "")
    if minute is None:
        minute = _small(minute_written or "") or 0
    return [] if hour is None else clock(hour, minute, period, hour > 12)


def span(m: re.Match[str]) -> Rows:
    """Two figures of one unit: 3-5 天, 100~200 元."""
    return measure(m.group(1), m.group(3)) + measure(m.group(2), m.group(3))


def prefixed(m: re.Match[str]) -> Rows:
    parsed = _number(m.group(2) + (m.group(3) or ""))
    if parsed is None:
        return []
    return [("amount", _unit(m.group(1))[1], *parsed)]


def with_unit(m: re.Match[str]) -> Rows:
    return measure(m.group(1), m.group(2), m.group(3) if m.re.groups >= 3 else None)


def per_cent_cn(m: re.Match[str]) -> Rows:
    """百分之十五 (15%), 百分之15, 百分之十五点五 (15.5%), 千分之五 (0.5%)."""
    whole, _, decimals = m.group(2).partition("点")
    parsed = _number(whole)
    if parsed is None or not all(c in _CN_DIGIT or c.isdigit() for c in decimals):
        return []
    fraction = "".join(c if c.isdigit() else str(_CN_DIGIT[c]) for c in decimals)
    value = parsed[0] + (Decimal("0." + fraction) if fraction else 0)
    step = Decimal(1).scaleb(-len(fraction))
    if m.group(1) == "千分之":
        value, step = value / 10, step / 10
    return [("percent", "percent", value, step)]


def discount(m: re.Match[str]) -> Rows:
    """八折 (80% of the price), 8.5折, 九五折 (95%)."""
    written = m.group(1) or m.group(2)
    if written[0].isdigit():
        value = Decimal(written) * 10
    elif len(written) == 1:
        value = Decimal(_CN_DIGIT[written] * 10)
    else:
        value = Decimal(_CN_DIGIT[written[0]] * 10 + _CN_DIGIT[written[1]])
    return [("percent", "percent", value, _ONE)]


def half(m: re.Match[str]) -> Rows:
    """半小时 (0.5 hour), 一个半小时 (1.5), 两个半月 (2.5 month)."""
    whole = _number(m.group(1)) if m.group(1) else (Decimal(0), _ONE)
    if whole is None:
        return []
    kind, unit = _unit(m.group(2))
    return [(kind, unit, whole[0] + Decimal("0.5"), _ONE)]


def english_words(m: re.Match[str]) -> Rows:
    value = EN_NUMBER[m.group(1).lower()]
    kind, unit = _unit(m.group(2))
    if value == 1 and kind == "count":
        return []
    return [(kind, unit, Decimal(value), _ONE)]


def english_half(m: re.Match[str]) -> Rows:
    return [("duration", _unit(m.group(1))[1], Decimal("0.5"), _ONE)]


def bare(m: re.Match[str]) -> Rows:
    written = m.group(0)
    # A Chinese numeral with no unit is a word (一些, 万一, 十分, 千万不要) unless it is
    # plainly a large number (三万).
    word = written[0] not in "一二两三四五六七八九" or not any(c in "百千万亿" for c in written)
    if not written[0].isdigit() and word:
        return []
    parsed = _number(written)
    return [] if parsed is None else [("number", "", *parsed)]
