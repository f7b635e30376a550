"""An ask-user form's answer, checked: the values a card's submit carried, or the asker's
numbered text reply, read against the form's fields (``FormSpec``) into typed values — or
the first problem, in words the asker reads (which field is missing or wrong).

Pure: the callback's raw values and the person's words in, ``FormCheck`` out. Nothing here
trusts a value's shape: a card may send a string, a list of strings or ``{"value": …}``
(``../shared/dingtalk-knowledge-and-forms-apis.md`` §3.1); a key the form never asked for
is refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

from agent.contracts import FormField, FormSpec, FormValue

MAX_TEXT_CHARS = 500
_NUMBER = re.compile(r"^[+-]?(?:\d+(?:\.\d*)?|\.\d+)$")
_DATE = re.compile(r"^(\d{4})\s*[-/.年]\s*(\d{1,2})\s*[-/.月]\s*(\d{1,2})\s*日?$")
_NUMBERED = re.compile(r"^\s*(\d{1,2})\s*[.、．:：)）]\s*(.*)$")
_SPLIT = re.compile(r"\s*[,，、;；/]\s*")


@dataclass(frozen=True)
class FormCheck:
    """The typed values, or the problems by field name (the first is what is said)."""

    values: dict[str, FormValue] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems

    def said(self, english: bool = False) -> str:
        """One line: the first problem (and how many more)."""
        if not self.problems:
            return ""
        first = next(iter(self.problems.values()))
        more = len(self.problems) - 1
        if not more:
            return first
        return f"{first} (and {more} more)" if english else f"{first}（另有 {more} 处）"


def check_values(spec: FormSpec, raw: dict[str, Any], english: bool = False) -> FormCheck:
    """A card's submitted values against the form: every required field present, each value
    of its field's type, a choice among the options offered, no key the form did not ask."""
    values: dict[str, FormValue] = {}
    problems: dict[str, str] = {}
    for key in raw:
        if spec.field(str(key)) is None:
            problems[str(key)] = f"Unknown field: {key}" if english else f"表单没有这一项：{key}"
    for item in spec.fields:
        value, problem = typed(item, raw.get(item.name), english)
        if problem is not None:
            problems[item.name] = problem
        elif value is not None:
            values[item.name] = value
    return FormCheck(values, problems)


def typed(item: FormField, raw: Any, english: bool = False) -> tuple[FormValue | None, str | None]:
    """One field's value in its type (None when left empty), or the problem with it."""
    raw = _unwrapped(raw)
    if _empty(raw):
        if item.required:
            return None, f"{item.label}: required" if english else f"「{item.label}」是必填项"
        return None, None
    if item.type == "number":
        return _number(item, raw, english)
    if item.type == "date":
        return _date(item, raw, english)
    if item.type in ("single", "multi"):
        return _choice(item, raw, english)
    if isinstance(raw, list):
        raw = " ".join(str(v) for v in raw)
    text = str(raw).strip()
    if len(text) > MAX_TEXT_CHARS:
        return None, _wrong(item, f"at most {MAX_TEXT_CHARS} characters", english)
    return text, None


def _unwrapped(raw: Any) -> Any:
    """``{"value": …}`` (a select's shape, maybe with its ``index``) as its value."""
    if isinstance(raw, dict) and "value" in raw:
        return raw["value"]
    return raw


def _empty(raw: Any) -> bool:
    if raw is None:
        return True
    if isinstance(raw, str):
        return not raw.strip()
    return isinstance(raw, list | dict) and not raw


def _wrong(item: FormField, what: str, english: bool) -> str:
    return f"{item.label}: {what}" if english else f"「{item.label}」{what}"


def _number(item: FormField, raw: Any, english: bool) -> tuple[FormValue | None, str | None]:
    if isinstance(raw, bool | list | dict):
        return None, _wrong(item, "must be a number" if english else "须为数字", english)
    text = str(raw).strip().replace(",", "").replace("，", "")
    if not _NUMBER.match(text):
        return None, _wrong(item, "must be a number" if english else "须为数字", english)
    number = float(text)
    return (int(number) if number.is_integer() else number), None


def _date(item: FormField, raw: Any, english: bool) -> tuple[FormValue | None, str | None]:
    """ISO (2025-01-31), 2025/1/31, 2025年1月31日, or epoch milliseconds (a date picker)."""
    said = "must be a date like 2025-01-31" if english else "须为日期，如 2025-01-31"
    wrong = _wrong(item, said, english)
    millis = isinstance(raw, int | float) and not isinstance(raw, bool)
    if millis or (str(raw).isdigit() and len(str(raw)) >= 11):
        try:
            day = datetime.fromtimestamp(float(raw) / 1000, tz=UTC).date()
        except (OverflowError, OSError, ValueError):
            return None, wrong
        return day.isoformat(), None
    found = _DATE.match(str(raw).strip())
    if found is None:
        return None, wrong
    try:
        return date(*(int(g) for g in found.groups())).isoformat(), None
    except ValueError:
        return None, wrong


def _choice(item: FormField, raw: Any, english: bool) -> tuple[FormValue | None, str | None]:
    """Options by value or by their text; a multi takes a list or a comma-separated line."""
    if isinstance(raw, list):
        picked = [str(_unwrapped(v)).strip() for v in raw]
    elif item.type == "multi":
        picked = [p for p in _SPLIT.split(str(raw).strip()) if p]
    else:
        picked = [str(raw).strip()]
    by_text = {o.text: o.value for o in item.options}
    offered = {o.value for o in item.options}
    chosen: list[str] = []
    for one in picked:
        value = one if one in offered else by_text.get(one)
        if value is None:
            said = f"has no option {one!r}" if english else f"没有「{one}」这个选项"
            return None, _wrong(item, said, english)
        if value not in chosen:
            chosen.append(value)
    if item.type == "single":
        if len(chosen) != 1:
            return None, _wrong(item, "takes one option" if english else "只能选一项", english)
        return chosen[0], None
    return chosen, None


def parse_reply(spec: FormSpec, text: str, english: bool = False) -> FormCheck:
    """The asker's text reply to a numbered form: numbered lines (「1. 张三」) matched to
    the fields by number, or, without numbers, one line per field in order."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    numbered: dict[int, str] = {}
    for line in lines:
        found = _NUMBERED.match(line)
        if found is not None:
            numbered[int(found.group(1))] = found.group(2)
    raw: dict[str, Any] = {}
    if numbered:
        for number, item in enumerate(spec.fields, start=1):
            raw[item.name] = _after_label(item, numbered.get(number, ""))
    else:
        for item, line in zip(spec.fields, lines, strict=False):
            raw[item.name] = _after_label(item, line)
    return check_values(spec, raw, english)


def _after_label(item: FormField, line: str) -> str:
    """A line that repeats its label (「姓名：张三」) read as its value only."""
    line = line.strip()
    for sep in ("：", ":"):
        head, found, rest = line.partition(sep)
        if found and head.strip().removesuffix("（必填）").strip() == item.label:
            return rest.strip()
    return line


def in_english(text: str) -> bool:
    """Words with no Chinese in them: the form is told in English."""
    return bool(text.strip()) and not re.search(r"[\u4e00-\u9fff]", text)


def prompt_lines(spec: FormSpec, english: bool = False) -> str:
    """The form as a numbered text question (where no form card is configured)."""
    head = (
        "Please reply with the following, one per line:"
        if english
        else "请回复以下内容（每行一项）："
    )
    rows = [head]
    for number, item in enumerate(spec.fields, start=1):
        rows.append(f"{number}. {item.label}{_hint(item, english)}")
    return "\n".join(rows)


def _hint(item: FormField, english: bool) -> str:
    notes = []
    if item.required:
        notes.append("required" if english else "必填")
    if item.type == "number":
        notes.append("a number" if english else "数字")
    elif item.type == "date":
        notes.append("a date, e.g. 2025-01-31" if english else "日期，如 2025-01-31")
    elif item.type in ("single", "multi"):
        options = "/".join(o.text for o in item.options)
        several = item.type == "multi"
        notes.append(
            (f"{'any' if several else 'one'} of {options}")
            if english
            else (f"{'可多选' if several else '选一项'}：{options}")
        )
    if not notes:
        return ""
    return f" ({'; '.join(notes)})" if english else f"（{'；'.join(notes)}）"
