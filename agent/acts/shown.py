"""An act as a person reads it: names instead of staff ids, arguments in their language
(no reprs, no JSON escapes), times in the team's time zone.

The approval card, the text prompt, ``dta approvals`` and the console all show an act
through ``readable``; the names come from the directory when the approval is opened
(``ApprovalRecord.names``), never from a model's text.

    readable("dingtalk.todo.create", {"subject": "交报告", "executors": ["u2"],
             "due": "2026-12-04T18:00:00+08:00"}, {"u2": "张三"}, "Asia/Shanghai")
    # [("主题", "交报告"), ("执行人", "张三"), ("截止", "12月4日 周五 18:00")]
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from agent.tools.builtin import WRITES

# argument → (zh, en) label; the order here is the order shown
_LABELS: dict[str, tuple[str, str]] = {
    "subject": ("主题", "Subject"),
    "summary": ("主题", "Title"),
    "todo_id": ("待办", "To-do"),
    "executors": ("执行人", "Assignees"),
    "attendees": ("参加人", "Attendees"),
    "user_ids": ("人员", "People"),
    "start": ("开始", "Starts"),
    "end": ("结束", "Ends"),
    "due": ("截止", "Due"),
    "location": ("地点", "Location"),
    "description": ("说明", "Details"),
}
_TIMES = frozenset({"start", "end", "due"})
_PEOPLE = frozenset({"executors", "attendees", "user_ids"})
_WEEKDAYS_ZH = "一二三四五六日"
_WEEKDAYS_EN = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


def local_time(moment: datetime | float, timezone: str, english: bool = False) -> str:
    """A moment as a colleague says it: 「12月4日 周五 18:00」 in the team's zone."""
    zone = ZoneInfo(timezone)
    if isinstance(moment, int | float):
        local = datetime.fromtimestamp(moment, zone)
    else:
        local = moment.astimezone(zone)
    if english:
        return f"{_WEEKDAYS_EN[local.weekday()]} {local:%b} {local.day}, {local:%H:%M}"
    return f"{local.month}月{local.day}日 周{_WEEKDAYS_ZH[local.weekday()]} {local:%H:%M}"


def person_names(ids: list[str], names: dict[str, str], english: bool = False) -> str:
    """People by name (an id the directory could not name is shown as it is)."""
    joiner = ", " if english else "、"
    return joiner.join(names.get(i) or i for i in ids)


def _value(key: str, value: Any, names: dict[str, str], timezone: str, english: bool) -> str:
    if key in _PEOPLE and isinstance(value, list):
        return person_names([str(v) for v in value], names, english)
    if key in _TIMES and isinstance(value, str):
        try:
            return local_time(datetime.fromisoformat(value), timezone, english)
        except ValueError:
            return value
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return ("、" if not english else ", ").join(value)
    return json.dumps(value, ensure_ascii=False)


def readable(
    tool: str,
    arguments: dict[str, Any],
    names: dict[str, str],
    timezone: str,
    english: bool = False,
    object_name: str | None = None,
) -> list[tuple[str, str]]:
    """The act's arguments as (label, value) lines, known ones first in a fixed order."""
    shown: list[tuple[str, str]] = []
    for key in [*(k for k in _LABELS if k in arguments), *sorted(set(arguments) - set(_LABELS))]:
        label = _LABELS.get(key, (key, key))[1 if english else 0]
        value = arguments[key]
        if key == "todo_id" and object_name:
            value = object_name  # the to-do's subject, read from DingTalk
        shown.append((label, _value(key, value, names, timezone, english)))
    write = WRITES.get(tool)  # the people it names left out: the asker's own (a to-do's)
    own = write.asker_when_absent if write is not None else None
    if own is not None and own not in arguments:
        label = _LABELS.get(own, (own, own))[1 if english else 0]
        shown.append((label, "you" if english else "你自己"))
    return shown


def lines(pairs: list[tuple[str, str]], english: bool = False) -> str:
    colon = ": " if english else "："
    return "\n".join(f"{label}{colon}{value}" for label, value in pairs)
