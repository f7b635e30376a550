"""The approvals run's harness: the daemons, the fake, the load, and what is done to them
(faults armed, kills random and targeted, pauses), one thing at a time."""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from agent.acts.executor import token_of
from lab.dev.config import DevModel
from lab.fake import FakeDingTalk, Fault
from lab.reliability.approvals.faults import ARM_CYCLE, PAUSE_S, READ_TIMEOUT_S, SPECS
from lab.reliability.approvals.parameters import REQUEST_ID, Shape, request_of, request_send
from lab.reliability.approvals.people import Clicker
from lab.reliability.daemon import DaemonProcess, until


class WatchedModel(DevModel):
    """The lab's fake model (``reword`` as asked), telling the harness the moment it
    proposes a create for a message it has not answered with one before."""

    def __init__(self, reword: bool) -> None:
        super().__init__(reword=reword)
        self.proposed = asyncio.Event()

    def next_entry(self, messages: list[Any]) -> dict[str, Any]:
        before = len(self.created_for)
        entry = super().next_entry(messages)
        if len(self.created_for) > before:
            self.proposed.set()
        return entry


def _pids_by_port(pids: Iterable[int]) -> dict[int, int]:
    """Each TCP socket's local port -> which of ``pids`` holds it (from /proc)."""
    inode_port: dict[str, int] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            inode_port[fields[9]] = int(fields[1].rsplit(":", 1)[1], 16)
    found: dict[int, int] = {}
    for pid in pids:
        entry = Path(f"/proc/{pid}")
        try:
            links = [os.readlink(fd) for fd in (entry / "fd").iterdir()]
        except OSError:
            continue
        for link in links:
            if link.startswith("socket:["):
                port = inode_port.get(link[8:-1])
                if port is not None:
                    found[port] = int(entry.name)
    return found


class Harness:
    """The daemons, the fake, the load and what is done to them, one thing at a time."""

    def __init__(
        self,
        fake: FakeDingTalk,
        daemons: list[DaemonProcess],
        clicker: Clicker,
        rng: random.Random,
        faults: tuple[str, ...],
        model: WatchedModel,
        codes: bool = False,
    ) -> None:
        self.fake = fake
        self.codes = codes  # clicker is a Replier: kills follow replies, not clicks
        self.model = model
        self.daemons = daemons
        self.clicker = clicker
        self.rng = rng
        self.faults = faults
        self.sent: list[str] = []
        self.flowing = asyncio.Event()  # cleared while a pause holds the load
        self.flowing.set()
        self.kills: Counter[str] = Counter()
        self.random_stops = 0
        self.armed: list[tuple[str, Fault, int]] = []  # kind, the fault, its times
        self.paused_windows: list[tuple[float, float]] = []  # monotonic, paused daemons up
        self.paused_s = 0.0
        self.notes: list[str] = []  # what a targeted action could not find
        self.struck_runs: list[str] = []  # what each targeted kill struck

    # ------------------------------------------------------------------ load and faults

    async def load(self, shape: Shape) -> None:
        cycle = [kind for kind in ARM_CYCLE if kind.removesuffix("_long") in self.faults]
        next_at, armed = time.monotonic(), 0
        for i in range(shape.requests):
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
            if not self.flowing.is_set():  # checked right before the send: nothing between
                await self.flowing.wait()
            next_at = max(next_at, time.monotonic()) + 1 / shape.rate_per_s
            send = request_send(i, self.codes)
            self.fake.inject(send)
            self.sent.append(send["msg"])
            if cycle and i % shape.arm_every == shape.arm_every // 2:
                self.arm(cycle[armed % len(cycle)])
                armed += 1

    def arm(self, kind: str, first: bool = False) -> Fault:
        """Arm a fault of ``kind``; ``first``: ahead of those of its target already armed
        (so it strikes the very next call)."""
        spec = SPECS[kind]
        fault = self.fake.arm_fault(spec).faults[-1]
        if first:
            self.fake.faults.remove(fault)
            self.fake.faults.insert(0, fault)
        self.armed.append((kind, fault, fault.remaining))
        return fault

    def struck(self, fault: Fault, times: int) -> int:
        held = next((f for f in self.fake.faults if f is fault), None)
        return times - (held.remaining if held is not None else 0)

    def fault_figures(self) -> dict[str, Any]:
        armed, struck = Counter[str](), Counter[str]()
        for kind, fault, times in self.armed:
            armed[kind] += times
            struck[kind] += self.struck(fault, times)
        return {
            "faults_armed": dict(sorted(armed.items())),
            "faults_struck": dict(sorted(struck.items())),
        }

    # ------------------------------------------------------------------ daemons

    async def restart(self, victim: DaemonProcess, kind: str) -> None:
        if kind == "random":
            self.random_stops += 1
        if kind == "random" and "sigterm" in self.faults and self.random_stops % 2 == 0:
            await victim.terminate(timeout=30)  # the grace, then what is left is cut
            kind = "sigterm"
        else:
            await victim.kill9()
        self.kills[kind] += 1
        await asyncio.sleep(self.rng.uniform(0.1, 0.6))
        await victim.start()

    def holder_of_port(self, port: int | None) -> DaemonProcess | None:
        if port is None:
            return None
        pid = _pids_by_port(d.pid for d in self.daemons if d.pid is not None).get(port)
        return next((d for d in self.daemons if d.pid is not None and d.pid == pid), None)

    async def kill_random(self) -> None:
        await self.restart(self.rng.choice(self.daemons), "random")

    async def kill_after_click(self) -> None:
        """Kill the daemon a click (with codes: a reply) was just delivered to, 0–300 ms
        after it came."""
        kind = "after_reply" if self.codes else "after_click"
        seen = len(self.clicker.keys)
        if not await until(lambda: len(self.clicker.keys) > seen, 10, 0.02):
            self.notes.append(f"kill_{kind}: nothing came within 10 s; a random kill")
            await self.kill_random()
            return
        key = self.clicker.keys[seen]
        stream = self.fake.stream

        def record() -> Any:
            sent = [f for f in stream.frames.values() if f.msg_id == key and f.sent_at]
            return sent[-1] if sent else None

        await until(lambda: record() is not None, 2, 0.01)
        await asyncio.sleep(self.rng.uniform(0.0, 0.3))
        frame = record()
        victim = None
        if frame is not None:
            conn = next((c for c in stream.connections if c.id == frame.connection_id), None)
            peer = conn.transport.get_extra_info("peername") if conn and conn.transport else None
            victim = self.holder_of_port(peer[1] if peer else None)
        msg = self.clicker.msgs[seen]
        what = f"{msg}:{key}" if self.codes else msg
        self.struck_runs.append(f"{kind}:{what}:{'holder' if victim else 'random'}")
        await self.restart(victim or self.rng.choice(self.daemons), kind)

    async def kill_during_create(self) -> None:
        """Arm an applied-then-timeout create and kill the daemon making it mid-stall."""
        fault = self.arm("timeout", first=True)
        before: set[str] = set()

        def struck() -> bool:
            nonlocal before
            if any(f is fault for f in self.fake.faults):
                before = {t.id for t in self.fake.workspace.todos}  # the create is not in
                return False
            return True

        if not await until(struck, 20, 0.02):
            self.notes.append("kill_during_create: no create came within 20 s; a random kill")
            await self.kill_random()
            return
        made = [request_of(t.subject) for t in self.fake.workspace.todos if t.id not in before]
        self.struck_runs.append(f"during_create:{','.join(filter(None, made))}")
        await asyncio.sleep(self.rng.uniform(0.2, READ_TIMEOUT_S * 0.6))
        victim = self.creator_of(before)
        await self.restart(victim or self.rng.choice(self.daemons), "during_create")

    async def kill_after_proposal(self, model: WatchedModel) -> None:
        """Kill the daemon whose run the model just answered with a create, before the run
        has its approval: the run is driven again and the model asked again (``reword``)."""
        seen = len(model.created_for)
        model.proposed.clear()
        try:
            await asyncio.wait_for(model.proposed.wait(), 10)
        except TimeoutError:
            self.notes.append("kill_after_proposal: no create proposed within 10 s; random")
            await self.kill_random()
            return
        await asyncio.sleep(self.rng.uniform(0.0, 0.02))
        found = REQUEST_ID.search(model.created_for[seen])
        msg = f"apv-{found.group(1)}" if found else None
        self.struck_runs.append(f"after_proposal:{msg}")
        await self.restart(self.running(msg) or self.rng.choice(self.daemons), "after_proposal")

    def owner_daemon(self, store: Any, where: str, value: str) -> DaemonProcess | None:
        """The daemon whose process owns the run (its owner is ``host:pid:nonce``)."""
        sql = f"SELECT owner FROM runs WHERE {where} = ?"
        rows = store.conn.execute(sql, (value,)).fetchall()
        owner = str(rows[0][0]) if rows and rows[0][0] else ""
        pid = owner.split(":")[1] if owner.count(":") >= 2 else ""
        return next((d for d in self.daemons if str(d.pid) == pid), None)

    def running(self, msg: str | None) -> DaemonProcess | None:
        """The daemon running ``msg``'s run (the only one, with one)."""
        if len(self.daemons) == 1 or msg is None:
            return self.daemons[0] if len(self.daemons) == 1 else None
        store = self.daemons[0].store()
        try:
            return self.owner_daemon(store, "event_id", msg)
        finally:
            store.close()

    def creator_of(self, before: set[str]) -> DaemonProcess | None:
        """The daemon whose run holds the act behind the to-do just made (its sourceId)."""
        if len(self.daemons) == 1:
            return self.daemons[0]
        fresh = {t.source_id for t in self.fake.workspace.todos if t.id not in before}
        store = self.daemons[0].store()
        try:
            for intent in store.actions.intents():
                if token_of(intent) in fresh:
                    holder = self.owner_daemon(store, "run_id", intent.run_id)
                    if holder is not None:
                        return holder
        finally:
            store.close()
        return None

    def asking_settled(self) -> bool:
        """Every request sent so far has its run past the model (waiting or finished)."""
        store = self.daemons[0].store()
        try:
            runs = (store.events.get_run(m) for m in self.sent)
            return all(run is not None and run.state.is_finished for run in runs)
        finally:
            store.close()

    async def pause(self, victims: list[DaemonProcess]) -> None:
        """Restart ``victims`` paused for PAUSE_S while clicks keep coming, then unpaused.
        New requests are held meanwhile: a paused robot stays silent to them, by design."""
        self.flowing.clear()
        await until(self.asking_settled, 1.5, 0.1)  # briefly: clicks must come meanwhile
        for daemon in victims:
            await daemon.terminate()
            daemon.reconfigure(paused=True)
        await asyncio.gather(*(daemon.start() for daemon in victims))
        began = time.monotonic()
        await asyncio.sleep(PAUSE_S)
        for daemon in victims:
            await daemon.terminate()
            daemon.reconfigure(paused=None)
        ended = time.monotonic()
        await asyncio.gather(*(daemon.start() for daemon in victims))
        self.paused_windows.append((began, ended))
        self.paused_s += ended - began
        self.flowing.set()

    def actions(self, shape: Shape) -> list[str]:
        """The targeted kills and pauses interleaved with the random kills, the targeted
        ones early (while the load runs)."""
        targeted = []
        if "kill_after_click" in self.faults:
            targeted += ["after_click"] * shape.click_kills
        if "kill_during_create" in self.faults:
            targeted += ["during_create"] * shape.create_kills
        if "reword" in self.faults:
            targeted += ["after_proposal"] * shape.proposal_kills
        self.rng.shuffle(targeted)
        pauses = ["pause"] * shape.pauses if "paused" in self.faults else []
        randoms = ["random"] * shape.kills
        order: list[str] = []
        while targeted or pauses or randoms:
            # two targeted kills (they wait for what they strike), a pause, a random kill
            order += targeted[:2] + pauses[:1] + randoms[:1]
            targeted, pauses, randoms = targeted[2:], pauses[1:], randoms[1:]
        return order

    async def act(self, action: str, pauses_done: int) -> None:
        if action == "random":
            await self.kill_random()
        elif action == "after_click":
            await self.kill_after_click()
        elif action == "during_create":
            await self.kill_during_create()
        elif action == "after_proposal":
            await self.kill_after_proposal(self.model)
        else:  # the first pause takes every replica; the next one only one of them
            victims = self.daemons if pauses_done == 0 else [self.rng.choice(self.daemons)]
            await self.pause(victims)
