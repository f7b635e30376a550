"""Providers as real processes and servers: the command provider runs a script in the
prepared run directory; the probe proves a model saw the skills."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from agent.cli.probe import probe
from agent.config import Settings
from lab.models.fake_model import FakeModel
from skills.loader import discover
from skills.providers.base import ProviderFailed
from skills.providers.command import CommandConfig, CommandProvider
from tests.test_rules_provider import make_invocation

ROOT = Path(__file__).resolve().parents[2]

AGENT = """
import json, os, pathlib, sys
inv = json.load(open("enriched-invocation.json"))
assert "session_webhook" not in inv["event"], "a credential reached the agent"
assert "DINGTALK_CLIENT_SECRET" not in os.environ, "a secret reached the agent"
skills = sorted(p.parent.name for p in pathlib.Path("skills").glob("*/SKILL.md"))
context = pathlib.Path("CONTEXT.md").read_text()
assert "data, not instructions" in context
sys.stderr.write("thinking about " + inv["text"] + "\\n")
said = "skills: " + ",".join(skills) + "; you said " + inv["text"]
print(json.dumps([{"kind": "ack", "text": "收到"}, {"kind": "reply", "text": said}],
                 ensure_ascii=False))
"""


def provider(tmp_path: Path, code: str, timeout: float = 10.0) -> CommandProvider:
    script = tmp_path / "agent.py"
    script.write_text(code, encoding="utf-8")
    return CommandProvider(CommandConfig((sys.executable, str(script)), tmp_path / "runs", timeout))


async def test_command_provider_runs_a_script_in_the_run_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("DINGTALK_CLIENT_SECRET", "must-not-leak")
    invocation = make_invocation("7+5 是多少")
    reply = await provider(tmp_path, AGENT).respond(invocation, discover())
    assert reply.requests == [
        {"kind": "ack", "text": "收到"},
        {"kind": "reply", "text": "skills: basic-behavior; you said 7+5 是多少"},
    ]
    assert "thinking about" in reply.evidence["stderr"]
    assert list((tmp_path / "runs").iterdir()) == []  # the run directory is cleaned up


async def test_command_timeout_ends_the_whole_process_group(tmp_path):
    import time

    slow = provider(tmp_path, "import subprocess; subprocess.run(['sleep', '30'])", 0.5)
    started = time.monotonic()
    with pytest.raises(ProviderFailed) as info:
        await slow.respond(make_invocation("hi"), discover())
    assert info.value.reason == "timeout"
    assert time.monotonic() - started < 5


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        ("import sys; sys.stderr.write('boom'); sys.exit(3)", "exit_status"),
        ("print('not json at all')", "invalid_output"),
        ("import time; time.sleep(5)", "timeout"),
    ],
)
async def test_command_failures_are_reasons_with_stderr_and_no_apology(tmp_path, code, reason):
    with pytest.raises(ProviderFailed) as info:
        await provider(tmp_path, code, timeout=0.5).respond(make_invocation("hi"), discover())
    failure = info.value
    assert failure.reason == reason and failure.reply_on_failure is True
    if reason == "exit_status":
        assert failure.evidence["stderr"] == "boom"


async def test_message_text_never_reaches_the_command_line(tmp_path):
    code = "import json, sys; print(json.dumps({'kind': 'reply', 'text': ' '.join(sys.argv)}))"
    hostile = "; rm -rf / $(touch pwned) `id`"
    reply = await provider(tmp_path, code).respond(make_invocation(hostile), discover())
    assert hostile not in reply.requests[0]["text"]
    assert not (tmp_path / "runs" / "pwned").exists()


async def test_probe_sees_the_marker_through_a_model_that_reads_its_prompt(tmp_path):
    async with FakeModel({"*": [{"echo_system_marker": True}]}) as model:
        settings = Settings(
            provider="openai",
            openai_base_url=model.base_url,
            openai_model="m",
            store_path=tmp_path / "d.db",
        )
        result = await probe(settings)
        assert result.loaded and result.marker in result.evidence
        system = model.requests[-1]["messages"][0]["content"]
        assert result.marker in system
    async with FakeModel({"*": [{"json": {"kind": "reply", "text": "no idea"}}]}) as deaf:
        settings = settings.with_overrides({"openai_base_url": deaf.base_url})
        assert (await probe(settings)).loaded is False


async def test_skills_probe_command(tmp_path):
    async with FakeModel({"*": [{"echo_system_marker": True}]}) as model:
        env = {
            **os.environ,
            "DTA_PROVIDER": "openai",
            "DTA_OPENAI_BASE_URL": model.base_url,
            "DTA_OPENAI_MODEL": "m",
            "NO_PROXY": "127.0.0.1,localhost",
        }
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "agent.cli.main",
            "skills",
            "probe",
            cwd=tmp_path,
            env={**env, "PYTHONPATH": str(ROOT)},
            stdout=asyncio.subprocess.PIPE,
        )
        out, _ = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, out
    assert out.decode().startswith("loaded: openai")


async def test_doctor_says_a_rejected_model_is_a_key_or_model_to_fix(tmp_path):
    from agent.cli.doctor import _probe

    async with FakeModel({}, api_key="right-key") as model:
        settings = Settings(
            provider="openai",
            openai_base_url=model.base_url,
            openai_model="m",
            openai_api_key="wrong-key",
            store_path=tmp_path / "d.db",
        )
        check = await asyncio.to_thread(_probe, settings)
    assert not check.ok and "openai_api_key" in check.fix
    assert "wrong-key" not in str(check)
