"""The action gate's checks for an AI card's frames and for the answer it ends with.

A card is approved like any reply (``ActionGate.decide(..., form="card")``), on the first text
of the answer, before the card exists. What streams after that can still go wrong, so every
frame passes the checks on what a text reply says (its content, no @ of everyone, no image
but DingTalk media) before it is pushed, and the finished answer passes every check that
depends on what it says (schema, allowed action, content, its attachments, its reminder, @
everyone, images) before the card is finalized with it: a card is a way to deliver a reply,
held to what the reply is held to.

A frame does not show all of the text so far: a tail that could begin a secret or 「@所有人」,
or an image whose address is still being written, waits for the next text (``unsafe_tail``).
Images are judged on what the frame shows: an unfinished one (``![](@l``) is judged whole by
the frame that ends it, never in part, so a media id cut across frames passes and a pixel is
refused, its host named, before any of it shows.
The rest — run state, generation, budgets, idempotency, identity, target — was decided
once, when the card was approved, and does not change with the text; only the pictures and
files the finished answer carries, which the card's approval may not have seen, are counted
against the write budget then, and become intents of their own (``card_attachments``).

Pure functions over the gate's own table (``gates.action.CHECKS``): nothing here reads the
store.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from agent.contracts import Run
from gates.action import (
    CHECKS,
    ActionFacts,
    ActionGate,
    Approval,
    Refusal,
    RunTally,
    _Case,
    _intents,
)
from gates.open_images import open_image_start
from gates.reminders import EVERYONE_WORDS

# A frame may not claim what was not done; a promise is judged on the finished answer, which
# may still open the follow-up that keeps it.
FRAME_CHECKS = frozenset({"content", "at_all", "images", "claims"})
FINAL_CHECKS = frozenset(
    {
        "schema",
        "allowed_action",
        "content",
        "attachments",
        "reminder",
        "at_all",
        "images",
        "claims",
        "promises",
    }
)
# What a finished answer's pictures and files are decided on once its words are on the card:
# the budget the card's approval could not count (they come with the finished answer only),
# and their own check.
ATTACHMENT_CHECKS = ("write_budget", "attachments")
# Judged on what a frame shows rather than on the whole text so far (see above).
SHOWN_CHECKS = frozenset({"images"})


@dataclass(frozen=True)
class FinalCheck:
    """The finished answer's verdict: refused, or passed with its reminder's time (epoch
    seconds; None without a reminder), which the acting step schedules as for text."""

    refusal: Refusal | None = None
    reminder_due: float | None = None
    # the AI label's line the finished card ends with ("" when its words carry none)
    label_footer: str = ""


def _recheck(
    gate: ActionGate,
    raw: Any,
    run: Run,
    names: frozenset[str],
    now: float = 0.0,
    sources: tuple[str, ...] = (),
    shown: Any = None,
) -> tuple[Refusal | None, _Case]:
    # Only ``now`` (a reminder's time) and ``sources`` (what a claim may quote) are read by
    # these checks; the run's other facts were weighed at approval. ``shown`` (a frame's
    # request as far as it is shown) is what the ``SHOWN_CHECKS`` judge, when given.
    facts = ActionFacts(
        now=now, thread_generation=0, writes_last_minute=0, writes_last_day=0, sources=sources
    )
    case = _Case(raw, run, RunTally(), facts, gate.policy, "card")
    seen = case if shown is None else _Case(shown, run, RunTally(), facts, gate.policy, "card")
    checked: list[str] = []
    for check in CHECKS:
        if check.name not in names:
            continue
        checked.append(check.name)
        refused = check.test(seen if check.name in SHOWN_CHECKS else case)
        if refused is not None:
            refusal = Refusal(refused.reason, refused.detail, checked, case.kind, say=refused.say)
            return refusal, case
    return None, case


def frame_refusal(
    gate: ActionGate, text: str, run: Run, sources: tuple[str, ...] = ()
) -> Refusal | None:
    """Why this frame (the full text so far) must not be pushed, or None when it may be.

    A frame is held to the card's whole-answer bounds: the length of one message, no
    configured secret, no session webhook URL; and what it shows (``shown_text``) to
    embedding no image but DingTalk media.
    """
    if not text.strip():
        return None  # nothing to show yet, so nothing to refuse
    raw = {"kind": "reply", "text": text}
    shown = shown_text(gate, text)
    names = FRAME_CHECKS if shown.strip() else FRAME_CHECKS - SHOWN_CHECKS
    return _recheck(gate, raw, run, names, 0.0, sources, {**raw, "text": shown})[0]


def held_words(gate: ActionGate) -> tuple[str, ...]:
    """What may not show on a card even in part: the configured secrets, @ everyone (the
    words ``CardReplies._offer`` holds back too: what a frame shows is what is judged)."""
    return (*gate.policy.secrets, *EVERYONE_WORDS)


def shown_text(gate: ActionGate, text: str) -> str:
    """What of the text so far a frame shows: all but its ``unsafe_tail``."""
    return text[: len(text) - unsafe_tail(text, held_words(gate))]


def final_check(
    gate: ActionGate, raw: Any, run: Run, now: float, sources: tuple[str, ...] = ()
) -> FinalCheck:
    """Whether the finished answer may be the card's final text (as of ``now``)."""
    refusal, case = _recheck(gate, raw, run, FINAL_CHECKS, now, sources)
    if refusal is not None:
        return FinalCheck(refusal)
    due = case.reminder_due if case.request.reminder is not None else None
    return FinalCheck(None, due, case.label_footer(card=True, words=case.body))


def card_attachments(
    gate: ActionGate, raw: Any, run: Run, facts: ActionFacts
) -> Approval | Refusal:
    """The finished answer's pictures and files, which go after its card as messages of
    their own: through ``ATTACHMENT_CHECKS`` on the run's store ``facts`` (fresh), then as
    the intents the gate gives a card reply's attachments (``gates.action._intents``: each
    in the reply's slot, numbered apart from the card's parts)."""
    # The write budget's cost counts the words as one message, and the card that carries
    # them is in the counts already: it is counted once.
    facts = replace(
        facts,
        writes_last_minute=max(0, facts.writes_last_minute - 1),
        writes_last_day=max(0, facts.writes_last_day - 1),
    )
    case = _Case(raw, run, RunTally(), facts, gate.policy, "card")
    checked: list[str] = []
    for check in CHECKS:
        if check.name not in ATTACHMENT_CHECKS:
            continue
        checked.append(check.name)
        refused = check.test(case)
        if refused is not None:
            return Refusal(refused.reason, refused.detail, checked, case.kind, say=refused.say)
    attachments = case.attachments
    assert isinstance(attachments, list)  # a problem was refused by its check
    intents = _intents(case, checked)[len(case.pieces) :]
    return Approval(case.request, intents, checked, attachments=tuple(attachments))


def unsafe_tail(text: str, secrets: Iterable[str]) -> int:
    """How many characters at the end of ``text`` could be the start of a secret, or are an
    image still being written (``gates.open_images.open_image_start``).

    They are held back from the frame until the next text shows whether the secret follows,
    or finishes the image: otherwise a secret streamed a few characters at a time would
    reach the card in pieces before the whole of it is ever seen, and a frame caught inside
    a media id (``![](@l``) would be refused for an address it does not have.
    """
    image = open_image_start(text)
    longest = 0 if image is None else len(text) - image
    for secret in secrets:
        for size in range(min(len(secret) - 1, len(text)), longest, -1):
            if text.endswith(secret[:size]):
                longest = size
                break
    return longest
