"""Numbers and units as written in an answer: Chinese numerals, magnitudes, the units an
amount, count or duration is given in (for ``gates/figures.py``)."""

from __future__ import annotations

import re
from decimal import Decimal

# ---------------------------------------------------------------------------- numbers

_CN_DIGIT = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5}
_CN_DIGIT |= {"六": 6, "七": 7, "八": 8, "九": 9}
_CN_SMALL = {"十": 10, "百": 100, "千": 1000}
_CN_LARGE = {"万": 10**4, "亿": 10**8}
_CN_CHARS = "".join(_CN_DIGIT) + "".join(_CN_SMALL) + "".join(_CN_LARGE)
_MAGNITUDE = {"千万": 10**7, "百万": 10**6, "万": 10**4, "亿": 10**8, "千": 1000, "百": 100}
_MAGNITUDE |= {"k": 1000, "thousand": 1000, "million": 10**6, "billion": 10**9}


def _cn(numeral: str) -> Decimal | None:
    """A Chinese numeral's value: 十五 15, 三百 300, 一百零五 105, 一千五 1500, 两万五 25000.
    Two digits in a row (三四, 一一) are an approximation or a digit string, not a number."""
    if all(c in _CN_DIGIT for c in numeral):
        return Decimal(_CN_DIGIT[numeral]) if len(numeral) == 1 else None
    total, section, digit, last, zero = 0, 0, None, 1, False
    for c in numeral:
        if c in "零〇":
            zero = True
        elif c in _CN_DIGIT:
            if digit is not None:
                return None
            digit = _CN_DIGIT[c]
        elif c in _CN_SMALL:
            section += (1 if digit is None else digit) * _CN_SMALL[c]
            digit, last, zero = None, _CN_SMALL[c], False
        else:
            section += digit or 0
            if section == 0 and total == 0:
                return None  # 万 alone
            total += section * _CN_LARGE[c]
            section, digit, last, zero = 0, None, _CN_LARGE[c], False
    if digit is not None:
        # 一千五 is 1500 and 两万五 25000: a digit after a unit counts in the next unit down.
        section += digit * last // 10 if last > 1 and not zero else digit
    return Decimal(total + section)


_DIGITS_MAG = re.compile(
    r"([0-9][0-9,]*(?:\.[0-9]+)?)\s*(千万|百万|万|亿|千|百|[kK]|thousand|million|billion)?"
)


def _number(written: str) -> tuple[Decimal, Decimal] | None:
    """The value of a number as written (3,000 · 1.5万 · 5k · 三百) and its precision."""
    written = written.strip()
    digits = _DIGITS_MAG.fullmatch(written)
    if digits is None:
        value = _cn(written)
        return None if value is None else (value, Decimal(1))
    number = Decimal(digits.group(1).replace(",", ""))
    scale = Decimal(_MAGNITUDE[(digits.group(2) or "").lower()] if digits.group(2) else 1)
    decimals = len(digits.group(1).partition(".")[2])
    return number * scale, Decimal(1).scaleb(-decimals) * scale


def _small(written: str) -> int | None:
    """A month, day or hour as written in digits or a Chinese numeral, or None."""
    parsed = _number(written) if written else None
    if parsed is None or parsed[0] != parsed[0].to_integral_value():
        return None
    return int(parsed[0])


# ---------------------------------------------------------------------------- units

_UNIT_WORDS = {
    ("amount", "USD"): "美元 美金 usd dollar dollars bucks $ us$",
    ("amount", "CNY"): "元 块 块钱 圆 人民币 元人民币 cny rmb yuan ¥ ￥",
    ("amount", "EUR"): "欧元 eur euro euros €",
    ("amount", "GBP"): "英镑 gbp £",
    ("amount", "HKD"): "港币 港元 hkd hk$",
    ("amount", "JPY"): "日元 円 jpy yen",
    ("percent", "percent"): "% percent per_cent pct 个百分点",
    ("duration", "workday"): "工作日 business_day business_days working_day working_days",
    ("duration", "hour"): "小时 钟头 h hr hrs hour hours",
    ("duration", "minute"): "分钟 min mins minute minutes",
    ("duration", "second"): "秒 秒钟 sec secs second seconds",
    ("duration", "day"): "天 日 day days",
    ("duration", "week"): "周 星期 礼拜 week weeks",
    ("duration", "month"): "月 个月 month months",
    ("duration", "year"): "年 year years yr yrs",
    ("count", "person"): "人 位 名 个人 people person persons pax guest guests",
    ("count", "person-time"): "人次",
    ("count", "times"): "次 回 遍 times",
    ("count", "night"): "晚 夜 间夜 night nights",
    ("count", "item"): "个 item items",
    ("count", "floor"): "楼 层 floor floors",
    ("count", "age"): "岁 周岁",
    ("count", "employee"): "employee employees member members",
}
_UNITS = {
    word.replace("_", " "): kind_unit
    for kind_unit, words in _UNIT_WORDS.items()
    for word in words.split()
}
# Durations that convert exactly compare in one measure: 2 小时 is 120 分钟, 1 周 is 7 天.
_SECONDS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400, "week": 604800}
_MONTHS = {"month": 1, "year": 12}


def _unit(word: str) -> tuple[str, str]:
    """(kind, canonical unit) of a unit word; a counter not in the table (项, 张) is its own
    unit."""
    key = re.sub(r"\s+", " ", word.strip()).lower()
    if key in _UNITS:
        return _UNITS[key]
    if key.startswith("个") and key[1:] in _UNITS:
        return _UNITS[key[1:]]
    return "count", key
