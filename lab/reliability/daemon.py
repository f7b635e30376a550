"""What the reliability scripts share beyond the daemon harness (``lab.daemon``): the
messages they send, how they count answers, and how they report."""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any, Literal

from lab.daemon import BASE_CONFIG, DaemonError, DaemonProcess, free_port, until
from lab.fake import FakeDingTalk
from storage import Store

Size = Literal["full", "reduced"]
__all__ = ["BASE_CONFIG", "DaemonError", "DaemonProcess", "Size", "free_port", "until"]


# --------------------------------------------------------------------------- messages


def question(i: int, base: int) -> str:
    """A DM the rules provider answers with arithmetic: each answer names its question."""
    return f"{i} + {base} 等于多少"


def answer(i: int, base: int) -> str:
    return f"{i} + {base} = {i + base}"


def send_dm(fake: FakeDingTalk, prefix: str, i: int, base: int, robot: str | None = None) -> str:
    """One DM from its own sender, so no two messages share a thread (no superseding); to
    ``robot`` (the fake's default robot when None)."""
    msg_id = f"{prefix}-{i}"
    send = {"msg": msg_id, "from": f"{prefix}-u{i}", "text": question(i, base)}
    fake.inject({**send, "robot": robot} if robot else send)
    return msg_id


def replies_per_user(fake: FakeDingTalk, start: int = 0) -> Counter[str]:
    """How many messages each one-to-one user received, from ``fake.received[start:]``."""
    counts: Counter[str] = Counter()
    for message in fake.received[start:]:
        for user in message.user_ids:
            counts[user] += 1
    return counts


def wrong_answers(
    fake: FakeDingTalk, prefix: str, base: int, elsewhere: tuple[str, ...] = ()
) -> int:
    """Replies whose text is not the answer to the recipient's own question (recipients
    named with one of the ``elsewhere`` prefixes are another phase's, judged there)."""
    wrong = 0
    for message in fake.received:
        for user in message.user_ids:
            if user.startswith(elsewhere) and elsewhere:
                continue
            index = user.removeprefix(f"{prefix}-u")
            if not index.isdigit() or message.text != answer(int(index), base):
                wrong += 1
    return wrong


def attempts_left_started(store: Store) -> int:
    """Attempts still ``started``: after a restart there must be none (they become uncertain)."""
    return sum(
        attempt.outcome.value == "started"
        for intent in store.actions.intents()
        for attempt in store.actions.attempts(intent.intent_id)
    )


def fake_model_config(base_url: str) -> dict[str, str]:
    """The settings that point a daemon at the lab's fake model (``lab.models.fake_model``)."""
    return {"provider": "openai", "openai_base_url": base_url, "openai_model": "dta-lab-fake-model"}


def by_another_robot(fake: FakeDingTalk, prefix: str, robot_of: Callable[[int], str]) -> int:
    """Replies sent by a robot other than the one the person (``<prefix>-u<i>``) wrote to."""
    wrong = 0
    for message in fake.received:
        for user in message.user_ids:
            index = user.removeprefix(f"{prefix}-u")
            if index.isdigit() and message.robot_code != robot_of(int(index)):
                wrong += 1
    return wrong


def unfinished_runs(store: Store, event_ids: Iterable[str]) -> int:
    runs = (store.events.get_run(event_id) for event_id in event_ids)
    return sum(run is None or not run.state.is_finished for run in runs)


def unanswered_on_platform(fake: FakeDingTalk, prefix: str) -> list[str]:
    """The msgIds the platform pushed to the robot whose sender has no reply in its record.

    Read from the fake's own inbound log, not from ``sent`` or the store, so a message the
    bot never stored (or stored and forgot) still counts.
    """
    per_user = replies_per_user(fake)
    return sorted(
        msg_id
        for msg_id, callback in fake.inbound.items()
        if msg_id.startswith(f"{prefix}-")
        and per_user.get(str(callback.get("senderStaffId")), 0) == 0
    )


def judge_messages(
    store: Store,
    fake: FakeDingTalk,
    sent: list[str],
    prefix: str,
    base: int,
    elsewhere: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Everything read back from the platform's record and the store, per message (the
    replies to ``elsewhere``'s recipients are another phase's, counted there)."""
    per_user = replies_per_user(fake)
    if elsewhere:
        per_user = Counter({u: n for u, n in per_user.items() if not u.startswith(elsewhere)})
    decisions = Counter(d.event_id for d in store.events.decisions())
    runs = store.work.runs_per_event()
    statuses: dict[str, set[str]] = {}
    for receipt in store.actions.receipts():
        statuses.setdefault(receipt.event_id, set()).add(receipt.status.value)
    answered_twice = uncertain = unproven = 0
    uncertain_delivered = 0
    for msg_id in sent:
        seen = per_user.get(f"{prefix}-u{msg_id.rsplit('-', 1)[1]}", 0)
        kinds = statuses.get(msg_id, set())
        answered_twice += seen > 1
        if "uncertain" in kinds:
            uncertain += 1
            uncertain_delivered += seen == 1
        if "accepted" in kinds:
            unproven += seen != 1  # an accepted receipt must match what the user saw
        elif "uncertain" not in kinds:
            unproven += 1
    unanswered = unanswered_on_platform(fake, prefix)
    return {
        "injected": len(sent),
        "replied": sum(per_user.values()),
        "uncertain": uncertain,
        "uncertain_but_delivered": uncertain_delivered,
        "answered_twice": answered_twice,
        "without_accepted_or_uncertain": unproven,
        "duplicate_deliveries": store.counts().duplicates,  # redelivered after a lost ack
        "lost": sum(runs.get(m, 0) == 0 for m in sent),
        "unanswered": len(unanswered),
        "unanswered_not_uncertain": sum("uncertain" not in statuses.get(m, ()) for m in unanswered),
        "runs_not_once": sum(runs.get(m, 0) != 1 for m in sent),
        "decisions_not_once": sum(decisions.get(m, 0) != 1 for m in sent),
        "unfinished_runs": unfinished_runs(store, sent),
        "attempts_left_started": attempts_left_started(store),
        "wrong_answers": wrong_answers(fake, prefix, base, elsewhere),
    }


# What must be zero in ``judge_messages``'s figures for a run to pass.
MUST_BE_ZERO = (
    "answered_twice",
    "without_accepted_or_uncertain",
    "lost",
    "unanswered_not_uncertain",
    "runs_not_once",
    "decisions_not_once",
    "unfinished_runs",
    "attempts_left_started",
    "wrong_answers",
)


def nothing_wrong(figures: dict[str, Any]) -> bool:
    return all(figures[key] == 0 for key in MUST_BE_ZERO)


# --------------------------------------------------------------------------- reports


def seal(report: dict[str, Any], secrets: Iterable[str]) -> dict[str, Any]:
    """Check the report is JSON and carries no secret; a leak is a bug, so it raises."""
    text = json.dumps(report, ensure_ascii=False)
    for secret in secrets:
        if secret and secret in text:
            raise AssertionError("a secret reached the reliability report")
    return report


def cli(
    name: str,
    description: str,
    run: Callable[[Size, Path], Awaitable[dict[str, Any]]],
    argv: list[str] | None = None,
) -> int:
    """``python -m lab.reliability.<name> [--reduced] [--json] [--workdir DIR]``; 0 if passed."""
    parser = argparse.ArgumentParser(prog=f"dta lab reliability {name}", description=description)
    parser.add_argument("--reduced", action="store_true", help="the smaller CI-sized run")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--workdir", type=Path, help="keep the store and logs here")
    args = parser.parse_args(argv)
    size: Size = "reduced" if args.reduced else "full"
    if args.workdir is not None:
        report = asyncio.run(run(size, args.workdir))
    else:
        with tempfile.TemporaryDirectory(prefix=f"dta-{name}-") as tmp:
            report = asyncio.run(run(size, Path(tmp)))
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        width = max(len(key) for key in report)
        for key, value in report.items():
            print(f"{key:<{width}}  {value}")
    return 0 if report.get("passed") else 1
