"""Judge a finished case from evidence only: the fake platform's record and the store.

Nothing here reads a log line or asks the runtime what it thinks it did. Each failed check
says what was expected and what the evidence shows.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from agent.contracts import Channel, Receipt, ReceiptStatus
from lab.eval.align import as_text, message_findings
from lab.eval.card_cases import card_findings
from lab.eval.cases import Expect, MessageExpect
from lab.eval.feedback_cases import feedback_findings, held_feedback
from lab.eval.standing_cases import form_findings, job_findings
from lab.eval.stores import Records, RobotStores


@dataclass(frozen=True)
class Check:
    name: str
    expected: Any
    actual: Any
    note: str | None = None  # context for a person (what a count counted), not compared

    def __str__(self) -> str:
        text = f"{self.name}: expected {as_text(self.expected)}, got {as_text(self.actual)}"
        return f"{text} ({self.note})" if self.note else text


def _message_problems(i: int, want: MessageExpect, got: dict[str, Any]) -> list[Check]:
    problems: list[Check] = []
    where = f"platform.messages[{i}]"
    if want.conversation is not None and got.get("conversation_id") != want.conversation:
        problems.append(
            Check(f"{where}.conversation", want.conversation, got.get("conversation_id"))
        )
    if want.user is not None:
        users = got.get("user_ids") or []
        if got.get("conversation_type") != "dm" or want.user not in users:
            actual = f"{got.get('conversation_type')} to {users}"
            problems.append(Check(f"{where}.user", want.user, actual))
    text = got.get("text") or ""
    for fragment in want.contains:
        if fragment not in text:
            problems.append(Check(f"{where}.contains", fragment, text))
    for fragment in want.not_contains:
        if fragment in text:
            problems.append(Check(f"{where}.not_contains", fragment, text))
    if want.matches is not None and not re.search(want.matches, text):
        problems.append(Check(f"{where}.matches", want.matches, text))
    if want.at_users is not None:
        # Exactly these people, so [] means nobody: an extra @ is a message to someone else.
        # (By staff id or, for a sender without one, by dingtalkId: both reach a person.)
        at = [*(got.get("at_user_ids") or []), *(got.get("at_dingtalk_ids") or [])]
        if sorted(set(at)) != sorted(set(want.at_users)) or got.get("at_all"):
            actual = [*at, "@all"] if got.get("at_all") else at
            problems.append(Check(f"{where}.at_users", want.at_users, actual))
    if want.channel is not None and got.get("channel") != want.channel:
        problems.append(Check(f"{where}.channel", want.channel, got.get("channel")))
    if want.msgtype is not None and got.get("msgtype") != want.msgtype:
        problems.append(Check(f"{where}.msgtype", want.msgtype, got.get("msgtype")))
    if want.robot is not None and got.get("robot_code") != want.robot:
        problems.append(Check(f"{where}.robot", want.robot, got.get("robot_code")))
    return problems


def _screen(message: dict[str, Any]) -> str:
    """The chat a message shows in (``ReceivedMessage.screen``, from its dict)."""
    conversation = message.get("conversation_id")
    if message.get("conversation_type") == "group" and conversation:
        return str(conversation)
    return f"dm:{','.join(message.get('user_ids') or []) or conversation}"


def smallest_gap(received: list[dict[str, Any]]) -> float | None:
    """The smallest real gap between consecutive messages shown in one chat (None when no
    chat got two)."""
    last: dict[str, float] = {}
    smallest: float | None = None
    for message in received:
        screen = _screen(message)
        mono = float(message["mono"])
        if screen in last:
            gap = mono - last[screen]
            smallest = gap if smallest is None else min(smallest, gap)
        last[screen] = mono
    return smallest


def _subset(want: dict[str, Any], got: dict[str, Any]) -> bool:
    return all(got.get(key) == value for key, value in want.items())


def _receipt_facts(receipt: Receipt) -> dict[str, Any]:
    """A receipt as ``receipts[]`` matches it; the channels come from its evidence, where the
    broker lists every channel it tried in order, so the last one carried the message."""
    tried = [channel.value for channel in receipt.evidence.channels_tried]
    return {
        "msg": receipt.event_id,
        "kind": receipt.kind.value if receipt.kind else None,
        "status": receipt.status.value,
        "reason": receipt.reason,
        "channel": tried[-1] if tried else Channel.NONE.value,
        "channels": tried,
    }


def _strings(value: Any) -> list[str]:
    """Every string in a request body (keys too), so a fragment matches what the model read,
    not its JSON escaping."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [part for key, item in value.items() for part in [key, *_strings(item)]]
    if isinstance(value, list):
        return [part for item in value for part in _strings(item)]
    return [json.dumps(value)]


def model_findings(expect: Expect, requests: list[dict[str, Any]]) -> list[Check]:
    """``model_requests_count`` and each ``model_requests[i]`` against the i-th request."""
    found: list[Check] = []
    if expect.model_requests_count is not None and len(requests) != expect.model_requests_count:
        found.append(Check("model_requests_count", expect.model_requests_count, len(requests)))
    for index, wanted in enumerate(expect.model_requests or []):
        where = f"model_requests[{index}]"
        if index >= len(requests):
            found.append(Check(where, "a request", f"{len(requests)} requests"))
            continue
        body = "\n".join(_strings(requests[index]))
        for fragment in wanted.contains:
            if fragment not in body:
                found.append(Check(f"{where}.contains", fragment, "absent"))
        for fragment in wanted.not_contains:
            if fragment in body:
                found.append(Check(f"{where}.not_contains", fragment, "present"))
    return found


def _held_findings(
    name: str, text_key: str, people_key: str, wanted: list[Any], held: list[dict[str, Any]]
) -> list[Check]:
    """``platform.todos`` / ``platform.events``: the i-th entry against the i-th held."""
    found: list[Check] = []
    for index, want in enumerate(wanted):
        where = f"platform.{name}[{index}]"
        if index >= len(held):
            found.append(Check(where, "one more", f"{len(held)} held"))
            continue
        got = held[index]
        text = str(got.get(text_key) or "")
        found.extend(Check(f"{where}.contains", f, text) for f in want.contains if f not in text)
        people = getattr(want, people_key)
        # Exact sets: one more executor or attendee is someone else's calendar or to-do list.
        if people is not None and sorted(set(people)) != sorted(set(got.get(people_key) or [])):
            found.append(Check(f"{where}.{people_key}", people, got.get(people_key)))
        done = getattr(want, "done", None)
        if done is not None and got.get("done") != done:
            found.append(Check(f"{where}.done", done, got.get("done")))
    return found


def workspace_findings(expect: Expect, workspace: dict[str, list[dict[str, Any]]]) -> list[Check]:
    """``platform.todos``, ``events`` and their exact counts, against the fake workspace."""
    if expect.platform is None:
        return []
    platform = expect.platform
    todos, events = workspace.get("todos", []), workspace.get("events", [])
    found = _held_findings("todos", "subject", "executors", platform.todos, todos)
    found.extend(_held_findings("events", "summary", "attendees", platform.events, events))
    for name, wanted, held, key in (
        ("todos_count", platform.todos_count, todos, "subject"),
        ("events_count", platform.events_count, events, "summary"),
    ):
        if wanted is not None and len(held) != wanted:
            note = "; ".join(str(item.get(key)) for item in held) or None
            found.append(Check(f"platform.{name}", wanted, len(held), note))
    return found


def run_findings(expect: Expect, store: Records) -> list[Check]:
    """``expect.runs``: per msgId, who answered and whether the run degraded."""
    found: list[Check] = []
    for msg, wanted in (expect.runs or {}).items():
        run = store.events.get_run(msg)
        if run is None:
            found.append(Check(f"runs.{msg}", "a run", None))
            continue
        if wanted.provider is not None and (run.answered_by or run.provider) != wanted.provider:
            found.append(
                Check(f"runs.{msg}.provider", wanted.provider, run.answered_by or run.provider)
            )
        if wanted.degraded is not None and (run.degraded or False) != wanted.degraded:
            found.append(Check(f"runs.{msg}.degraded", wanted.degraded, run.degraded or False))
        if wanted.state is not None and run.state.value != wanted.state:
            found.append(Check(f"runs.{msg}.state", wanted.state, run.state.value))
    return found


def reaction_findings(expect: Expect, held: list[dict[str, Any]]) -> list[Check]:
    """``platform.reactions``: the reactions the fake holds, in order (``[]``: none)."""
    wanted = expect.platform.reactions if expect.platform is not None else None
    if wanted is None:
        return []
    found: list[Check] = []
    if len(held) != len(wanted):
        found.append(Check("platform.reactions", len(wanted), len(held), str(held)))
    for i, want in enumerate(wanted):
        got = held[i] if i < len(held) else None
        if got is None or not _subset(want.model_dump(exclude_none=True), got):
            found.append(Check(f"platform.reactions[{i}]", want.model_dump(exclude_none=True), got))
    return found


def approval_findings(expect: Expect, store: Records) -> list[Check]:
    """``expect.approvals`` (in creation order, subset match) and ``approvals_count``."""
    held = [
        {"msg": a.event_id, "tool": a.tool, "status": a.status.value, "by": a.decided_by}
        for a in store.approvals.all()
    ]
    found: list[Check] = []
    if expect.approvals_count is not None and len(held) != expect.approvals_count:
        found.append(Check("approvals_count", expect.approvals_count, len(held)))
    for i, want in enumerate(expect.approvals or []):
        wanted = want.model_dump(exclude_none=True)
        got = held[i] if i < len(held) else None
        if got is None or not _subset(wanted, got):
            found.append(Check(f"approvals[{i}]", wanted, got, f"held: {held}" if held else None))
    return found


def judge(
    expect: Expect,
    received: list[dict[str, Any]],
    store: Records,
    downloads: int = 0,
    cards: list[dict[str, Any]] | None = None,
    calls: dict[str, int] | None = None,
    model_requests: list[dict[str, Any]] | None = None,
    workspace: dict[str, list[dict[str, Any]]] | None = None,
    reactions: list[dict[str, Any]] | None = None,
) -> list[Check]:
    """``downloads``: the message-file download calls the platform answered; ``cards``: the
    platform's record of its AI cards; ``calls``: every request it answered, by kind
    (``lab.fake.calls``); ``model_requests``: the bodies the fake model received;
    ``workspace``: the to-dos and events the fake holds (``PlatformState.workspace_view``)."""
    problems: list[Check] = model_findings(expect, model_requests or [])
    problems.extend(workspace_findings(expect, workspace or {}))
    problems.extend(run_findings(expect, store))
    problems.extend(approval_findings(expect, store))
    problems.extend(Check(*found) for found in job_findings(expect, store))
    problems.extend(Check(*found) for found in form_findings(expect, store))
    if expect.feedback is not None or expect.feedback_count is not None:
        held = held_feedback(store.stores if isinstance(store, RobotStores) else [store])
        found = feedback_findings(expect.feedback, expect.feedback_count, held)
        problems.extend(Check(*finding) for finding in found)
    problems.extend(reaction_findings(expect, reactions or []))

    if expect.platform is not None and expect.platform.calls is not None:
        counted = calls or {}
        for kind, wanted in expect.platform.calls.model_dump(exclude_none=True).items():
            if counted.get(kind, 0) != wanted:
                note = ", ".join(f"{k} {n}" for k, n in counted.items() if n and k != "total")
                problems.append(
                    Check(f"platform.calls.{kind}", wanted, counted.get(kind, 0), note or None)
                )
    if expect.platform is not None:
        if expect.platform.count is not None and len(received) != expect.platform.count:
            # A count is compared as a count; the messages are context, not the value.
            shown = "; ".join(f"{m.get('channel')}: {(m.get('text') or '')[:40]}" for m in received)
            note = f"received: {shown}" if received else None
            problems.append(Check("platform.count", expect.platform.count, len(received), note))
        if expect.platform.cards is not None:
            found = card_findings(expect.platform.cards, cards or [])
            problems.extend(Check(*finding) for finding in found)
        wanted_gap = expect.platform.min_gap_s
        if wanted_gap is not None:
            gap = smallest_gap(received)
            if gap is not None and gap < wanted_gap:
                problems.append(Check("platform.min_gap_s", wanted_gap, round(gap, 4)))
        wanted_downloads = expect.platform.downloads
        if wanted_downloads is not None and downloads != wanted_downloads:
            problems.append(Check("platform.downloads", wanted_downloads, downloads))
        for finding in message_findings(
            expect.platform.messages,
            received,
            _message_problems,
            lambda want: want.model_dump(mode="json", exclude_none=True, exclude_defaults=True),
        ):
            problems.append(finding if isinstance(finding, Check) else Check(*finding))

    decisions = {d.event_id: d for d in store.events.decisions()}
    for msg, want in (expect.decisions or {}).items():
        got = decisions.get(msg)
        if got is None:
            problems.append(Check(f"decisions.{msg}", want.model_dump(exclude_none=True), None))
            continue
        actual = {"verdict": got.verdict.value, "reason": got.reason.value}
        wanted = want.model_dump(mode="json", exclude_none=True)
        if not _subset(wanted, actual):
            problems.append(Check(f"decisions.{msg}", wanted, actual))

    receipts = [_receipt_facts(r) for r in store.actions.receipts()]
    if expect.receipts == [] and receipts:
        problems.append(Check("receipts", [], receipts))
    for i, want_receipt in enumerate(expect.receipts or []):
        wanted = want_receipt.model_dump(mode="json", exclude_none=True)
        if not any(_subset(wanted, r) for r in receipts):
            problems.append(Check(f"receipts[{i}]", wanted, receipts))

    refusals = [
        {"msg": r["msg"], "reason": r["reason"]}
        for r in receipts
        if r["status"] == ReceiptStatus.REFUSED.value
    ]
    if expect.refusals == [] and refusals:
        problems.append(Check("refusals", [], refusals))
    for i, want_refusal in enumerate(expect.refusals or []):
        wanted = want_refusal.model_dump(exclude_none=True)
        if not any(_subset(wanted, r) for r in refusals):
            problems.append(Check(f"refusals[{i}]", wanted, refusals))

    counts = store.counts()
    if expect.quarantined is not None and counts.quarantined != expect.quarantined:
        problems.append(Check("quarantined", expect.quarantined, counts.quarantined))
    if expect.duplicates is not None and counts.duplicates != expect.duplicates:
        problems.append(Check("duplicates", expect.duplicates, counts.duplicates))

    runs = store.work.runs_per_event()
    for msg in expect.processed or []:
        if runs.get(msg, 0) != 1:
            problems.append(Check(f"processed.{msg}", "exactly one run", runs.get(msg, 0)))

    problems.extend(
        _records("tasks", expect.tasks, [t.model_dump(mode="json") for t in store.context.tasks()])
    )
    problems.extend(
        _records(
            "memory_candidates",
            expect.memory_candidates,
            [c.model_dump(mode="json") for c in store.context.memory_candidates()],
        )
    )
    return problems


def _records(
    name: str, wanted: list[dict[str, Any]] | None, records: list[dict[str, Any]]
) -> list[Check]:
    """Subset-match each wanted record; an explicit empty list demands none at all."""
    if wanted is None:
        return []
    if not wanted:
        return [Check(name, [], records)] if records else []
    problems = []
    for i, want in enumerate(wanted):
        if not any(_subset(want, record) for record in records):
            problems.append(Check(f"{name}[{i}]", want, records))
    return problems
