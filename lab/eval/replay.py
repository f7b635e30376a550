"""``dta lab replay``: drive a recording of raw frames through the pipeline, offline.

A recording is JSONL, one frame per line: ``{"received_at": <epoch s>, "frame": "<raw>"}``
(``dta run --record`` writes it). The replay runs on a virtual clock that follows the
recorded receive times, against a fresh fake DingTalk and a temporary store, and prints
what happened to each event. Session webhooks in the recording are re-pointed at the fake:
a replay never reaches a real DingTalk host.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from agent.clock import VirtualClock
from agent.config import ConfigError, Settings, load_settings
from agent.runtime import Runtime
from lab.eval.transcript import Transcript, collect_transcript
from lab.fake import FakeDingTalk


class RecordingError(Exception):
    pass


@dataclass(frozen=True)
class RecordedFrame:
    line: int
    received_at: float
    raw: str


def read_recording(path: Path) -> list[RecordedFrame]:
    frames: list[RecordedFrame] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            received_at = float(item["received_at"])
            raw = item["frame"]
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise RecordingError(f"{path}:{number}: not a recorded frame ({exc})") from None
        frames.append(
            RecordedFrame(number, received_at, raw if isinstance(raw, str) else json.dumps(raw))
        )
    return frames


def _callback_data(raw: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
    try:
        frame = json.loads(raw)
        data = json.loads(frame["data"])
    except (json.JSONDecodeError, KeyError, TypeError):
        return None
    return (frame, data) if isinstance(frame, dict) and isinstance(data, dict) else None


def repoint_webhook(raw: str, fake: FakeDingTalk) -> str:
    """Swap a recorded session webhook for one on the fake, keeping its expiry."""
    parsed = _callback_data(raw)
    if parsed is None or "sessionWebhook" not in parsed[1]:
        return raw
    frame, data = parsed
    group = data.get("conversationType") == "2"
    expires_ms = data.get("sessionWebhookExpiredTime")
    expires_at = expires_ms / 1000.0 if isinstance(expires_ms, int | float) else 0.0
    data["sessionWebhook"] = fake.register_session(
        str(data.get("conversationId")),
        "group" if group else "dm",
        data.get("senderStaffId") or data.get("senderId"),
        expires_at,
    )
    frame["data"] = json.dumps(data, ensure_ascii=False)
    return json.dumps(frame, ensure_ascii=False)


def _robot_code(frames: list[RecordedFrame]) -> str:
    for frame in frames:
        parsed = _callback_data(frame.raw)
        if parsed is not None and isinstance(parsed[1].get("robotCode"), str):
            return parsed[1]["robotCode"]
    return "dta-lab-robot"


async def replay_frames(frames: list[RecordedFrame], base: Settings, workdir: Path) -> Transcript:
    start = frames[0].received_at if frames else 0.0
    clock = VirtualClock(start)
    fake = FakeDingTalk(clock, robot_code=_robot_code(frames))
    await fake.start()
    settings = base.with_overrides(
        {
            "store_path": workdir / "replay.db",
            "media_dir": workdir / "media",
            "openapi_base_url": fake.base_url,
            "webhook_origins": [fake.base_url],  # the recorded webhooks are re-pointed here
            "client_id": fake.app_key,
            "client_secret": fake.app_secret,
            "robot_code": fake.robot_code,
        }
    )
    runtime = Runtime(settings, clock=clock)
    try:
        await runtime.start()
        for frame in frames:
            clock.advance_to(frame.received_at)
            runtime.ingest(repoint_webhook(frame.raw, fake), frame.received_at)
            await runtime.drain()
        return collect_transcript(
            runtime.store, [m.to_dict() for m in fake.received], fake.faults_seen
        )
    finally:
        await runtime.aclose()
        await fake.stop()


def replay(recording: Path, config: Path | None = None, out: TextIO | None = None) -> int:
    def say(text: str) -> None:
        if out is not None:
            print(text, file=out)

    try:
        frames = read_recording(recording)
        base = load_settings(config, env={}) if config else Settings()
    except (OSError, RecordingError, ConfigError) as exc:
        say(f"cannot replay: {exc}")
        return 2
    with tempfile.TemporaryDirectory(prefix="dta-replay-") as tmp:
        transcript = asyncio.run(replay_frames(frames, base, Path(tmp)))
    for line in transcript.lines():
        say(line)
    say(f"{len(frames)} frames replayed, {len(transcript.platform)} messages sent")
    return 0
