"""``dta trace`` for people: the chain as lines, and the times a person types.

``agent/cli/trace.py`` builds the chain; this module only words it, so the console, ``dta dev``
and the command line say the same thing the same way.
"""

from __future__ import annotations

import time
from typing import Any

from agent.cli.trace import NEXT_STEP, NO_MATCH, Cause, Trace


def render(trace: Trace) -> list[str]:
    """The chain as lines a person reads, top to bottom in the order it happened."""
    lines = [f"message {trace.msg_id}"]
    if trace.event is not None:
        e = trace.event
        where = "DM" if e["scene"] == "dm" else f"group {e['conversation']}"
        at = " (@robot)" if e["mentioned"] else ""
        nick = f" ({e['nick']})" if e["nick"] else ""
        lines.append(f"  from {e['sender']}{nick} in {where}{at}, received {e['received_at']}")
        lines.append(f"  text: {e['text'][:200]}")
        copies = len(trace.deliveries)
        duplicates = sum(d["duplicate"] for d in trace.deliveries)
        lines.append(f"  delivered {copies} time(s), {duplicates} duplicate(s) acked, not run")
    for q in trace.quarantined:
        lines.append(f"  quarantined frame at {q['received_at']}: {q['reason']} ({q['error']})")
    if trace.decision is not None:
        d = trace.decision
        checked = " → ".join(d["checked"])
        lines.append(f"  decision: {d['verdict']} ({d['reason']}); checked {checked}")
    if trace.run is not None:
        r = trace.run
        skills = ", ".join(r["skills"]) or "none"
        tokens = f", {r['usage'].get('total_tokens')} tokens" if r["usage"] else ""
        lines.append(
            f"  run {r['run_id']}: {r['state']} · provider {r['provider']}{tokens}"
            f" · skills {skills} · may {', '.join(r['allowed_actions'])}"
        )
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
    for intent in trace.intents:
        lines.append(f"  intent {intent['kind']} {intent['chunk']} to {intent['target']}:")
        lines.append(f"    {intent['text'][:200]}")
        for attempt in intent["attempts"]:
            status = attempt["evidence"].get("http_status")
            http = f" (HTTP {status})" if status else ""
            lines.append(f"    attempt via {attempt['channel']}: {attempt['outcome']}{http}")
    for refusal in trace.refusals:
        detail = f": {refusal['detail']}" if refusal["detail"] else ""
        lines.append(f"  refused {refusal['kind'] or 'request'} ({refusal['reason']}){detail}")
    lines.extend(receipt_line(receipt) for receipt in trace.receipts)
    lines.extend(approval_lines(trace.approvals))
    lines.extend(task_line(task) for task in trace.tasks)
    for memory in trace.memory:
        lines.append(
            f"  memory {memory['candidate_id']}: {memory['status']} (revision"
            f" {memory['revision']}) {memory['title']}"
        )
    lines.append(f"cause: {trace.cause.value} — {trace.summary}")
    lines.append(f"next: {trace.next_step}")
    return lines


def approval_lines(approvals: list[dict[str, Any]]) -> list[str]:
    """Each approval the run asked for, and every click on it."""
    lines = []
    for approval in approvals:
        by = f" by {approval['decided_by']}" if approval["decided_by"] else ""
        lines.append(
            f"  approval {approval['approval_id']}: {approval['status']}{by} · {approval['tool']}"
            f" 「{approval['object']}」 for {', '.join(approval['audience'])}"
            f" ({approval['impact']})"
        )
        for click in approval["clicks"]:
            lines.append(f"    click by {click['user']}: {click['action']} → {click['outcome']}")
    return lines


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
