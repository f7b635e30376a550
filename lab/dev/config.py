"""How ``dta dev`` runs *your* bot: your configuration, with only DingTalk swapped for a fake.

The daemon ``dta dev`` starts reads the same ``dta.toml`` as ``dta run`` in this folder
(agent, knowledge, skills, provider, gates) and runs from the same folder, so relative
paths mean what they mean for ``dta run``. Only what would reach DingTalk is replaced:
credentials and endpoints point at the fake on 127.0.0.1, the store lives in the
instance's own folder, and no proxy variable survives. ``--model fake`` also puts the lab's
fake model behind the ``openai`` provider, so nothing leaves the machine.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from pathlib import Path
from typing import Any

from agent.config import ENV_KEYS, ConfigError, Settings, load_settings
from agent.config.robots import file_name_for, robot_code_of
from lab.daemon import BASE_CONFIG, ROOT, DaemonProcess, toml_text
from lab.fake import FakeDingTalk
from lab.models.fake_model import FakeModel

# Settings that say where DingTalk (and the daemon's own ports and files) are: dev decides.
DINGTALK_KEYS = frozenset(
    {
        "client_id",
        "client_secret",
        "robot_code",
        "openapi_base_url",
        "oapi_base_url",
        "webhook_origins",
        "store_path",
        "store_url",  # each dev instance keeps its own SQLite store, never a shared database
        "store_schema",
        "health_host",
        "health_port",
        "http_proxy",
        "log_level",
        "log_format",
    }
)
MODEL_KEYS = frozenset({"provider", "openai_base_url", "openai_model", "openai_api_key"})
MODEL_ENV = frozenset(
    {"DTA_PROVIDER", "DTA_OPENAI_API_KEY", "DTA_OPENAI_BASE_URL", "DTA_OPENAI_MODEL"}
)
BEHAVIOUR_ENV = MODEL_ENV | {"DTA_KNOWLEDGE_DIR"}
_PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")
# Short enough that Ctrl-C ends `dta dev` within a second; the store keeps anything cut.
DEV_CONFIG: dict[str, Any] = {**BASE_CONFIG, "shutdown_grace_s": 0.3, "log_level": "INFO"}
FAKE_MODEL = "dta-dev-fake-model"
# With the fake model, the workspace tools it knows how to call, unless yours say otherwise,
# and an approval card (the fake DingTalk takes any template id), so `/click` has a card.
DEV_TOOLS = ["dingtalk.directory.search", "dingtalk.todo.list", "dingtalk.todo.create"]
DEV_APPROVAL_TEMPLATE = "dta-dev-approval-card.schema"
# 「待办：交周报」 for oneself; 「给张三建个待办：交周报」 for a colleague (looked up, then it
# waits for approval)
# ``DevModel(reword=True)``: how a re-asked create is worded anew (the same act)
REWORD_PREFIX = "尽快"
REWORD_DUE = "2027-01-15T18:00:00+08:00"
_TODO = re.compile(
    r"(?:给\s*(?P<who>[^\s，,：:]+?)\s*(?:建|创建|新建|加|安排)?(?:一)?个?)?待办[:：]\s*(?P<subject>.+)"
)


def config_file(config: Path | None) -> Path | None:
    """The file ``dta run`` would read here: the one given, else ``./dta.toml`` if present."""
    if config is not None:
        return config
    return Path("dta.toml") if Path("dta.toml").exists() else None


def user_settings(config: Path | None) -> tuple[Settings, dict[str, Any]]:
    """Your validated settings and the raw table they came from (``ConfigError`` if bad)."""
    settings = load_settings(config)
    path = config_file(config)
    raw: dict[str, Any] = {}
    if path is not None:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    return settings, raw


def dev_config(
    raw: dict[str, Any], fake_url: str, model_url: str | None, fake: FakeDingTalk | None = None
) -> dict[str, Any]:
    """Your configuration with DingTalk (and, given ``model_url``, the model) swapped. With
    several ``[[robots]]``, each robot gets an app of its own on ``fake`` (the first one is
    where the messages you type go)."""
    drop = DINGTALK_KEYS | (MODEL_KEYS if model_url else frozenset())
    config = {key: value for key, value in raw.items() if key not in drop}
    if isinstance(raw.get("robots"), list) and fake is not None:
        config["robots"] = [_dev_robot(table, drop, fake) for table in raw["robots"]]
        if config["robots"]:
            fake.use_robot(config["robots"][0]["robot_code"])
    config.update(DEV_CONFIG)
    config["webhook_origins"] = [fake_url]
    if model_url:
        config.update(provider="openai", openai_base_url=model_url, openai_model=FAKE_MODEL)
        config.setdefault("tools", list(DEV_TOOLS))
        config.setdefault("approval_card_template_id", DEV_APPROVAL_TEMPLATE)
    return config


def _dev_robot(table: Any, drop: frozenset[str], fake: FakeDingTalk) -> dict[str, Any]:
    """One ``[[robots]]`` table as ``dta dev`` runs it: its code kept, its DingTalk swapped
    for an app of its own on the fake."""
    if not isinstance(table, dict):
        raise ConfigError(f"robots: a robot is a table of keys, got {table!r}")
    code = robot_code_of(table)
    if code is None:
        raise ConfigError("robots: give each robot its robot_code (or client_id)")
    app = fake.add_robot(code)
    kept = {key: value for key, value in table.items() if key not in drop}
    return {**kept, "robot_code": code, "client_id": app.app_key, "client_secret": app.app_secret}


class DevModel(FakeModel):
    """The lab's fake model, answering what ``dta dev`` needs: it repeats what it read.

    Scripted entries still come first; with none, the answer quotes the message text from
    the invocation the provider sent, so a builder sees the openai path work end to end. A
    message that asks for a to-do (「待办：…」, 「给张三建个待办：…」) is answered with a call of
    ``dingtalk.todo.create`` — for a colleague, after ``dingtalk.directory.search`` found
    exactly one person by that name (none or several: one question) — and then with what
    its result says: created, or waiting for the asker's approval on the card (``/click
    MSGID approve`` at the prompt).

    ``reword=True`` (the approvals reliability script) makes it word an act differently
    when it is asked again for a message it has already answered with a create (a kill
    re-drove the run): 「尽快」 before the subject and a ``due`` argument — the same act to
    dta's identity rule (agent/acts/identity.py), never a second to-do. ``reworded``
    counts those creates.
    """

    def __init__(self, *args: Any, reword: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.reword = reword
        self.reworded = 0
        self.created_for: list[str] = []  # message texts answered with a create, in order

    def next_entry(self, messages: list[Any]) -> dict[str, Any]:
        entry = super().next_entry(messages)
        if entry:
            return entry
        text, answer = self._answer(messages)
        return self._worded(text, answer) if self.reword else answer

    def _worded(self, text: str, answer: dict[str, Any]) -> dict[str, Any]:
        """A create for a message answered with one before: worded anew (see the class)."""
        calls = answer.get("tool_calls") or []
        if len(calls) != 1 or calls[0].get("name") != "dingtalk.todo.create":
            return answer
        if text not in self.created_for:
            self.created_for.append(text)
            return answer
        self.reworded += 1
        arguments = dict(calls[0]["arguments"])
        arguments["subject"] = f"{REWORD_PREFIX}{arguments['subject']}"[:100]
        arguments["due"] = REWORD_DUE
        return _call("dingtalk.todo.create", arguments)

    def _answer(self, messages: list[Any]) -> tuple[str, dict[str, Any]]:
        """The message's text and the answer to it."""
        text = ""
        for message in messages:
            content = message.get("content") if isinstance(message, dict) else None
            found = re.search(r"```json\n(.*?)\n```", content or "", re.S)
            if found:
                try:
                    text = str(json.loads(found.group(1)).get("text", ""))
                except (ValueError, AttributeError):
                    continue
        results = [m for m in messages if isinstance(m, dict) and m.get("role") == "tool"]
        todo = _TODO.search(text)
        if results:
            return text, _after(str(results[-1].get("content")), todo)
        if todo is not None:
            who = todo.group("who")
            if who:  # a colleague: found in the directory first, never named as typed
                return text, _call("dingtalk.directory.search", {"name": who})
            subject = todo.group("subject").strip()[:100]
            return text, _call("dingtalk.todo.create", {"subject": subject})
        return text, {"json": {"kind": "reply", "text": f"（假模型）我读到了：{text[:200]}"}}


def _call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def _after(result: str, todo: re.Match[str] | None) -> dict[str, Any]:
    """The next step after a tool's result: a directory search that found one person makes
    the to-do for them; none or several is one question; anything else is said."""
    try:
        shown = json.loads(result)
    except ValueError:
        shown = {}
    if shown.get("tool") == "dingtalk.directory.search" and todo is not None:
        people = shown.get("data") or []
        who = todo.group("who")
        if len(people) == 1:
            arguments = {
                "subject": todo.group("subject").strip()[:100],
                "executors": [people[0]["user_id"]],
            }
            return _call("dingtalk.todo.create", arguments)
        if not people:
            return _ask(f"（假模型）没找到叫「{who}」的同事，你说的是哪位？")
        listed = "、".join(
            f"{p.get('name')}（{p.get('department') or p.get('title') or '-'}）" for p in people
        )
        return _ask(f"（假模型）有几位「{who}」：{listed}，你说的是哪一位？")
    return {"json": {"kind": "reply", "text": _said_of(result)}}


def _ask(text: str) -> dict[str, Any]:
    return {"json": {"kind": "ask", "text": text}}


def _said_of(result: str) -> str:
    """The fake model's words for a tool's result (it claims only what the result says)."""
    if '"status": "approved"' in result:
        return "（假模型）你已经同意了这个待办，正在执行，不会再建一个。"
    if "awaiting_approval" in result and '"asked_with": "card"' not in result:
        return "（假模型）这个待办涉及别人，需要你回复上面的确认码后才会创建。"
    if "awaiting_approval" in result:
        return "（假模型）这个待办涉及别人，需要你在卡片上确认后才会创建。"
    if '"verified"' in result:
        return "（假模型）待办已创建，并已回读确认。"
    if '"accepted"' in result:
        return "（假模型）钉钉说待办已创建，还没能核对。"
    if '"uncertain"' in result:
        return "（假模型）待办已提交，结果还没确认，不会重复创建。"
    return f"（假模型）没有办成：{result[:160]}"


class DevDaemon(DaemonProcess):
    """``dta run`` on your configuration, from your folder, against the fake DingTalk."""

    def __init__(
        self, fake: FakeDingTalk, workdir: Path, config: dict[str, Any], fake_model: bool
    ) -> None:
        super().__init__(fake, workdir, {})
        self.config_path.write_text(toml_text(config), encoding="utf-8")
        # The daemon's store setting; with several robots, dev watches the first robot's
        # file, which the daemon keeps beside it (agent/config/robots.py).
        self.store_setting = self.store_path
        robots = config.get("robots") or []
        if robots:
            first = file_name_for(str(robots[0]["robot_code"]))
            self.store_path = self.store_setting.with_name(f"{first}.db")
        self.cwd = Path.cwd()
        # Your environment's behaviour settings stay, as `dta run` would read them here.
        self.keep_env = BEHAVIOUR_ENV - (MODEL_ENV if fake_model else frozenset())

    def _env(self) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in _PROXY_VARS
            and not k.startswith("DINGTALK_")
            and (k not in ENV_KEYS or k in self.keep_env)
        }
        paths = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
        env.update(
            DINGTALK_CLIENT_ID=self.fake.app_key,
            DINGTALK_CLIENT_SECRET=self.fake.app_secret,
            DINGTALK_ROBOT_CODE=self.fake.robot_code,
            DINGTALK_OPENAPI_ENDPOINT=self.fake.base_url,
            DTA_STORE_PATH=str(self.store_setting),
            DTA_HEALTH_PORT=str(self.health_port),
            NO_PROXY="127.0.0.1,localhost",
            PYTHONPATH=os.pathsep.join(paths),
        )
        return env

    def _command(self) -> list[str]:
        """From your folder, with ``-P`` so a folder of yours named ``agent`` is never
        imported in place of dta's."""
        command = super()._command()
        return [command[0], "-P", *command[1:]]

    async def stop_quickly(self, within: float = 0.6) -> None:
        """SIGTERM, then SIGKILL if it is not gone ``within`` seconds: Ctrl-C must end dev
        promptly, and the store keeps whatever a kill cuts (runs resume next time)."""
        await self.terminate(timeout=within)
