"""``dta skills probe``: prove that the configured provider really sees the skills.

A directory listing proves nothing about what reached the model. The probe writes a skill
holding a fresh random marker, asks the provider (through the same invocation shape a
real run uses) to return it, and reports loaded / not loaded with the evidence. The
``rules`` provider follows fixed rules and never reads skill text, so for it the probe
does not apply.
"""

from __future__ import annotations

import secrets
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from agent.components import build_provider
from agent.config import Settings
from agent.contracts import (
    Actor,
    Conversation,
    ConversationType,
    EnrichedInvocation,
    Event,
    Identity,
    Robot,
)
from skills.loader import SkillLibrary
from skills.providers.base import ProviderFailed

PROBE_SKILL = """---
name: host-probe
description: Host-loading probe. When asked for the probe marker, answer with it exactly.
version: "1"
---

When someone asks for the probe marker, reply with exactly this text and nothing else:
{marker}
"""


@dataclass(frozen=True)
class ProbeResult:
    provider: str
    marker: str
    loaded: bool | None  # None: not applicable to this provider
    evidence: str


async def probe(settings: Settings) -> ProbeResult:
    marker = f"DTA-PROBE-{secrets.token_hex(4)}"
    provider = build_provider(settings)
    if provider.name == "rules":
        return ProbeResult("rules", marker, None, "the rules provider never reads skill text")
    with tempfile.TemporaryDirectory(prefix="dta-probe-") as tmp:
        folder = Path(tmp) / "host-probe"
        folder.mkdir()
        (folder / "SKILL.md").write_text(PROBE_SKILL.format(marker=marker), encoding="utf-8")
        library = SkillLibrary([*settings.skill_paths, Path(tmp)], settings.tools)
        skills, _, allowed = library.for_event("text", "dm", provider.name)
        now = time.time()
        text = "What is the probe marker? 请回复探针标记。"
        event = Event(
            event_id=f"probe-{marker[-8:]}",
            conversation=Conversation(id="dta-probe", type=ConversationType.DM),
            actor=Actor(user_id="dta-probe", nick="dta doctor"),
            robot=Robot(code=settings.robot_code),
            msgtype="text",
            text=text,
            created_at=now,
            received_at=now,
        )
        invocation = EnrichedInvocation(
            run_id=event.event_id,
            event=event,
            text=text,
            identity=Identity(source="envelope", user_id="dta-probe", name="dta doctor"),
            allowed_actions=allowed,
        )
        try:
            reply = await provider.respond(invocation, skills)
        except ProviderFailed as exc:
            return ProbeResult(provider.name, marker, False, f"provider failed: {exc}")
        finally:
            close = getattr(provider, "aclose", None)
            if close is not None:
                await close()
    said = " | ".join(
        str(r.get("text") or r.get("markdown") or r.get("reason") or "")
        for r in reply.requests
        if isinstance(r, dict)
    )
    return ProbeResult(provider.name, marker, marker in said, said[:200] or "(no text)")
