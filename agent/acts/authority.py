"""An act's authorization snapshot, taken from trusted facts only.

Who authorizes is the run's origin (the event's sender), never a name in the arguments or
in a tool result; who is touched is read from the object where one exists (a to-do's own
executors, by agent/acts/runner.py), else from the arguments the tool declares as naming
people (executors, attendees: staff ids; an MCP write that declares none may touch anyone);
the risk is the tool's declared one. The five factors of the behaviour
contract come down to one ``impact``:

- ``own``: only the asker, and it can be undone → runs at once;
- ``others``: someone else is an executor or attendee (their list, their calendar: whose
  data and who can see it change) → waits for the asker's approval;
- ``batch``: more than ``BATCH_AT`` people at once → waits;
- ``irreversible``: cannot be undone → waits.
"""

from __future__ import annotations

from typing import Any

from agent.contracts import Authorization, Origin, ToolSpec, canonical_json, sha256_text

BATCH_AT = 5  # more people than this in one act is a batch

# The argument that names who an act touches, per tool (staff ids); absent = the asker.
_AUDIENCE_KEYS = ("executors", "attendees", "user_ids")
# What an act makes or changes, in words, per argument that names it.
_OBJECT_KEYS = ("subject", "summary", "todo_id", "title", "name")


def arguments_hash(arguments: dict[str, Any]) -> str:
    return sha256_text(canonical_json(arguments))


def audience_of(spec: ToolSpec, arguments: dict[str, Any], asker: str) -> list[str]:
    """Everyone any of the tool's people arguments names (all of them: an act cannot hide
    attendees behind executors), or the asker when none does."""
    named: set[str] = set()
    for key in sorted({*_AUDIENCE_KEYS, *(spec.people_args or ())}):
        value = arguments.get(key)
        if isinstance(value, list):
            named.update(str(v) for v in value)
        elif isinstance(value, str) and value.strip():
            named.add(value.strip())
    return sorted(named) if named else [asker]


def object_of(arguments: dict[str, Any]) -> str:
    for key in _OBJECT_KEYS:
        value = arguments.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()[:200]
    return canonical_json(arguments)[:200]


def authorize(
    spec: ToolSpec,
    arguments: dict[str, Any],
    origin: Origin,
    now: float,
    approval_timeout_s: float,
    *,
    audience: list[str] | None = None,
    object_name: str | None = None,
) -> Authorization:
    """The snapshot for ``arguments`` proposed in a run answering ``origin``. ``audience``
    and ``object_name``: what reading the object said (a to-do's executors and subject),
    which wins over anything the arguments say."""
    asker = origin.user_id
    if audience is None:
        audience = audience_of(spec, arguments, asker)
    undeclared = spec.people_args is None and spec.name.startswith("mcp.")
    if not spec.reversible:
        impact = "irreversible"
    elif len(audience) > BATCH_AT:
        impact = "batch"
    elif audience != [asker] or undeclared:
        impact = "others"
    else:
        impact = "own"
    return Authorization(
        authorizer=asker,
        robot_code=origin.robot_code,
        conversation_id=origin.conversation_id,
        tool=spec.name,
        action=spec.label or spec.description,
        object=object_name or object_of(arguments),
        audience=audience,
        audience_undeclared=undeclared,
        arguments_hash=arguments_hash(arguments),
        impact=impact,
        reversible=spec.reversible,
        taken_at=now,
        fresh_until=now + approval_timeout_s,
    )
