"""The typed broker: turns an approved intent into attempts and exactly one receipt.

The order is the point. The intent is stored (claiming its idempotency key), then each
Attempt is stored *before* any I/O, then the platform is called, then the attempt and the
receipt are closed together. A crash anywhere leaves a record that start-up reconciles:
an attempt still ``started`` becomes ``uncertain`` and is never resent blindly.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from agent.clock import Clock
from agent.contracts import (
    ActionIntent,
    ActionKind,
    AttachmentReason,
    Attempt,
    AttemptOutcome,
    Channel,
    Evidence,
    Origin,
    Receipt,
    ReceiptStatus,
    RefusalReason,
    Run,
    RunEnding,
    SilentReason,
    new_id,
)
from agent.crashpoints import CrashPoints
from agent.dingtalk.http_pool import Place
from agent.dingtalk.transport import Delivery, DingTalkTransport, OutboundRequest
from agent.run.spacing import SendSpacing
from gates.action import GATE_VERSION
from storage import Store
from storage.patience import patiently

_STATUS_OF = {
    AttemptOutcome.ACCEPTED: ReceiptStatus.ACCEPTED,
    AttemptOutcome.FAILED: ReceiptStatus.FAILED,
    AttemptOutcome.UNCERTAIN: ReceiptStatus.UNCERTAIN,
}


log = logging.getLogger("dta.broker")


@dataclass
class _Sent:
    """What one send came to: its last attempt, the delivery, the channels tried."""

    attempt: Attempt
    delivery: Delivery
    tried: list[Channel]
    retries: int


class Broker:
    def __init__(
        self,
        store: Store,
        transport: DingTalkTransport,
        clock: Clock,
        crash: CrashPoints,
        verify: bool = False,
        spacing: SendSpacing | None = None,
    ) -> None:
        self.store = store
        self.transport = transport
        self.clock = clock
        self.crash = crash
        # One conversation's messages one after another, send_gap_s apart (agent/run/spacing.py).
        self.spacing = spacing or SendSpacing(0.0)
        # Read an accepted OpenAPI send back from DingTalk: "verified" rather than the
        # platform's own "accepted" (one more request per message).
        self.verify = verify

    def webhook_problem(self, target: Origin) -> str | None:
        """Why the target's session webhook cannot be used now (None: it can), as the
        transport would choose; the action gate reads it before each write."""
        return self.transport.webhook_problem(target)

    def receipt(
        self,
        run: Run,
        kind: ActionKind | None,
        status: ReceiptStatus,
        *,
        intent_id: str | None = None,
        reason: str | None = None,
        evidence: Evidence | None = None,
        gate_version: str = GATE_VERSION,
    ) -> Receipt:
        now = self.clock.now()
        return Receipt(
            receipt_id=new_id("rcp"),
            run_id=run.run_id,
            event_id=run.event_id,
            intent_id=intent_id,
            kind=kind,
            status=status,
            reason=reason,
            evidence=evidence or Evidence(),
            gate_version=gate_version,
            skill_snapshot=run.skill_snapshot.digest,
            created_at=now,
            updated_at=now,
        )

    def refuse_duplicate(self, run: Run, intent: ActionIntent) -> Receipt:
        """Another execution claimed the intent's key between the gate and here: a refused
        receipt that names the first one."""
        first = self.store.actions.receipt_for_idempotency_key(intent.idempotency_key)
        receipt = self.receipt(
            run,
            intent.kind,
            ReceiptStatus.REFUSED,
            reason=RefusalReason.DUPLICATE_INTENT.value,
            evidence=Evidence(first_receipt_id=first.receipt_id if first else None),
        )
        self.store.actions.add_receipt(receipt)
        return receipt

    async def execute(
        self,
        run: Run,
        intent: ActionIntent,
        silence_detail: str = "",
        ending: RunEnding | None = None,
        payload: bytes | None = None,
        stored: bool = False,
    ) -> Receipt:
        """Deliver an approved intent: one receipt. ``payload``: the bytes of the attachment
        it carries (uploaded with its attempt). ``stored``: a piece of an answer stored
        with its siblings before the first went (storage/pieces.py); only its attempt is
        recorded here, and only if no execution has tried it yet."""
        channel = self.transport.channel_for_intent(intent) if intent.kind.is_message else None
        if channel is None or channel is Channel.NONE:
            if not stored and not self.store.actions.add_intent(intent):
                return self.refuse_duplicate(run, intent)
            return self._without_channel(run, intent, silence_detail, ending)
        await self.transport.prepare(channel)
        # The conversation's turn, then the pool place, however long they take: only then
        # is the attempt recorded, so a stop (or a takeover) while waiting leaves nothing
        # that may have been sent.
        turn = self.spacing.turn(intent.target.conversation_id)
        async with turn, await self.transport.reserve_place() as place:
            attempt, request = self._attempt(intent, channel, place, payload)
            recorded = (
                self.store.pieces.start_piece(attempt)
                if stored
                else self.store.actions.add_intent(intent, attempt)
            )
            if not recorded:
                return self.refuse_duplicate(run, intent)
            sent = await self._send(run, intent, attempt, request)
        reason = AttachmentReason.UPLOAD_FAILED.value if sent.delivery.upload_failed else None
        return await self._settle(run, intent, sent, ending, reason)

    def _without_channel(
        self, run: Run, intent: ActionIntent, silence_detail: str, ending: RunEnding | None
    ) -> Receipt:
        """A stored intent that sends nothing: a silence, or a message with no channel (the
        webhook expired after the gate looked and there is no OpenAPI to fall to)."""
        if intent.kind is ActionKind.SILENCE:
            receipt = self.receipt(
                run,
                intent.kind,
                ReceiptStatus.SILENT,
                intent_id=intent.intent_id,
                reason=SilentReason.PROVIDER_SILENCE.value,
                evidence=Evidence(detail=silence_detail[:500] or None),
            )
        else:
            reason, detail = None, "no usable channel: webhook expired, no OpenAPI credentials"
            if intent.content is not None and intent.content.attachment is not None:
                reason = AttachmentReason.NO_OPENAPI.value
                detail = (
                    "a file goes by the OpenAPI only (a session webhook cannot carry one)"
                    " and no OpenAPI credentials are configured"
                )
            receipt = self.receipt(
                run,
                intent.kind,
                ReceiptStatus.FAILED,
                intent_id=intent.intent_id,
                reason=reason,
                evidence=Evidence(channels_tried=[Channel.NONE], detail=detail),
            )
        self.store.actions.add_receipt(receipt, ending.apply(run, receipt) if ending else None)
        return receipt

    async def deliver_instead(
        self,
        run: Run,
        intent: ActionIntent,
        ending: RunEnding | None,
        reason: str,
        record: Callable[[Attempt], None],
        tried: list[Channel],
    ) -> Receipt:
        """Deliver an intent that is already stored, on its usual channel, because the form
        it was approved for could not carry it (an AI card); ``reason`` goes on the receipt.
        ``record`` stores the first attempt (with whatever else changed) before any I/O."""
        channel = self.transport.channel_for(intent.target)
        if channel is Channel.NONE:
            receipt = self.receipt(
                run,
                intent.kind,
                ReceiptStatus.FAILED,
                intent_id=intent.intent_id,
                reason=reason,
                evidence=Evidence(channels_tried=[*tried, Channel.NONE], detail="no channel"),
            )
            self.store.actions.add_receipt(receipt, ending.apply(run, receipt) if ending else None)
            return receipt
        await self.transport.prepare(channel)
        turn = self.spacing.turn(intent.target.conversation_id)
        async with turn, await self.transport.reserve_place() as place:
            attempt, request = self._attempt(intent, channel, place)
            record(attempt)
            sent = await self._send(run, intent, attempt, request, tried)
        return await self._settle(run, intent, sent, ending, reason)

    def _attempt(
        self,
        intent: ActionIntent,
        channel: Channel,
        place: Place | None = None,
        payload: bytes | None = None,
    ) -> tuple[Attempt, OutboundRequest]:
        request = self.transport.build_request(intent, channel, payload)
        request.place = place
        attempt = Attempt(
            attempt_id=new_id("att"),
            intent_id=intent.intent_id,
            channel=channel,
            started_at=self.clock.now(),
            request_digest=request.digest,
        )
        return attempt, request

    async def _send(
        self,
        run: Run,
        intent: ActionIntent,
        attempt: Attempt,
        request: OutboundRequest,
        tried_before: list[Channel] | None = None,
    ) -> _Sent:
        """Send on the attempt's channel (its place held); fall back to the OpenAPI only on
        a definite no."""
        tried: list[Channel] = list(tried_before or [])
        retries = 0
        while True:
            channel = attempt.channel
            tried.append(channel)
            self.crash.hit("after_attempt_started")
            try:
                delivery = await self.transport.deliver(request)
            except asyncio.CancelledError:
                if not request.may_have_arrived:  # stopped in a back-off or a token fetch
                    self.store.actions.forget_unsent(intent.intent_id)
                raise
            except Exception as exc:  # the transport classifies what it knows; not this
                log.exception("unexpected failure while sending", extra={"run_id": run.run_id})
                delivery = Delivery(
                    AttemptOutcome.UNCERTAIN,
                    Evidence(error=type(exc).__name__, detail="failed while sending; unknown"),
                )
            self.crash.hit("after_send")
            retries += delivery.evidence.retries
            attempt.outcome = delivery.outcome
            attempt.finished_at = self.clock.now()
            attempt.evidence = delivery.evidence
            fallback = self.transport.openapi_channel(intent.target)
            if not (
                delivery.session_gone
                and channel is Channel.SESSION_WEBHOOK
                and fallback is not Channel.NONE
            ):
                return _Sent(attempt, delivery, tried, retries)
            # DingTalk said the webhook is gone: nothing was delivered, so the OpenAPI may
            # carry the same message. The next attempt is stored before it is sent.
            attempt_next, request = self._attempt(intent, fallback, request.place)
            await patiently(
                lambda done=attempt, then=attempt_next: self.store.actions.finish_attempt(
                    done, start_next=then
                ),
                attempts=None,
            )
            attempt = attempt_next

    async def _settle(
        self,
        run: Run,
        intent: ActionIntent,
        sent: _Sent,
        ending: RunEnding | None,
        reason: str | None = None,
    ) -> Receipt:
        """The receipt for what the send proved (read back first when asked), stored with
        the attempt's end, the outbound index and the run's last state, together."""
        attempt, delivery = sent.attempt, sent.delivery
        evidence = delivery.evidence.model_copy(
            update={"channels_tried": sent.tried, "retries": sent.retries}
        )
        status = _STATUS_OF[delivery.outcome]
        key = evidence.process_query_key
        if self.verify and status is ReceiptStatus.ACCEPTED and key:
            seen = await self.transport.readback(intent.target, attempt.channel, key)
            if seen == "SUCCESS":  # only DingTalk's own "sent" upgrades the receipt
                status = ReceiptStatus.VERIFIED
                evidence = evidence.model_copy(update={"readback": f"sendStatus={seen}"})
        receipt = self.receipt(
            run,
            intent.kind,
            status,
            intent_id=intent.intent_id,
            reason=reason,
            evidence=evidence,
        )
        outbound = None
        if delivery.outcome is not AttemptOutcome.FAILED and intent.content is not None:
            outbound = {
                "intent_id": intent.intent_id,
                "process_query_key": delivery.evidence.process_query_key,
                "conversation_id": intent.target.conversation_id,
                "channel": attempt.channel.value,
                "text": intent.content.text,
                "sent_at": attempt.finished_at,
            }
        # Something may have reached the person: this record outlasts a locked or full
        # store (waited out for as long as it takes; only a stop cancels the wait, and then
        # the open attempt is reconciled as uncertain).
        settled = ending.apply(run, receipt) if ending else None
        await patiently(
            lambda: self.store.actions.finish_delivery(attempt, receipt, outbound, settled),
            attempts=None,
        )
        return receipt

    def reconcile_interrupted(self, event_id: str | None = None) -> list[Receipt]:
        """Attempts an execution left open (it crashed, or the store failed under it) are
        ``uncertain`` — recorded, never resent. All of them at start-up, or one run's
        before it is driven again."""
        receipts = []
        for attempt, intent in self.store.actions.interrupted_attempts(event_id):
            run = self.store.events.get_run(intent.event_id)
            approval_card = intent.content is not None and intent.content.msgtype == "approval"
            if run is None or (attempt.channel is Channel.CARD and not approval_card):
                continue  # a reply card's calls are reconciled with it (CardBroker.recover)
            # the receipt is written in the name of the run that made the attempt (an
            # approval's settlement, whose lease this replica now holds), never fenced on
            # the lease of the run that asked for it — a killed process may still hold that
            run = run.model_copy(update={"run_id": intent.run_id})
            attempt.outcome = AttemptOutcome.UNCERTAIN
            attempt.finished_at = self.clock.now()
            attempt.evidence = Evidence(
                channels_tried=[attempt.channel],
                detail="the runtime stopped during this attempt; delivery unknown",
            )
            receipt = self.receipt(
                run,
                intent.kind,
                ReceiptStatus.UNCERTAIN,
                intent_id=intent.intent_id,
                evidence=attempt.evidence,
            )
            self.store.actions.close_interrupted(attempt, receipt)
            receipts.append(receipt)
        return receipts
