"""The tools as a model sees them: the OpenAI ``tools`` form, and arguments checked
against each tool's JSON schema (the built-in specs are declared in
``agent.contracts.tools``, where the configuration can check names without this layer)."""

from __future__ import annotations

from typing import Any

import jsonschema

from agent.contracts import ToolSpec
from agent.contracts.tools import BUILTIN, READ_TOOLS

__all__ = [
    "BUILTIN",
    "READ_TOOLS",
    "argument_problem",
    "function_name",
    "openai_tools",
    "tool_name",
]


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


def argument_problem(spec: ToolSpec, arguments: Any) -> str | None:
    """Why ``arguments`` do not fit the tool's schema (the first problem), or None."""
    validator = jsonschema.Draft202012Validator(spec.parameters)
    error = jsonschema.exceptions.best_match(validator.iter_errors(arguments))
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or "arguments"
    return f"{where}: {error.message}"[:300]
