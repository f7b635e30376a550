"""A lab-only provider that answers chosen messages with exactly what a case scripts.

The ``rules`` provider always produces well-formed, single requests, so it can never show
what the action gate does with a misbehaving model: a request that names a target, two
acks, a reply after silence. A case lists such raw requests under
``fixtures.provider_script`` (msgId -> list of raw requests); every other message is
answered by the normal provider.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from agent.contracts import EnrichedInvocation
from skills.providers.base import Provider, ProviderReply


class ScriptedProvider:
    name = "scripted"

    def __init__(self, script: dict[str, list[Any]], fallback: Provider) -> None:
        self.script = script
        self.fallback = fallback

    async def respond(self, invocation: EnrichedInvocation, skills: Sequence[Any]) -> ProviderReply:
        scripted = self.script.get(invocation.event.event_id)
        if scripted is None:
            return await self.fallback.respond(invocation, skills)
        return ProviderReply(copy.deepcopy(scripted))
