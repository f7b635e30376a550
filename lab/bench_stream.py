"""Stream benchmark: dta's daemon next to a bare ``dingtalk-stream`` echo bot, same fake.

Each contestant runs as a subprocess connected to a fresh fake DingTalk over the real
websocket. Two loads, measured from the platform's side:

- steady: messages at a fixed rate; the fake times each frame from send to ack (ack
  latency p50/p99);
- burst: a batch injected at once; replies per second until the platform has them all.

Each runs twice: with the fake answering sends at loopback speed, and with a 30 ms answer
time like the real platform seen from a server. The bare bot replies inside its handler
(blocking HTTP, as the SDK README shows), so its ack waits for the reply and its messages
are handled one at a time; dta acks once the frame is durable and replies concurrently.
"""

from __future__ import annotations

import asyncio
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
from lab.daemon import DaemonProcess, until
from lab.fake import FakeDingTalk

Contestant = Literal["dta", "bare"]
ROOT = Path(__file__).resolve().parents[1]


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
        "lab.bare_echo",
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )


async def measure(
    kind: Contestant, rate: float, steady_s: float, burst: int, latency_s: float, workdir: Path
) -> StreamFigures:
    fake = FakeDingTalk(SystemClock(), send_latency_s=latency_s)
    await fake.start()
    run_dir = workdir / f"{kind}-{latency_s * 1000:g}ms"  # a fresh store: msgIds repeat
    daemon = bare = None
    if kind == "dta":  # production keepalive, quiet logs
        config = {"log_level": "WARNING", "stream_ping_interval_s": 10, "stream_ping_timeout_s": 10}
        daemon = DaemonProcess(fake, run_dir, config)
        await daemon.start()
    else:
        bare = await _start_bare(fake)
    try:
        if not await fake.wait_connected(30):
            raise RuntimeError(f"{kind} did not connect to the fake gateway")
        for i in range(5):  # warm-up, not measured
            fake.inject({"msg": f"{kind}-w{i}", "from": f"w{i}", "text": f"{i} + 1 等于多少"})
        await until(lambda: len(fake.received) >= 5, 30)

        steady = int(rate * steady_s)
        ids = []
        started = time.monotonic()
        for i in range(steady):
            await asyncio.sleep(max(0.0, started + i / rate - time.monotonic()))
            ids.append(
                fake.inject({"msg": f"{kind}-s{i}", "from": f"s{i}", "text": f"{i} + 2 等于多少"})[
                    "msg"
                ]
            )
        await fake.wait_acked(ids, 60)
        wanted = set(ids)
        latencies = [
            frame["latency_ms"]
            for frame in fake.stream_stats()["frames"]
            if frame.get("msg_id") in wanted and frame.get("latency_ms") is not None
        ]
        await until(lambda: len(fake.received) >= 5 + steady, 60)
        in_daemon = await _daemon_ack_p99_ms(daemon) if daemon is not None else None

        # One sender per message: several quick lines from one person are deliberately
        # answered once by dta (a newer message supersedes older runs), which would not
        # compare like with like.
        pid = daemon.pid if daemon is not None else bare.pid  # type: ignore[union-attr]
        assert pid is not None
        cpu_before = _cpu_seconds(pid)
        mark = len(fake.received)
        t0 = time.monotonic()
        for i in range(burst):
            fake.inject({"msg": f"{kind}-b{i}", "from": f"b{i}", "text": f"{i} + 3 等于多少"})
        await until(lambda: len(fake.received) >= mark + burst, 120)
        seconds = time.monotonic() - t0
        replies = len(fake.received) - mark
        cpu = _cpu_seconds(pid) - cpu_before
    finally:
        if daemon is not None:
            await daemon.stop()
        if bare is not None:
            bare.kill()  # 0.24.3's start_forever cannot be stopped politely
            await bare.wait()
        await fake.stop()
    return StreamFigures(
        contestant=kind,
        platform_latency_ms=latency_s * 1000,
        steady_messages=steady,
        ack_p50_ms=round(statistics.median(latencies), 2) if latencies else float("nan"),
        ack_p99_ms=round(_percentile(latencies, 0.99), 2),
        ack_max_ms=round(max(latencies), 2) if latencies else float("nan"),
        burst_messages=burst,
        burst_seconds=round(seconds, 3),
        replies_per_s=round(replies / seconds, 1) if seconds > 0 else float("nan"),
        replies=replies,
        steady_rate_per_s=rate,
        cpu_ms_per_message=round(1000 * cpu / max(replies, 1), 3),
        daemon_ack_p99_at_most_ms=in_daemon,
    )


LATENCIES_S = (0.0, 0.03)  # loopback, and a send answered in 30 ms as from a real server


async def bench_stream(quick: bool, workdir: Path) -> list[StreamFigures]:
    """Both contestants at each platform latency; neither shares a process, store or fake."""
    rate, steady_s, burst = (100.0, 2.0, 200) if quick else (200.0, 5.0, 1000)
    figures = []
    for latency in LATENCIES_S:
        for kind in ("bare", "dta"):
            n = burst if latency == 0 else max(100, burst // 5)
            figures.append(await measure(kind, rate, steady_s, n, latency, workdir))
    return figures
