"""What every provider looks like, plus tiny builders for ActionRequest-shaped dicts.

Providers return plain dicts rather than ``ActionRequest`` objects on purpose: the action
gate validates whatever comes back (from rules, a model or an external command) in one
place, so a provider cannot skip validation by handing over an already-built object.
The builders below only ever emit ``kind`` plus the one field the kind needs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from agent.contracts import ActionKind, EnrichedInvocation
from skills.loader import Skill


@runtime_checkable
class Provider(Protocol):
    """Turns one invocation and the selected skills into ActionRequest JSON dicts."""

    name: str

    async def respond(
        self, invocation: EnrichedInvocation, skills: Sequence[Skill]
    ) -> list[dict[str, Any]]: ...


def reply(text: str) -> dict[str, Any]:
    return {"kind": ActionKind.REPLY.value, "text": text}


def ask(text: str) -> dict[str, Any]:
    return {"kind": ActionKind.ASK.value, "text": text}


def silence(reason: str) -> dict[str, Any]:
    return {"kind": ActionKind.SILENCE.value, "reason": reason}
