"""The streaming seam: what streams an answer as it is written (``AnswerStream``; the AI
cards of ``agent/cards/stream.py`` are one) and what the run lends it (``StreamHost``).

``agent/run/`` knows only these: the card stream is built in ``agent/components/`` and
handed to the answering step and the pipeline, so the run layer imports nothing of
``agent/cards/``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from agent.contracts import (
    ActionKind,
    ActionRequest,
    EnrichedInvocation,
    Receipt,
    Run,
    RunEnding,
)
from agent.run.outcome import RunOutcome
from skills.providers.base import ProviderReply
from skills.providers.streaming import StreamingProvider

Act = Callable[..., Awaitable[RunOutcome]]


@dataclass(frozen=True)
class StreamHost:
    """What the pipeline lends a streamed answer: its provider, its way of acting on
    requests (``Acting.act``), its ack, its rule for how a run ends, its ack delay."""

    provider: StreamingProvider
    act: Act
    ack: Callable[[], Awaitable[None]]
    ending: Callable[[RunOutcome, ActionKind], RunEnding]
    ack_after_s: float  # from now: what is left of the ack's delay since the message came
    # The provider's places (``max_concurrent_runs``): the answer waits for one.
    slots: asyncio.Semaphore
    # The acting step's handling of an approved answer (``Acting.accept``): its memory
    # candidates and its reminder, exactly as for a text reply.
    accept: Callable[[Run, ActionRequest, float | None], None]
    # The acting step's handling of the finished answer's pictures and files, each a
    # message of its own after the card (``Acting.send_after``), as a text reply's go.
    send_after: Callable[[Run, Any, Receipt, RunOutcome, bool], Awaitable[None]]


class AnswerStream(Protocol):
    """What streams a provider's answer into its delivery form as it is written."""

    def streams(self, provider: object) -> bool:
        """Can this provider's answer be streamed (else it is answered in one piece)?"""
        ...

    async def respond(
        self,
        host: StreamHost,
        run: Run,
        invocation: EnrichedInvocation,
        skills: Sequence[Any],
        outcome: RunOutcome,
    ) -> ProviderReply:
        """The provider's reply, streamed; only what the run still owes is returned."""
        ...

    async def recover(self, event_id: str) -> int:
        """What an earlier, stopped execution of the event left open, settled before it
        runs again; how many were closed."""
        ...
