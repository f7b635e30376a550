"""The console's feedback page: 👍 / 👎 on answers, per conversation, skill, provider and day.

Read from the store's ratings (one per person and answer, their latest press) with the run
each rates, so a provider or a skill is judged by the answers it gave; plain data for the
template, every time in the team's zone.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

from pydantic import ValidationError

from agent.cli.trace import clock
from agent.cli.trace_records import RATING_SIGN
from agent.contracts import Run
from storage import Store
from storage.feedback import Rated

RECENT = 50
UNKNOWN = "(run no longer kept)"


def _run(rated: Rated) -> Run | None:
    if rated.run_json is None:
        return None
    try:
        return Run.model_validate_json(rated.run_json)
    except ValidationError:
        return None


def _provider(run: Run | None) -> list[str]:
    return [run.answered_by or run.provider] if run is not None else [UNKNOWN]


def _skills(run: Run | None) -> list[str]:
    if run is None:
        return [UNKNOWN]
    return [skill.name for skill in run.skill_snapshot.skills] or ["(no skill)"]


def tally(
    ratings: Iterable[tuple[Rated, Run | None]], keys: Callable[[Rated, Run | None], list[str]]
) -> list[dict[str, Any]]:
    """Ratings counted under each key they fall in (an answer under each of its skills),
    most rated first: ``{key, up, down, total, up_share}`` (the share in whole percent)."""
    counts: dict[str, dict[str, int]] = defaultdict(lambda: {"up": 0, "down": 0})
    for rated, run in ratings:
        for key in keys(rated, run):
            if rated.rating in ("up", "down"):
                counts[key][rated.rating] += 1
    rows = []
    for key, seen in counts.items():
        total = seen["up"] + seen["down"]
        share = round(100 * seen["up"] / total) if total else 0
        rows.append({"key": key, **seen, "total": total, "up_share": share})
    return sorted(rows, key=lambda row: (-row["total"], row["key"]))


def feedback_page(store: Store, timezone: str, since: float | None = None) -> dict[str, Any]:
    """Everything the feedback page shows."""
    when = clock(timezone)
    ratings = [(rated, _run(rated)) for rated in store.feedback.since(since)]
    recent = [
        {
            "msg": rated.event_id,
            "by": rated.user_id,
            "rating": rated.rating,
            "sign": RATING_SIGN.get(rated.rating, rated.rating),
            "reason": rated.reason or "",
            "conversation": rated.conversation_id or "",
            "provider": _provider(run)[0],
            "at": when(rated.at),
        }
        for rated, run in reversed(ratings[-RECENT:])
    ]
    return {
        "timezone": timezone,
        "totals": tally(ratings, lambda rated, run: ["all"]),
        "by_conversation": tally(ratings, lambda rated, run: [rated.conversation_id or "?"]),
        "by_skill": tally(ratings, lambda rated, run: _skills(run)),
        "by_provider": tally(ratings, lambda rated, run: _provider(run)),
        "by_day": sorted(
            tally(ratings, lambda rated, run: [(when(rated.at) or "")[:10]]),
            key=lambda row: row["key"],
        ),
        "recent": recent,
    }
