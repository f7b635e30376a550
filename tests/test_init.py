"""``dta init`` writes a bot that loads: a valid commented config, a knowledge file the rules
provider answers from, a skill the loader accepts, an agent whose output the gate reads."""

from __future__ import annotations

import io
import json
import subprocess
import sys

from agent.cli.init import scaffold
from agent.config import load_settings
from agent.contracts import ActionRequest
from skills.loader import SkillLibrary


def test_init_writes_a_bot_that_loads(tmp_path, monkeypatch):
    out = io.StringIO()
    assert scaffold(tmp_path, out) == 0
    monkeypatch.chdir(tmp_path)
    settings = load_settings(tmp_path / "dta.toml", env={})
    assert settings.agent.name == "小智" and settings.provider == "rules"
    names = [skill.name for skill in SkillLibrary(settings.skill_paths).skills]
    assert names == ["basic-behavior", "team-etiquette"]
    toml = (tmp_path / "dta.toml").read_text(encoding="utf-8")
    assert toml.count("\n#") >= 10, "commented"
    assert str(tmp_path / "agents" / "example_agent.py") in toml
    assert ".dta/" in (tmp_path / ".gitignore").read_text(encoding="utf-8")
    assert "dta dev" in out.getvalue()


def test_uncommenting_a_block_sets_top_level_keys(tmp_path, monkeypatch):
    """The commented examples sit above the ``[agent]`` table: uncommented, they are the
    robot's settings, not fields of its agent."""
    scaffold(tmp_path, io.StringIO())
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "dta.toml"
    text = config.read_text(encoding="utf-8")
    text = text.replace('provider = "rules"', "")
    assert "\nheartbeat_interval_s = 60\n" in text, "reminders work in a new project"
    for line in ("# follow_up_after_s = 3600",):
        text = text.replace(line, line.removeprefix("# "))
    for line in text.splitlines():  # the model block, as a reader would uncomment it
        if line.startswith(('# provider = "openai"', "# openai_")):
            text = text.replace(line, line.removeprefix("# "))
    config.write_text(text, encoding="utf-8")
    settings = load_settings(config, env={})
    assert settings.provider == "openai" and settings.openai_model == "qwen-plus"
    assert (settings.heartbeat_interval_s, settings.follow_up_after_s) == (60, 3600)
    assert settings.agent.name == "小智"


def test_the_example_agent_answers_with_an_action_request(tmp_path):
    scaffold(tmp_path, io.StringIO())
    run = tmp_path / "run"
    run.mkdir()
    invocation = {"text": "你好", "identity": {"user_id": "u1", "name": "王芳"}}
    (run / "enriched-invocation.json").write_text(json.dumps(invocation), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(tmp_path / "agents" / "example_agent.py")],
        cwd=run,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    request = ActionRequest.model_validate_json(done.stdout)
    assert request.kind.value == "reply" and "王芳" in (request.text or "")


def test_init_never_overwrites_without_force(tmp_path):
    (tmp_path / "dta.toml").write_text("provider = 'rules'\n", encoding="utf-8")
    out = io.StringIO()
    assert scaffold(tmp_path, out) == 1
    assert "already exist" in out.getvalue()
    assert (tmp_path / "dta.toml").read_text(encoding="utf-8") == "provider = 'rules'\n"
    assert not (tmp_path / "knowledge").exists()
    assert scaffold(tmp_path, io.StringIO(), force=True) == 0
