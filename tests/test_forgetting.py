"""Forgetting: 「忘掉…」 withdraws what this conversation remembers at once, proposes a
tombstone, and a published tombstone removes the memory's block from the notes."""

from __future__ import annotations

import io

import pytest

from agent.contracts import MemoryStatus, Turn
from agent.run.forgetting import after_last_forget, forget_request, remembered_here
from agent.run.memory import PUBLISH_LEASE_S, file_hash, publish, review
from skills.retrieval.sections import parse_sections
from tests import factories

_candidate = factories.memory_candidate


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ("忘掉我的工位信息", "我的工位信息"),
        ("@小钉 请帮我忘记：我的车牌号。", "我的车牌号"),
        ("别再用我的手机号", "我的手机号"),
        ("忘掉吧", ""),
        ("please forget my desk number", "my desk number"),
        ("我忘了带工牌", None),  # a statement, not a request
        ("怎么忘掉一个密码", None),
    ],
)
def test_what_a_request_to_forget_names(text: str, what: str | None) -> None:
    assert forget_request(text, "小钉") == what


def test_turns_before_a_request_to_forget_are_not_shown_again() -> None:
    turns = [
        Turn(msg_id="m1", said="我的工位在 3 楼", at=1.0),
        Turn(msg_id="m2", said="忘掉我的工位信息", at=2.0),
        Turn(msg_id="m3", said="报销要什么材料", at=3.0),
    ]
    assert [t.msg_id for t in after_last_forget(turns)] == ["m3"]
    assert after_last_forget(turns[:1]) == turns[:1]


def test_what_can_be_forgotten_here_spans_the_store_and_the_folder() -> None:
    desk = _candidate("工位在 3 楼", status=MemoryStatus.PUBLISHED)
    rejected = _candidate("车位 B2-07", status=MemoryStatus.REJECTED)
    other_scope = parse_sections(
        "m.md", "<!-- dta:memory mem_x scope=cid-2 -->\n## 门禁\n\n卡号 7\n"
    )
    here = parse_sections("m.md", "<!-- dta:memory mem_y scope=cid-1 -->\n## 门禁\n\n卡号 9\n")
    found = remembered_here([desk, rejected], other_scope + here, "cid-1")
    assert [m.candidate_id for m in found] == [desk.candidate_id, "mem_y"]
    tombstone = _candidate("不再使用", kind="tombstone", supersedes=[desk.candidate_id])
    after = remembered_here([desk, tombstone], here, "cid-1")
    assert [m.candidate_id for m in after] == ["mem_y"]


def test_a_published_tombstone_removes_the_block(store, tmp_path) -> None:
    desk = _candidate("工位在 3 楼 A 区", title="工位")
    store.propose_memory([desk])
    review(store, desk.candidate_id, 1, True, io.StringIO())
    target = tmp_path / "MEMORY.md"
    target.write_text("# Team memory\n\nkeep this line\n", encoding="utf-8")
    assert publish(store, desk.candidate_id, target, file_hash(target), io.StringIO()) == 0
    assert "工位在 3 楼 A 区" in target.read_text() and "scope=cid-1" in target.read_text()
    tombstone = _candidate("不再使用：工位", kind="tombstone", supersedes=[desk.candidate_id])
    store.propose_memory([tombstone])
    review(store, tombstone.candidate_id, 1, True, io.StringIO())
    dry = io.StringIO()
    assert publish(store, tombstone.candidate_id, target, None, dry) == 0
    assert "removed" in dry.getvalue() and "工位在 3 楼 A 区" in target.read_text()
    assert publish(store, tombstone.candidate_id, target, file_hash(target), io.StringIO()) == 0
    text = target.read_text()
    assert "工位在 3 楼 A 区" not in text and desk.candidate_id not in text
    assert text.startswith("# Team memory\n\nkeep this line")


def test_a_second_publisher_waits_for_the_lease(store, tmp_path) -> None:
    desk = _candidate("工位在 3 楼 A 区")
    store.propose_memory([desk])
    review(store, desk.candidate_id, 1, True, io.StringIO())
    target = tmp_path / "MEMORY.md"
    assert store.take_lease(f"publish:{target.resolve()}", "someone-else", PUBLISH_LEASE_S)
    out = io.StringIO()
    assert publish(store, desk.candidate_id, target, file_hash(target), out) == 1
    assert "someone else is publishing" in out.getvalue() and not target.exists()
    store.release_thread(f"publish:{target.resolve()}", "someone-else")
    assert publish(store, desk.candidate_id, target, file_hash(target), io.StringIO()) == 0
