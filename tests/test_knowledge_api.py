"""KnowledgeClient: against the fake DingTalk over real loopback HTTP (paging, blocks,
permission per unionId, deleted docs, throttling, records), against respx for the error
kinds the fake does not make, and ``blocks_to_sections`` on its own."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import respx

from agent.clock import VirtualClock
from agent.components import transport_config
from agent.dingtalk.knowledge_api import (
    DocBlock,
    KnowledgeClient,
    KnowledgeError,
    blocks_to_sections,
)
from agent.dingtalk.knowledge_records import epoch_s, node_kind
from agent.dingtalk.transport import DingTalkTransport
from lab.fake import FakeDingTalk
from lab.fake.calls import call_counts, call_kind
from lab.fake.docs_faults import parse_docs_fault
from lab.fake.docs_state import LAB_KNOWLEDGE_READER
from tests.factories import built

START = 1_767_225_600.0
READER = LAB_KNOWLEDGE_READER
USERS: dict[str, dict[str, Any]] = {
    "u1": {"name": "张三", "union_id": "UNION-1"},
    "u2": {"name": "李四"},  # derived unionId: union-u2
    "u3": {"name": "王五"},
}
DOCS: list[dict[str, Any]] = [
    {
        "id": "leave",
        "title": "请假制度",
        "text": "# 年假\n\n每年十天。\n\n## 申请\n\n提前一周申请。",
        "readers": ["u1", "cid-hr"],
        "modified_at": START - 3600,
    },
    {"id": "handbook", "title": "Handbook", "blocks": [{"paragraph": "Welcome."}]},
    {"id": "travel", "title": "Travel", "text": "Book early.", "folder": "Policies/Money"},
    {"id": "travel-faq", "title": "Travel FAQ", "text": "Q.", "parent": "travel"},
    {"id": "d5", "title": "Five", "text": "5"},
    {"id": "d6", "title": "Six", "text": "6"},
    {"id": "other-ws", "title": "Elsewhere", "text": "x", "workspace": "ws-eng"},
]
TABLES: list[dict[str, Any]] = [
    {
        "id": "assets",
        "name": "资产",
        "records": [{"fields": {"名称": f"laptop {n}"}} for n in range(7)],
        "readers": ["u1"],
    }
]

slow = pytest.mark.slow  # sockets: a started server on loopback


@pytest.fixture
async def fake() -> AsyncIterator[FakeDingTalk]:
    platform = FakeDingTalk(VirtualClock(START), timeout_fault_s=0.2, users=USERS)
    platform.workspace.knowledge.seed(DOCS, TABLES, {"cid-hr": ["u3"]}, START)
    await platform.start()
    try:
        yield platform
    finally:
        await platform.stop()


def _transport(base_url: str, clock: VirtualClock, **fields: Any) -> DingTalkTransport:
    cfg = built(
        transport_config,
        openapi_base_url=base_url,
        client_id=fields.pop("client_id", "dta-lab-app"),
        client_secret=fields.pop("client_secret", "dta-lab-secret"),
        robot_code="dta-lab-robot",
        send_retries=2,
        read_timeout_s=fields.pop("read_timeout_s", 2.0),
        **fields,
    )
    return DingTalkTransport(cfg, clock)


@pytest.fixture
async def client(fake: FakeDingTalk) -> AsyncIterator[KnowledgeClient]:
    transport = _transport(fake.base_url, VirtualClock(START), read_timeout_s=0.5)
    try:
        yield KnowledgeClient(transport)
    finally:
        await transport.aclose()


def counts(fake: FakeDingTalk) -> dict[str, int]:
    return call_counts(fake.request_log)


# ---------------------------------------------------------------------- wiki


@slow
async def test_the_whole_tree_is_read_page_by_page_with_parents(
    fake: FakeDingTalk, client: KnowledgeClient
):
    nodes = await client.workspace_nodes("ws-lab", READER)
    by_id = {n.node_id: n for n in nodes}
    top = [n for n in nodes if n.parent_id == "ws-lab-root"]
    # 4 docs, a folder and the table at the top: two pages of three at most
    assert len(top) == 6 and counts(fake)["doc_list"] >= 5
    folder = by_id["ws-lab-folder-Policies"]
    assert folder.kind == "folder" and folder.has_children
    assert by_id["ws-lab-folder-Policies-Money"].parent_id == folder.node_id
    assert by_id["travel"].parent_id == "ws-lab-folder-Policies-Money"
    assert by_id["travel-faq"].parent_id == "travel" and by_id["travel"].has_children
    assert by_id["assets"].kind == "table" and by_id["leave"].kind == "doc"
    assert by_id["leave"].modified_at == START - 3600
    assert by_id["leave"].url and by_id["leave"].url.endswith("/leave")
    assert "other-ws" not in by_id  # another knowledge base
    assert counts(fake)["doc_read"] == 0  # listing reads no content


@slow
async def test_a_listing_shows_only_what_the_operator_may_see(client: KnowledgeClient):
    seen = {n.node_id for n in await client.workspace_nodes("ws-lab", "union-u2")}
    assert "leave" not in seen and "assets" not in seen and "handbook" in seen
    assert "leave" in {n.node_id for n in await client.workspace_nodes("ws-lab", "UNION-1")}


@slow
async def test_one_node_and_an_unknown_knowledge_base(client: KnowledgeClient):
    node = await client.node("travel", READER)
    assert (node.name, node.kind, node.workspace_id) == ("Travel", "doc", "ws-lab")
    with pytest.raises(KnowledgeError) as caught:
        await client.workspace_nodes("ws-nope", READER)
    assert caught.value.kind == "not_found"


# ---------------------------------------------------------------------- docs


@slow
async def test_blocks_come_back_as_sections(fake: FakeDingTalk, client: KnowledgeClient):
    blocks = await client.blocks("leave", READER)
    assert [b.kind for b in blocks] == ["heading", "paragraph", "heading", "paragraph"]
    assert blocks[2].level == 2
    sections = blocks_to_sections("请假制度", blocks)
    assert sections == [
        (["请假制度", "年假"], "每年十天。"),
        (["请假制度", "年假", "申请"], "提前一周申请。"),
    ]
    assert counts(fake)["doc_read"] == 1


@slow
async def test_permission_per_union_id(fake: FakeDingTalk, client: KnowledgeClient):
    assert await client.can_read("leave", "UNION-1")  # a reader by staff id
    assert await client.can_read("leave", "union-u3")  # a member of the reader group
    assert not await client.can_read("leave", "union-u2")  # neither
    assert await client.can_read("leave", READER)
    with pytest.raises(KnowledgeError):  # no answer about it: neither yes nor no
        await client.can_read("no-such-doc", READER)
    assert counts(fake)["permission"] == 5
    with pytest.raises(KnowledgeError) as caught:
        await client.blocks("leave", "union-u2")
    assert caught.value.kind == "no_permission"
    assert len(await client.blocks("leave", "union-u3")) == 4


@slow
async def test_a_deleted_doc_is_gone_and_unreadable(fake: FakeDingTalk, client: KnowledgeClient):
    fake.workspace.knowledge.delete("handbook")
    fake.arm_fault({"docs": {"deleted": "d5", "no_permission": "d6"}})
    for doc, kind in (("handbook", "not_found"), ("d5", "not_found"), ("d6", "no_permission")):
        assert not await client.can_read(doc, READER)
        with pytest.raises(KnowledgeError) as caught:
            await client.blocks(doc, READER)
        assert caught.value.kind == kind
    seen = {n.node_id for n in await client.workspace_nodes("ws-lab", READER)}
    assert {"handbook", "d5", "d6"}.isdisjoint(seen)


@slow
async def test_an_edit_moves_the_modified_time(fake: FakeDingTalk, client: KnowledgeClient):
    fake.clock.advance_to(START + 600)  # type: ignore[attr-defined]
    fake.workspace.knowledge.edit("handbook", "## New\n\nRewritten.", fake.clock.now())
    assert (await client.node("handbook", READER)).modified_at == START + 600
    blocks = await client.blocks("handbook", READER)
    assert blocks_to_sections("Handbook", blocks) == [(["Handbook", "New"], "Rewritten.")]


@slow
async def test_throttled_then_answered(fake: FakeDingTalk, client: KnowledgeClient):
    fake.arm_fault({"docs": {"throttled": 2, "retry_after": 1}})
    assert len(await client.blocks("handbook", READER)) == 1
    assert counts(fake)["doc_read"] == 3
    fake.arm_fault({"docs": {"throttled": 5}})
    with pytest.raises(KnowledgeError) as caught:
        await client.can_read("handbook", READER)
    assert caught.value.kind == "throttled"


@slow
async def test_a_slow_answer_is_unavailable(fake: FakeDingTalk, client: KnowledgeClient):
    fake.arm_fault({"docs": {"slow": 1.0}})
    with pytest.raises(KnowledgeError) as caught:
        await client.blocks("handbook", READER)
    assert caught.value.kind == "unavailable"


@slow
async def test_a_staff_id_as_operator_is_invalid(client: KnowledgeClient):
    with pytest.raises(KnowledgeError) as caught:
        await client.blocks("handbook", "u1")
    assert caught.value.kind == "invalid"


# ---------------------------------------------------------------------- AI tables


@slow
async def test_records_every_page(fake: FakeDingTalk, client: KnowledgeClient):
    sheets = await client.table_sheets("assets", "UNION-1")
    assert sheets == [("assets-sheet1", "资产")]
    records = await client.table_records("assets", "资产", "UNION-1")
    assert [r.fields["名称"] for r in records] == [f"laptop {n}" for n in range(7)]
    assert records[0].record_id == "assets-sheet1-rec1" and records[0].modified_at == START
    assert counts(fake)["doc_read"] == 3  # pages of three
    with pytest.raises(KnowledgeError) as caught:
        await client.table_records("assets", "assets-sheet1", "union-u2")
    assert caught.value.kind == "not_found"  # DingTalk says "no access" this way too


# ---------------------------------------------------------------------- error kinds (respx)

API = "https://api.test"


@pytest.fixture
async def mocked() -> AsyncIterator[KnowledgeClient]:
    transport = _transport(API, VirtualClock(START), client_id="app", client_secret="s")
    try:
        yield KnowledgeClient(transport)
    finally:
        await transport.aclose()


@respx.mock
@pytest.mark.parametrize(
    ("status", "body", "kind"),
    [
        (403, {"code": "Forbidden.AccessDenied.AccessTokenPermissionDenied"}, "no_permission"),
        (404, {"code": "InvalidAction.NotFound"}, "not_found"),
        (400, {"code": "invalidRequest.document.notFound"}, "not_found"),
        (400, {"code": "paramError"}, "invalid"),
        (500, {"code": "InternalError"}, "unavailable"),
        (503, {}, "unavailable"),
        (401, {"code": "InvalidAuthentication"}, "unavailable"),
    ],
)
async def test_dingtalk_errors_map_to_kinds(
    mocked: KnowledgeClient, status: int, body: dict[str, Any], kind: str
):
    respx.post(f"{API}/v1.0/oauth2/accessToken").mock(
        return_value=httpx.Response(200, json={"accessToken": "tok", "expireIn": 7200})
    )
    route = respx.get(f"{API}/v1.0/doc/suites/documents/d1/blocks").mock(
        return_value=httpx.Response(status, json=body)
    )
    with pytest.raises(KnowledgeError) as caught:
        await mocked.blocks("d1", "U1")
    assert caught.value.kind == kind
    request = route.calls.last.request
    assert request.headers["x-acs-dingtalk-access-token"] == "tok"
    assert request.url.params["operatorId"] == "U1"


@respx.mock
async def test_an_unreachable_platform_is_unavailable(mocked: KnowledgeClient):
    respx.post(f"{API}/v1.0/oauth2/accessToken").mock(
        return_value=httpx.Response(200, json={"accessToken": "tok", "expireIn": 7200})
    )
    respx.post(f"{API}/v1.0/doc/workspaces/docs/infos/query").mock(
        side_effect=httpx.ConnectError("refused")
    )
    with pytest.raises(KnowledgeError) as caught:
        await mocked.can_read("d1", "U1")
    assert caught.value.kind == "unavailable"


async def test_an_empty_id_or_operator_is_invalid(mocked: KnowledgeClient):
    for doc, operator in (("", "U1"), ("d1", "")):
        with pytest.raises(KnowledgeError) as caught:
            await mocked.blocks(doc, operator)
        assert caught.value.kind == "invalid"


# ---------------------------------------------------------------------- sections


def test_sections_split_at_headings_and_nest():
    blocks = [
        DocBlock("paragraph", "Intro."),
        DocBlock("heading", "A", 1),
        DocBlock("heading", "A.1", 2),
        DocBlock("list", "one", ordered=True),
        DocBlock("list", "two", ordered=True),
        DocBlock("list", "dot"),
        DocBlock("quote", "said"),
        DocBlock("other", ""),
        DocBlock("heading", "B", 1),
        DocBlock("paragraph", "b."),
    ]
    assert blocks_to_sections("T", blocks) == [
        (["T"], "Intro."),
        (["T", "A", "A.1"], "1. one\n\n2. two\n\n- dot\n\n> said"),
        (["T", "B"], "b."),
    ]


def test_tables_are_rows_of_cells():
    from agent.dingtalk.knowledge_records import doc_block

    block = doc_block(
        {"blockType": "table", "table": {"cells": [["项目", "负责人"], ["发布", {"text": "A"}]]}}
    )
    assert blocks_to_sections("T", [block]) == [(["T"], "项目 | 负责人\n发布 | A")]
    heading = doc_block({"blockType": "heading", "heading": {"level": "3", "text": "x"}})
    assert heading.level == 3
    assert doc_block({"blockType": "unknown"}).kind == "other"


def test_long_sections_split_at_paragraphs():
    paragraphs = [DocBlock("paragraph", f"{n}" * 500) for n in range(5)]
    sections = blocks_to_sections("T", paragraphs)
    assert all(len(text) <= 1200 for _, text in sections)
    assert [text.count("\n\n") for _, text in sections] == [1, 1, 0]  # 2 + 2 + 1 paragraphs
    giant = blocks_to_sections("T", [DocBlock("paragraph", "很长的一句话。" * 400)])
    assert len(giant) == 3 and all(t.endswith("。") for _, t in giant)
    assert "".join(t for _, t in giant) == "很长的一句话。" * 400


def test_node_kinds_and_times():
    assert node_kind({"type": "FOLDER"}) == "folder"
    assert node_kind({"type": "FILE", "extension": "alidoc"}) == "doc"
    assert node_kind({"type": "FILE", "category": "ALIDOC"}) == "doc"
    assert node_kind({"type": "FILE", "extension": "able"}) == "table"
    assert node_kind({"type": "FILE", "extension": "pdf"}) == "file"
    assert epoch_s(1_767_225_600_000) == 1_767_225_600.0
    assert epoch_s("2026-01-01T00:00Z") == 1_767_225_600.0
    assert epoch_s("soon") is None and epoch_s(True) is None


# ---------------------------------------------------------------------- the fake's vocabulary


def test_call_kinds_of_the_knowledge_paths():
    assert call_kind("/v1.0/doc/suites/documents/d1/blocks") == "doc_read"
    assert call_kind("/v1.0/notable/bases/b/sheets/s/records/list") == "doc_read"
    assert call_kind("/v1.0/notable/bases/b/sheets") == "doc_list"
    assert call_kind("/v2.0/wiki/nodes") == "doc_list"
    assert call_kind("/v1.0/doc/workspaces/docs/infos/query") == "permission"


@pytest.mark.parametrize(
    "spec",
    [
        {},
        {"bogus": 1},
        {"throttled": 0},
        {"retry_after": 1},
        {"times": 2},
        {"slow": 99},
        {"no_permission": []},
        {"deleted": [""]},
    ],
)
def test_bad_docs_faults_are_named(spec: dict[str, Any]):
    with pytest.raises(ValueError, match="docs"):
        parse_docs_fault(spec)
