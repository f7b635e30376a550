"""After a crash: finish a run from what its earlier execution already did.

An event whose run exists and is still ``working`` is executed again at start-up. If the
earlier execution already reached a terminal action (its intents and receipts are in the
store), asking the provider again would only produce a second answer the idempotency keys
then refuse — and, with a slow provider, a pointless "seen, working on it" after the
reply. So the run is settled from the records instead: delivered pieces → done (or
waiting, for an ask), anything uncertain or missing → failed, with the reason. The
thread's task moves the same way it would have: an ask that reached the person leaves it
waiting, a delivered reply completes it, a failed one fails it.
"""

from __future__ import annotations

from agent.contracts import (
    ActionIntent,
    ActionKind,
    ActionRequest,
    Run,
    RunState,
)
from agent.run.tasks import TaskKeeper
from storage import Store


def settled_from_records(store: Store, tasks: TaskKeeper, run: Run, now: float) -> Run | None:
    """The run's final form if its terminal action is already on record, else None."""
    # The words of the terminal action decide the run; a reply's attachments, sent after
    # them, never do (one that a crash cut is simply not sent: its bytes were not kept).
    terminal = [
        i
        for i in store.intents(run.event_id)
        if i.kind.is_terminal and (i.content is None or i.content.attachment is None)
    ]
    if not terminal:
        return None
    receipts = {r.intent_id: r for r in store.receipts(run.event_id) if r.intent_id}
    kind = terminal[0].kind
    recorded = [receipts[i.intent_id] for i in terminal if i.intent_id in receipts]
    statuses = [receipt.status for receipt in recorded]
    pieces = terminal[0].chunks
    failure = None
    if kind is ActionKind.SILENCE:
        state = RunState.SILENT
    elif len(statuses) < pieces:
        state = RunState.FAILED
        failure = f"partial reply: {len(statuses)} of {pieces} pieces before the runtime stopped"
    elif all(status.delivered for status in statuses):
        state = RunState.WAITING if kind is ActionKind.ASK else RunState.DONE
    else:
        state = RunState.FAILED
        failure = f"{kind.value} {statuses[-1].value} when the runtime stopped"
    task = tasks.taken_by(run)
    if state is RunState.FAILED:
        tasks.fail(run, task)
    elif recorded:
        tasks.settle(run, task, _request_of(terminal), recorded[-1])
    settled = run.model_copy(update={"state": state, "failure": failure, "updated_at": now})
    store.save_run(settled)
    return settled


def _request_of(pieces: list[ActionIntent]) -> ActionRequest:
    """The request as the task keeper needs it: kind, what was said, the task patch."""
    first = pieces[0]
    text = "".join(piece.content.text for piece in pieces if piece.content)
    if first.kind is ActionKind.SILENCE or not text.strip():
        return ActionRequest(kind=ActionKind.SILENCE, reason="recorded silence", task=first.task)
    return ActionRequest(kind=first.kind, text=text, task=first.task)
