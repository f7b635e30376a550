"""``dta trace`` for people: the chain as lines, and the times a person types.

``agent/cli/trace.py`` builds the chain; this module only words it, so the console, ``dta dev``
and the command line say the same thing the same way.
"""

from __future__ import annotations

import time
from typing import Any

from agent.cli.trace import NEXT_STEP, NO_MATCH, Cause, Trace
from agent.cli.trace_acts import named


def render(trace: Trace) -> list[str]:
    """The chain as lines a person reads, top to bottom in the order it happened."""
    lines = [f"message {trace.msg_id}"]
    if trace.event is not None:
        lines.extend(event_lines(trace.event, trace.deliveries))
    for q in trace.quarantined:
        lines.append(f"  quarantined frame at {q['received_at']}: {q['reason']} ({q['error']})")
    if trace.decision is not None:
        d = trace.decision
        checked = " → ".join(d["checked"])
        lines.append(f"  decision: {d['verdict']} ({d['reason']}); checked {checked}")
    if trace.run is not None:
        lines.extend(run_lines(trace.run))
    for intent in trace.intents:
        lines.extend(intent_lines(intent))
    for refusal in trace.refusals:
        detail = f": {refusal['detail']}" if refusal["detail"] else ""
        lines.append(f"  refused {refusal['kind'] or 'request'} ({refusal['reason']}){detail}")
    lines.extend(receipt_line(receipt) for receipt in trace.receipts)
    lines.extend(approval_lines(trace.approvals))
    lines.extend(feedback_line(rated) for rated in trace.feedback)
    lines.extend(form_line(form) for form in trace.forms)
    lines.extend(task_line(task) for task in trace.tasks)
    for memory in trace.memory:
        lines.append(
            f"  memory {memory['candidate_id']}: {memory['status']} (revision"
            f" {memory['revision']}) {memory['title']}"
        )
    lines.append(f"cause: {trace.cause.value} — {trace.summary}")
    lines.append(f"next: {trace.next_step}")
    return lines


def event_lines(e: dict[str, Any], deliveries: list[dict[str, Any]]) -> list[str]:
    """Who sent the message, where, its text, and how often DingTalk delivered it."""
    where = "DM" if e["scene"] == "dm" else f"group {e['conversation']}"
    at = " (@robot)" if e["mentioned"] else ""
    nick = f" ({e['nick']})" if e["nick"] else ""
    copies = len(deliveries)
    duplicates = sum(d["duplicate"] for d in deliveries)
    return [
        f"  from {e['sender']}{nick} in {where}{at}, received {e['received_at']}",
        f"  text: {e['text'][:200]}",
        f"  delivered {copies} time(s), {duplicates} duplicate(s) acked, not run",
    ]


def run_lines(r: dict[str, Any]) -> list[str]:
    """The run: its state, provider, skills, tokens, failure and the tools it called."""
    skills = ", ".join(r["skills"]) or "none"
    tokens = f", {r['usage'].get('total_tokens')} tokens" if r["usage"] else ""
    lines = [
        f"  run {r['run_id']}: {r['state']} · provider {r['provider']}{tokens}"
        f" · skills {skills} · may {', '.join(r['allowed_actions'])}"
    ]
    if r["failure"]:
        lines.append(f"    failure: {r['failure']}")
    if r.get("usage"):
        tokens = ", ".join(f"{k} {v}" for k, v in r["usage"].items())
        lines.append(f"    tokens: {tokens}")
    if r.get("degraded"):
        lines.append(f"    answered by {r['answered_by']} ({r['degraded']})")
    for call in r.get("tool_calls", []):
        outcome = "ok" if call.get("ok") else call.get("error")
        lines.append(
            f"    tool {call.get('tool')}: {outcome}, {call.get('result_chars')} chars"
            f" shown, {call.get('elapsed_ms')} ms"
        )
    return lines


def intent_lines(intent: dict[str, Any]) -> list[str]:
    """One intent (or act) and every attempt made at it."""
    if intent.get("outcome"):  # an act: what became of it, and its arguments as read
        lines = [f"  {intent['line']}"]
        lines.extend(f"    {label}: {value[:200]}" for label, value in intent["shown"])
    else:
        lines = [
            f"  intent {intent['kind']} {intent['chunk']} to {intent['target']}:",
            f"    {intent['text'][:200]}",
        ]
    for attempt in intent["attempts"]:
        status = attempt["evidence"].get("http_status")
        http = f" (HTTP {status})" if status else ""
        lines.append(f"    attempt via {attempt['channel']}: {attempt['outcome']}{http}")
    return lines


def approval_lines(approvals: list[dict[str, Any]]) -> list[str]:
    """Each approval the run asked for, what became of its act, and every click on it
    (people by name where the directory named them)."""
    lines = []
    for approval in approvals:
        names = approval.get("names", {})
        by = f" by {named(approval['decided_by'], names)}" if approval["decided_by"] else ""
        audience = ", ".join(named(u, names) for u in approval["audience"])
        lines.append(
            f"  approval {approval['approval_id']}: {approval['status']}{by} · {approval['tool']}"
            f" 「{approval['object']}」 for {audience} ({approval['impact']})"
            f" → {approval['outcome_words']}"
        )
        for click in approval["clicks"]:
            who = named(click["user"], names)
            lines.append(f"    click by {who}: {click['action']} → {click['outcome']}")
    return lines


def form_line(form: dict[str, Any]) -> str:
    """An ask-user form: how it was asked, where it stands, what was submitted by whom."""
    said = f"  form {form['form_id']} ({form['asked_with']}: {', '.join(form['fields'])})"
    said += f" {form['status']}"
    if form["submitted_by"]:
        values = form["values"] or {}
        shown = ", ".join(
            f"{name}={'、'.join(map(str, v)) if isinstance(v, list) else v}"
            for name, v in values.items()
        )
        said += f" by {form['submitted_by']} at {form['decided']}: {shown}"
    elif form["status"] == "pending":
        said += f", expires {form['expires']}"
    elif form["decided"]:
        said += f" at {form['decided']}"
    return said


def feedback_line(rated: dict[str, Any]) -> str:
    """One person's 👍 / 👎 on the answer (their latest press), with their reason."""
    reason = f": {rated['reason']}" if rated.get("reason") else ""
    return f"  feedback {rated['sign']} {rated['rating']} by {rated['by']} at {rated['at']}{reason}"


def receipt_line(receipt: dict[str, Any], every_channel: bool = True) -> str:
    """One receipt as a line: kind, status, reason and the channels tried (or the last)."""
    reason = f" ({receipt['reason']})" if receipt["reason"] else ""
    channels = receipt["channels"] if every_channel else receipt["channels"][-1:]
    via = f" via {' → '.join(channels)}" if channels else ""
    read = f"; read back: {receipt['readback']}" if receipt.get("readback") else ""
    return f"  receipt {receipt['kind']}: {receipt['status']}{reason}{via}{read}"


def task_line(task: dict[str, Any]) -> str:
    return f"  task {task['task_id']}: {task['status']} (revision {task['revision']})"


def render_search(store_path: str, traces: list[Trace]) -> list[str]:
    if not traces:
        return [
            f"no stored message matches in {store_path}",
            f"cause: {Cause.NEVER_ARRIVED.value} — {NO_MATCH}",
            f"next: {NEXT_STEP[Cause.NEVER_ARRIVED]}",
        ]
    lines: list[str] = []
    for trace in traces:
        if lines:
            lines.append("")
        lines.extend(render(trace))
    return lines


def parse_when(text: str, now: float | None = None) -> float:
    """``90s``, ``15m``, ``2h``, ``3d`` ago; an ISO date or time (local); or epoch seconds."""
    now = time.time() if now is None else now
    text = text.strip()
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    if text and text[-1] in units and text[:-1].replace(".", "", 1).isdigit():
        return now - float(text[:-1]) * units[text[-1]]
    try:
        return float(text)
    except ValueError:
        pass
    for fmt in ("%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M"):
        try:
            return time.mktime(time.strptime(text, fmt))
        except ValueError:
            continue
    try:
        return time.mktime(time.strptime(text, "%Y-%m-%d"))
    except ValueError:
        raise ValueError(
            f'"{text}" is not a time: use 15m, 2h or 3d (ago), 2026-01-31 or 2026-01-31T09:30'
        ) from None
