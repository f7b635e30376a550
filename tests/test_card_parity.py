"""A card is a way to deliver a reply, not a second pipeline: the model cases tagged
``card-parity`` pass unchanged in card mode too (the streamed answer takes the acting step
a text reply takes: the same checks, the same reminder handling), and no frame ever shows
what the final text may not (issue 25: a reminder promised in a card was never scheduled,
one for someone else was not refused, 「@所有人」 reached the card)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from lab.eval.cases import Case, discover
from lab.eval.runner import CaseRun

PROJECT_CASES = Path(__file__).resolve().parents[1] / "lab" / "cases"
CARD_MODE = {"reply_mode": "card", "card_template_id": "dta-lab-card.schema"}


def parity_cases() -> list[Case]:
    return [case for case in discover([PROJECT_CASES]) if "card-parity" in case.tags]


def test_there_are_parity_cases() -> None:
    assert len(parity_cases()) >= 3


@pytest.mark.parametrize("case", parity_cases(), ids=lambda case: case.id)
@pytest.mark.parametrize("mode", ["text", "card"])
async def test_a_text_mode_case_passes_in_card_mode(case: Case, mode: str) -> None:
    if mode == "card":
        case = case.model_copy(update={"config": {**case.config, **CARD_MODE}})
    with tempfile.TemporaryDirectory() as tmp:
        running = CaseRun(case, Path(tmp))
        result = await running.run()
    assert result.passed, [str(p) for p in result.problems] or result.error
    cards = running.fake.cards
    if mode == "text":
        assert cards == []
        return
    assert cards, "in card mode the answer went into a card"
    for card in cards:
        for frame in card.to_dict()["frames"]:
            assert "@所" not in frame and "所有人" not in frame, frame
