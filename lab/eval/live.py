"""``dta lab eval --live``: the same case files, through the real connector and websocket.

Instead of handing frames to ingest, each case starts the fake DingTalk's stream gateway
and the real ``dingtalk-stream`` client (``agent.dingtalk.connector``) on the system clock;
steps become injected callbacks, raw frames, redeliveries and faults on the platform's side,
and the verdict comes from the same judge (``LiveCaseRun`` is the live driver of
``lab.eval.play``). A plain ``restart`` stops every connector and runtime and starts them
again on their stores, with the configuration overrides the restarts gave so far
(``restart.config``). A case that needs the virtual clock (waits, crash points, minute-long
gaps, or several messages from one person arriving at the same instant) cannot
be reproduced on real time and is skipped with the reason.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from agent.clock import SystemClock
from agent.components import connector_config
from agent.config import Settings
from agent.daemon.connect import connect
from agent.dingtalk.connector import Connector
from agent.runtime import Runtime
from lab.eval.case_settings import case_provider, lab_settings
from lab.eval.cases import Case, RestartSpec, SendSpec, Step, directory
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
from lab.fake import FakeDingTalk
from lab.fake.files import parse_files

SETTLE_TIMEOUT_S = 10.0
# A short keepalive and back-off: a lab case notices a dropped socket in about a second.
LIVE_STREAM = {
    "stream_ping_interval_s": 1.0,
    "stream_ping_timeout_s": 1.0,
    "reconnect_backoff_base_s": 0.05,
    "reconnect_backoff_max_s": 0.5,
}


def live_skip_reason(case: Case) -> str | None:
    """Why this case cannot run on real time, or None when it can."""
    kinds = {step.kind for step in case.steps}
    if any(isinstance(step.restart, RestartSpec) and step.restart.crash for step in case.steps):
        return "crash restarts (a crash point armed) need the in-process harness"
    if "wait" in kinds:
        return "waits on the virtual clock"
    if any(step.click is not None and step.click.frame_id for step in case.steps):
        return "a click delivered again under its frame id is played in-process"
    if kinds & {"edit_doc", "delete_doc"}:
        return "docs changed mid-case are seen by a sync on the virtual clock"
    if "operator" in kinds:
        return "operator sends (dta send) do not come over the stream"
    if any(config.get("heartbeat_interval_s") is not None for config in case.configs()):
        return "heartbeats are fired on the virtual clock"
    if any((step.at or 0) >= 60 for step in case.steps):
        return "spans a minute or more of virtual time"
    arrivals: Counter[tuple[float, str]] = Counter()
    for step in case.steps:
        if step.send is not None:
            arrivals[(step.at or 0.0, _thread(step.send))] += 1
    if any(count > 1 for count in arrivals.values()):
        return "several messages from one person at the same instant"
    return None


def _thread(send: SendSpec) -> str:
    return f"{send.group or 'dm'}|{send.from_}"


class LiveCaseRun:
    def __init__(self, case: Case, workdir: Path) -> None:
        self.case = case
        self.workdir = workdir
        self.fake = FakeDingTalk(
            SystemClock(), timeout_fault_s=1.0, users=directory(case.fixtures.users)
        )
        self.fake.files.update(parse_files(case.fixtures.files))
        self.fake.seed_todos([todo.seed() for todo in case.fixtures.todos])
        seed_knowledge(self.fake, case)
        self.settings: Settings | None = None
        # each robot's runtime and connector (one of each without config.robots)
        self.runtimes: dict[str, Runtime] = {}
        self.connectors: list[Connector] = []
        self.model_url: str | None = None
        self.overrides: dict[str, Any] = {}  # restart.config so far (accumulated)
        self.frames = 0  # frames sent since the connectors (re)started

    async def run(self) -> CaseResult:
        return await play_case(self)

    # ------------------------------------------------------------------ the driver

    async def open(self, model_url: str | None) -> None:
        self.model_url = model_url
        self.settings = lab_settings(self.case, self.workdir, self.fake, self.model_url)
        await self._start(asyncio.get_running_loop())

    async def play(self, step: Step, following: Step | None) -> None:
        """One step on the platform's side, then settled (a stop lands mid-stream: the step
        before it is not settled, the run is still streaming when the stop comes)."""
        if _stops(step):  # on the card being written
            self.frames += await self._stop(step)
        elif step.kind == "restart":
            # everything sent so far was settled; the new connectors count from zero
            spec = step.restart if isinstance(step.restart, RestartSpec) else RestartSpec()
            await self._restart(spec)
            self.frames = 0
        else:
            self.frames += self._inject(step)
        if following is not None and _stops(following):
            return
        await self._settle(self.frames)

    async def finish(self) -> None:
        """Nothing: each step was settled as it was played."""

    def records(self) -> Records:
        stores = [runtime.store for runtime in self.runtimes.values()]
        return stores[0] if len(stores) == 1 else RobotStores(stores)

    def checks(self) -> list[Check]:
        return []

    async def close(self) -> None:
        await self._stop_all(asyncio.get_running_loop())

    def _codes(self) -> list[str]:
        """The robot codes the gateway knows the connections by (none: the default's)."""
        assert self.settings is not None
        return [str(code) for code in self.runtimes] if self.settings.robots else []

    async def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Every robot's runtime and connector, connected to the gateway."""
        assert self.settings is not None
        for robot in self.settings.robot_settings():
            await self._open(robot, loop)
        if not await self.fake.wait_connected(SETTLE_TIMEOUT_S, self._codes()):
            raise RuntimeError("the connectors did not connect to the fake gateway")

    async def _stop_all(self, loop: asyncio.AbstractEventLoop) -> None:
        connectors, self.connectors = self.connectors, []
        runtimes, self.runtimes = list(self.runtimes.values()), {}
        for connector in connectors:
            await loop.run_in_executor(None, connector.stop, 5.0)
        for runtime in runtimes:
            await runtime.aclose()

    async def _restart(self, spec: RestartSpec) -> None:
        """A plain restart: every connector and runtime stopped (what was in memory is
        gone, the stores stay) and started again, with ``spec.config`` merged over the
        overrides earlier restarts gave. The gateway must have seen the old connections
        close before the new ones count as connected."""
        loop = asyncio.get_running_loop()
        keys = [
            app.app_key for code in self._codes() if (app := self.fake.app_for_robot(code))
        ] or [None]
        await self._stop_all(loop)
        stream = self.fake.stream
        if not await stream.wait_until(
            lambda: not any(stream.connected_of(key) for key in keys), SETTLE_TIMEOUT_S
        ):
            raise RuntimeError("the gateway still holds the connections of the stopped run")
        self.overrides.update(spec.config)
        self.settings = lab_settings(
            self.case, self.workdir, self.fake, self.model_url, self.overrides
        )
        await self._start(loop)

    async def _open(self, robot: Settings, loop: asyncio.AbstractEventLoop) -> None:
        """One robot's runtime and its connector, as ``dta run`` opens them."""
        runtime = Runtime(robot, provider=case_provider(self.case, robot))
        self.runtimes[str(robot.robot_code)] = runtime
        await runtime.start()
        if runtime.knowledge is not None:  # as the daemon's schedule does at start
            await runtime.knowledge.sync.sync()
        # The stream always connects with the robot's app credentials on the fake, even in
        # a case that leaves the OpenAPI ones out (that is about sending, not this).
        app = self.fake.app_for_robot(robot.robot_code) or self.fake.app_for_robot(None)
        assert app is not None
        stream = {**LIVE_STREAM, "client_id": app.app_key, "client_secret": app.app_secret}
        connector = connect(runtime, connector_config(robot.with_overrides(stream)), loop)
        self.connectors.append(connector)
        connector.start()

    def _inject(self, step: Step) -> int:
        """Play one step on the platform's side; returns how many frames it sent."""
        if step.send is not None:
            self.fake.inject(step.send.short_keys())
            return 1
        if step.kind == "frame":
            value = step.frame_value
            self.fake.inject_raw(value if isinstance(value, str) else json.dumps(value))
            return 1
        if step.redeliver is not None:
            self.fake.redeliver(step.redeliver)
            return 1
        if step.fault is not None:
            self.fake.arm_fault(step.fault)
        if step.edit_doc is not None:
            knowledge = self.fake.workspace.knowledge
            knowledge.edit(step.edit_doc.id, step.edit_doc.text, self.fake.clock.now())
        if step.delete_doc is not None:
            self.fake.workspace.knowledge.delete(step.delete_doc)
        if step.click is not None:
            click = step.click
            track = None
            if click.choice in FEEDBACK_CHOICES:  # an answer card carries no msg_id variable
                robot = (self.fake.inbound.get(click.msg) or {}).get("robotCode")
                runtime = self.runtimes.get(str(robot), next(iter(self.runtimes.values())))
                track = answer_card(runtime.store, click.msg, click.card)
            self.fake.click(
                click.msg, click.by, click.choice, track, values=click.values, reason=click.reason
            )
            return 1
        return 0

    async def _stop(self, step: Step) -> int:
        """A press of the stop button once the reply card holds ``after_frames`` frames (of
        the answer's ``card``-th card, once a later card holds them)."""
        click = step.click
        assert click is not None
        robot = (self.fake.inbound.get(click.msg) or {}).get("robotCode")
        runtime = self.runtimes.get(str(robot), next(iter(self.runtimes.values())))
        track = await reply_card_once_streaming(
            runtime.store, self.fake, click.msg, click.after_frames or 1, click.card
        )
        self.fake.click(click.msg, click.by, click.choice, track)
        return 1

    async def _settle(self, frames: int) -> None:
        """Wait until every frame sent so far was handled and the runs it caused finished."""
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        while time.monotonic() < deadline and (
            sum(sum(c.stats.frames.values()) for c in self.connectors) < frames
        ):
            await asyncio.sleep(0.005)
        await self.fake.wait_idle(max(0.0, deadline - time.monotonic()))
        await asyncio.sleep(0)  # let handed-over events reach the dispatcher
        for runtime in self.runtimes.values():
            await runtime.drain()
            # one pass of the daemon's recovery loop (it runs every recovery_interval_s
            # there): acts left uncertain are read back, decided approvals carried out
            await runtime.settle_acts()
            runtime.tick()
            await runtime.drain()
        self.fake.show_click_acks()


def _stops(step: Step) -> bool:
    return step.click is not None and step.click.choice == "stop"


async def run_live_case(case: Case) -> CaseResult:
    reason = live_skip_reason(case)
    if reason is not None:
        return CaseResult(case, skipped=reason)
    with tempfile.TemporaryDirectory(prefix=f"dta-live-{case.id[:40]}-") as tmp:
        return await LiveCaseRun(case, Path(tmp)).run()
