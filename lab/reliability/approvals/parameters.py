"""The approvals run's shape: its sizes, the people and their requests, how they decide,
and the daemon's config."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from lab.reliability.approvals.faults import READ_TIMEOUT_S, SETTLE_S


@dataclass(frozen=True)
class Shape:
    """One size of the run."""

    requests: int
    kills: int  # at random moments
    replicas: int  # two share PostgreSQL in the full run
    rate_per_s: float
    click_kills: int  # kill_after_click
    create_kills: int  # kill_during_create
    pauses: int  # paused
    proposal_kills: int  # reword: a kill right after the model proposed a create
    arm_every: int  # a fault is armed every this many requests


SIZES: dict[str, Shape] = {
    "full": Shape(240, 10, 2, 4.0, 3, 3, 2, 3, 8),
    "reduced": Shape(40, 3, 1, 2.5, 1, 1, 1, 2, 5),
}
PG_URL = "postgresql://127.0.0.1:5432/test"
SEED = 20_261_203
ASKERS = max(shape.requests for shape in SIZES.values())
COLLEAGUE = "u-colleague"
COLLEAGUE_NAME = "被派的人"
EXPIRE_S = 8.0  # approval_timeout_s: an approval nobody decides expires within the run
# With codes an approval lives longer (people answer as soon as on cards, 0.2–4 s): a reply a
# pause silenced is sent again after the resume, some 8–12 s after the prompt, in time or not.
CODES_EXPIRE_S = 12.0
WRONG_FIRST = 0.2  # share of cards someone else clicks first
CHOICES = (("approve", 0.55), ("deny", 0.25), (None, 0.20))  # None: never decided
TWICE = 0.15  # share of decisions clicked a second time
# Text codes (--codes): every GROUP_EVERY-th request is asked in a group of its own; a share
# of replies is delivered again by the platform (the same msgId), besides those sent twice.
GROUP_EVERY = 2
REDELIVERED = 0.15
STRANGER = "u-stranger"
# A request's id inside a to-do's subject or the text a model proposed.
REQUEST_ID = re.compile(r"apv-task-(\d+)(?!\d)")


def fake_users() -> dict[str, dict[str, Any]]:
    """The fake's directory: one asker per request, the colleague they assign, a stranger."""
    users = {f"apv-u{i}": {"name": f"同事{i}"} for i in range(ASKERS)}  # one per request
    users[COLLEAGUE] = {"name": COLLEAGUE_NAME}
    users["u-stranger"] = {"name": "旁观者"}
    return users


def daemon_config(
    model_url: str, replicas: int, schema: str | None, codes: bool = False
) -> dict[str, Any]:
    """The daemon's config: the openai provider against the fake model, the to-do and
    directory tools, approvals on cards (with codes: in words), the faults' timings."""
    config: dict[str, Any] = {
        "provider": "openai",
        "openai_base_url": model_url,
        "openai_model": "fake",
        "openai_api_key": "fake-key",
        "tools": ["dingtalk.todo.create", "dingtalk.directory.search"],
        "approval_card_template_id": "lab-approval-card.schema",
        "approval_timeout_s": CODES_EXPIRE_S if codes else EXPIRE_S,
        "act_settle_s": SETTLE_S,
        "read_timeout_s": READ_TIMEOUT_S,
        "recovery_interval_s": 0.5,
        "act_budget_per_day": 10_000,
        "act_budget_per_conversation_per_day": 10_000,
        "ack_after_s": 30,
    }
    if codes:  # no card template: asked in words, decided by a text code
        del config["approval_card_template_id"]
    if replicas > 1:
        config.update(store_schema=schema, run_lease_s=3.0, stream_ping_interval_s=2.0)
    return config


def request_send(i: int, codes: bool) -> dict[str, Any]:
    """The ``i``-th request: from its own asker (one thread each: a person's next message
    would supersede), in their one-to-one chat; with codes, every GROUP_EVERY-th in a group
    of its own, @-ing the robot."""
    send: dict[str, Any] = {
        "msg": f"apv-{i}",
        "from": f"apv-u{i}",
        "text": f"给{COLLEAGUE_NAME}建个待办：apv-task-{i}",  # looked up by name, then asked
    }
    if codes and i % GROUP_EVERY == 1:
        send.update(group=f"apv-g{i}", at_bot=True)
    return send


def request_of(subject: str) -> str | None:
    """The request a to-do is for: its id inside the subject, however it was worded."""
    found = REQUEST_ID.search(subject)
    return f"apv-{found.group(1)}" if found else None
