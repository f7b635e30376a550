"""A model's tool calls, in the OpenAI shape, and the messages that answer them.

A completion whose message holds ``tool_calls`` (``finish_reason: "tool_calls"``) asks the
host to run them: each goes to the ``ToolRunner`` and its result goes back as a ``tool``
message — JSON marked as data, never instructions. The provider then asks again, up to
``max_tool_steps`` rounds of calls per answer (the run's budget). The tools are offered in
the OpenAI ``tools`` form (``openai_tools``).
"""

from __future__ import annotations

import json
from typing import Any

from agent.contracts import ToolCall, ToolSpec
from skills.providers.base import ToolRunner


def openai_tools(specs: list[ToolSpec]) -> list[dict[str, Any]]:
    """The specs in the OpenAI ``tools`` form. Function names may not hold dots, so each is
    named with underscores and its description starts with the real name."""
    return [
        {
            "type": "function",
            "function": {
                "name": function_name(spec.name),
                "description": f"{spec.name}: {spec.description}",
                "parameters": spec.parameters,
            },
        }
        for spec in specs
    ]


def function_name(tool: str) -> str:
    """``dingtalk.todo.list`` → ``dingtalk__todo__list`` (OpenAI names: [a-zA-Z0-9_-])."""
    return tool.replace(".", "__")


def tool_name(function: str) -> str:
    return function.replace("__", ".")


def calls_of(data: dict[str, Any]) -> tuple[dict[str, Any], list[ToolCall]] | None:
    """The assistant message and its tool calls, or None when it asks for none."""
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None
    message = choices[0].get("message")
    raw = message.get("tool_calls") if isinstance(message, dict) else None
    if not isinstance(raw, list) or not raw:
        return None
    calls = []
    for index, item in enumerate(raw):
        function = item.get("function") if isinstance(item, dict) else None
        if not isinstance(function, dict):
            continue
        arguments: Any = function.get("arguments") or "{}"
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except json.JSONDecodeError:
                arguments = {"_unreadable": arguments[:200]}
        call_id = item.get("id") if isinstance(item.get("id"), str) else f"call_{index}"
        name = str(function.get("name") or "")
        shaped = arguments if isinstance(arguments, dict) else {"_not_an_object": arguments}
        calls.append(ToolCall(call_id=call_id, name=tool_name(name), arguments=shaped))
    assert isinstance(message, dict)
    return message, calls


async def answered(
    runner: ToolRunner, message: dict[str, Any], calls: list[ToolCall], log: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The assistant's message as given, then one ``tool`` message per call; each call is
    noted in ``log`` (name, ok or its error code, size of the result, time)."""
    replies: list[dict[str, Any]] = [
        {
            "role": "assistant",
            "content": message.get("content"),
            "tool_calls": message["tool_calls"],
        }
    ]
    for call in calls:
        result = await runner.call(call)
        shown = json.dumps(result.for_model(), ensure_ascii=False)
        log.append(
            {
                "tool": call.name,
                "ok": result.ok,
                "error": result.error,
                "result_chars": len(shown),
                "elapsed_ms": result.elapsed_ms,
            }
        )
        replies.append({"role": "tool", "tool_call_id": call.call_id, "content": shown})
    return replies
