"""What every provider looks like, plus tiny builders for ActionRequest-shaped dicts.

Providers return plain dicts rather than ``ActionRequest`` objects on purpose: the action
gate validates whatever comes back (from rules, a model or an external command) in one
place, so a provider cannot skip validation by handing over an already-built object.
The builders below only ever emit ``kind`` plus the one field the kind needs.

A provider that cannot produce an answer raises ``ProviderFailed`` with a reason; the
pipeline then ends the run honestly (a short "could not process this" reply, or silence
with ``provider_failed`` where replying is not allowed) — never a crash, never a raw dump.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from agent.contracts import ActionKind, EnrichedInvocation, ToolCall, ToolResult, ToolSpec
from skills.loader import Skill


@dataclass
class ProviderReply:
    """What a provider produced: raw requests for the action gate, plus its own accounting."""

    requests: list[Any]
    usage: dict[str, int] = field(default_factory=dict)  # e.g. prompt/completion tokens
    evidence: dict[str, Any] = field(default_factory=dict)  # e.g. repair rounds, stderr tail


class ProviderFailed(Exception):
    """No usable answer (timeout, invalid output after repair, a failing command)."""

    def __init__(
        self,
        reason: str,
        detail: str = "",
        evidence: dict[str, Any] | None = None,
        *,
        reply_on_failure: bool = True,
    ) -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail
        self.evidence = evidence or {}
        # Say a short "could not process this" to the person (where replying is allowed)?
        self.reply_on_failure = reply_on_failure


@runtime_checkable
class Provider(Protocol):
    """Turns one invocation and the selected skills into ActionRequest JSON dicts."""

    name: str

    async def respond(
        self, invocation: EnrichedInvocation, skills: Sequence[Skill]
    ) -> ProviderReply: ...


@runtime_checkable
class ToolRunner(Protocol):
    """What a provider is handed to call tools (the host's side, ``agent/tools/registry.py``:
    it decides what is enabled, runs reads at once and sends every write through the action
    gate; a provider never calls DingTalk itself). ``call`` never raises for a tool's own
    failure: a refused, invalid or failing call is a ``ToolResult`` with ``ok`` false and a
    code."""

    def specs(self) -> list[ToolSpec]: ...

    async def call(self, call: ToolCall) -> ToolResult: ...


def reply(text: str) -> dict[str, Any]:
    return {"kind": ActionKind.REPLY.value, "text": text}


def ask(text: str) -> dict[str, Any]:
    return {"kind": ActionKind.ASK.value, "text": text}


def silence(reason: str) -> dict[str, Any]:
    return {"kind": ActionKind.SILENCE.value, "reason": reason}
