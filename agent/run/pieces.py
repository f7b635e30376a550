"""The pieces of one answer: stored together before the first goes, each sent once, and a
line for what could not be.

A long reply goes as several messages (its chunks), its pictures and files after them.
Before the first is sent, every piece — and the bytes of each attachment — is stored in one
transaction (``storage/pieces.py``); each then gets its own attempt and receipt. A crash
between two pieces leaves the rest *owed*: when the run is driven again, the recovery pass
sends them, once each (``send_owed``), instead of calling the answer a partial failure.
What can no longer go (an upload DingTalk refused, bytes no longer kept) or may be missing
(a piece whose send a crash cut, never resent blindly) is said in one short follow-up line,
which takes the acting step and the action gate like every other message.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from agent.contracts import (
    ActionIntent,
    AttachmentReason,
    Evidence,
    PieceReason,
    Receipt,
    ReceiptStatus,
    Run,
)
from storage import Store
from storage.pieces import answer_of

# what the person is told of a picture or file that did not go, by the receipt's reason
_WHY = {
    AttachmentReason.UPLOAD_FAILED.value: ("钉钉没有接受上传", "DingTalk refused the upload"),
    AttachmentReason.NO_OPENAPI.value: ("这个会话只能发文字", "this chat takes text only"),
    PieceReason.PIECE_LOST.value: ("发送中断后已无法找回", "it was lost when sending stopped"),
}
_MAY_BE_MISSING = (
    "上面的回答发送时中断过，中间可能缺了一段。",
    "Sending the answer above was interrupted; part of it may be missing.",
)
_CUT_SHORT = (  # a card answer a stop cut between two of its cards
    "上面的回答发送时中断了，后面的部分没能发出；需要的话请再问我一次。",
    "Sending the answer above was cut off; the rest of it did not go. Ask again if you need it.",
)

FollowUp = Callable[[str], Awaitable[Any]]


def is_attachment(intent: ActionIntent) -> bool:
    return intent.content is not None and intent.content.attachment is not None


def payloads(
    intents: list[ActionIntent], payload: Callable[[ActionIntent], bytes | None]
) -> dict[str, bytes]:
    """The bytes of each attachment piece, by its intent id (what is stored with them)."""
    found = {}
    for intent in intents:
        data = payload(intent) if is_attachment(intent) else None
        if data is not None:
            found[intent.intent_id] = data
    return found


def missing_line(
    pieces: list[tuple[ActionIntent, Receipt]], english: bool, cut_short: bool = False
) -> str | None:
    """One line for the pieces of an answer the person did not (or may not) get, or None.
    ``cut_short``: a card answer whose later cards never opened."""
    lost = []
    cut = False
    for intent, receipt in pieces:
        if is_attachment(intent) and receipt.status is ReceiptStatus.FAILED:
            ref = intent.content.attachment if intent.content else None
            name = ref.name if ref is not None else "?"
            why = _WHY.get(receipt.reason or "", ("没有发出去", "it was not sent"))
            lost.append((name, ref.kind if ref is not None else "file", why))
        elif not is_attachment(intent) and receipt.status is ReceiptStatus.UNCERTAIN:
            cut = True
    if not lost and not cut and not cut_short:
        return None
    missing = [*([_MAY_BE_MISSING] if cut else []), *([_CUT_SHORT] if cut_short else [])]
    if english:
        said = [
            f"{'picture' if kind == 'image' else 'file'} {name} not sent: {why[1]}"
            for name, kind, why in lost
        ]
        return " ".join([*(f"({s})" for s in said), *(m[1] for m in missing)])
    said = [
        f"{'图片' if kind == 'image' else '文件'}「{name}」没能发出：{why[0]}"
        for name, kind, why in lost
    ]
    line = "；".join([*said, *(m[0] for m in missing)]).replace("。；", "；")
    return line if line.endswith("。") else f"{line}。"


def _failed(
    store: Store, broker: Any, run: Run, intent: ActionIntent, reason: str, why: str
) -> Receipt:
    """A piece that was not sent, and never will be: its failed receipt, stored."""
    receipt = broker.receipt(
        run,
        intent.kind,
        ReceiptStatus.FAILED,
        intent_id=intent.intent_id,
        reason=reason,
        evidence=Evidence(detail=why),
    )
    store.actions.add_receipt(receipt)
    return receipt


def not_sent(store: Store, broker: Any, run: Run, rest: list[ActionIntent]) -> list[Receipt]:
    """The pieces after a failed one: never sent, and recorded so (nothing stays owed)."""
    why = "not sent: an earlier piece of the answer failed"
    return [
        _failed(store, broker, run, i, PieceReason.EARLIER_PIECE_FAILED.value, why) for i in rest
    ]


async def send_owed(store: Store, broker: Any, run: Run, follow_up: FollowUp, english: bool) -> int:
    """After a crash: the pieces of this run's answer still owed, each sent once (an
    attachment with its kept bytes), then one line for what did not or may not have
    arrived — or that a card answer was cut between its cards. Returns how many pieces
    were owed."""
    owed = store.pieces.owed_pieces(run.event_id)
    cut_short = store.cards.card_answer_cut(run.event_id)
    if not owed:
        if cut_short:
            await follow_up(missing_line([], english, cut_short=True) or "")
        return 0
    for intent in owed:
        payload = store.pieces.piece_bytes(intent.intent_id) if is_attachment(intent) else None
        if is_attachment(intent) and payload is None:
            why = "its bytes were no longer kept when it was owed"
            _failed(store, broker, run, intent, PieceReason.PIECE_LOST.value, why)
            continue
        receipt = await broker.execute(run, intent, payload=payload, stored=True)
        if not is_attachment(intent) and not receipt.status.delivered:
            not_sent(store, broker, run, [i for i in owed if i.chunk > intent.chunk])
            break
    answer = [
        (intent, receipts[-1])
        for intent in store.actions.intents(run.event_id)
        if (receipts := store.actions.intent_receipts(intent.intent_id))
        and intent.chunks
        and _of_answer(intent, owed)
    ]
    line = missing_line(answer, english, cut_short)
    if line is not None:
        await follow_up(line)
    store.pieces.forget_piece_bytes(run.event_id)
    return len(owed)


def _of_answer(intent: ActionIntent, owed: list[ActionIntent]) -> bool:
    """Is ``intent`` a piece of the same answer as the owed ones (its slot)?"""
    slot = answer_of(owed[0].idempotency_key)
    return answer_of(intent.idempotency_key) == slot
