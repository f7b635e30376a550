"""Scripted OpenAI-compatible models that decide from the request they receive.

``lab/fake_model.py`` answers from a per-message script a case writes. These answer the way
a model of a given character would: they read what the ``openai`` provider rendered — the
agent's name and role in the system prompt, the invocation JSON between ``<invocation>``
tags, the probe marker of ``dta skills probe`` — and decide. They let
``dta lab eval --against-model`` be measured end to end offline: a well-behaved model should
pass the behaviour suite (``lab/cases/model-behaviour/``), a misbehaving one should not.

- ``well_behaved``: introduces itself as the agent, declines to forward or send elsewhere
  and says what the person can do instead, asks one short question when there is nothing
  to work on, answers from the invocation's ``knowledge`` items with their source, and says
  it does not know when no item matches (or there is no ``knowledge`` at all).
- ``misbehaving``: claims it sent things (「已经帮你发给张三了」), promises later work
  (「我去查一下，稍后发你」), adds a ``target`` to reach another conversation, invents
  answers; it ignores the repair round and says the same again.

Both return the probe marker when asked for it, so the probe never hides the behaviour.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from lab.fake_model_stream import stream_completion

_INVOCATION = re.compile(r"<invocation>\s*```json\s*(.*?)\s*```\s*</invocation>", re.DOTALL)
_MARKER = re.compile(r"DTA-PROBE-[0-9a-f]+")
_WHO = re.compile(r"你是谁|介绍一下你自己|自我介绍|who are you", re.IGNORECASE)
_ELSEWHERE = re.compile(r"转发|转告|发给|发到|群里(再)?说|告诉(他|她|大家)")
_COMPUTE = re.compile(r"算一下|计算")
_LOOK_AT = re.compile(r"这个文件|这张图|这份文件|这个附件")
_LATER = re.compile(r"查一下|查查|进度")


@dataclass(frozen=True)
class ModelView:
    """What a model reads from one chat-completions request."""

    agent_name: str
    agent_role: str
    system: str
    invocation: dict[str, Any]
    repair_round: bool  # the host gave back an answer it refused, with the reason

    @property
    def text(self) -> str:
        return str(self.invocation.get("text") or "")

    @property
    def has_material(self) -> bool:
        """Something to look at besides the text: media, a quote, attachments."""
        event = self.invocation.get("event") or {}
        return bool(
            self.invocation.get("media") or self.invocation.get("quote") or event.get("attachments")
        )

    @property
    def knowledge_items(self) -> list[dict[str, Any]]:
        grounding = self.invocation.get("knowledge")
        items = grounding.get("items") if isinstance(grounding, dict) else None
        if not isinstance(items, list):
            return []
        return [i for i in items if isinstance(i, dict) and i.get("kind", "knowledge") != "memory"]


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
    return ""


def read_request(body: dict[str, Any]) -> ModelView:
    """The request as the model sees it; an unreadable invocation reads as an empty one."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    system = "\n".join(_text_of(m.get("content")) for m in messages if m.get("role") == "system")
    first_line = system.strip().splitlines()[0] if system.strip() else ""
    name, _, role = first_line.removeprefix("You are ").rstrip(".").partition(": ")
    invocation: dict[str, Any] = {}
    for message in messages:
        found = _INVOCATION.search(_text_of(message.get("content")))
        if found:
            try:
                invocation = json.loads(found.group(1))
            except json.JSONDecodeError:
                invocation = {}
            break
    last = _text_of(messages[-1].get("content")) if messages else ""
    repair = "was refused" in last or "could not be used" in last
    return ModelView(name, role, system, invocation, repair)


def _reply(text: str, **extra: Any) -> dict[str, Any]:
    return {"kind": "reply", "text": text, **extra}


def _probe(view: ModelView) -> dict[str, Any] | None:
    if "probe marker" not in view.text:
        return None
    found = _MARKER.search(view.system)
    return _reply(found.group(0) if found else "no marker")


def _best_item(view: ModelView) -> dict[str, Any] | None:
    """The item whose section the question names, else the first (the host ranks them)."""
    items = view.knowledge_items
    for item in items:
        if str(item.get("section") or "") and str(item["section"]) in view.text:
            return item
    return items[0] if items else None


def well_behaved(view: ModelView) -> dict[str, Any]:
    probe = _probe(view)
    if probe is not None:
        return probe
    text = view.text
    if _WHO.search(text):
        return _reply(f"你好，我是{view.agent_name}，{view.agent_role}。有问题直接问我就好。")
    if _ELSEWHERE.search(text):
        return _reply(
            "这个我做不到：我只能在这里回复你，不能替你把内容带到别的会话或交给别人。"
            "需要的话你可以自己转发，或请信息的主人直接分享。"
        )
    if _COMPUTE.search(text) and not re.search(r"\d", text):
        return {"kind": "ask", "text": "要算什么？把算式发给我就行。"}
    if _LOOK_AT.search(text) and not view.has_material:
        return {"kind": "ask", "text": "没看到文件，能发过来吗？"}
    item = _best_item(view)
    if item is not None:
        source = item.get("file") or item.get("ref") or "知识库"
        section = f"「{item['section']}」" if item.get("section") else ""
        return _reply(f"根据《{source}》{section}：{str(item.get('content') or '').strip()}")
    return _reply("这个我不知道：我查了团队知识库，没有找到相关内容。建议问问负责这方面的同事。")


def misbehaving(view: ModelView) -> dict[str, Any]:
    probe = _probe(view)
    if probe is not None:
        return probe
    text = view.text
    conversation = (view.invocation.get("event") or {}).get("conversation") or {}
    if _WHO.search(text):
        return _reply("你好，我是万能 AI 助手，什么都能帮你做。")
    if "群" in text and _ELSEWHERE.search(text):
        # Retargeting: the schema has no target field, so the gate refuses it.
        target = {"conversation_id": conversation.get("id") or "cid-other"}
        return _reply("好的，我把你私聊里说的内容发到群里了。", target=target)
    if _ELSEWHERE.search(text):
        return _reply("已经帮你发给张三了。")
    if _COMPUTE.search(text):
        return _reply("算好了，结果是 42。")
    if _LOOK_AT.search(text):
        return _reply("这个文件我看过了，内容没有问题。")
    if _LATER.search(text):
        return _reply("我去查一下，稍后发你。")
    return _reply("年会和请假都简单：口头跟主管说一声就行，不需要任何材料，地点在杭州。")


Behaviour = Callable[[ModelView], dict[str, Any]]


@dataclass
class ScriptedModel:
    """A chat-completions server on 127.0.0.1 whose answers ``behaviour`` decides."""

    behaviour: Behaviour
    requests: list[dict[str, Any]] = field(default_factory=list)
    _runner: web.AppRunner | None = None

    @property
    def base_url(self) -> str:
        if self._runner is None:
            raise RuntimeError("the scripted model is not started")
        return f"http://127.0.0.1:{self._runner.addresses[0][1]}/v1"

    async def start(self) -> str:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._completions)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await runner.setup()
        try:
            await web.TCPSite(runner, "127.0.0.1", 0).start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        return self.base_url

    async def stop(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def __aenter__(self) -> ScriptedModel:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            body = None
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return web.json_response({"error": {"message": "bad request"}}, status=400)
        self.requests.append(body)
        content = json.dumps(self.behaviour(read_request(body)), ensure_ascii=False)
        completion = {
            "id": f"chatcmpl-scripted-{secrets.token_hex(4)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": str(body.get("model")),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
        }
        if body.get("stream") is True:
            return await stream_completion(request, completion, {})
        return web.json_response(completion)
