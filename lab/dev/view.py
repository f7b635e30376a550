"""What ``dta dev`` shows for each message, whoever sent it: the prompt, ``dta dev say``, a
redelivery or a raw frame. One short block per message — its id, the decision, what the
robot sent with each receipt, task and memory changes — and a hint whenever the outcome is
one a builder may not expect (a silent group line, a gate rule, a failing provider).

The watcher reads the instance's store, not the prompt: a message shows up here because
the daemon stored it, which is the only proof that it arrived.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.cli.trace import Cause, Trace, trace_message
from agent.cli.trace_cause import GATE_SILENCES
from agent.cli.trace_text import receipt_line, task_line
from agent.proactive.heartbeat import BEAT_ACTOR
from storage import Store

# Hints for silences a builder may not expect, by reason code.
HINTS: dict[str, str] = {
    "group_not_mentioned": "in a group the robot answers only when @-ed: add --at-bot",
    "provider_silence": "your provider chose to say nothing for this message",
    "task_cancelled": "a stop word (算了/停/取消/stop/cancel) ended the open task; nothing is said",
    "answered_together": "sent with words about it: the words' run read it and answered both",
    **{k: v for k, v in GATE_SILENCES.items() if k != "group_not_mentioned"},
}
SETTLE_S = 15.0  # how long a message may take before dev says it has no outcome yet


def _who(trace: Trace) -> str:
    event = trace.event or {}
    if event.get("scene") == "group":
        at = " @robot" if event.get("mentioned") else ""
        return f"{event.get('sender')} in {event.get('conversation')}{at}"
    return f"{event.get('sender')} (DM)"


def story(trace: Trace, log_hint: str = "") -> list[str]:
    """The block printed for one message."""
    event = trace.event or {}
    lines = [f"[{trace.msg_id}] {_who(trace)}: {event.get('text', '')}"]
    if trace.decision:
        lines.append(f"  decision: {trace.decision['verdict']} ({trace.decision['reason']})")
    group = event.get("scene") == "group"
    for intent in trace.intents:
        at = f" @{event.get('sender')}" if group and intent["kind"] != "silence" else ""
        outcomes = [a["outcome"] for a in intent["attempts"]]
        lines.append(intent_line(intent, at))
        if set(outcomes) != {"accepted"}:
            tried = ", ".join(outcomes) or "not sent"
            lines.append(f"    {intent['kind']} {intent['chunk']} attempts: {tried}")
    for refusal in trace.refusals:
        lines.append(f"  refused by the action gate: {refusal['reason']} {refusal['detail'] or ''}")
    lines.extend(receipt_line(receipt, every_channel=False) for receipt in trace.receipts)
    lines.extend(task_line(task) for task in trace.tasks)
    for memory in trace.memory:
        lines.append(
            f"  memory proposed: {memory['title']} — review with `dta memory approve"
            f" {memory['candidate_id']} --revision {memory['revision']} --dev` or the console"
        )
    lines.extend(hints(trace, log_hint))
    return lines


def intent_line(intent: dict[str, Any], at: str = "") -> str:
    """One line for what the run put out, saying what it is (``form``: an act with what
    became of it, a card, an approval card, a reaction on the message, a picture) or words."""
    form = intent.get("form") or ""
    if form == "act":  # its text says "act …" with what became of it (trace_acts.act_text)
        return f"  {intent['text']}"
    if form == "reaction":
        return f"  reaction on the message: {intent['text']}"
    return f"  {form or 'robot'} → {intent['target']}{at}: {intent['text']}"


def idle_own_event(trace: Trace) -> bool:
    """A heartbeat that found nothing to do: nothing went out, nothing was refused."""
    event = trace.event or {}
    own = event.get("sender") == BEAT_ACTOR or trace.msg_id.startswith("beat:")
    return own and not trace.intents and not trace.refusals


def hints(trace: Trace, log_hint: str = "") -> list[str]:
    reasons = [r["reason"] for r in trace.receipts if r["status"] == "silent" and r["reason"]]
    if trace.decision and trace.decision["verdict"] == "silent":
        reasons.insert(0, trace.decision["reason"])
    found = [f"  hint: {HINTS[reason]}" for reason in dict.fromkeys(reasons) if reason in HINTS]
    if trace.cause in (Cause.FAILED, Cause.UNCERTAIN):
        found.append(f"  hint: {trace.summary}{log_hint}")
    return found


@dataclass
class Watcher:
    """Prints every stored message once its run has an outcome (a slow one never holds
    back the others, so the order is the order outcomes arrive)."""

    store_path: Path
    say: Callable[[str], None]
    log_hint: str = ""
    # print the heartbeats that did nothing too (else they are only counted in ``idle``)
    verbose: bool = False
    # lines to add after a message's block (``dta dev``: where the robot's files were saved)
    after: Callable[[], list[str]] | None = None
    shown: dict[str, asyncio.Event] = field(default_factory=dict)
    quarantined: int = 0
    idle: int = 0

    def seen(self, msg_id: str) -> asyncio.Event:
        return self.shown.setdefault(msg_id, asyncio.Event())

    async def run(self, interval: float = 0.1) -> None:
        pending: dict[str, float] = {}
        since = 0.0
        while True:
            try:
                since = self._poll(pending, since)
            except Exception as exc:  # a store mid-write or mid-creation: try again
                if not self.store_path.exists():
                    await asyncio.sleep(interval)
                    continue
                self.say(f"(dev could not read the store: {type(exc).__name__}: {exc})")
            await asyncio.sleep(interval)

    def _count_idle(self) -> None:
        """Idle beats are counted, not printed; the first says so once."""
        self.idle += 1
        if self.idle == 1:
            self.say(
                "(idle heartbeats are counted, not shown: /status says how many;"
                " --verbose shows each)"
            )

    def _poll(self, pending: dict[str, float], since: float) -> float:
        if not self.store_path.exists():
            return since
        with Store(self.store_path) as store:
            records = store.inspect
            for received_at, event in records.newest_events(since - 1.0, limit=500):
                if event.event_id not in pending and not self.seen(event.event_id).is_set():
                    pending[event.event_id] = time.monotonic()
                since = max(since, received_at)
            for msg_id, first_seen in list(pending.items()):
                run = store.events.get_run(msg_id)
                late = time.monotonic() - first_seen > SETTLE_S
                if (run is not None and run.state.is_finished) or late:
                    trace = trace_message(store, msg_id)
                    del pending[msg_id]
                    self.seen(msg_id).set()
                    if not self.verbose and idle_own_event(trace):
                        self._count_idle()
                        continue
                    lines = story(trace, self.log_hint)
                    if self.after is not None:
                        lines += self.after()
                    if late and (run is None or not run.state.is_finished):
                        lines.append(f"  (no outcome after {SETTLE_S:g} s: still working)")
                    self.say("\n".join(lines))
            quarantined = store.events.quarantined()
            for frame in quarantined[self.quarantined :]:
                self.say(f"[frame] quarantined ({frame['reason']}): {frame['error']}")
            self.quarantined = len(quarantined)
        return since
