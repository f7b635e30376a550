"""A fake OpenAI-compatible model server for offline tests and lab cases.

It speaks the ``/v1/chat/completions`` shape closely enough for the ``openai`` provider to
run unchanged against it, and answers from a script so a case can pin every twist a real
model or gateway produces: prose around JSON, invalid JSON, 429 with Retry-After, a 500,
a slow answer, a wrong key.

Scripts map a key to a list of entries consumed in order. The key is looked up as a
substring of the request's messages (the lab uses the message id, which appears in the
invocation JSON); ``"*"`` is the fallback; with nothing scripted the answer is
``{"kind": "reply", "text": "ok"}``. Entry keys:

- ``json``: any JSON value, serialized as the message content;
- ``content``: raw text as the message content (invalid JSON, prose around JSON, ...);
- ``status`` (+ optional ``retry_after``, ``message``): an OpenAI-style error response;
- ``delay_s``: sleep before answering (combines with the others);
- ``echo_system_marker``: reply with the first ``DTA-PROBE-<hex>`` marker found in the
  system prompt, or "no marker" (proves which skills a host actually loaded);
- ``tool_calls``: ``[{"name": "...", "arguments": {...}}]`` — an assistant message holding
  OpenAI-style tool calls (``finish_reason: "tool_calls"``) instead of content;
- ``usage``: replaces the computed usage (``None`` leaves it out of the response);
- ``chunk_chars``, ``chunk_delay_s``, ``stream``: how a request with ``stream: true`` is
  answered (``lab.models.fake_model_stream``; ``"stream": false`` answers it unstreamed).

Every entry is consumed when used, errors included, so a retry gets the next one.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import secrets
import time
from typing import Any

from aiohttp import web

from lab.models.fake_model_stream import stream_completion

DEFAULT_ANSWER: dict[str, Any] = {"kind": "reply", "text": "ok"}
FALLBACK_KEY = "*"
ENTRY_KEYS = frozenset(
    {
        "json",
        "content",
        "status",
        "retry_after",
        "message",
        "delay_s",
        "echo_system_marker",
        "usage",
        "chunk_chars",
        "chunk_delay_s",
        "stream",
        "tool_calls",
    }
)
_MARKER = re.compile(r"DTA-PROBE-[0-9a-f]+")
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "permission_denied",
    404: "not_found_error",
    429: "rate_limit_exceeded",
}


def _check_entry(key: str, entry: Any) -> None:
    """Refuse a malformed script at construction, not halfway through a case."""
    if not isinstance(entry, dict):
        raise ValueError(f"script[{key!r}]: each entry must be an object, got {entry!r}")
    unknown = set(entry) - ENTRY_KEYS
    if unknown:
        raise ValueError(f"script[{key!r}]: unknown entry keys {sorted(unknown)}")
    kinds = ("json", "content", "status", "echo_system_marker", "tool_calls")
    answers = [k for k in kinds if k in entry]
    if len(answers) > 1:
        raise ValueError(f"script[{key!r}]: an entry gives one answer, got {answers}")


def _text_of(content: Any) -> str:
    """Message content as text: a string, or the text parts of a multi-part content."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
    return ""


def _tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
    body = {
        "error": {
            "message": message,
            "type": _ERROR_TYPES.get(status, "server_error"),
            "param": None,
            "code": "invalid_api_key" if status == 401 else None,
        }
    }
    return web.json_response(body, status=status, headers=headers)


class FakeModel:
    """A scripted chat-completions server on 127.0.0.1; ``requests`` records every body."""

    def __init__(
        self,
        script: dict[str, list[dict[str, Any]]] | None = None,
        api_key: str | None = None,
        *,
        port: int = 0,
    ) -> None:
        self.script: dict[str, list[dict[str, Any]]] = {}
        for key, entries in (script or {}).items():
            for entry in entries:
                _check_entry(key, entry)
            self.script[key] = [dict(e) for e in entries]
        self.api_key = api_key
        self.port = port
        self.requests: list[dict[str, Any]] = []
        self._runner: web.AppRunner | None = None
        self._served = 0

    async def __aenter__(self) -> FakeModel:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL (ending in ``/v1``); only valid once started."""
        if self._runner is None:
            raise RuntimeError("the fake model is not started")
        return f"http://127.0.0.1:{self._runner.addresses[0][1]}/v1"

    async def start(self) -> str:
        """Listen on 127.0.0.1 (a free port unless one was given); returns the base URL."""
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._completions)
        app.router.add_get("/_lab/requests", self._recorded)
        # Cancel a delayed handler when its client gives up, so stop() never waits on it.
        runner = web.AppRunner(
            app, access_log=None, handler_cancellation=True, shutdown_timeout=0.5
        )
        await runner.setup()
        try:
            await web.TCPSite(runner, "127.0.0.1", self.port).start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        return self.base_url

    async def stop(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    def next_entry(self, messages: list[Any]) -> dict[str, Any]:
        """Consume the first scripted entry whose key occurs in the messages, else ``*``."""
        haystack = "\n".join(_text_of(m.get("content")) for m in messages if isinstance(m, dict))
        for key, entries in self.script.items():
            if key != FALLBACK_KEY and entries and key in haystack:
                return entries.pop(0)
        fallback = self.script.get(FALLBACK_KEY)
        if fallback:
            return fallback.pop(0)
        return {}

    async def _recorded(self, request: web.Request) -> web.Response:
        return web.json_response(self.requests)

    async def _completions(self, request: web.Request) -> web.Response:
        raw = await request.read()
        try:
            body = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            body = None
        self.requests.append(
            body if isinstance(body, dict) else {"_raw": raw.decode(errors="replace")}
        )
        # Never echo what was sent: it may be somebody's real key.
        wanted = None if self.api_key is None else f"Bearer {self.api_key}"
        if wanted is not None and request.headers.get("Authorization") != wanted:
            return _error(401, "Incorrect API key provided.")
        if not isinstance(body, dict):
            return _error(400, "We could not parse the JSON body of your request.")
        messages = body.get("messages")
        if not isinstance(body.get("model"), str) or not isinstance(messages, list) or not messages:
            return _error(400, "'model' and a non-empty 'messages' list are required.")

        entry = self.next_entry(messages)
        if entry.get("delay_s"):
            await asyncio.sleep(float(entry["delay_s"]))
        if "status" in entry:
            status = int(entry["status"])
            headers = {}
            if entry.get("retry_after") is not None:
                headers["Retry-After"] = f"{entry['retry_after']:g}"
            default = "Rate limit reached." if status == 429 else "The server had an error."
            return _error(status, entry.get("message", default), headers)
        content = self._content(entry, messages)
        completion = self._completion(body, messages, content, entry)
        if body.get("stream") is True and entry.get("stream", True):
            return await stream_completion(request, completion, entry)
        return web.json_response(completion)

    def _content(self, entry: dict[str, Any], messages: list[Any]) -> str:
        if "content" in entry:
            return str(entry["content"])
        if entry.get("echo_system_marker"):
            system = "\n".join(
                _text_of(m.get("content"))
                for m in messages
                if isinstance(m, dict) and m.get("role") == "system"
            )
            found = _MARKER.search(system)
            return json.dumps({"kind": "reply", "text": found.group(0) if found else "no marker"})
        return json.dumps(entry.get("json", DEFAULT_ANSWER), ensure_ascii=False)

    def _completion(
        self, body: dict[str, Any], messages: list[Any], content: str, entry: dict[str, Any]
    ) -> dict[str, Any]:
        self._served += 1
        prompt = sum(_tokens(_text_of(m.get("content"))) for m in messages if isinstance(m, dict))
        completion = _tokens(content)
        answer: dict[str, Any] = {
            "id": f"chatcmpl-fake-{self._served}-{secrets.token_hex(4)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        }
        if "tool_calls" in entry:
            choice = answer["choices"][0]
            choice["finish_reason"] = "tool_calls"
            choice["message"] = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{self._served}_{index}",
                        "type": "function",
                        "function": {
                            "name": str(call.get("name", "")).replace(".", "__"),
                            "arguments": json.dumps(call.get("arguments", {}), ensure_ascii=False),
                        },
                    }
                    for index, call in enumerate(entry["tool_calls"])
                ],
            }
        if "usage" in entry:
            if entry["usage"] is None:
                del answer["usage"]
            else:
                answer["usage"] = entry["usage"]
        return answer
