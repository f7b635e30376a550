"""What models cost: one row per run that had a model behind it (``model_usage``).

store.usage.add_model_usage(ModelUsage(run_id="r1", actor_id="u1", conversation_id="cid",
                                       model="qwen-plus", at=now, prompt_tokens=900,
                                       completion_tokens=120, cost=0.0021))
store.usage.model_tokens("u1", "cid", day_ago=now - 86_400, month_start=first_of_month)
"""

from __future__ import annotations

from dataclasses import dataclass

from storage.base import Family


@dataclass(frozen=True)
class ModelUsage:
    run_id: str
    actor_id: str
    conversation_id: str
    model: str
    at: float
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    degraded: str | None = None  # model_budget / model_unavailable: the fallback answered

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class TokensSpent:
    person_today: int
    conversation_today: int
    month: int


class UsageRecords(Family):
    def add_model_usage(self, usage: ModelUsage) -> None:
        """The run's usage so far (a repair round adds to it; a re-executed run replaces
        what its crashed execution recorded)."""
        with self._tx(run=usage.run_id) as conn:
            conn.execute(
                "INSERT INTO model_usage (run_id, actor_id, conversation_id, model, at,"
                " prompt_tokens, completion_tokens, total_tokens, cost, degraded)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id) DO UPDATE SET"
                " prompt_tokens = excluded.prompt_tokens,"
                " completion_tokens = excluded.completion_tokens,"
                " total_tokens = excluded.total_tokens, cost = excluded.cost,"
                " degraded = excluded.degraded",
                (
                    usage.run_id,
                    usage.actor_id,
                    usage.conversation_id,
                    usage.model,
                    usage.at,
                    usage.prompt_tokens,
                    usage.completion_tokens,
                    usage.total_tokens,
                    usage.cost,
                    usage.degraded,
                ),
            )

    def model_tokens(
        self, actor_id: str, conversation_id: str, day_ago: float, month_start: float
    ) -> TokensSpent:
        """Tokens spent by the person and in the conversation since ``day_ago``, and by
        everyone since ``month_start`` (one statement)."""
        row = self.db.conn.execute(
            "SELECT"
            " (SELECT COALESCE(SUM(total_tokens), 0) FROM model_usage"
            "  WHERE actor_id = ? AND at > ?),"
            " (SELECT COALESCE(SUM(total_tokens), 0) FROM model_usage"
            "  WHERE conversation_id = ? AND at > ?),"
            " (SELECT COALESCE(SUM(total_tokens), 0) FROM model_usage WHERE at >= ?)",
            (actor_id, day_ago, conversation_id, day_ago, month_start),
        ).fetchone()
        return TokensSpent(int(row[0]), int(row[1]), int(row[2]))

    def model_usage_totals(self) -> list[tuple[str, str | None, int, int, float]]:
        """(model, degraded, runs, tokens, cost) over every row: the metrics' source."""
        return self.db.conn.execute(
            "SELECT model, degraded, COUNT(*), COALESCE(SUM(total_tokens), 0),"
            " COALESCE(SUM(cost), 0) FROM model_usage GROUP BY model, degraded"
        ).fetchall()

    def cost_of_run(self, run_id: str) -> tuple[str, int, float] | None:
        """(model, tokens, cost) a run's model spent; None without a model behind it."""
        row = self.db.conn.execute(
            "SELECT model, total_tokens, cost FROM model_usage WHERE run_id = ?", (run_id,)
        ).fetchone()
        return (row[0], int(row[1]), float(row[2])) if row else None
