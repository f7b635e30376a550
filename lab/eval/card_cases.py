"""Case expectations on AI cards (``expect.platform.cards[]``) and how they are judged.

The list, when given, is every card the platform created, in order: ``[]`` means no card at
all, one entry means exactly one card (a runtime that created a second one after a crash
fails it). Each entry checks the card's record on the fake platform:

- ``conversation`` (group) / ``user`` (one-to-one) — where it was delivered;
- ``final`` — its content at the end, exactly; ``contains`` — fragments of it;
- ``not_contains`` — fragments that must appear in no frame and not at the end (a secret
  produced mid-stream must never reach the platform, not even for one frame);
- ``finalized`` — not spinning any more (a final frame, or a finished or failed state);
  ``finished`` — its flow state is "finished";
- ``min_frames`` / ``max_frames`` — bounds on the frames it took;
- ``data`` — card variables as last set (subset match: ``{"feedback": "on"}``);
  ``private`` — per staff id, what a click's answer showed that person alone (subset).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator


class CardExpect(BaseModel):
    model_config = ConfigDict(extra="forbid")

    conversation: str | None = None
    user: str | None = None
    # an empty fragment is in every text: it would check nothing, so it is refused
    final: Annotated[str, Field(min_length=1)] | None = None
    contains: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)
    not_contains: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)
    finalized: bool | None = None
    finished: bool | None = None
    min_frames: int | None = Field(default=None, ge=0)
    max_frames: int | None = Field(default=None, ge=0)
    # the fake marks a card that ever showed a block over what DingTalk renders as blank
    blank: bool | None = None
    # dta extension: card variables as last set (subset), and what a click's answer showed
    # one person only (staff id -> variables, subset)
    data: dict[str, str] | None = None
    private: dict[str, dict[str, str]] | None = None

    @model_validator(mode="after")
    def _checks_something(self) -> CardExpect:
        given = [name for name in self.model_fields_set if getattr(self, name) not in (None, [])]
        if not given:
            names = ", ".join(type(self).model_fields)
            raise ValueError(f"an empty object matches any card; give at least one of {names}")
        return self


def card_findings(
    wanted: list[CardExpect], cards: list[dict[str, Any]]
) -> list[tuple[str, Any, Any]]:
    """(check, expected, actual) for each way the platform's cards miss the expectation."""
    problems: list[tuple[str, Any, Any]] = []
    if len(cards) != len(wanted):
        shown = [(card.get("content") or "")[:40] for card in cards]
        problems.append(("platform.cards", f"{len(wanted)} card(s)", shown))
    for i, (want, card) in enumerate(zip(wanted, cards, strict=False)):
        problems.extend(_card_problems(f"platform.cards[{i}]", want, card))
    return problems


def _card_problems(
    where: str, want: CardExpect, card: dict[str, Any]
) -> list[tuple[str, Any, Any]]:
    problems: list[tuple[str, Any, Any]] = []
    content = card.get("content") or ""
    frames: list[str] = card.get("frames") or []
    if want.conversation is not None and card.get("conversation_id") != want.conversation:
        problems.append((f"{where}.conversation", want.conversation, card.get("conversation_id")))
    if want.user is not None and (
        card.get("conversation_type") != "dm" or want.user not in (card.get("user_ids") or [])
    ):
        actual = f"{card.get('conversation_type')} to {card.get('user_ids')}"
        problems.append((f"{where}.user", want.user, actual))
    if want.final is not None and content != want.final:
        problems.append((f"{where}.final", want.final, content))
    for fragment in want.contains:
        if fragment not in content:
            problems.append((f"{where}.contains", fragment, content))
    for fragment in want.not_contains:
        seen = [text for text in [*frames, content] if fragment in text]
        if seen:
            problems.append((f"{where}.not_contains", fragment, seen[0]))
    for name in ("finalized", "finished"):
        expected = getattr(want, name)
        if expected is not None and bool(card.get(name)) != expected:
            problems.append((f"{where}.{name}", expected, card.get(name)))
    if want.min_frames is not None and len(frames) < want.min_frames:
        problems.append((f"{where}.min_frames", want.min_frames, len(frames)))
    if want.max_frames is not None and len(frames) > want.max_frames:
        problems.append((f"{where}.max_frames", want.max_frames, len(frames)))
    if want.blank is not None and bool(card.get("blank")) != want.blank:
        problems.append((f"{where}.blank", want.blank, bool(card.get("blank"))))
    held: dict[str, Any] = card.get("data") or {}
    if want.data is not None and any(held.get(k) != v for k, v in want.data.items()):
        problems.append((f"{where}.data", want.data, held))
    for user, view in (want.private or {}).items():
        seen = (card.get("private") or {}).get(user) or {}
        if any(seen.get(k) != v for k, v in view.items()):
            problems.append((f"{where}.private.{user}", view, seen))
    return problems
