"""Stream benchmark: dta's daemon next to a bare ``dingtalk-stream`` echo bot.

Both contestants run as subprocesses for the whole benchmark, each connected to a fake
DingTalk of its own over the real websocket (the fakes share this process). Two loads,
measured from the platform's side:

- steady: messages at a fixed rate; the fake times each frame from send to ack (ack
  latency p50/p99);
- burst: a batch injected at once; replies per second until the platform has them all,
  and the contestant's CPU time (``/proc``) per message.

Both loads run with the fakes answering sends at loopback speed, then answering in 30 ms
like the real platform seen from a server. The bare bot replies inside its handler
(blocking HTTP, as the SDK README shows), so its ack waits for the reply and its messages
are handled one at a time; dta acks once the frame is durable and replies concurrently.

This machine's speed drifts by a factor of two within minutes, so the bursts alternate
(bare, dta, bare, dta …, ``BURST_ROUNDS`` of each) and each contestant's figures are the
median of its rounds: a ratio compares bursts seconds apart, not a minute apart. While
one contestant is measured the other sits idle. The fakes' own start-up objects are
frozen out of this process's garbage collector first, so a full collection in the
measuring process does not land on one contestant's figures.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import httpx
from prometheus_client.parser import text_string_to_metric_families

from agent.clock import SystemClock
from agent.daemon.serve import settle_heap
from lab.daemon import DaemonProcess, until
from lab.fake import FakeDingTalk

Contestant = Literal["dta", "bare"]
ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class StreamFigures:
    contestant: str
    platform_latency_ms: float
    steady_messages: int
    ack_p50_ms: float
    ack_p99_ms: float
    ack_max_ms: float
    burst_messages: int
    burst_seconds: float
    replies_per_s: float
    replies: int
    steady_rate_per_s: float
    cpu_ms_per_message: float  # the contestant's process, user + system, over the burst
    # dta only: the steady phase's ack p99 as the daemon itself saw it (frame received to
    # ack sent, its ``dta_ack_latency_seconds`` histogram), as the bucket bound that holds
    # it. Against ``ack_p99_ms`` it tells the daemon's own delay from frames queued behind
    # it (a stalled write) and the fake's.
    daemon_ack_p99_at_most_ms: float | None = None
    # Each burst round's replies per second (the figures above are the rounds' medians).
    burst_rounds: tuple[float, ...] = ()


def _cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process so far (``/proc/PID/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text(encoding="ascii").rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _daemon_ack_p99_ms(daemon: DaemonProcess) -> float | None:
    """The upper bound of the histogram bucket holding the daemon's 99th-percentile ack;
    None if that is the open-ended bucket."""
    async with httpx.AsyncClient(trust_env=False) as client:
        text = (await client.get(daemon.url("/metrics"), timeout=10)).text
    counts: list[tuple[float, float]] = []
    for family in text_string_to_metric_families(text):
        if family.name == "dta_ack_latency_seconds":
            counts = [
                (float(sample.labels["le"]), sample.value)
                for sample in family.samples
                if sample.name.endswith("_bucket")
            ]
    if not counts:
        return None
    total = counts[-1][1]
    bound = next(le for le, count in counts if count >= 0.99 * total)
    return None if bound == float("inf") else bound * 1000


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


BURST_ROUNDS = 3
LATENCIES_S = (0.0, 0.03)  # loopback, and a send answered in 30 ms as from a real server


@dataclass
class _Running:
    """One contestant, alive for the whole benchmark, and the fake it is connected to."""

    kind: Contestant
    fake: FakeDingTalk
    daemon: DaemonProcess | None = None
    bare: asyncio.subprocess.Process | None = None

    @property
    def pid(self) -> int:
        pid = self.daemon.pid if self.daemon is not None else self.bare.pid  # type: ignore[union-attr]
        assert pid is not None
        return pid

    async def stop(self) -> None:
        if self.daemon is not None:
            await self.daemon.stop()
        if self.bare is not None and self.bare.returncode is None:
            self.bare.kill()  # 0.24.3's start_forever cannot be stopped politely
            await self.bare.wait()
        await self.fake.stop()


async def _start_bare(fake: FakeDingTalk) -> asyncio.subprocess.Process:
    env = {
        **os.environ,
        "DINGTALK_CLIENT_ID": fake.app_key,
        "DINGTALK_CLIENT_SECRET": fake.app_secret,
        "DINGTALK_OPENAPI_ENDPOINT": fake.base_url,
        "NO_PROXY": "127.0.0.1,localhost",
    }
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "lab.bench.bare_echo",
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )


async def _start(kind: Contestant, workdir: Path, stack: contextlib.AsyncExitStack) -> _Running:
    fake = FakeDingTalk(SystemClock())
    await fake.start()
    running = _Running(kind, fake)
    stack.push_async_callback(running.stop)
    if kind == "dta":  # production keepalive, quiet logs
        config = {"log_level": "WARNING", "stream_ping_interval_s": 10, "stream_ping_timeout_s": 10}
        running.daemon = DaemonProcess(fake, workdir / "dta", config)
        await running.daemon.start()
    else:
        running.bare = await _start_bare(fake)
    if not await fake.wait_connected(30):
        raise RuntimeError(f"{kind} did not connect to the fake gateway")
    for i in range(5):  # warm-up, not measured
        fake.inject({"msg": f"{kind}-w{i}", "from": f"w{i}", "text": f"{i} + 1 等于多少"})
    await until(lambda: len(fake.received) >= 5, 30)
    return running


async def _steady(
    c: _Running, rate: float, seconds: float, tag: str
) -> tuple[list[float], float | None]:
    """Messages at ``rate``; each frame's send-to-ack latency, and the daemon's own p99."""
    fake = c.fake
    count = int(rate * seconds)
    mark = len(fake.received)
    ids = []
    started = time.monotonic()
    for i in range(count):
        await asyncio.sleep(max(0.0, started + i / rate - time.monotonic()))
        sent = fake.inject(
            {"msg": f"{c.kind}-{tag}s{i}", "from": f"{tag}s{i}", "text": f"{i} + 2 等于多少"}
        )
        ids.append(sent["msg"])
    await fake.wait_acked(ids, 60)
    wanted = set(ids)
    latencies = [
        frame["latency_ms"]
        for frame in fake.stream_stats()["frames"]
        if frame.get("msg_id") in wanted and frame.get("latency_ms") is not None
    ]
    await until(lambda: len(fake.received) >= mark + count, 120)
    in_daemon = await _daemon_ack_p99_ms(c.daemon) if c.daemon is not None else None
    return latencies, in_daemon


async def _burst(c: _Running, count: int, tag: str) -> tuple[float, int, float]:
    """A batch at once; (seconds until the platform had every reply, replies, CPU s).

    One sender per message: several quick lines from one person are deliberately answered
    once by dta (a newer message supersedes older runs), which would not compare like
    with like."""
    fake = c.fake
    cpu_before = _cpu_seconds(c.pid)
    mark = len(fake.received)
    t0 = time.monotonic()
    for i in range(count):
        fake.inject(
            {"msg": f"{c.kind}-{tag}b{i}", "from": f"{tag}b{i}", "text": f"{i} + 3 等于多少"}
        )
    await until(lambda: len(fake.received) >= mark + count, 120)
    seconds = time.monotonic() - t0
    return seconds, len(fake.received) - mark, _cpu_seconds(c.pid) - cpu_before


def _figures(
    c: _Running,
    latency_s: float,
    rate: float,
    steady: tuple[list[float], float | None],
    bursts: list[tuple[float, int, float]],
    count: int,
) -> StreamFigures:
    latencies, in_daemon = steady
    rates = [replies / seconds for seconds, replies, _ in bursts if seconds > 0]
    cpu = [1000 * used / max(replies, 1) for _, replies, used in bursts]
    return StreamFigures(
        contestant=c.kind,
        platform_latency_ms=latency_s * 1000,
        steady_messages=len(latencies),
        ack_p50_ms=round(statistics.median(latencies), 2) if latencies else float("nan"),
        ack_p99_ms=round(_percentile(latencies, 0.99), 2),
        ack_max_ms=round(max(latencies), 2) if latencies else float("nan"),
        burst_messages=count,
        burst_seconds=round(statistics.median(seconds for seconds, _, _ in bursts), 3),
        replies_per_s=round(statistics.median(rates), 1) if rates else float("nan"),
        replies=min(replies for _, replies, _ in bursts),
        steady_rate_per_s=rate,
        cpu_ms_per_message=round(statistics.median(cpu), 3),
        daemon_ack_p99_at_most_ms=in_daemon,
        burst_rounds=tuple(round(r, 1) for r in rates),
    )


async def bench_stream(quick: bool, workdir: Path) -> list[StreamFigures]:
    """Both contestants at each platform latency: [bare, dta] at loopback, then at 30 ms."""
    rate, steady_s, burst = (100.0, 2.0, 200) if quick else (200.0, 5.0, 1000)
    rounds = 2 if quick else BURST_ROUNDS
    figures = []
    async with contextlib.AsyncExitStack() as stack:
        contestants = [await _start(kind, workdir, stack) for kind in ("bare", "dta")]
        settle_heap()  # as the daemon does: a collection here lands on neither contestant
        try:
            for latency in LATENCIES_S:
                tag = f"{latency * 1000:g}ms-"
                for c in contestants:
                    c.fake.send_latency_s = latency
                steady = [await _steady(c, rate, steady_s, tag) for c in contestants]
                count = burst if latency == 0 else max(100, burst // 5)
                bursts: list[list[tuple[float, int, float]]] = [[], []]
                for r in range(rounds):
                    for index, c in enumerate(contestants):
                        bursts[index].append(await _burst(c, count, f"{tag}{r}-"))
                for index, c in enumerate(contestants):
                    figures.append(_figures(c, latency, rate, steady[index], bursts[index], count))
        finally:
            gc.unfreeze()
    return figures
