"""A reply that pastes what a tool returned instead of saying it (pure).

A person asked 「张三的待办有哪些」 should read 「张三有两条待办：……」, not
``{"taskId": "t-81", "executorIds": ["manager4521"]}``: field names and staff ids are the
tool's words, meaningless to a colleague and, for ids, not theirs to see. A reply is raw
when it holds a JSON-like fragment whose field names are those of a tool result of this
run, or a staff id of someone a tool returned or the event named (names are said, ids
never).

    result = '{"subject": "交周报", "done": false}'
    raw_output(f"结果：{result}", [result])  # -> "pastes the tool's fields subject, done"
    raw_output("执行人 manager4521", [], ids=("manager4521",))  # -> "shows the staff id …"
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

# a field as JSON, YAML or a Python dict writes it: "name": / 'name': / name=
_FIELD = re.compile(
    r"""["']([A-Za-z_][A-Za-z0-9_]{2,40})["']\s*:|\b([A-Za-z_][A-Za-z0-9_]{2,40})="""
)
MIN_FIELDS = 2  # one field name may be a word the reply uses; two in fields are a paste
MIN_ID_CHARS = 3  # shorter ids are too easily a word


def _keys(value: Any, into: set[str]) -> None:
    if isinstance(value, dict):
        for key, inner in value.items():
            into.add(str(key))
            _keys(inner, into)
    elif isinstance(value, list):
        for inner in value:
            _keys(inner, into)


def result_fields(results: Iterable[str]) -> set[str]:
    """Every field name in the tool results (each a JSON text; others are skipped)."""
    fields: set[str] = set()
    for text in results:
        try:
            _keys(json.loads(text), fields)
        except (ValueError, TypeError):
            continue
    return fields


def raw_output(text: str, results: Sequence[str], ids: Sequence[str] = ()) -> str | None:
    """Why ``text`` reads as a tool's raw output, or None when it says things in words."""
    fields = result_fields(results)
    pasted = []
    for match in _FIELD.finditer(text):
        name = match.group(1) or match.group(2)
        if name in fields and name not in pasted:
            pasted.append(name)
    if len(pasted) >= MIN_FIELDS:
        return f"pastes the tool's fields {', '.join(pasted[:5])}"
    for staff_id in ids:
        # a plain look first: most texts hold no id, and a pattern per id is compiled anew
        # for every sender, past the regex cache
        if len(staff_id) < MIN_ID_CHARS or staff_id not in text:
            continue
        # (an @ before it is how a DingTalk message mentions someone: not a paste)
        if re.search(rf"(?<![A-Za-z0-9_@]){re.escape(staff_id)}(?![A-Za-z0-9_])", text):
            return f"shows the staff id {staff_id}"
    return None
