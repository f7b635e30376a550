"""How the robot speaks, shared by the providers and the runtime's own words (reminders,
follow-ups): which language to answer in, and how a person says when something is.

    is_english("remind me at 5pm")            # True: letters and no Chinese
    say_when(moment, now, ZoneInfo("Asia/Shanghai"))   # "明天 10:00"
"""

from __future__ import annotations

import re
from datetime import datetime
from zoneinfo import ZoneInfo

_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_LEADING_MENTIONS = re.compile(r"^(?:\s*[@＠][^\s@＠]+(?:\s+|$))+")


def clean_text(text: str, agent_name: str = "") -> str:
    """Drop a leftover robot name and other leading @mentions, and surrounding spaces."""
    stripped = text.strip()
    for prefix in (f"@{agent_name}", f"＠{agent_name}"):
        if agent_name and stripped.startswith(prefix):
            stripped = stripped[len(prefix) :]
    return _LEADING_MENTIONS.sub("", stripped).strip()


def is_english(text: str) -> bool:
    """Answer in English only when the message has no Chinese at all but has letters."""
    return not _CJK.search(text) and re.search(r"[A-Za-z]", text) is not None


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


_CN_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6,
              "七": 7, "八": 8, "九": 9}  # fmt: skip


def cn_number(text: str) -> int:
    """Arabic or Chinese numerals up to 99, as times and dates say them (九, 十, 十二,
    二十, 三十五; 0 for what is neither)."""
    if text.isdigit():
        return int(text)
    if "十" in text:
        tens, _, ones = text.partition("十")
        return (_CN_DIGITS.get(tens, 1) if tens else 1) * 10 + _CN_DIGITS.get(ones, 0)
    return _CN_DIGITS.get(text, 0)
