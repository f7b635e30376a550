"""``dta lab eval --live``: the same case files, through the real connector and websocket.

Instead of handing frames to ingest, each case starts the fake DingTalk's stream gateway
and the real ``dingtalk-stream`` client (``agent.dingtalk.connector``) on the system clock; steps
become injected callbacks, raw frames, redeliveries and faults on the platform's side, and
the verdict comes from the same judge. A case that needs the virtual clock (waits, crash
restarts, minute-long gaps, or several messages from one person arriving at the same
instant) cannot be reproduced on real time and is skipped with the reason.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from collections import Counter
from pathlib import Path

from agent.clock import SystemClock
from agent.components import connector_config
from agent.config import Settings
from agent.daemon.connect import connect
from agent.dingtalk.connector import Connector
from agent.runtime import Runtime
from lab.case_settings import case_provider, lab_settings, uses_model
from lab.cases import Case, SendSpec, Step, directory
from lab.fake import FakeDingTalk
from lab.fake.calls import call_counts
from lab.fake.files import parse_files
from lab.fake_model import FakeModel
from lab.judge import judge
from lab.runner import CaseResult, reply_card_once_streaming
from lab.stores import RobotStores
from lab.transcript import collect_transcript

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
    if "restart" in kinds:
        return "restarts and crash points need the in-process harness"
    if "wait" in kinds:
        return "waits on the virtual clock"
    if "operator" in kinds:
        return "operator sends (dta send) do not come over the stream"
    if case.config.get("heartbeat_interval_s") is not None:
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
        self.settings: Settings | None = None
        # each robot's runtime and connector (one of each without config.robots)
        self.runtimes: dict[str, Runtime] = {}
        self.connectors: list[Connector] = []

    async def run(self) -> CaseResult:
        started = time.perf_counter()
        result = CaseResult(self.case)
        await self.fake.start()
        loop = asyncio.get_running_loop()
        model = FakeModel(self.case.fixtures.model_script) if uses_model(self.case) else None
        try:
            model_url = await model.start() if model else None
            self.settings = lab_settings(self.case, self.workdir, self.fake, model_url)
            for robot in self.settings.robot_settings():
                await self._open(robot, loop)
            codes = [str(code) for code in self.runtimes] if self.settings.robots else []
            if not await self.fake.wait_connected(SETTLE_TIMEOUT_S, codes):
                raise RuntimeError("the connectors did not connect to the fake gateway")
            await self._play()
            stores = [runtime.store for runtime in self.runtimes.values()]
            records = stores[0] if len(stores) == 1 else RobotStores(stores)
            received = [message.to_dict() for message in self.fake.received]
            cards = [card.to_dict() for card in self.fake.cards]
            calls = call_counts(self.fake.request_log)
            result.problems = judge(
                self.case.expect,
                received,
                records,
                self.fake.downloads,
                cards,
                calls,
                model.requests if model is not None else None,
                self.fake.workspace_view(),
                self.fake.reactions,
            )
            result.transcript = collect_transcript(records, received, self.fake.faults_seen)
        except Exception as exc:
            result.error = f"{type(exc).__name__}: {exc}"
        finally:
            for connector in self.connectors:
                await loop.run_in_executor(None, connector.stop, 5.0)
            for runtime in self.runtimes.values():
                await runtime.aclose()
            if model is not None:
                await model.stop()
            await self.fake.stop()
        result.seconds = time.perf_counter() - started
        return result

    async def _open(self, robot: Settings, loop: asyncio.AbstractEventLoop) -> None:
        """One robot's runtime and its connector, as ``dta run`` opens them."""
        runtime = Runtime(robot, provider=case_provider(self.case, robot))
        self.runtimes[str(robot.robot_code)] = runtime
        await runtime.start()
        # The stream always connects with the robot's app credentials on the fake, even in
        # a case that leaves the OpenAPI ones out (that is about sending, not this).
        app = self.fake.app_for_robot(robot.robot_code) or self.fake.app_for_robot(None)
        assert app is not None
        stream = {**LIVE_STREAM, "client_id": app.app_key, "client_secret": app.app_secret}
        connector = connect(runtime, connector_config(robot.with_overrides(stream)), loop)
        self.connectors.append(connector)
        connector.start()

    async def _play(self) -> None:
        """The steps on the platform's side, settling after each (a stop lands mid-stream)."""
        frames = 0
        steps = self.case.steps
        for at, step in enumerate(steps):
            if _stops(step):  # a stop lands mid-stream, on the card being written
                frames += await self._stop(step)
            else:
                frames += self._step(step)
            if at + 1 < len(steps) and _stops(steps[at + 1]):
                continue  # the run is still streaming when the stop comes
            await self._settle(frames)

    def _step(self, step: Step) -> int:
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
        if step.click is not None:
            self.fake.click(step.click.msg, step.click.by, step.click.choice)
            return 1
        return 0

    async def _stop(self, step: Step) -> int:
        """A press of the stop button once the reply card holds ``after_frames`` frames."""
        click = step.click
        assert click is not None
        robot = (self.fake.inbound.get(click.msg) or {}).get("robotCode")
        runtime = self.runtimes.get(str(robot), next(iter(self.runtimes.values())))
        track = await reply_card_once_streaming(
            runtime.store, self.fake, click.msg, click.after_frames or 1
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
