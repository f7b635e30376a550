"""An AI card as the store keeps it: one reply intent streamed into a DingTalk card.

``Card`` records the last frame DingTalk took (``streamed``) and the text the card must end
with (``final``), so a card left open by a crash can be finalized with exactly what the
person saw. Its states (``CardState``) and fallback reasons (``CardReason``) are in
``codes``; how cards are driven is ``agent/cards/broker.py``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from agent.contracts.base import Contract
from agent.contracts.codes import CardReason, CardState


class Card(Contract):
    """An AI card carrying one reply intent, as the store keeps it.

    ``streamed`` is the last frame DingTalk took, so a card left open by a crash can be
    finalized with exactly what the person saw; ``final`` is the text the card must end
    with once that is decided (the answer, a refusal, or the cut-off text), recorded before
    its calls wait for their slots, and ``final_reason`` the reason its receipt will carry
    (``card_cut_off``, ``card_stopped``; None for the answer itself): a stop before the end
    went leaves both for the next execution to put on the card.
    """

    schema_: Literal["dta.card/1"] = Field(default="dta.card/1", alias="$schema")
    out_track_id: str
    intent_id: str
    run_id: str
    event_id: str
    conversation_id: str
    template_id: str
    content_key: str
    state: CardState = CardState.CREATED
    frames: int = 0
    # ended with its part of a longer answer, which goes on in the next card: if no next
    # card opened (a stop, a crash), the answer was cut there (store.cards.card_answer_cut)
    continues: bool = False
    streamed: str = ""
    final: str | None = None
    final_reason: CardReason | None = None
    fallback: CardReason | None = None
    created_at: float
    updated_at: float
