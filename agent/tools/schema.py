"""A call's arguments checked against its tool's JSON schema (the first problem, in words)."""

from __future__ import annotations

from typing import Any

import jsonschema

from agent.contracts import ToolSpec

__all__ = ["argument_problem"]


def argument_problem(spec: ToolSpec, arguments: Any) -> str | None:
    """Why ``arguments`` do not fit the tool's schema (the first problem), or None."""
    validator = jsonschema.Draft202012Validator(spec.parameters)
    error = jsonschema.exceptions.best_match(validator.iter_errors(arguments))
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or "arguments"
    return f"{where}: {error.message}"[:300]
