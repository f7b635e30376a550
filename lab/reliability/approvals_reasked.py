"""A reproduction: an act approved but not yet carried out, re-asked in new words, is asked
for again — and approving the second card makes a second to-do.

Found by ``dta lab reliability approvals`` (2026-12-03, full size: ``apv-63``, two to-dos
for one request). Here on one daemon (SQLite) and the fake DingTalk, step by step:

1. A request for a colleague's to-do; the approval card reaches the asker, but its answer
   stalls (``card_create`` applied, then a timeout), so the asking run is still at work —
   not yet ``waiting`` — when the daemon is killed (SIGKILL).
2. The asker approves the card they see (the click waits in the platform for the next
   connection).
3. On restart the click is recorded (the approval is ``approved``, its settlement event
   stored) and the re-driven asking run asks the model again; the lab's fake model, with
   ``reword``, words the same act anew (「尽快」 before the subject, a ``due``). The model is
   slowed (0.5 s an answer) only so the queued click is decided first, as it was in the
   reliability run by itself.
4. A second approval card is sent for the same act; the asker approves it too.

Expected: one to-do (the re-asked act is the approved one: read back, never made again).
Seen: two to-dos, 「apv-task-0」 and 「尽快apv-task-0」, and the asker told 已完成 twice.

Exit 0 when there is exactly one to-do, 1 while the problem reproduces.

    python -m lab.reliability.approvals_reasked [--workdir DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from agent.clock import SystemClock
from lab.daemon import DaemonProcess, until
from lab.dev.config import DevModel
from lab.fake import FakeDingTalk
from lab.reliability import approvals
from lab.reliability.daemon import unfinished_runs

MSG, ASKER = "apv-0", "apv-u0"


class SlowWhenAsked(DevModel):
    """The reword model, answering 0.5 s late while ``slow``."""

    slow = False

    def next_entry(self, messages: list[Any]) -> dict[str, Any]:
        entry = super().next_entry(messages)
        return {**entry, "delay_s": 0.5} if self.slow and entry else entry


def _cards(fake: FakeDingTalk) -> list[Any]:
    return [card for card in fake.cards if card.data.get("msg_id") == MSG]


async def reproduce(workdir: Path) -> dict[str, Any]:
    fake = FakeDingTalk(
        SystemClock(),
        timeout_fault_s=5.0,
        redelivery_delay_s=1.0,
        max_redeliveries=60,
        users=approvals.fake_users(),
    )
    model = SlowWhenAsked(reword=True)
    await fake.start()
    config = approvals.daemon_config(await model.start(), 1, None)
    config["approval_timeout_s"] = 60
    daemon = DaemonProcess(fake, workdir / "reasked", config)
    try:
        await daemon.start()
        fake.arm_fault({"card_create": {"timeout": True, "delivered": True}})
        text = f"给{approvals.COLLEAGUE_NAME}建个待办：apv-task-0"
        fake.inject({"msg": MSG, "from": ASKER, "text": text})
        if not await until(lambda: bool(_cards(fake)), 10):
            raise RuntimeError("no approval card")
        await daemon.kill9()
        fake.click("", ASKER, "approve", out_track_id=_cards(fake)[0].out_track_id)
        model.slow = True
        await daemon.start()
        second = await until(lambda: len(_cards(fake)) > 1, 15)
        model.slow = False
        if second:
            fake.click("", ASKER, "approve", out_track_id=_cards(fake)[-1].out_track_id)
        store = daemon.store()
        try:

            def settled() -> bool:
                records = store.approvals.all(MSG)
                events = [MSG, *(f"approval:{a.approval_id}" for a in records)]
                return (
                    not any(a.status.is_open for a in records)
                    and not store.approvals.uncertain_acts()
                    and unfinished_runs(store, events) == 0
                )

            await until(settled, 30, 0.3)
            await asyncio.sleep(2.0)
            found = {
                "approvals": [
                    {
                        "id": a.approval_id,
                        "status": a.status.value,
                        "arguments": a.arguments,
                        "act_key": a.act_key,
                        "decided_at": a.decided_at,
                        "created_at": a.created_at,
                    }
                    for a in store.approvals.all(MSG)
                ],
                "receipts": [
                    f"{r.kind.value if r.kind else '-'}:{r.status.value}:{r.reason or ''}"
                    for r in store.actions.receipts(MSG)
                ],
            }
        finally:
            store.close()
        todos = fake.workspace_view().get("todos", [])
        found["todos"] = [t["subject"] for t in todos]
        found["told"] = [
            m.text for m in fake.received if ASKER in m.user_ids and m.msgtype != "card"
        ]
        found["reproduced"] = len(todos) != 1
        return found
    finally:
        await daemon.stop()
        await model.stop()
        await fake.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, help="keep the store and logs here")
    args = parser.parse_args(argv)
    if args.workdir is not None:
        found = asyncio.run(reproduce(args.workdir))
    else:
        with tempfile.TemporaryDirectory(prefix="dta-reasked-") as tmp:
            found = asyncio.run(reproduce(Path(tmp)))
    print(json.dumps(found, indent=2, ensure_ascii=False))
    return 1 if found["reproduced"] else 0


if __name__ == "__main__":
    sys.exit(main())
