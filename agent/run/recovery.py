"""After a crash: finish a run from what its earlier execution already did.

An event whose run exists and is still ``working`` is executed again at start-up. If the
earlier execution already reached a terminal action (its intents and receipts are in the
store), asking the provider again would only produce a second answer the idempotency keys
then refuse — and, with a slow provider, a pointless "seen, working on it" after the
reply. So the run is settled from the records instead: delivered pieces → done (or
waiting, for an ask), anything uncertain or missing → failed, with the reason — unless its
answer's AI card was created but shows nothing yet: then the run is driven on, and its
answer goes on that card (agent/cards/recovery.py). The
thread's task moves the same way it would have: an ask that reached the person leaves it
waiting, a delivered reply completes it, a failed one fails it.
"""

from __future__ import annotations

from agent.contracts import (
    ActionIntent,
    ActionKind,
    ActionRequest,
    CardState,
    Run,
    RunState,
)
from agent.run.tasks import TaskKeeper
from gates.action_case import FOLLOW_UP_SLOT, words_of
from storage import Store


def settled_from_records(store: Store, tasks: TaskKeeper, run: Run, now: float) -> Run | None:
    """The run's final form if its terminal action is already on record, else None."""
    # The words of the terminal action decide the run; a reply's attachments, sent after
    # them, never do (the recovery pass has sent what a crash left owed: agent/run/pieces.py).
    terminal = [
        i
        for i in store.actions.intents(run.event_id)
        if i.kind.is_terminal
        and (i.content is None or i.content.attachment is None)
        and not i.idempotency_key.endswith(f":{FOLLOW_UP_SLOT}")  # a line after it decides nothing
    ]
    if not terminal:
        return None
    receipts = {r.intent_id: r for r in store.actions.receipts(run.event_id) if r.intent_id}
    if any(i.intent_id not in receipts and _card_left_open(store, i) for i in terminal):
        return None  # a card that shows nothing yet: the run goes on to answer on it
    kind = terminal[0].kind
    recorded = [receipts[i.intent_id] for i in terminal if i.intent_id in receipts]
    statuses = [receipt.status for receipt in recorded]
    pieces = terminal[0].chunks
    failure = None
    if kind is ActionKind.SILENCE:
        state = RunState.SILENT
    elif store.cards.card_answer_cut(run.event_id):
        state = RunState.FAILED
        failure = "partial reply: the runtime stopped between two cards of the answer"
    elif len(statuses) < pieces:
        state = RunState.FAILED
        failure = f"partial reply: {len(statuses)} of {pieces} pieces before the runtime stopped"
    elif all(status.delivered for status in statuses):
        state = RunState.WAITING if kind is ActionKind.ASK else RunState.DONE
    else:
        state = RunState.FAILED
        first = next(s for s in statuses if not s.delivered)
        at = f" (piece {statuses.index(first) + 1} of {pieces})" if pieces > 1 else ""
        failure = f"{kind.value} {first.value}{at} when the runtime stopped"
    task = tasks.taken_by(run)
    if state is RunState.FAILED:
        tasks.fail(run, task)
    elif recorded:
        tasks.settle(run, task, _request_of(terminal), recorded[-1])
    settled = run.model_copy(update={"state": state, "failure": failure, "updated_at": now})
    store.events.save_run(settled)
    return settled


def _card_left_open(store: Store, intent: ActionIntent) -> bool:
    """Is the intent's card still open after the card recovery (agent/cards/recovery.py),
    which leaves open only a card that shows nothing yet, for the run's next answer?"""
    card = store.cards.card_for_intent(intent.intent_id)
    return card is not None and card.state in (CardState.CREATED, CardState.STREAMING)


def _request_of(pieces: list[ActionIntent]) -> ActionRequest:
    """The request as the task keeper needs it: kind, what was said, the task patch."""
    first = pieces[0]
    text = "".join(
        words_of(piece.content.text, piece.content.label) for piece in pieces if piece.content
    )
    if first.kind is ActionKind.SILENCE or not text.strip():
        return ActionRequest(kind=ActionKind.SILENCE, reason="recorded silence", task=first.task)
    return ActionRequest(kind=first.kind, text=text, task=first.task)
