"""The host's own fixed words — the rules provider's answers, the plain words for a failure
or a refusal — claim nothing and promise nothing the claim checks would refuse: the robot
must pass its own checks (they judge the rules provider's words like a model's)."""

from __future__ import annotations

import pytest

import agent.run.endings as endings
import gates.action_checks as action_checks
import skills.providers.reminders as reminders
import skills.providers.rules as rules
from gates.claims import find_claims

pytestmark = pytest.mark.timeout(30)


def _fixed_words(module) -> dict[str, str]:
    return {
        f"{module.__name__}.{name}": value
        for name, value in vars(module).items()
        if name.isupper() or (name.startswith("_") and name[1:].isupper())
        if (isinstance(value, str) and len(value) > 8 and not value.isascii()) or (
            isinstance(value, str) and " " in value and len(value) > 20
        )
    }


WORDS = {
    **_fixed_words(rules),
    **_fixed_words(reminders),
    **_fixed_words(endings),
    **{k: v for k, v in _fixed_words(action_checks).items() if k.endswith("_SAY")},
}


def test_there_are_fixed_words_to_judge():
    assert len(WORDS) >= 15, sorted(WORDS)


@pytest.mark.parametrize("name", sorted(WORDS))
def test_fixed_words_claim_and_promise_nothing(name):
    assert find_claims(WORDS[name]) == [], WORDS[name]
