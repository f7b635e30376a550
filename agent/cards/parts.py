"""A long answer as several cards: where one card's part ends, and each part's own slot."""

from __future__ import annotations

from agent.contracts import ActionIntent


def card_parts(text: str, block: int) -> list[str]:
    """``text`` as cards of at most ``block`` code points: cut at a paragraph, a line or a
    sentence in the block's second half where there is one, else at the block's end."""
    parts: list[str] = []
    rest = text
    while len(rest) > block:
        cut = part_end(rest, block)
        parts.append(rest[:cut].rstrip())
        rest = rest[cut:].lstrip()
    parts.append(rest)
    return parts


def part_end(text: str, block: int) -> int:
    """Where the first card of ``text`` (longer than ``block``) ends."""
    for mark in ("\n\n", "\n", "。", "！", "？", ". ", "；", "，", " "):
        at = text.rfind(mark, block // 2, block)
        if at > 0:
            return at + len(mark)
    return block


def part_intent(intent: ActionIntent, n: int) -> ActionIntent:
    """The intent of a long answer's n-th card: the first is the approved one; each later
    one has a key of its own (``<key>#n``), so its card is named once however often the run
    is driven, and counts as the message it is."""
    if n == 1:
        return intent
    return intent.model_copy(
        update={
            "intent_id": f"{intent.intent_id}-{n}",
            "idempotency_key": f"{intent.idempotency_key}#{n}",
        }
    )
