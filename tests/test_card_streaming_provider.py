"""Reading an answer while the model writes it: the scanner, and the streaming provider
against the fake model over real loopback HTTP."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from lab.models.fake_model import FakeModel
from skills.providers.base import ProviderFailed
from skills.providers.openai import OpenAIConfig
from skills.providers.openai_stream import StreamingOpenAIProvider
from skills.providers.streaming import ActionScanner, ReplyText, RequestDone, StreamEvent
from tests.test_openai_provider import AGENT, invocation


def scan(document: str, step: int) -> list[StreamEvent]:
    scanner = ActionScanner()
    events: list[StreamEvent] = []
    for start in range(0, len(document), step):
        events += scanner.feed(document[start : start + step])
    return events


def texts(events: list[StreamEvent]) -> list[str]:
    return [e.text for e in events if isinstance(e, ReplyText)]


@pytest.mark.parametrize("step", [1, 2, 3, 7, 1000])
def test_the_reply_text_grows_and_the_request_arrives_whole(step: int):
    answer = {"kind": "reply", "text": '第一行\n"引号" \\ 反斜杠 \u00e9 😀 完', "title": "t"}
    events = scan(json.dumps(answer, ensure_ascii=step % 2 == 0), step)
    shown = texts(events)
    assert shown[-1] == answer["text"]
    assert all(answer["text"].startswith(text) for text in shown)  # never garbled on the way
    assert events[-1] == RequestDone(0, answer)


def test_the_kind_may_come_after_the_text_and_fields_written_first_are_in_the_head():
    events = scan('{"target": "u9", "text": "hello there", "kind": "reply"}', 4)
    first = next(e for e in events if isinstance(e, ReplyText))
    assert first.text == "hello there"  # nothing is reported before the kind is known
    assert first.head == {"target": "u9", "kind": "reply", "text": "hello there"}


def test_requests_are_found_where_the_parser_finds_them():
    actions = '[{"kind": "ack", "text": "稍等"}, {"kind": "reply", "markdown": "**好**"}]'
    wrapped = f'Sure:\n```json\n{{"actions": {actions}}}\n```'
    events = scan(wrapped, 5)
    done = [e for e in events if isinstance(e, RequestDone)]
    assert [e.raw["kind"] for e in done] == ["ack", "reply"] and [e.index for e in done] == [0, 1]
    assert texts(events)[-1] == "**好**"
    lines = scan('{"kind": "silence", "reason": "x"}\n{"kind": "reply", "text": "ab"}', 3)
    assert [e.index for e in lines if isinstance(e, RequestDone)] == [0, 1]
    nested = scan('{"kind": "reply", "text": "a", "memory_candidates": [{"kind": "semantic"}]}', 2)
    assert [e.index for e in nested if isinstance(e, RequestDone)] == [0]


def test_only_replies_report_text():
    assert texts(scan('{"kind": "ask", "text": "哪一天？"}', 2)) == []


def script(text: str, **entry: Any) -> dict[str, list[dict[str, Any]]]:
    return {"m1": [{"json": {"kind": "reply", "text": text}, **entry}]}


async def ask(model: FakeModel, retries: int = 0) -> tuple[Any, list[StreamEvent]]:
    events: list[StreamEvent] = []
    config = OpenAIConfig(base_url=model.base_url, model="lab", max_retries=retries)
    provider = StreamingOpenAIProvider(config, AGENT, sleep=lambda _s: asyncio.sleep(0))
    try:
        reply = await provider.respond_streaming(invocation(), [], events.append)
    finally:
        await provider.aclose()
    return reply, events


async def test_a_streamed_answer_is_reported_piece_by_piece_and_parsed_whole():
    text = "先在 OA 提交申请，再等主管审批，最后去财务报销。"
    async with FakeModel(script(text, chunk_chars=4, chunk_delay_s=0)) as model:
        reply, events = await ask(model)
        assert model.requests[0]["stream"] is True
    assert reply.requests == [{"kind": "reply", "text": text}]
    assert len(texts(events)) > 3 and texts(events)[-1] == text


async def test_a_server_that_does_not_stream_still_works_as_one_frame():
    async with FakeModel(script("一次说完", stream=False)) as model:
        reply, events = await ask(model)
    assert reply.requests == [{"kind": "reply", "text": "一次说完"}]
    assert texts(events) == ["一次说完"]


async def test_a_throttled_stream_is_asked_again_before_any_text():
    entries = [{"status": 429, "retry_after": 0}, {"json": {"kind": "reply", "text": "好"}}]
    async with FakeModel({"m1": entries}) as model:
        _, events = await ask(model, retries=2)
        assert len(model.requests) == 2 and all(r["stream"] for r in model.requests)
    assert texts(events) == ["好"]


async def test_only_the_first_round_streams_and_a_repair_replaces_the_answer():
    entries = [{"content": "not json at all"}, {"json": {"kind": "reply", "text": "修好了"}}]
    async with FakeModel({"m1": entries}) as model:
        reply, _ = await ask(model)
        assert [r.get("stream") for r in model.requests] == [True, None]
    assert reply.requests == [{"kind": "reply", "text": "修好了"}] and reply.evidence["repaired"]


async def test_a_stream_that_breaks_after_text_fails_instead_of_answering_twice(monkeypatch):
    async def broken(self: Any, response: httpx.Response, evidence: Any, call: Any) -> Any:
        self._report(call, '{"kind": "reply", "text": "半句')
        raise httpx.RemoteProtocolError("peer closed")

    monkeypatch.setattr(StreamingOpenAIProvider, "_read_events", broken)
    async with FakeModel(script("whatever")) as model:
        with pytest.raises(ProviderFailed) as failed:
            await ask(model, retries=2)
        assert len(model.requests) == 1
    assert failed.value.reason == "unavailable"
