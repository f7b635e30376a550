"""The fake model server over real loopback HTTP.

Lab cases that exercise the ``openai`` provider are only as honest as this fake: scripts
must be consumed exactly as documented (errors included), and its answers must have the
shape a real OpenAI-compatible server returns.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from lab.models.fake_model import FakeModel


def _body(text: str = "hello", system: str = "you are a test") -> dict[str, Any]:
    return {
        "model": "fake-1",
        "messages": [
            {"role": "system", "content": system},
            {"role": "user", "content": text},
        ],
    }


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=5) as client:
        yield client


async def _ask(http: httpx.AsyncClient, fake: FakeModel, **kwargs: Any) -> httpx.Response:
    return await http.post(f"{fake.base_url}/chat/completions", json=_body(**kwargs))


def _content(response: httpx.Response) -> str:
    return response.json()["choices"][0]["message"]["content"]


async def test_default_answer_has_the_openai_shape(http: httpx.AsyncClient) -> None:
    async with FakeModel() as fake:
        assert fake.base_url.startswith("http://127.0.0.1:")
        assert fake.base_url.endswith("/v1")
        response = await _ask(http, fake, text="x" * 40)
    assert response.status_code == 200
    data = response.json()
    assert data["id"].startswith("chatcmpl-")
    assert data["model"] == "fake-1"
    choice = data["choices"][0]
    assert choice["message"]["role"] == "assistant"
    assert choice["finish_reason"] == "stop"
    assert json.loads(choice["message"]["content"]) == {"kind": "reply", "text": "ok"}
    usage = data["usage"]
    assert usage["prompt_tokens"] >= 10  # about characters / 4 of the prompt
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


async def test_records_every_body_and_serves_them(http: httpx.AsyncClient) -> None:
    async with FakeModel() as fake:
        await _ask(http, fake, text="first")
        await _ask(http, fake, text="second")
        served = (await http.get(fake.base_url.removesuffix("/v1") + "/_lab/requests")).json()
    assert [r["messages"][1]["content"] for r in fake.requests] == ["first", "second"]
    assert served == fake.requests


async def test_script_is_keyed_by_substring_and_consumed_in_order(
    http: httpx.AsyncClient,
) -> None:
    script = {
        '"event_id": "m1"': [{"json": {"kind": "reply", "text": "one"}}, {"content": "raw"}],
        "*": [{"json": {"kind": "ask", "text": "fallback"}}],
    }
    async with FakeModel(script) as fake:
        first = await _ask(http, fake, text='{"event_id": "m1"}')
        second = await _ask(http, fake, text='{"event_id": "m1"}')
        exhausted = await _ask(http, fake, text='{"event_id": "m1"}')
        after_fallback = await _ask(http, fake, text="anything")
    assert json.loads(_content(first)) == {"kind": "reply", "text": "one"}
    assert _content(second) == "raw"
    assert json.loads(_content(exhausted)) == {"kind": "ask", "text": "fallback"}
    assert json.loads(_content(after_fallback)) == {"kind": "reply", "text": "ok"}


async def test_key_may_match_the_system_prompt(http: httpx.AsyncClient) -> None:
    async with FakeModel({"needle": [{"content": "found"}]}) as fake:
        response = await _ask(http, fake, system="a needle in the system prompt")
    assert _content(response) == "found"


async def test_error_entries_are_consumed_and_carry_retry_after(
    http: httpx.AsyncClient,
) -> None:
    script = {"*": [{"status": 429, "retry_after": 1}, {"status": 500}, {"content": "fine"}]}
    async with FakeModel(script) as fake:
        throttled = await _ask(http, fake)
        broken = await _ask(http, fake)
        fine = await _ask(http, fake)
    assert throttled.status_code == 429
    assert throttled.headers["Retry-After"] == "1"
    assert throttled.json()["error"]["type"] == "rate_limit_exceeded"
    assert broken.status_code == 500
    assert "message" in broken.json()["error"]
    assert _content(fine) == "fine"
    assert len(fake.requests) == 3


async def test_delay_is_applied_before_answering(http: httpx.AsyncClient) -> None:
    async with FakeModel({"*": [{"delay_s": 0.2, "content": "late"}]}) as fake:
        started = time.monotonic()
        response = await _ask(http, fake)
    assert time.monotonic() - started >= 0.2
    assert _content(response) == "late"


async def test_stop_does_not_wait_for_an_abandoned_slow_answer() -> None:
    fake = FakeModel({"*": [{"delay_s": 30}]})
    await fake.start()
    async with httpx.AsyncClient(timeout=0.1) as client:
        with pytest.raises(httpx.ReadTimeout):
            await client.post(f"{fake.base_url}/chat/completions", json=_body())
    started = time.monotonic()
    await fake.stop()
    assert time.monotonic() - started < 2


@pytest.mark.parametrize(
    ("system", "expected"),
    [("skill body DTA-PROBE-0a1b2c here", "DTA-PROBE-0a1b2c"), ("no probe", "no marker")],
)
async def test_echo_system_marker(http: httpx.AsyncClient, system: str, expected: str) -> None:
    async with FakeModel({"*": [{"echo_system_marker": True}]}) as fake:
        # A marker in the user message must not count: only the system prompt is searched.
        response = await _ask(http, fake, system=system, text="DTA-PROBE-ffff")
    assert json.loads(_content(response)) == {"kind": "reply", "text": expected}


async def test_api_key_is_enforced_without_echoing_it(http: httpx.AsyncClient) -> None:
    url_body = _body()
    async with FakeModel(api_key="sk-right") as fake:
        url = f"{fake.base_url}/chat/completions"
        missing = await http.post(url, json=url_body)
        wrong = await http.post(url, json=url_body, headers={"Authorization": "Bearer sk-wrong"})
        right = await http.post(url, json=url_body, headers={"Authorization": "Bearer sk-right"})
    assert missing.status_code == 401
    assert wrong.status_code == 401
    assert wrong.json()["error"]["code"] == "invalid_api_key"
    assert "sk-wrong" not in wrong.text
    assert right.status_code == 200


async def test_usage_can_be_replaced_or_left_out(http: httpx.AsyncClient) -> None:
    usage = {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}
    async with FakeModel({"*": [{"usage": usage}, {"usage": None}]}) as fake:
        replaced = (await _ask(http, fake)).json()
        absent = (await _ask(http, fake)).json()
    assert replaced["usage"] == usage
    assert "usage" not in absent


async def test_malformed_requests_get_openai_style_400(http: httpx.AsyncClient) -> None:
    async with FakeModel() as fake:
        url = f"{fake.base_url}/chat/completions"
        not_json = await http.post(url, content=b"{nope", headers={"Content-Type": "text/plain"})
        no_messages = await http.post(url, json={"model": "m", "messages": []})
    assert not_json.status_code == 400
    assert no_messages.status_code == 400
    assert no_messages.json()["error"]["type"] == "invalid_request_error"
    assert fake.requests[0] == {"_raw": "{nope"}


@pytest.mark.parametrize(
    "script",
    [
        {"*": ["not an object"]},
        {"*": [{"jsn": {}}]},
        {"*": [{"json": {}, "content": "both"}]},
    ],
)
def test_malformed_script_is_refused_up_front(script: Any) -> None:
    with pytest.raises(ValueError, match="script"):
        FakeModel(script)


def test_base_url_needs_a_started_server() -> None:
    with pytest.raises(RuntimeError):
        _ = FakeModel().base_url
