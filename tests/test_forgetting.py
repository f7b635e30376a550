"""Forgetting: 「忘掉…」 withdraws what this conversation remembers at once, proposes a
tombstone, and a published tombstone removes the memory's block from the notes. In a
group, only what the asker taught goes at once; the rest waits for a reviewer."""

from __future__ import annotations

import io
from typing import Any

import pytest

from agent.contracts import (
    ActionRequest,
    EnrichedInvocation,
    Identity,
    MemoryCandidate,
    MemoryStatus,
    Turn,
)
from agent.run.forgetting import (
    Remembered,
    after_last_forget,
    forget_reply,
    forget_request,
    remembered_here,
)
from agent.run.grounding import withdrawn_ids
from agent.run.memory import (
    PUBLISH_LEASE_S,
    candidates_from,
    file_hash,
    list_candidates,
    publish,
    review,
)
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
    store.context.propose_memory([desk])
    review(store, desk.candidate_id, 1, True, io.StringIO())
    target = tmp_path / "MEMORY.md"
    target.write_text("# Team memory\n\nkeep this line\n", encoding="utf-8")
    assert publish(store, desk.candidate_id, target, file_hash(target), io.StringIO()) == 0
    assert "工位在 3 楼 A 区" in target.read_text() and "scope=cid-1" in target.read_text()
    tombstone = _candidate("不再使用：工位", kind="tombstone", supersedes=[desk.candidate_id])
    store.context.propose_memory([tombstone])
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
    store.context.propose_memory([desk])
    review(store, desk.candidate_id, 1, True, io.StringIO())
    target = tmp_path / "MEMORY.md"
    assert store.context.take_lease(f"publish:{target.resolve()}", "someone-else", PUBLISH_LEASE_S)
    out = io.StringIO()
    assert publish(store, desk.candidate_id, target, file_hash(target), out) == 1
    assert "someone else is publishing" in out.getvalue() and not target.exists()
    store.work.release_thread(f"publish:{target.resolve()}", "someone-else")
    assert publish(store, desk.candidate_id, target, file_hash(target), io.StringIO()) == 0


def _asking(text: str, user: str, group: str | None = "cid-g1") -> EnrichedInvocation:
    event = factories.event(msg_id="m9", user=user, text=text, group=group, at_bot=True)
    return EnrichedInvocation(
        run_id="run_1",
        event=event,
        text=text,
        identity=Identity(source="envelope", user_id=user),
        allowed_actions=[],
    )


def _proposed(invocation: EnrichedInvocation, answer: dict[str, Any]) -> list[MemoryCandidate]:
    """The reply's tombstones as the run would store them."""
    run = factories.run_for(invocation.event)
    return candidates_from(run, ActionRequest.model_validate(answer), factories.T0)


def test_a_candidate_records_who_taught_it_and_older_ones_read_as_unrecorded() -> None:
    invocation = _asking("记住：门禁卡号 7", "u1")
    request = ActionRequest.model_validate(
        {"kind": "reply", "text": "好", "memory_candidates": [{"title": "门禁", "content": "7"}]}
    )
    run = factories.run_for(invocation.event)
    (taught,) = candidates_from(run, request, factories.T0)
    assert taught.taught_by == "u1" and taught.asks_to_supersede is None
    assert [m.taught_by for m in remembered_here([taught], [], taught.scope_id)] == ["u1"]
    older = _candidate("工位在 3 楼").to_dict()
    older.pop("taught_by", None)
    assert MemoryCandidate.model_validate(older).taught_by is None
    assert "asks_to_supersede" not in taught.to_json()  # unset: left out of the record


def test_in_a_group_only_what_the_asker_taught_is_withdrawn_at_once(store) -> None:
    desk = Remembered("mem_desk", "工位", "工位在 3 楼", taught_by="u1")
    car = Remembered("mem_car", "车位", "车位 B2-07", taught_by="u2")
    door = Remembered("mem_door", "门禁", "门禁卡号 7")  # stored before teachers were
    invocation = _asking("忘掉所有", "u2")
    answer = forget_reply(invocation, [desk, car, door], "小钉")
    assert answer is not None
    text = answer["text"]
    assert "不再使用记下的「车位」" in text
    assert "「工位；门禁」是别人教我的" in text and "审核通过前我还会用" in text
    own, asked = _proposed(invocation, answer)
    assert own.supersedes == ["mem_car"] and own.taught_by == "u2"
    assert asked.supersedes == [] and asked.asks_to_supersede == ["mem_desk", "mem_door"]
    assert "u2" in asked.content and "u1" in asked.content and "未记录" in asked.content
    store.context.propose_memory([own, asked])
    assert withdrawn_ids(store.context.memory_in_scope("cid-g1")) == {"mem_car"}
    listed = io.StringIO()
    list_candidates(store, "proposed", listed)
    assert "asks to supersede mem_desk, mem_door (still in use" in listed.getvalue()
    assert review(store, asked.candidate_id, 1, True, io.StringIO()) == 0
    assert withdrawn_ids(store.context.memory_in_scope("cid-g1")) == {
        "mem_car",
        "mem_desk",
        "mem_door",
    }


def test_in_a_group_what_someone_else_taught_is_not_claimed_forgotten() -> None:
    desk = Remembered("mem_desk", "工位", "工位在 3 楼", taught_by="u1")
    answer = forget_reply(_asking("忘掉工位", "u2"), [desk], "小钉")
    assert answer is not None
    assert "不再使用" not in answer["text"] and "别人教我的" in answer["text"]
    (asked,) = answer["memory_candidates"]
    assert "supersedes" not in asked and asked["asks_to_supersede"] == ["mem_desk"]
    english = forget_reply(_asking("please forget the desk", "u2"), [desk], "小钉")
    assert english is not None
    assert "Someone else taught me" in english["text"] and "I still use it" in english["text"]
    mine = forget_reply(_asking("忘掉工位", "u1"), [desk], "小钉")
    assert mine is not None
    assert [c.get("supersedes") for c in mine["memory_candidates"]] == [["mem_desk"]]


def test_a_bare_request_in_a_group_forgets_the_latest_thing_the_asker_taught() -> None:
    desk = Remembered("mem_desk", "工位", "工位在 3 楼", taught_by="u1")
    car = Remembered("mem_car", "车位", "车位 B2-07", taught_by="u2")
    answer = forget_reply(_asking("忘掉吧", "u1"), [desk, car], "小钉")
    assert answer is not None
    assert [c.get("supersedes") for c in answer["memory_candidates"]] == [["mem_desk"]]


def test_in_a_dm_everything_matching_is_withdrawn_whoever_is_recorded() -> None:
    desk = Remembered("mem_desk", "工位", "工位在 3 楼", taught_by="u1")
    door = Remembered("mem_door", "门禁", "门禁卡号 7")
    answer = forget_reply(_asking("忘掉所有", "u1", group=None), [desk, door], "小钉")
    assert answer is not None
    (tombstone,) = answer["memory_candidates"]
    assert tombstone["supersedes"] == ["mem_desk", "mem_door"]
    assert "别人" not in answer["text"]
