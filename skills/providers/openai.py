"""The ``openai`` provider: any OpenAI-compatible ``/chat/completions`` endpoint.

DashScope (Qwen), DeepSeek, vLLM, Ollama and OpenAI all speak this shape. The provider
renders the prompts (see ``prompting``), asks once, gives the model one repair round if its
answer cannot be read as requests, and hands the parsed dicts to the action gate untouched.

Failures are reasons, never crashes or raw dumps: ``timeout`` (the model is too slow; not
retried, since waiting again doubles the delay), ``unavailable`` (429/5xx/connection
problems that outlasted the retries), ``rejected`` (any other 4xx: the request or the key is
wrong, so retrying cannot help) and ``invalid_output``. The API key goes into the
``Authorization`` header and nowhere else: not into logs, evidence or exception text.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential,
)

from agent.contracts import AgentDefinition, EnrichedInvocation
from skills.loader import Skill
from skills.providers import model_media, prompting, tool_calls
from skills.providers.base import ProviderFailed, ProviderReply, ToolRunner
from skills.providers.tool_calls import openai_tools

log = logging.getLogger(__name__)

USAGE_KEYS = ("prompt_tokens", "completion_tokens", "total_tokens")
MAX_DETAIL_CHARS = 300
_KEY_LIKE = re.compile(r"\bsk-[A-Za-z0-9_*.\-]+")
_backoff = wait_exponential(multiplier=0.5, min=0.5, max=8)


@dataclass(frozen=True)
class OpenAIConfig:
    """Where the model lives and how patiently to talk to it."""

    base_url: str  # e.g. https://dashscope.aliyuncs.com/compatible-mode/v1
    model: str
    api_key: str | None = None
    timeout_s: float = 60.0
    connect_timeout_s: float = 5.0
    max_retries: int = 2  # for 429 / 5xx / connect errors
    max_retry_after_s: float = 30.0
    response_format: bool = True  # {"type": "json_object"}; some servers reject it
    temperature: float = 0.0
    vision: bool = False  # the model reads images: pictures go as image_url parts
    max_file_chars: int = 8000  # of each text file shown to the model
    max_tool_steps: int = 4  # rounds of tool calls per answer (each may hold several calls)

    def __repr__(self) -> str:  # a dataclass repr would print the key
        key = "set" if self.api_key else "none"
        return f"OpenAIConfig(base_url={self.base_url!r}, model={self.model!r}, api_key={key})"


class _Retryable(Exception):
    """A failure that provably left the model untouched or asked us to come back later."""

    def __init__(self, detail: str, retry_after: float | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.retry_after = retry_after


def not_connected(exc: Exception) -> _Retryable:
    """The request never reached the model: asking again is safe."""
    return _Retryable(f"cannot connect ({type(exc).__name__})")


def json_body(response: httpx.Response, evidence: dict[str, Any]) -> dict[str, Any]:
    """The answer's JSON object, or ``unavailable`` when the body is not one."""
    try:
        data = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        data = None
    if not isinstance(data, dict):
        raise ProviderFailed(
            "unavailable",
            f"HTTP {response.status_code} but the body is not a JSON object",
            evidence,
        )
    return data


class OpenAIProvider:
    """Asks a chat-completions endpoint for ActionRequest JSON; one repair round at most."""

    name: str = "openai"
    metered = True  # its tokens count against the model budgets (agent/run/metering.py)
    uses_tools = True  # given the enabled workspace tools (agent/tools/registry.py)

    def __init__(
        self,
        config: OpenAIConfig,
        agent: AgentDefinition,
        client: httpx.AsyncClient | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.config = config
        self.agent = agent
        self._owns_client = client is None
        self._client = client or httpx.AsyncClient()
        self._sleep = sleep
        self._url = config.base_url.rstrip("/") + "/chat/completions"
        self._timeout = httpx.Timeout(config.timeout_s, connect=config.connect_timeout_s)

    @property
    def model_name(self) -> str:
        return self.config.model

    async def aclose(self) -> None:
        """Close the HTTP client if this provider created it (a shared one is the caller's)."""
        if self._owns_client:
            await self._client.aclose()

    async def respond(
        self,
        invocation: EnrichedInvocation,
        skills: Sequence[Skill],
        tools: ToolRunner | None = None,
    ) -> ProviderReply:
        """Requests for the invocation, or ProviderFailed with a reason and evidence. With
        ``tools``, the model may call the enabled ones first (``tool_calls``)."""
        messages = self._messages(invocation, skills)
        usage = dict.fromkeys(USAGE_KEYS, 0)
        problem = ""
        specs = openai_tools(tools.specs() if tools is not None else [])
        calls_log: list[dict[str, Any]] = []
        for round_number in (1, 2):
            evidence = {"model": self.config.model, "rounds": round_number, "usage": usage}
            data = await self._complete_calling_tools(messages, evidence, tools, specs, calls_log)
            content = _content(data, evidence)
            try:
                requests = prompting.parse_actions(content)
            except prompting.InvalidOutput as exc:
                problem = str(exc)
                log.info("model output unusable", extra={"round": round_number, "problem": problem})
                messages.append({"role": "assistant", "content": content or ""})
                messages.append({"role": "user", "content": prompting.repair_prompt(problem)})
                continue
            done: dict[str, Any] = {
                "model": self.config.model,
                "rounds": round_number,
                "repaired": round_number > 1,
            }
            if calls_log:
                done["tool_calls"] = calls_log
            return ProviderReply(requests, usage=usage, evidence=done)
        raise ProviderFailed(
            "invalid_output", problem, {"model": self.config.model, "rounds": 2, "usage": usage}
        )

    def _messages(
        self, invocation: EnrichedInvocation, skills: Sequence[Skill]
    ) -> list[dict[str, Any]]:
        """The conversation the model is asked: the system prompt, the user's turn with its
        files and pictures, and any repair round's messages."""
        allowed = prompting.permitted_actions(invocation, skills)
        files = model_media.text_files(invocation, self.config.max_file_chars)
        prompt = prompting.render_user(invocation, allowed, files)
        return [
            {"role": "system", "content": prompting.render_system(self.agent, skills, allowed)},
            {
                "role": "user",
                "content": model_media.user_content(prompt, invocation, self.config.vision),
            },
            *prompting.repair_messages(invocation),
        ]

    async def _complete_calling_tools(
        self,
        messages: list[dict[str, Any]],
        evidence: dict[str, Any],
        tools: ToolRunner | None,
        specs: list[dict[str, Any]],
        calls_log: list[dict[str, Any]],
    ) -> dict[str, Any]:
        """One completion, answering the tool calls it asks for (``messages`` and
        ``calls_log`` grow with them) until the model answers in words; the usage is added
        to ``evidence["usage"]``. More than ``max_tool_steps`` rounds of calls fail."""
        usage = evidence["usage"]
        data = await self._complete(messages, evidence, specs)
        _add_usage(usage, data.get("usage"))
        steps = 0
        while tools is not None and (asked := tool_calls.calls_of(data)) is not None:
            steps += 1
            if steps > self.config.max_tool_steps:
                raise ProviderFailed(
                    "tool_budget",
                    f"more than {self.config.max_tool_steps} rounds of tool calls",
                    {**evidence, "tool_calls": calls_log},
                )
            messages += await tool_calls.answered(tools, *asked, calls_log)
            data = await self._complete(messages, evidence, specs)
            _add_usage(usage, data.get("usage"))
        return data

    def _body(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.config.model,
            "messages": messages,
            "temperature": self.config.temperature,
        }
        if tools:
            body["tools"] = tools
        if self.config.response_format:
            body["response_format"] = {"type": "json_object"}
        return body

    async def _complete(
        self,
        messages: list[dict[str, Any]],
        evidence: dict[str, Any],
        tools: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """One completion, retried on 429/5xx/connect errors; the parsed response body."""
        body = self._body(messages, tools)
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.config.max_retries + 1),
            retry=retry_if_exception_type(_Retryable),
            wait=self._wait,
            sleep=self._sleep,
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    return await self._post(body, evidence)
        except _Retryable as exc:
            tries = self.config.max_retries + 1
            raise ProviderFailed(
                "unavailable", f"{exc.detail} (gave up after {tries} attempts)", evidence
            ) from None
        raise AssertionError("unreachable: tenacity either returns or raises")  # pragma: no cover

    def _wait(self, state: RetryCallState) -> float:
        """Honour a server's Retry-After (capped), else back off exponentially."""
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, _Retryable) and exc.retry_after is not None:
            return min(exc.retry_after, self.config.max_retry_after_s)
        return min(_backoff(state), self.config.max_retry_after_s)

    def timed_out(self, exc: Exception, evidence: dict[str, Any]) -> ProviderFailed:
        return ProviderFailed(
            "timeout",
            f"no answer within {self.config.timeout_s:g}s ({type(exc).__name__})",
            evidence,
        )

    async def _post(self, body: dict[str, Any], evidence: dict[str, Any]) -> dict[str, Any]:
        headers = {"Content-Type": "application/json"}
        if self.config.api_key:
            headers["Authorization"] = f"Bearer {self.config.api_key}"
        try:
            response = await self._client.post(
                self._url, json=body, headers=headers, timeout=self._timeout
            )
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
            raise not_connected(exc) from None
        except httpx.RemoteProtocolError:
            # Closed before answering; a completion has no side effects, so asking again is safe.
            raise _Retryable("the server closed the connection without answering") from None
        except httpx.TimeoutException as exc:
            raise self.timed_out(exc, evidence) from None
        except httpx.HTTPError as exc:
            raise ProviderFailed(
                "unavailable", f"HTTP error ({type(exc).__name__})", evidence
            ) from None
        status = response.status_code
        if status == 429 or status >= 500:
            raise _Retryable(
                f"HTTP {status}: {self._server_message(response)}",
                _retry_after(response.headers.get("Retry-After")) if status == 429 else None,
            )
        if status >= 400:
            raise ProviderFailed(
                "rejected", f"HTTP {status}: {self._server_message(response)}", evidence
            )
        return json_body(response, evidence)

    def _server_message(self, response: httpx.Response) -> str:
        """The server's own error message, truncated, with anything key-like blanked out."""
        try:
            data = response.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            data = None
        message: Any = None
        if isinstance(data, dict):
            error = data.get("error", data)
            message = error.get("message") if isinstance(error, dict) else error
        if not isinstance(message, str) or not message.strip():
            message = response.text or response.reason_phrase or "no message"
        if self.config.api_key:
            message = message.replace(self.config.api_key, "***")
        message = _KEY_LIKE.sub("sk-***", " ".join(message.split()))
        if len(message) > MAX_DETAIL_CHARS:
            message = message[: MAX_DETAIL_CHARS - 1] + "…"
        return message


def _retry_after(value: str | None) -> float | None:
    """Seconds to wait from a Retry-After header (seconds or an HTTP date); None if absent."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:  # "-0000" means UTC with no zone information
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _content(data: dict[str, Any], evidence: dict[str, Any]) -> Any:
    """``choices[0].message.content``; a missing envelope is the server's fault, not the model's."""
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ProviderFailed("unavailable", "the response has no choices", evidence)
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise ProviderFailed("unavailable", "the first choice has no message", evidence)
    return message.get("content")


def _add_usage(total: dict[str, int], usage: Any) -> None:
    """Add a round's token counts; servers that report none (or junk) add nothing."""
    if not isinstance(usage, dict):
        return
    for key in USAGE_KEYS:
        value = usage.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            total[key] += value
