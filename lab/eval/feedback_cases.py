"""Case expectations on answers' feedback (``expect.feedback``, ``expect.feedback_count``)
and how they are judged (dta's additions, docs/lab.md).

The store keeps one rating per person and answer (a later press by the same person
replaces theirs). ``feedback``, when given, is every rating the store holds, in the order
their holding press came (ties by message, then person), and the
i-th entry is matched against the i-th rating — ``msg``, ``by``, ``rating`` (``up`` /
``down``), ``reason`` (exactly; ``null`` is not checked). ``feedback_count`` is their exact
number (``0``: none at all).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from lab.eval.case_base import CaseModel


class FeedbackExpect(CaseModel):
    msg: str | None = Field(default=None, min_length=1)
    by: str | None = Field(default=None, min_length=1)
    rating: Literal["up", "down"] | None = None
    reason: str | None = None

    @model_validator(mode="after")
    def _checks_something(self) -> FeedbackExpect:
        if not self.model_dump(exclude_none=True):
            names = ", ".join(type(self).model_fields)
            raise ValueError(f"an empty object matches any rating; give at least one of {names}")
        return self


def held_feedback(stores: list[Any]) -> list[dict[str, Any]]:
    """Every rating every robot's store holds, in the order of their holding press."""
    rated = [r for store in stores for r in store.feedback.since()]
    rated.sort(key=lambda r: (r.at, r.event_id, r.user_id))
    return [
        {"msg": r.event_id, "by": r.user_id, "rating": r.rating, "reason": r.reason} for r in rated
    ]


def feedback_findings(
    wanted: list[FeedbackExpect] | None, count: int | None, held: list[dict[str, Any]]
) -> list[tuple[str, Any, Any]]:
    """(check, expected, actual) for each way the stored ratings miss the expectation."""
    problems: list[tuple[str, Any, Any]] = []
    if count is not None and len(held) != count:
        problems.append(("feedback_count", count, len(held)))
    if wanted is None:
        return problems
    if len(held) != len(wanted):
        problems.append(("feedback", f"{len(wanted)} rating(s)", held))
    for i, want in enumerate(wanted):
        expected = want.model_dump(exclude_none=True)
        got = held[i] if i < len(held) else None
        if got is None or any(got.get(key) != value for key, value in expected.items()):
            problems.append((f"feedback[{i}]", expected, got))
    return problems
