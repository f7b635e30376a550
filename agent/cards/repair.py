"""The repair round of a streamed card: the answer a refused frame gets instead.

A text answer refused as untrue (``unbacked_claim``, ``deferred_promise``) or too long is
asked for again once (``Answering.repair``). A card shows its answer as it is written, so
the refusal lands mid-stream: the stream is stopped, the provider is asked again — whole,
not streamed, with the refusal's reason in ``EnrichedInvocation.repair`` — and, if that
answer passes the card's final checks, the card is finalized with it. A second refusal
(or no usable answer) leaves the honest plain words, as for text.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agent.contracts import ActionKind, ActionRequest, EnrichedInvocation, Repair, Run
from agent.run.outcome import RunOutcome
from agent.run.refusals import REPAIRABLE
from gates.action import ActionGate, Refusal
from gates.frames import final_check
from skills.providers.base import ProviderReply
from skills.providers.streaming import StreamingProvider

log = logging.getLogger("dta.cards")


@dataclass(frozen=True)
class RepairedAnswer:
    request: ActionRequest  # the reply the card ends with
    reminder_due: float | None
    reply: ProviderReply  # the second round, for its usage and evidence


def _reply_of(reply: ProviderReply) -> Any | None:
    for raw in reply.requests:
        kind = raw.get("kind") if isinstance(raw, dict) else None
        if kind == ActionKind.REPLY.value:
            return raw
    return None


async def repaired_answer(
    provider: StreamingProvider,
    gate: ActionGate,
    invocation: EnrichedInvocation,
    skills: Sequence[Any],
    run: Run,
    refusal: Refusal,
    outcome: RunOutcome,
    now: float,
) -> RepairedAnswer | Refusal | None:
    """The provider's second answer when the refusal is one it can mend and the answer
    passes; its refusal when it does not pass; None when there is no second answer (the
    caller then ends the card with the plain words)."""
    if refusal.reason not in REPAIRABLE or invocation.repair is not None:
        return None
    note = Repair(reason=refusal.reason.value, detail=refusal.detail, previous=[])
    log.info("card answer refused; repair round", extra={"run_id": run.run_id})
    try:
        reply = await provider.respond(invocation.model_copy(update={"repair": note}), skills)
    except Exception:  # a failed second round leaves the honest words, never an open card
        log.warning("repair round failed", extra={"run_id": run.run_id}, exc_info=True)
        return None
    final = _reply_of(reply)
    if final is None:
        return None
    check = final_check(gate, final, run, now, outcome.grounds.sources)
    if check.refusal is not None:
        log.info("repaired card answer refused too", extra={"run_id": run.run_id})
        return check.refusal
    request = ActionRequest.model_validate(final)
    return RepairedAnswer(request, check.reminder_due, reply)
