"""Build the enriched invocation a behavior skill sees for one run.

For now: the event, its text, and the actor's identity as the envelope states it
(``source: envelope``). Quote, burst and directory identity arrive with the task-lifecycle
work; each item says where it came from and never grants authority.
"""

from __future__ import annotations

from agent.contracts import EnrichedInvocation, Event, Identity, Run

MAX_TEXT_CHARS = 4000


class InvocationBuilder:
    def __init__(self, max_text_chars: int = MAX_TEXT_CHARS) -> None:
        self.max_text_chars = max_text_chars

    def build(self, event: Event, run: Run) -> EnrichedInvocation:
        text = event.text
        truncated = len(text) > self.max_text_chars
        return EnrichedInvocation(
            run_id=run.run_id,
            event=event,
            text=text[: self.max_text_chars],
            text_truncated=truncated,
            text_original_length=len(text) if truncated else None,
            identity=Identity(
                source="envelope",
                user_id=event.actor.user_id,
                name=event.actor.nick,
            ),
            allowed_actions=run.allowed_actions,
        )
