"""What a model may cost, and what a run spent: the token budgets and their fallback.

Before a metered provider (a model) is asked, the person's and the conversation's tokens of
the last day and everyone's of this month are read against the operator's limits; over
one, the run is answered by the fallback provider (``rules``: knowledge, arithmetic, an
honest "I can't answer that now") and says it is limited. A call that crosses a limit is
still delivered: the check is before the call. After the call its tokens and their cost
(``model_prices``, per 1,000 tokens) are kept per run (``storage/usage.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from agent.clock import Clock
from agent.contracts import Event, Run
from storage import ModelUsage, Store

DAY_S = 86_400.0
# How the person is told the answer comes from the fallback, by why.
LIMITED_SAY = {
    "model_budget": "（助手今天的用量已到上限，先给你一个简单回答。）",
    "model_unavailable": "（助手暂时答不上来，先给你一个简单回答。）",
}


@dataclass(frozen=True)
class ModelLimits:
    """Token limits (0 = none) and prices (model -> (input, output) per 1,000 tokens)."""

    per_person_per_day: int
    per_conversation_per_day: int
    per_month: int
    prices: dict[str, tuple[float, float]]
    timezone: str


class ModelMeter:
    def __init__(self, store: Store, clock: Clock, limits: ModelLimits) -> None:
        self.store = store
        self.clock = clock
        self.limits = limits

    def over_limit(self, event: Event) -> str | None:
        """Which limit the event's person, conversation or the month has reached, or None."""
        limits = self.limits
        if not (limits.per_person_per_day or limits.per_conversation_per_day or limits.per_month):
            return None
        now = self.clock.now()
        spent = self.store.usage.model_tokens(
            event.actor.user_id, event.conversation.id, now - DAY_S, self._month_start(now)
        )
        checks = (
            (limits.per_person_per_day, spent.person_today, "the person's tokens today"),
            (limits.per_conversation_per_day, spent.conversation_today, "the chat's tokens today"),
            (limits.per_month, spent.month, "this month's tokens"),
        )
        for limit, used, what in checks:
            if limit and used >= limit:
                return f"{what}: {used} of {limit}"
        return None

    def record(
        self, run: Run, event: Event, model: str, usage: dict[str, Any], degraded: str | None
    ) -> None:
        prompt = int(usage.get("prompt_tokens") or 0)
        completion = int(usage.get("completion_tokens") or 0)
        price_in, price_out = self.limits.prices.get(model, (0.0, 0.0))
        cost = (prompt * price_in + completion * price_out) / 1000
        self.store.usage.add_model_usage(
            ModelUsage(
                run_id=run.run_id,
                actor_id=event.actor.user_id,
                conversation_id=event.conversation.id,
                model=model,
                at=self.clock.now(),
                prompt_tokens=prompt,
                completion_tokens=completion,
                cost=round(cost, 6),
                degraded=degraded,
            )
        )

    def _month_start(self, now: float) -> float:
        local = datetime.fromtimestamp(now, ZoneInfo(self.limits.timezone))
        first = local.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        return first.timestamp()


def limited(requests: list[Any], why: str) -> list[Any]:
    """The fallback's requests, each reply and question saying first that it is limited."""
    notice = LIMITED_SAY[why]
    marked = []
    for request in requests:
        if isinstance(request, dict) and request.get("kind") in ("reply", "ask"):
            for key in ("text", "markdown"):
                if isinstance(request.get(key), str):
                    request = {**request, key: f"{notice}\n{request[key]}"}
                    break
        marked.append(request)
    return marked
