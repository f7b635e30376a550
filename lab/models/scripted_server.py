"""The scripted models' chat-completions server on 127.0.0.1: each request read as a real
model would see it, answered by the behaviour it was started with."""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from lab.models.fake_model_stream import stream_completion
from lab.models.scripted_answer import Behaviour, Calls
from lab.models.scripted_reading import ModelView, read_request


def _tool_calls(view: ModelView, calls: Calls) -> list[dict[str, Any]]:
    functions = {offer.name: offer.function for offer in view.offers}
    return [
        {
            "id": f"call_{secrets.token_hex(4)}",
            "type": "function",
            "function": {
                "name": functions.get(name, name.replace(".", "__")),
                "arguments": json.dumps(arguments, ensure_ascii=False),
            },
        }
        for name, arguments in calls.calls
    ]


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
        view = read_request(body)
        answer = self.behaviour(view)
        message: dict[str, Any] = {"role": "assistant"}
        if isinstance(answer, Calls):
            message |= {"content": None, "tool_calls": _tool_calls(view, answer)}
            finish = "tool_calls"
        else:
            message["content"] = json.dumps(answer, ensure_ascii=False)
            finish = "stop"
        completion = {
            "id": f"chatcmpl-scripted-{secrets.token_hex(4)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": str(body.get("model")),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
        }
        if body.get("stream") is True and finish == "stop":
            return await stream_completion(request, completion, {})
        return web.json_response(completion)
