"""The form card: an ``ask`` with a ``form``, as one card its asker fills in and submits.

The template (``form_card_template_id``) is the operator's; its contract
(``../shared/dingtalk-knowledge-and-forms-apis.md`` §3.1–3.3) is:

- variables (all strings): ``question`` (the ask's words), ``form`` (a ``form`` variable,
  JSON-encoded: ``{"fields": [{name, label, type, required, options[{value, text}]}]}``
  with types ``TEXT``, ``NUMBER``, ``DATE``, ``SELECT``, ``MULTI_SELECT``), ``card_status``
  (pending | submitted | expired | cancelled: the Form shows only while pending),
  ``expires``, ``msg_id``; private ``form_notice`` and ``form_error`` for the presser;
- the Form's submit a "回传请求" with the param ``form``, a cancel button with
  ``user_cancel = "true"``, and ``callbackType: STREAM`` so both come back over the Stream
  connection (``agent/acts/forms.py`` decides them).

The card's ``outTrackId`` is the form's id. It goes out like any message — stored intent,
stored attempt, one create, one receipt — after the form's row (``Acting.accept``). A card
DingTalk refuses is asked in words instead: the numbered question, answered by a reply.
"""

from __future__ import annotations

import json
import logging

from agent.acts.card_create import CardDeliveries
from agent.acts.forms import CARD_STATUS
from agent.acts.shown import local_time
from agent.cards.api import open_space_id
from agent.contracts import (
    ActionIntent,
    Attempt,
    Channel,
    Evidence,
    FormRecord,
    FormSpec,
    MessageContent,
    Receipt,
    ReceiptStatus,
    Run,
    RunEnding,
    form_id_for,
)
from gates.action_case import LABEL_GAP, words_of
from gates.form_values import prompt_lines

log = logging.getLogger("dta.forms")

_TYPES = {
    "text": "TEXT",
    "number": "NUMBER",
    "date": "DATE",
    "single": "SELECT",
    "multi": "MULTI_SELECT",
}


def card_form(spec: FormSpec) -> str:
    """The template's ``form`` variable, JSON-encoded (``cardParamMap`` takes strings)."""
    fields = [
        {
            "name": item.name,
            "label": item.label,
            "type": _TYPES[item.type],
            "required": item.required,
            **({"options": [o.model_dump() for o in item.options]} if item.options else {}),
            **({"placeholder": item.placeholder} if item.placeholder else {}),
        }
        for item in spec.fields
    ]
    return json.dumps({"fields": fields}, ensure_ascii=False)


class FormCards(CardDeliveries):
    """Delivers asks with a form as form cards (``Acting.deliver``) and shows their end."""

    def params(self, record: FormRecord, question: str) -> dict[str, str]:
        return {
            "question": question,
            "form": card_form(record.spec),
            CARD_STATUS: "pending",
            "expires": local_time(record.expires_at, self.timezone, record.english),
            "msg_id": record.event_id,
        }

    async def deliver(self, run: Run, intent: ActionIntent, ending: RunEnding | None) -> Receipt:
        record = self.store.forms.get_form(form_id_for(intent.event_id))
        space = open_space_id(intent.target)
        if record is None or space is None or intent.content is None:
            detail = "no such form" if record is None else "no card space for this sender"
            return self.closed(
                run, intent, None, ReceiptStatus.FAILED, Evidence(detail=detail), ending
            )
        body = self.api.create_body(record.form_id, intent.target, space)
        body["cardData"] = {"cardParamMap": self.params(record, intent.content.text)}
        track = record.form_id
        created = await self.create_once(
            run, intent, body, track, lambda: self.store.forms.set_form_asked(track, track, "card")
        )
        if isinstance(created, Receipt):
            return created
        if created.status is ReceiptStatus.FAILED:
            reason = created.answer.reason.value
            return await self._in_words(run, intent, record, created.attempt, reason, ending)
        return self.closed(run, intent, created.attempt, created.status, created.evidence, ending)

    async def _in_words(
        self,
        run: Run,
        intent: ActionIntent,
        record: FormRecord,
        card_attempt: Attempt,
        reason: str,
        ending: RunEnding | None,
    ) -> Receipt:
        """No card was taken: the numbered question in words, answered by a reply."""
        content = intent.content
        assert content is not None
        text = (
            f"{words_of(content.text, content.label)}\n{prompt_lines(record.spec, record.english)}"
        )
        if content.label:
            text = f"{text}{LABEL_GAP}{content.label}"
        words = intent.model_copy(
            update={"content": MessageContent(msgtype="text", text=text, label=content.label)}
        )
        self.store.forms.set_form_asked(record.form_id, None, "text")
        log.info("form card refused: asked in words", extra={"form": record.form_id})
        return await self.broker.deliver_instead(
            run,
            words,
            ending,
            reason,
            lambda attempt: self.store.actions.switch_delivery(card_attempt, words, attempt),
            tried=[Channel.CARD],
        )

    async def show(self, record: FormRecord) -> bool:
        """Put the form's end on its card (by key: the rest of the card stays)."""
        if record.out_track_id is None:
            return False
        answer = await self.api.update(record.out_track_id, {CARD_STATUS: record.status})
        if not answer.ok:
            log.warning("form card not updated", extra={"form": record.form_id})
        return answer.ok
