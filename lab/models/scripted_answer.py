"""What a scripted model's behaviour answers: a reply, a question, or tool calls."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lab.models.scripted_reading import ModelView


@dataclass(frozen=True)
class Calls:
    """An answer that calls tools: (real tool name, arguments) each."""

    calls: list[tuple[str, dict[str, Any]]]


Answer = dict[str, Any] | Calls
Behaviour = Callable[[ModelView], Answer]


def reply(text: str, **extra: Any) -> dict[str, Any]:
    return {"kind": "reply", "text": text, **extra}


def ask(text: str) -> dict[str, Any]:
    return {"kind": "ask", "text": text}
