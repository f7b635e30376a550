"""Which reactions still owe a recall (agent/run/reactions.py ``owes_recall``): a put that
may be on the message is taken off until DingTalk says yes, or says the request itself is
wrong (nothing there to take off)."""

from __future__ import annotations

from agent.contracts import Attempt, AttemptOutcome, Channel, Evidence
from agent.run.reactions import RECALL, owes_recall


def attempt(outcome: AttemptOutcome, digest: str = "reply", status: int | None = None) -> Attempt:
    return Attempt(
        attempt_id=f"att-{digest}-{outcome.value}-{status}",
        intent_id="int-1",
        channel=Channel.REACTION,
        started_at=1.0,
        finished_at=2.0,
        outcome=outcome,
        request_digest=digest,
        evidence=Evidence(http_status=status),
    )


def test_a_put_cut_by_a_crash_is_recalled_anyway() -> None:
    assert owes_recall([attempt(AttemptOutcome.UNCERTAIN)])
    assert owes_recall([attempt(AttemptOutcome.STARTED)])


def test_a_put_dingtalk_refused_needs_no_recall() -> None:
    assert not owes_recall([attempt(AttemptOutcome.FAILED, status=503)])


def test_a_refused_recall_is_owed_again_until_one_is_accepted() -> None:
    put = attempt(AttemptOutcome.ACCEPTED, status=200)
    refused = attempt(AttemptOutcome.FAILED, RECALL, status=503)
    assert owes_recall([put, refused])
    assert not owes_recall([put, refused, attempt(AttemptOutcome.ACCEPTED, RECALL, 200)])


def test_a_recall_refused_for_what_it_asks_is_the_last_one() -> None:
    put = attempt(AttemptOutcome.UNCERTAIN)
    assert not owes_recall([put, attempt(AttemptOutcome.FAILED, RECALL, status=400)])


def test_trace_says_where_a_reaction_stands() -> None:
    from agent.cli.trace_records import reaction_state

    put = attempt(AttemptOutcome.ACCEPTED, status=200)
    refused = attempt(AttemptOutcome.FAILED, RECALL, status=503)
    assert reaction_state([put]) == "on the message"
    assert "tried again by the recovery pass" in reaction_state([put, refused])
    assert reaction_state([put, refused, attempt(AttemptOutcome.ACCEPTED, RECALL, 200)]) == (
        "recalled (2 tries)"
    )
    assert reaction_state([attempt(AttemptOutcome.FAILED, status=503)]).startswith("not put")
