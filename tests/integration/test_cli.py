"""Operator commands as subprocesses: doctor's verdicts, and start-up refusing bad config."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from agent.clock import SystemClock
from lab.fake import FakeDingTalk

ROOT = Path(__file__).resolve().parents[2]


async def dta(*args: str, env: dict[str, str]) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "agent.cli.main",
        *args,
        cwd=ROOT,
        env={**os.environ, "NO_PROXY": "127.0.0.1,localhost", **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode, out.decode(), err.decode()


@pytest.fixture
async def fake():
    platform = FakeDingTalk(SystemClock())
    await platform.start()
    yield platform
    await platform.stop()


async def test_doctor_passes_with_good_credentials_and_names_failures(fake, tmp_path):
    base = {
        "DINGTALK_CLIENT_ID": fake.app_key,
        "DINGTALK_OPENAPI_ENDPOINT": fake.base_url,
        "DTA_STORE_PATH": str(tmp_path / "d.db"),
    }
    code, out, _ = await dta("doctor", env={**base, "DINGTALK_CLIENT_SECRET": fake.app_secret})
    assert code == 0, out
    assert "ok    access token" in out and "ok    stream gateway" in out
    code, out, _ = await dta("doctor", env={**base, "DINGTALK_CLIENT_SECRET": "wrong-secret"})
    assert code == 1
    assert "FAIL  access token" in out and "fix:" in out
    assert "wrong-secret" not in out


async def test_doctor_without_credentials_says_what_to_set(tmp_path):
    code, out, _ = await dta(
        "doctor",
        env={
            "DTA_STORE_PATH": str(tmp_path / "d.db"),
            "DINGTALK_CLIENT_ID": "",
            "DINGTALK_CLIENT_SECRET": "",
        },
    )
    assert code == 1 and "DINGTALK_CLIENT_ID" in out


@pytest.mark.parametrize(
    ("env", "field"),
    [
        ({"DTA_HEALTH_PORT": "not-a-port"}, "health_port"),
        ({"DTA_PROVIDER": "gpt"}, "provider"),
        ({"DINGTALK_CLIENT_ID": "", "DINGTALK_CLIENT_SECRET": ""}, "client_id"),
    ],
)
async def test_run_refuses_bad_config_naming_the_field(tmp_path, env, field):
    full = {
        "DINGTALK_CLIENT_ID": "app",
        "DINGTALK_CLIENT_SECRET": "secret",
        "DTA_STORE_PATH": str(tmp_path / "d.db"),
        **env,
    }
    code, _, err = await dta("run", env=full)
    assert code == 2
    assert field in err


async def test_run_refuses_a_broken_skill_naming_file_and_field(tmp_path):
    skill = tmp_path / "skills" / "broken"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: broken\ndescription: x\nversion: '1'\npriority: soon\n---\nbody\n"
    )
    (tmp_path / "dta.toml").write_text(f'skill_paths = ["{tmp_path / "skills"}"]\n')
    code, _, err = await dta(
        "run",
        "--config",
        str(tmp_path / "dta.toml"),
        env={
            "DINGTALK_CLIENT_ID": "app",
            "DINGTALK_CLIENT_SECRET": "secret",
            "DTA_STORE_PATH": str(tmp_path / "d.db"),
        },
    )
    assert code == 2
    assert "broken/SKILL.md" in err and "priority" in err


async def test_dev_demo_talks_to_the_daemon_over_the_stream(tmp_path):
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "agent.cli.main",
        "dev",
        "--demo",
        "--dir",
        str(tmp_path / "dev"),
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 90)
    text = out.decode()
    assert proc.returncode == 0, text + err.decode()
    assert "robot → cid-dm-u1: 7 + 5 = 12" in text
    assert "decision: silent (group_not_mentioned)" in text
    assert "robot → cid-demo @u2: (3 + 4) × 6 = 42" in text
    assert "delivered 2x, 0 new messages" in text
    assert not (tmp_path / ".dta" / "dev.json").exists()


def test_a_reader_that_stops_early_ends_the_output_quietly() -> None:
    """``dta lab eval … | head -1``: the pipe closes after one line; no BrokenPipeError
    traceback, and the status says the pipe ended it (141)."""
    import subprocess

    proc = subprocess.Popen(
        [sys.executable, "-m", "agent.cli.main", "lab", "eval", str(ROOT / "lab" / "cases")],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()  # what `head -1` does after its line
    try:
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert first.startswith((b"PASS", b"FAIL"))
    assert b"Traceback" not in err and b"BrokenPipe" not in err, err.decode()[-2000:]
    assert proc.returncode == 141
