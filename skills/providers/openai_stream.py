"""The ``openai`` provider in card mode: the same requests, read while the model writes them.

``StreamingOpenAIProvider`` is ``OpenAIProvider`` (same prompts, rounds, repair and failure
reasons) whose first completion is asked for with ``stream: true``. The server's chunks are
joined into the one answer the base class parses as always, and meanwhile an
``ActionScanner`` reports the action kind and the reply's text so far to the caller's
``on_event``, which is how a card can be approved and filled before the answer is complete.

A server that answers without streaming (a JSON body instead of ``text/event-stream``) still
works: its whole answer is reported at once, one frame. Only the first round streams: a
repair round is asked for whole, and its answer replaces everything. A stream that breaks
after text was reported fails the provider (``unavailable``) instead of being asked again:
a second answer would not be the text already shown. Text mode uses ``OpenAIProvider``
unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import httpx

from agent.contracts import EnrichedInvocation
from skills.loader import Skill
from skills.providers.base import ProviderFailed, ProviderReply
from skills.providers.openai import (
    OpenAIProvider,
    _content,
    _retry_after,
    _Retryable,
    json_body,
    not_connected,
)
from skills.providers.streaming import ActionScanner, StreamEvent


@dataclass
class _Call:
    """One streaming respond: where events go, and whether its one stream has run."""

    on_event: Callable[[StreamEvent], None]
    scanner: ActionScanner = field(default_factory=ActionScanner)
    streamed: bool = False
    reported: bool = False


_CALL: ContextVar[_Call | None] = ContextVar("dta_openai_stream", default=None)


class StreamingOpenAIProvider(OpenAIProvider):
    async def respond_streaming(
        self,
        invocation: EnrichedInvocation,
        skills: Sequence[Skill],
        on_event: Callable[[StreamEvent], None],
    ) -> ProviderReply:
        """``respond``, reporting the answer to ``on_event`` as it is written."""
        token = _CALL.set(_Call(on_event))
        try:
            return await self.respond(invocation, skills)
        finally:
            _CALL.reset(token)

    async def _post(self, body: dict[str, Any], evidence: dict[str, Any]) -> dict[str, Any]:
        call = _CALL.get()
        if call is None or call.streamed:
            return await super()._post(body, evidence)
        try:
            data = await self._stream({**body, "stream": True}, evidence, call)
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
            raise not_connected(exc) from None
        except httpx.TimeoutException as exc:
            raise self.timed_out(exc, evidence) from None
        except httpx.HTTPError as exc:
            if call.reported:
                raise ProviderFailed(
                    "unavailable", f"the stream broke ({type(exc).__name__})", evidence
                ) from None
            raise _Retryable(f"the stream broke before any text ({type(exc).__name__})") from None
        call.streamed = True
        return data

    async def _stream(
        self, body: dict[str, Any], evidence: dict[str, Any], call: _Call
    ) -> dict[str, Any]:
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if self.config.api_key:
            headers["Authorization"] = f"Bearer {self.config.api_key}"
        async with self._client.stream(
            "POST", self._url, json=body, headers=headers, timeout=self._timeout
        ) as response:
            status = response.status_code
            if status >= 400:
                await response.aread()
                self._refuse(response, evidence)
            if "text/event-stream" not in response.headers.get("content-type", ""):
                # A server that does not stream: its whole answer, reported as one frame.
                await response.aread()
                data = json_body(response, evidence)
                content = _content(data, evidence)
                if isinstance(content, str):
                    self._report(call, content)
                return data
            return await self._read_events(response, evidence, call)

    async def _read_events(
        self, response: httpx.Response, evidence: dict[str, Any], call: _Call
    ) -> dict[str, Any]:
        """Server-sent ``data:`` lines of ``chat.completion.chunk`` objects, to ``[DONE]``."""
        pieces: list[str] = []
        usage: Any = None
        finish: Any = None
        async for line in response.aiter_lines():
            if not line.startswith("data:"):
                continue
            payload = line[5:].strip()
            if payload == "[DONE]":
                break
            try:
                chunk = json.loads(payload)
            except json.JSONDecodeError:
                continue
            if not isinstance(chunk, dict):
                continue
            if isinstance(chunk.get("error"), dict):
                message = str(chunk["error"].get("message") or "error")[:200]
                raise ProviderFailed("unavailable", f"the stream said: {message}", evidence)
            usage = chunk.get("usage") or usage
            choices = chunk.get("choices")
            if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
                continue
            finish = choices[0].get("finish_reason") or finish
            delta = choices[0].get("delta")
            text = delta.get("content") if isinstance(delta, dict) else None
            if isinstance(text, str) and text:
                pieces.append(text)
                self._report(call, text)
        message = {"role": "assistant", "content": "".join(pieces)}
        answer: dict[str, Any] = {"choices": [{"message": message, "finish_reason": finish}]}
        if isinstance(usage, dict):
            answer["usage"] = usage
        return answer

    @staticmethod
    def _report(call: _Call, piece: str) -> None:
        for event in call.scanner.feed(piece):
            call.reported = True
            call.on_event(event)

    def _refuse(self, response: httpx.Response, evidence: dict[str, Any]) -> None:
        """An error answer, classified as the base provider classifies it."""
        status = response.status_code
        message = self._server_message(response)
        if status == 429 or status >= 500:
            after = _retry_after(response.headers.get("Retry-After")) if status == 429 else None
            raise _Retryable(f"HTTP {status}: {message}", after)
        raise ProviderFailed("rejected", f"HTTP {status}: {message}", evidence)
