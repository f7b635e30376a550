"""``dta dev``: talk to the robot locally — the bundled fake DingTalk plus the real daemon.

``dta dev`` starts the fake DingTalk on 127.0.0.1 and ``dta run`` as a subprocess connected
to it over the real ``dingtalk-stream`` client, with SQLite and the ``rules`` provider, no
credentials needed. Then a person types messages (or ``--demo`` plays a short scripted
conversation) and sees what the platform received, with the decision and receipt trail.
``dta dev say`` sends one message to a running ``dta dev`` from another terminal.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import httpx

from agent.clock import SystemClock
from agent.contracts import RunState
from lab.daemon import DaemonError, DaemonProcess
from lab.fake import FakeDingTalk
from storage import Store

STATE_FILE = Path(".dta/dev.json")
DEMO: list[list[str]] = [
    ["--from", "u1", "你好，介绍一下你自己"],
    ["--from", "u1", "7 + 5 等于多少？"],
    ["--group", "cid-demo", "--from", "u2", "大家好，今天下午开会"],
    ["--group", "cid-demo", "--at-bot", "--from", "u2", "(3+4)×6 是多少"],
    ["--from", "u3", "把这个结果转发到销售群"],
]


def say_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="say", add_help=False, exit_on_error=False)
    parser.add_argument("--group", help="openConversationId of a group (absent: a DM)")
    parser.add_argument("--at-bot", action="store_true", help="@ the robot (groups)")
    parser.add_argument("--from", dest="user", default="dev-user", help="sender staff id")
    parser.add_argument("text", nargs="+")
    return parser


def to_send(args: argparse.Namespace, msg_id: str) -> dict[str, Any]:
    send: dict[str, Any] = {"msg": msg_id, "from": args.user, "text": " ".join(args.text)}
    if args.group:
        send["group"] = args.group
        send["at_bot"] = bool(args.at_bot)
    return send


@dataclass
class DevSession:
    """Reads the daemon's store and the fake's record to show what one message caused."""

    store_path: Path
    out: TextIO

    async def wait_finished(self, msg_id: str, timeout: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            store = Store(self.store_path)
            try:
                run = store.get_run(msg_id)
                if run is not None and run.state is not RunState.WORKING:
                    return True
            finally:
                store.close()
            await asyncio.sleep(0.05)
        return False

    def trail(self, msg_id: str) -> list[str]:
        store = Store(self.store_path)
        try:
            lines = []
            decision = store.get_decision(msg_id)
            if decision is not None:
                lines.append(f"  decision: {decision.verdict.value} ({decision.reason.value})")
            for receipt in store.receipts(msg_id):
                reason = f" ({receipt.reason})" if receipt.reason else ""
                via = ",".join(c.value for c in receipt.evidence.channels_tried)
                via = f" via {via}" if via else ""
                lines.append(f"  receipt {receipt.kind}: {receipt.status.value}{reason}{via}")
            return lines
        finally:
            store.close()

    def show(self, send: dict[str, Any], received: list[dict[str, Any]]) -> None:
        where = (
            f"in {send['group']}" + (" @robot" if send.get("at_bot") else "")
            if (send.get("group"))
            else "(DM)"
        )
        print(f"\n{send['from']} {where}: {send['text']}", file=self.out)
        for line in self.trail(send["msg"]):
            print(line, file=self.out)
        for message in received:
            target = message.get("conversation_id") or ",".join(message.get("user_ids") or [])
            at = f" @{','.join(message['at_user_ids'])}" if message.get("at_user_ids") else ""
            print(f"  robot → {target}{at}: {message['text']}", file=self.out)


async def _converse(
    fake: FakeDingTalk, session: DevSession, argv: list[str], counter: list[int]
) -> None:
    try:
        args = say_parser().parse_args(argv)
    except (argparse.ArgumentError, SystemExit):
        print("usage: [--group CID] [--at-bot] [--from USER] text", file=session.out)
        return
    counter[0] += 1
    send = to_send(args, f"dev-{os.getpid()}-{counter[0]}")
    before = len(fake.received)
    fake.inject(send)
    await session.wait_finished(send["msg"])
    await asyncio.sleep(0.05)  # the platform's record lands right after the receipt
    session.show(send, [m.to_dict() for m in fake.received[before:]])


async def dev(demo: bool, workdir: Path, out: TextIO) -> int:
    workdir.mkdir(parents=True, exist_ok=True)
    fake = FakeDingTalk(SystemClock())
    base = await fake.start()
    daemon = DaemonProcess(fake, workdir, {"log_level": "WARNING"})
    try:
        try:
            await daemon.start(timeout=20)
        except DaemonError:
            print(f"the daemon did not become ready; see {workdir}/daemon-*.log", file=out)
            return 1
        health = daemon.url("")
        state = {"fake_url": base, "store_path": str(daemon.store_path), "health_url": health}
        STATE_FILE.parent.mkdir(parents=True, exist_ok=True)
        STATE_FILE.write_text(json.dumps(state), encoding="utf-8")
        print(f"fake DingTalk {base} · daemon pid {daemon.pid} · health {health}", file=out)
        session, counter = DevSession(daemon.store_path, out), [0]
        if demo:
            for argv in DEMO:
                await _converse(fake, session, argv, counter)
            await _redelivery_demo(fake, session, f"dev-{os.getpid()}-2")
            return 0
        print("type a message (options: --group CID --at-bot --from USER); Ctrl-D quits", file=out)
        loop = asyncio.get_running_loop()
        while True:
            line = await loop.run_in_executor(None, _read_line)
            if line is None:
                return 0
            if line.strip():
                await _converse(fake, session, shlex.split(line), counter)
    finally:
        await daemon.stop()
        await fake.stop()
        STATE_FILE.unlink(missing_ok=True)


async def _redelivery_demo(fake: FakeDingTalk, session: DevSession, msg_id: str) -> None:
    before = len(fake.received)
    fake.redeliver(msg_id)
    await asyncio.sleep(0.5)
    store = Store(session.store_path)
    deliveries = store.deliveries(msg_id)
    store.close()
    print(
        f"\nDingTalk redelivers {msg_id}: delivered {deliveries}x,"
        f" {len(fake.received) - before} new messages (duplicate acked and counted, not answered)",
        file=session.out,
    )


def _read_line() -> str | None:
    try:
        return input("> ")
    except EOFError:
        return None


def say(argv: list[str], out: TextIO) -> int:
    """Send one message to a running ``dta dev`` and print what it caused."""
    if not STATE_FILE.exists():
        print("no running `dta dev` found (start it in another terminal first)", file=out)
        return 2
    state = json.loads(STATE_FILE.read_text(encoding="utf-8"))
    args = say_parser().parse_args(argv)
    send = to_send(args, f"say-{os.getpid()}-{int(time.time() * 1000)}")
    with httpx.Client(base_url=state["fake_url"], trust_env=False, timeout=5) as client:
        before = len(client.get("/_lab/received").json())
        client.post("/_lab/messages", json=send).raise_for_status()
        session = DevSession(Path(state["store_path"]), out)
        asyncio.run(session.wait_finished(send["msg"]))
        time.sleep(0.05)
        received = client.get("/_lab/received").json()[before:]
    session.show(send, received)
    return 0
