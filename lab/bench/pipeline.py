"""``dta lab bench``: throughput of the whole pipeline against the bare store writes.

N synthetic one-to-one messages go through ingest, the response gate, the rules provider,
the action gate, the broker and a stub transport (the real one with the network call
replaced by an immediate "ok") on a file-backed SQLite store. Beside it, in the same run,
``storage.baseline`` writes the same rows directly. The ratio is the figure to watch:
absolute rates on shared machines are noise, the ratio is not. The two alternate
(``PIPELINE_ROUNDS`` of each, fresh stores every time) and the ratio is the median of the
rounds' ratios, so each compares runs seconds apart on a machine whose speed drifts.
Both use SQLite as the pipeline finds it, checkpoints included (the daemon's checkpoint
thread is the daemon's, not the pipeline's).
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx

from agent.clock import SystemClock
from agent.components import transport_config
from agent.config import Settings
from agent.daemon.serve import settle_heap
from agent.dingtalk.transport import DingTalkTransport, OutboundRequest
from agent.runtime import Runtime
from lab.bench.cards import run_bench_cards
from lab.bench.floor import StoreCalls
from lab.bench.stream import bench_stream
from lab.fake.callbacks import callback_frame
from storage.baseline import write_bare_rows

STUB_ORIGIN = "http://stub.invalid"  # the session webhooks' host; StubTransport answers it
PIPELINE_ROUNDS = 3


@dataclass(frozen=True)
class PipelineBench:
    events: int
    pipeline_seconds: float
    pipeline_events_per_s: float
    bare_seconds: float
    bare_events_per_s: float
    ratio: float  # the median of the rounds' ratios (bare seconds / pipeline seconds)
    replies: int  # the fewest any round's pipeline sent (every round: one per event)
    rounds: int = 1
    round_ratios: list[float] = field(default_factory=list)
    # Of the bare writes' time, the share inside COMMIT (median of the rounds): the part of
    # the floor both sides pay alike, so the ratio can at most approach the pipeline's
    # share of time in commits.
    bare_commit_share: float = 0.0
    # The pipeline's own store calls replayed alone (lab/bench/floor.py), medians of the
    # rounds: bare seconds / replay seconds, the highest ratio its store layer allows; and
    # the share of the pipeline's time spent outside its store calls.
    store_calls_seconds: float = 0.0
    store_calls_ratio: float = 0.0
    outside_store_share: float = 0.0


def _callback(i: int, now_ms: int) -> dict[str, object]:
    user = f"u{i}"
    return {
        "msgId": f"bench-{i}",
        "msgtype": "text",
        "text": {"content": f"{i} + 5 等于多少"},
        "conversationId": f"cid-dm-{user}",
        "conversationType": "1",
        "senderId": f"$:LWCP_v1:${user}",
        "senderStaffId": user,
        "senderNick": user,
        "chatbotUserId": "$:LWCP_v1:$bench-bot",
        "robotCode": "bench-robot",
        "isInAtList": False,
        "createAt": now_ms,
        "sessionWebhook": f"{STUB_ORIGIN}/robot/sendBySession?session={i}",
        "sessionWebhookExpiredTime": now_ms + 5_400_000,
    }


def _ok() -> httpx.Response:
    response = httpx.Response(200, content=b'{"errcode": 0, "errmsg": "ok"}')
    response.read()
    return response


class StubTransport(DingTalkTransport):
    """The real transport minus the wire: requests are built, retried and classified as
    usual, and DingTalk's "ok" comes back at once."""

    answered = 0
    ok = _ok()  # one answer, reused: building responses is not what is measured

    async def _send_once(self, request: OutboundRequest) -> httpx.Response:
        self.answered += 1
        return self.ok


async def bench_pipeline_on(
    store: dict[str, object], count: int, recorder: StoreCalls | None = None
) -> tuple[float, int]:
    """``count`` DMs through the whole pipeline on the store ``store`` names (settings
    overrides: a SQLite ``store_path``, or a PostgreSQL ``store_url`` and schema);
    ``recorder`` keeps the store calls the events make."""
    settings = Settings(
        **store,
        robot_code="bench-robot",
        max_concurrent_runs=64,
        webhook_origins=[STUB_ORIGIN],  # the stub answers for it; nothing leaves the process
    )
    clock = SystemClock()
    stub = StubTransport(transport_config(settings), clock)
    runtime = Runtime(settings, clock=clock, transport=stub)
    await runtime.start()
    settle_heap()  # as the daemon does once it is built: collections skip start-up's objects
    now_ms = int(time.time() * 1000)
    frames = [callback_frame(_callback(i, now_ms), f"bf-{i}") for i in range(count)]
    if recorder is not None:
        recorder.attach(runtime.store)
    started = time.perf_counter()
    for raw in frames:
        runtime.ingest(raw)
        if runtime.dispatcher.busy >= 256:  # keep memory flat, like a socket would
            await runtime.drain()
    await runtime.drain()
    seconds = time.perf_counter() - started
    if recorder is not None:
        recorder.detach()
    await runtime.aclose()
    gc.unfreeze()
    return seconds, stub.answered


def _recorded(count: int, synchronous: str) -> StoreCalls:
    """The store calls of ``count`` events through the pipeline (a run of its own: copying
    the arguments slows it, so its time is not one of the rounds')."""
    calls = StoreCalls()
    with tempfile.TemporaryDirectory(prefix="dta-bench-") as tmp:
        target = {"store_path": Path(tmp) / "recorded.db", "store_synchronous": synchronous}
        asyncio.run(bench_pipeline_on(target, count, calls))
    return calls


def bench_pipeline(
    count: int, synchronous: str = "normal", rounds: int = PIPELINE_ROUNDS, floor: bool = False
) -> PipelineBench:
    """``rounds`` times: ``count`` events through the pipeline, then the same rows as bare
    writes, each on a fresh store; seconds are the rounds' medians. ``floor``: also replay
    the pipeline's store calls alone in each round (lab/bench/floor.py)."""
    pipeline, bare, replies, commit_shares = [], [], [], []
    calls = _recorded(count, synchronous) if floor else None
    replays: list[float] = []
    for _ in range(rounds):
        with tempfile.TemporaryDirectory(prefix="dta-bench-") as tmp:
            target = {"store_path": Path(tmp) / "pipeline.db", "store_synchronous": synchronous}
            seconds, answered = asyncio.run(bench_pipeline_on(target, count))
            pipeline.append(seconds)
            replies.append(answered)
            written = write_bare_rows(Path(tmp) / "bare.db", count, synchronous)
            bare.append(written.seconds)
            commit_shares.append(written.commit_seconds / written.seconds)
            if calls is not None:
                replays.append(calls.replay(Path(tmp) / "replay.db", synchronous))
    ratios = [round(b / p, 3) for p, b in zip(pipeline, bare, strict=True)]
    floors = {}
    if replays:
        floors = {
            "store_calls_seconds": round(statistics.median(replays), 3),
            "store_calls_ratio": round(
                statistics.median(b / r for b, r in zip(bare, replays, strict=True)), 3
            ),
            "outside_store_share": round(
                statistics.median(1 - r / p for p, r in zip(pipeline, replays, strict=True)), 3
            ),
        }
    seconds, bare_seconds = statistics.median(pipeline), statistics.median(bare)
    return PipelineBench(
        events=count,
        pipeline_seconds=round(seconds, 3),
        pipeline_events_per_s=round(count / seconds, 1),
        bare_seconds=round(bare_seconds, 3),
        bare_events_per_s=round(count / bare_seconds, 1),
        ratio=round(statistics.median(ratios), 3),
        replies=min(replies),
        rounds=rounds,
        round_ratios=ratios,
        bare_commit_share=round(statistics.median(commit_shares), 3),
        **floors,
    )


def bench(events: int | None, quick: bool, only: str | None) -> dict[str, object]:
    """Run the benchmarks; each figure sits next to its baseline from the same run."""
    report: dict[str, object] = {"quick": quick}
    if only in (None, "pipeline"):
        count = events or (1000 if quick else 2000)
        rounds = 2 if quick else PIPELINE_ROUNDS
        normal = bench_pipeline(count, rounds=rounds, floor=True)
        report["pipeline"] = asdict(normal)
        # The same load with every commit synced to disk (survives power loss, not only a
        # crash of dta): what store_synchronous = "full" costs, in the same run.
        full = bench_pipeline(count, "full", rounds)
        report["pipeline_synchronous_full"] = {
            **asdict(full),
            "full_over_normal": round(full.pipeline_events_per_s / normal.pipeline_events_per_s, 3),
        }
    if only in (None, "stream"):
        with tempfile.TemporaryDirectory(prefix="dta-bench-stream-") as tmp:
            figures = asyncio.run(bench_stream(quick, Path(tmp)))
        report["stream"] = [asdict(f) for f in figures]
        ratios = {}
        for bare, dta in zip(figures[::2], figures[1::2], strict=True):
            ratios[f"{dta.platform_latency_ms:g}ms"] = {
                "replies_per_s_dta_over_bare": round(dta.replies_per_s / bare.replies_per_s, 2),
                "ack_p99_dta_over_bare": round(dta.ack_p99_ms / bare.ack_p99_ms, 3),
                "cpu_per_message_dta_over_bare": round(
                    dta.cpu_ms_per_message / bare.cpu_ms_per_message, 2
                ),
            }
        report["stream_ratios"] = ratios
    if only in (None, "cards"):
        report["cards"] = asdict(run_bench_cards(quick))
    if only == "model":  # minutes of a real-time model's waits: run when asked for by name
        from lab.bench.model import bench_model, quick_load

        with tempfile.TemporaryDirectory(prefix="dta-bench-model-") as tmp:
            report["model"] = asyncio.run(bench_model(quick_load(quick, events), Path(tmp)))
    if only == "postgres":  # needs a server: run when asked for by name
        from lab.bench.pg import bench_pipeline_pg, bench_replicas

        pg = bench_pipeline_pg(events or (500 if quick else 2000))
        replicas = [asdict(f) for f in bench_replicas(100 if quick else 300)]
        speedup = round(replicas[1]["replies_per_s"] / replicas[0]["replies_per_s"], 2)
        report["postgres"] = {"pipeline": pg, "replicas": replicas, "three_over_one": speedup}
    return report
