"""Run lab cases: each in a fresh store, against a fresh fake DingTalk, on a virtual clock.

The runner plays DingTalk's part of the protocol: it builds callbacks like the platform
does, delivers frames to the runtime's ingest, remembers which frames were never acked
(the runtime "died" before answering) and delivers those again after the redelivery delay,
as DingTalk does. A ``restart`` throws the whole runtime away — as ``kill -9`` would — and
builds a new one on the same store, with the configuration overrides the restarts gave so
far (``restart.config``). ``CaseRun`` is the in-process driver of ``lab.eval.play``, which
plays the steps and calls the judge.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from agent.clock import VirtualClock
from agent.config import Settings
from agent.crashpoints import Crash, CrashPoints
from agent.proactive.operator import operator_event
from agent.proactive.operator import send as operator_send
from agent.runtime import Runtime
from lab.eval.case_settings import case_provider, lab_settings
from lab.eval.cases import Case, ClickSpec, OperatorSpec, RestartSpec, Step, directory
from lab.eval.judge import Check
from lab.eval.knowledge_cases import seed_knowledge
from lab.eval.play import (
    FEEDBACK_CHOICES,
    CaseResult,
    answer_card,
    play_case,
    reply_card_once_streaming,
)
from lab.eval.stores import Records, RobotStores
from lab.fake import FakeDingTalk, build_callback, callback_frame
from lab.fake.callbacks import CARD_CALLBACK_TOPIC
from lab.fake.files import parse_files

LAB_EPOCH = 1_767_225_600.0  # 2026-01-01T00:00:00Z: every case starts here
REDELIVERY_DELAY_S = 60.0  # DingTalk redelivers an unacked callback about a minute later


class CaseRun:
    def __init__(self, case: Case, workdir: Path) -> None:
        self.case = case
        self.workdir = workdir
        self.clock = VirtualClock(LAB_EPOCH)
        self.fake = FakeDingTalk(
            self.clock, timeout_fault_s=1.0, users=directory(case.fixtures.users)
        )
        self.fake.files.update(parse_files(case.fixtures.files))
        self.fake.seed_todos([todo.seed() for todo in case.fixtures.todos])
        seed_knowledge(self.fake, case)
        # One process, as kill -9 would see it: a crash point armed for the next delivery
        # takes down every robot's runtime, and all of them start again.
        self.crash = CrashPoints()
        self.unacked: list[tuple[float, dict[str, Any]]] = []
        self.frames = 0
        # Each robot's runtime on its own store, by robot code; the first is the default.
        self.runtimes: dict[str, Runtime] = {}
        self.settings: Settings | None = None
        self.model_url: str | None = None
        # restart.config: the overrides in force (accumulated), and those a crash restart
        # armed with them applies when the runtime next starts
        self.overrides: dict[str, Any] = {}
        self.pending: dict[str, Any] = {}
        self.next_beat: float | None = None  # when the heartbeat is on: the next beat's time
        self.next_sync: float | None = None  # with DingTalk knowledge: the next sync's time

    @property
    def runtime(self) -> Runtime:
        """The first (or only) robot's runtime: where a step that names no robot goes."""
        return next(iter(self.runtimes.values()))

    async def run(self) -> CaseResult:
        return await play_case(self)

    # ------------------------------------------------------------------ the driver

    async def open(self, model_url: str | None) -> None:
        self.model_url = model_url
        self.settings = lab_settings(self.case, self.workdir, self.fake, self.model_url)
        await self._boot()

    async def play(self, step: Step, following: Step | None) -> None:
        await self._step(step)

    async def finish(self) -> None:
        await self._drain()

    def checks(self) -> list[Check]:
        if not self.crash.armed:
            return []
        # a case about a crash proves nothing unless it came
        return [Check("restart.crash", "hit", f"never hit: {', '.join(self.crash.armed)}")]

    async def close(self) -> None:
        await self._close()

    def records(self) -> Records:
        """What the judge reads: the one robot's store, or every robot's side by side."""
        stores = [runtime.store for runtime in self.runtimes.values()]
        return stores[0] if len(stores) == 1 else RobotStores(stores)

    async def _boot(self) -> None:
        assert self.settings is not None
        for robot in self.settings.robot_settings():
            provider = case_provider(self.case, robot)
            runtime = Runtime(robot, clock=self.clock, crash=self.crash, provider=provider)
            if runtime.heartbeat is not None:
                # Beats are aligned to the case's start; the runner fires them (see
                # _advance), so no task sleeps on the virtual clock and races it ahead.
                runtime.heartbeat.anchor = LAB_EPOCH
                if self.next_beat is None:  # at the start, or turned on by a restart
                    self.next_beat = runtime.heartbeat.next_beat(self.clock.now())
            self.runtimes[str(robot.robot_code)] = runtime
            await runtime.start()
        if any(r.knowledge is not None for r in self.runtimes.values()):
            await self._sync_knowledge()  # the daemon syncs at start

    async def _close(self) -> None:
        runtimes, self.runtimes = list(self.runtimes.values()), {}
        for runtime in runtimes:
            await runtime.aclose()

    async def _restart(self) -> None:
        """Throw every runtime away (memory, tasks, connections), as ``kill -9`` of the
        process would, and start them again on their stores — with the configuration
        overrides given for this start (``restart.config``) merged over the earlier ones."""
        await self._close()
        if self.pending:
            self.overrides.update(self.pending)
            self.pending = {}
            self.settings = lab_settings(
                self.case, self.workdir, self.fake, self.model_url, self.overrides
            )
        await self._boot()

    async def _drain(self) -> None:
        while True:
            try:
                for runtime in self.runtimes.values():
                    await runtime.drain_store()
                return
            except Crash:
                await self._restart()

    def _robot(self, code: str | None) -> Runtime:
        """The runtime of robot ``code`` (the first for None); ``ValueError`` if none."""
        if code is None:
            return self.runtime
        runtime = self.runtimes.get(code)
        if runtime is None:
            raise ValueError(f"no robot {code!r} in this case (robots: {', '.join(self.runtimes)})")
        return runtime

    # ------------------------------------------------------------------ steps

    async def _advance(self, moment: float) -> None:
        """Move the clock, delivering the unacked frames and firing the heartbeat's beats
        that fall due on the way, in time order (a beat first when both fall due at once).

        Frames delivered at the same instant arrive back to back, before the runtime has
        worked on any of them (as when a user sends three lines at once, or DingTalk
        redelivers while the first delivery is still being handled). The runtime is
        drained whenever time moves on, and after each beat.
        """
        if moment > self.clock.now():
            await self._drain()
        while True:
            self.unacked.sort(key=lambda item: item[0])
            frame_due = self.unacked[0][0] if self.unacked else float("inf")
            beat_due = self.next_beat if self.next_beat is not None else float("inf")
            sync_due = self.next_sync if self.next_sync is not None else float("inf")
            if min(frame_due, beat_due, sync_due) > moment:
                break
            if sync_due <= min(frame_due, beat_due):
                self.clock.advance_to(sync_due)
                await self._sync_knowledge()
            elif beat_due <= frame_due:
                self.clock.advance_to(beat_due)
                await self._beat()
            else:
                due, data = self.unacked.pop(0)
                self.clock.advance_to(due)
                await self._deliver(callback_frame(data, self._frame_id(), now=due), data)
            await self._drain()
        self.clock.advance_to(moment)

    async def _sync_knowledge(self) -> None:
        """Every robot's DingTalk knowledge synced at the virtual now (as the daemon's
        schedule would), then the next sync is due ``knowledge_sync_s`` later."""
        syncing = [r for r in self.runtimes.values() if r.knowledge is not None]
        for runtime in syncing:
            assert runtime.knowledge is not None
            await runtime.knowledge.sync.sync()
        every = syncing[0].settings.knowledge_sync_s if syncing else None
        self.next_sync = self.clock.now() + every if every else None

    async def _beat(self) -> None:
        """One beat at the virtual now on every robot with a heartbeat, then the next one is
        due a slot later."""
        beating = [r.heartbeat for r in self.runtimes.values() if r.heartbeat is not None]
        self.next_beat = beating[0].next_beat(self.clock.now()) if beating else None
        for heartbeat in beating:
            heartbeat.beat()

    def _frame_id(self) -> str:
        self.frames += 1
        return f"lab-frame-{self.frames}"

    async def _step(self, step: Step) -> None:
        if step.at is not None:
            await self._advance(LAB_EPOCH + step.at)
        kind = step.kind
        if kind == "send":
            assert step.send is not None
            data = build_callback(self.fake, step.send.short_keys(), self.clock.now())
            await self._deliver(callback_frame(data, self._frame_id(), now=self.clock.now()), data)
        elif kind == "frame":
            value = step.frame_value
            raw = value if isinstance(value, str) else json.dumps(value)
            await self._deliver(raw, None)
        elif kind == "redeliver":
            data = self.fake.inbound.get(step.redeliver or "")
            if data is None:
                raise ValueError(f"redeliver: message {step.redeliver!r} was never sent")
            frame = callback_frame(data, self._frame_id(), now=self.clock.now())
            await self._deliver(frame, data)
        elif kind == "fault":
            assert step.fault is not None
            self.fake.arm_fault(step.fault)
        elif kind == "restart":
            spec = step.restart if isinstance(step.restart, RestartSpec) else RestartSpec()
            self.pending.update(spec.config)  # for the next start: now, or after the crash
            if spec.crash is not None:
                self.crash.arm(spec.crash)
            else:
                await self._restart()
        elif kind == "wait":
            await self._advance(self.clock.now() + (step.wait or 0.0))
        elif kind == "operator":
            assert step.operator is not None
            await self._operator(step.operator)
        elif kind == "click":
            assert step.click is not None
            await self._click(step.click)
        elif kind == "edit_doc":
            assert step.edit_doc is not None
            self.fake.workspace.knowledge.edit(
                step.edit_doc.id, step.edit_doc.text, self.clock.now()
            )
        elif kind == "delete_doc":
            self.fake.workspace.knowledge.delete(step.delete_doc or "")

    async def _operator(self, spec: OperatorSpec) -> None:
        """``dta send`` on the robot the step names (the first by default)."""
        runtime = self._robot(spec.robot)
        event = operator_event(
            spec.text,
            self.clock.now(),
            user=spec.user,
            group=spec.group,
            robot_code=runtime.settings.robot_code,
            event_id=spec.msg,
        )
        await operator_send(runtime.store, runtime.pipeline, event)

    async def _click(self, click: ClickSpec) -> None:
        """A press on the card the run of ``click.msg`` sent, delivered as DingTalk does: a
        card callback frame to the robot that sent it; what its ack answers is what the
        card shows."""
        if click.choice == "stop":  # mid-stream: the run is still writing its card
            runtime = self._sender_of(click.msg)
            track = await reply_card_once_streaming(
                runtime.store, self.fake, click.msg, click.after_frames or 1, click.card
            )
        else:
            await self._drain()  # the card exists once the run that sends it has worked
            runtime, track = self._sender_of(click.msg), None
            if click.choice in FEEDBACK_CHOICES:  # an answer card carries no msg_id variable
                track = answer_card(runtime.store, click.msg, click.card)
        data, card = self.fake.click_data(
            click.msg, click.by, click.choice, track, click.values, click.reason
        )
        # the same ``frame_id`` again: DingTalk redelivering a callback it got no ack for
        frame_id = click.frame_id or self._frame_id()
        frame = callback_frame(data, frame_id, now=self.clock.now(), topic=CARD_CALLBACK_TOPIC)
        result = runtime.ingest(frame, self.clock.now())
        self.fake.show_click_answer(card, click.by, result.response)

    def _sender_of(self, msg: str) -> Runtime:
        """The runtime of the robot that received ``msg`` (so sent its cards)."""
        data = self.fake.inbound.get(msg) or {}
        return self.runtimes.get(str(data.get("robotCode")), self.runtime)

    async def _deliver(self, raw: str, data: dict[str, Any] | None) -> None:
        """A frame to the robot it was sent to (a raw frame: the first robot)."""
        runtime = self._sender_of(str(data["msgId"])) if data is not None else self.runtime
        try:
            runtime.ingest(raw, self.clock.now())
        except Crash:
            # Died after storing, before acking: DingTalk will deliver the frame again.
            if data is not None:
                self.unacked.append((self.clock.now() + REDELIVERY_DELAY_S, data))
            await self._restart()


async def run_case(case: Case) -> CaseResult:
    with tempfile.TemporaryDirectory(prefix=f"dta-case-{case.id[:40]}-") as tmp:
        return await CaseRun(case, Path(tmp)).run()


async def run_cases(
    cases: list[Case],
    on_result: Callable[[CaseResult], None] | None = None,
    runner: Callable[[Case], Awaitable[CaseResult]] = run_case,
) -> list[CaseResult]:
    """Run cases one after another (each is deterministic on its own clock)."""
    results = []
    for case in cases:
        result = await runner(case)
        if on_result is not None:
            on_result(result)
        results.append(result)
    return results
