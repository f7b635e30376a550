"""Flame graphs of where dta spends its CPU, made with py-spy (``pip install py-spy``).

    python -m lab.bench.profile OUT_DIR [--format flamegraph|raw] [--events N] [--burst N]
                             [--only pipeline|stream] [--gil]

writes two profiles of the same loads ``dta lab bench`` measures:

- ``pipeline.svg``: N one-to-one messages through the whole pipeline on a file-backed
  SQLite store, in one process (``lab.bench.pipeline.bench_pipeline_on``);
- ``stream.svg``: the daemon (``dta run``, sampled from outside by its pid) while a burst
  of first-time senders arrives from the fake DingTalk over the real websocket.

``--format raw`` writes collapsed stacks (``.txt``) instead, to add up by function.
Sampling slows the profiled process a little; the figures to quote come from
``dta lab bench``, not from here.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from agent.clock import SystemClock
from lab.daemon import DaemonProcess, until
from lab.fake import FakeDingTalk

RATE_HZ = "250"


def _py_spy() -> str:
    found = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(found).exists():
        raise SystemExit("py-spy is not installed: pip install py-spy")
    return found


def _record(fmt: str, target: Path, gil: bool = False) -> list[str]:
    # --gil keeps only the samples of the thread holding the interpreter: what limits a
    # burst's replies/s is that one lock, not the threads waiting on I/O.
    command = [_py_spy(), "record", "-r", RATE_HZ, "-f", fmt, "-o", str(target)]
    return [*command, "--gil"] if gil else command


def _target(events: int) -> list[str]:
    return [sys.executable, "-m", "lab.bench.profile", "--pipeline-target", str(events)]


def _suffix(fmt: str) -> str:
    return ".svg" if fmt == "flamegraph" else ".txt"


def profile_pipeline(out: Path, fmt: str, events: int) -> None:
    target = out / f"pipeline{_suffix(fmt)}"
    subprocess.run(
        [*_record(fmt, target), "--", *_target(events)],
        check=True,
        stdout=subprocess.DEVNULL,
    )


def _pipeline_target(events: int) -> None:
    from lab.bench.pipeline import bench_pipeline_on

    with tempfile.TemporaryDirectory(prefix="dta-profile-") as tmp:
        asyncio.run(bench_pipeline_on({"store_path": Path(tmp) / "pipeline.db"}, events))


async def profile_stream(out: Path, fmt: str, burst: int, gil: bool = False) -> None:
    target = out / f"stream{_suffix(fmt)}"
    fake = FakeDingTalk(SystemClock())
    await fake.start()
    config = {"log_level": "WARNING", "stream_ping_interval_s": 10, "stream_ping_timeout_s": 10}
    with tempfile.TemporaryDirectory(prefix="dta-profile-stream-") as tmp:
        daemon = DaemonProcess(fake, Path(tmp), config)
        await daemon.start()
        try:
            await fake.wait_connected(30)
            for i in range(5):  # warm-up: not sampled
                fake.inject({"msg": f"w{i}", "from": f"w{i}", "text": f"{i} + 1 等于多少"})
            await until(lambda: len(fake.received) >= 5, 30)
            spy = subprocess.Popen(
                [*_record(fmt, target, gil), "--pid", str(daemon.pid)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            await asyncio.sleep(1.0)  # py-spy attaches
            mark = len(fake.received)
            for i in range(burst):
                fake.inject({"msg": f"b{i}", "from": f"b{i}", "text": f"{i} + 3 等于多少"})
            await until(lambda: len(fake.received) >= mark + burst, 300)
            spy.send_signal(signal.SIGINT)
            spy.wait(60)
        finally:
            await daemon.stop()
            await fake.stop()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m lab.bench.profile", description=__doc__)
    parser.add_argument("out", type=Path, nargs="?")
    parser.add_argument("--format", default="flamegraph", choices=("flamegraph", "raw"))
    parser.add_argument("--events", type=int, default=5000, help="pipeline messages")
    parser.add_argument("--burst", type=int, default=1000, help="stream burst messages")
    parser.add_argument(
        "--gil", action="store_true", help="stream: sample only the thread holding the GIL"
    )
    parser.add_argument("--only", choices=("pipeline", "stream"), help="one of the two")
    parser.add_argument("--pipeline-target", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.pipeline_target is not None:
        _pipeline_target(args.pipeline_target)
        return
    if args.out is None:
        parser.error("OUT_DIR is required")
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    if args.only != "stream":
        profile_pipeline(args.out, args.format, args.events)
    if args.only != "pipeline":
        asyncio.run(profile_stream(args.out, args.format, args.burst, args.gil))
    print(f"profiles in {args.out} ({time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
