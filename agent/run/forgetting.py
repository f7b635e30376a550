"""「忘掉我的工位信息」: forgetting, answered by the host for every provider alike.

A model asked to forget says 「好的，已经忘掉了」 and goes on using the fact, because the
memory is not its to drop. So the host answers the request itself, before any provider:

- the memories of this conversation that match what is named (published, approved or
  still proposed) are withdrawn at once: the reply carries a tombstone candidate naming
  them in ``supersedes``, and a withdrawn memory is never served again here
  (``agent.run.grounding.withdrawn_ids``), before anyone reviews the tombstone;
- in a group, only what the asker taught (``MemoryCandidate.taught_by``) is withdrawn at
  once: any member could otherwise wipe what others told the robot. The other matches,
  and those with no recorded teacher, stay in use; a second tombstone names them in
  ``asks_to_supersede`` and the reply says a reviewer decides (``dta memory approve``
  withdraws them). In a DM everything matching is the person's own;
- the person's earlier turns in this thread stop being shown to providers (the recent
  exchange starts after the request: ``after_last_forget``);
- the reply says what dta cannot erase: their own messages in DingTalk's chat history,
  replies already delivered, and a published note until a reviewer publishes the tombstone.

Publishing the tombstone (``dta memory publish``) removes the memory's block from the
Markdown file.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agent.contracts import (
    ConversationType,
    EnrichedInvocation,
    MemoryCandidate,
    MemoryStatus,
)
from agent.run.grounding import withdrawn_ids
from skills.language import clean_text, is_english
from skills.providers.base import reply
from skills.retrieval.bm25 import Bm25Index
from skills.retrieval.folder import KnowledgeBase
from skills.retrieval.sections import Section, parse_sections
from storage import Store

_FORGET = re.compile(
    r"^(?:请|麻烦)?(?:你)?(?:帮我)?(?:把)?(?:忘掉|忘记|忘了|删掉|删除|别再用|不要再用|别再记|不要再记)"
    r"(?:关于)?[：:，,\s]*(?P<what>.*?)[。.!！]*$"
    r"|^(?i:(?:please\s+)?(?:forget|stop using|delete)\s+(?:about\s+)?(?P<what_en>.*?)[.!]*)$"
)
_PARTICLES = re.compile(r"[吧啊呀嘛了哈]*|(?i:it|that|this)")
_EVERYTHING = re.compile(r"^(?:所有|全部|一切|我的一切|everything|all)")
_OF_MINE = re.compile(r"^(?:我的|我|关于我的)|(?:信息|内容|记忆|那条|的事)$")


def forget_request(text: str, agent_name: str = "") -> str | None:
    """What the person asks to forget (may be "" for 「忘掉吧」), or None if they do not."""
    match = _FORGET.match(clean_text(text, agent_name))
    if match is None:
        return None
    what = (match.group("what") or match.group("what_en") or "").strip()
    return "" if _PARTICLES.fullmatch(what) else what


def after_last_forget(turns: list[Any], said: Callable[[Any], str] | None = None) -> list[Any]:
    """The turns (or messages) after the last request to forget: what came before it is
    not shown again, in any form. ``said``: a turn's words (default: its ``said``)."""
    words = said or (lambda turn: turn.said)
    for index in range(len(turns) - 1, -1, -1):
        if forget_request(words(turns[index])) is not None:
            return turns[index + 1 :]
    return turns


@dataclass(frozen=True)
class Remembered:
    """A memory of this conversation that may be forgotten: in the store, or only as a
    published block in the knowledge folder."""

    candidate_id: str
    title: str
    content: str
    taught_by: str | None = None  # None: not recorded (older candidates, folder-only blocks)


def _matching(what: str, memories: list[Remembered]) -> list[Remembered]:
    if not memories:
        return []
    if not what:
        return memories[-1:]  # 「忘掉吧」: the latest thing remembered here
    if _EVERYTHING.match(what):
        return memories
    topic = _OF_MINE.sub("", what).strip() or what
    sections = [
        parse_sections(m.candidate_id, f"# {m.title}\n\n{m.content}\n")[-1] for m in memories
    ]
    hits = Bm25Index(sections).search(topic, k=len(sections))
    chosen = {h.section.source for h in hits}
    return [m for m in memories if m.candidate_id in chosen]


def remembered_here(
    memories: list[MemoryCandidate], sections: list[Section], scope: str
) -> list[Remembered]:
    """What this conversation remembers and has not withdrawn: its candidates in the store
    (any status but rejected) and the published blocks of its scope in the folder."""
    withdrawn = withdrawn_ids(memories)
    found = {
        m.candidate_id: Remembered(m.candidate_id, m.title, m.content, m.taught_by)
        for m in memories
        if m.kind != "tombstone"
        and m.status is not MemoryStatus.REJECTED
        and m.candidate_id not in withdrawn
    }
    for s in sections:
        if s.memory_id and s.memory_id not in found and s.visible_in(scope, withdrawn):
            found[s.memory_id] = Remembered(s.memory_id, s.heading, s.own)
    return list(found.values())


def forget_reply(
    invocation: EnrichedInvocation, remembered: list[Remembered], agent_name: str
) -> dict[str, Any] | None:
    """The host's answer to a request to forget, with its tombstones; None if it is not one.

    In a group, what someone else taught is only asked for: a tombstone in
    ``asks_to_supersede``, withdrawn once a reviewer approves it."""
    what = forget_request(invocation.text, agent_name)
    if what is None:
        return None
    event = invocation.event
    person = event.actor.user_id
    group = event.conversation.type is ConversationType.GROUP
    if group and not what:  # 「忘掉吧」 in a group: the latest thing they taught, if any
        remembered = [m for m in remembered if m.taught_by == person] or remembered
    found = _matching(what, remembered)
    # No recorded teacher is not theirs either: withdrawing it is the reviewer's call.
    own = [m for m in found if not group or m.taught_by == person]
    others = [m for m in found if group and m.taught_by != person]
    english = is_english(invocation.text)
    answer = reply(_words(what, own, others, english))
    topic = what[:24] or "这里记下的内容"
    tombstones = []
    if own:
        tombstones.append(
            {
                "kind": "tombstone",
                "title": f"忘掉：{topic}",
                "content": f"不再使用：{_named(own)}",
                "supersedes": [m.candidate_id for m in own],
                "confidence": 1.0,
            }
        )
    if others:
        teachers = "、".join(sorted({m.taught_by or "未记录" for m in others}))
        tombstones.append(
            {
                "kind": "tombstone",
                "title": f"待审核的忘掉请求：{topic}",
                "content": f"{person} 请求不再使用别人教的（{teachers}）：{_named(others)}",
                "asks_to_supersede": [m.candidate_id for m in others],
                "confidence": 1.0,
            }
        )
    if tombstones:
        answer["memory_candidates"] = tombstones
    return answer


def _named(memories: list[Remembered]) -> str:
    """Titles and ids, for the reviewer."""
    return f"{_titles(memories, '；')}（{', '.join(m.candidate_id for m in memories)}）"


class Forgetting:
    """The host's answer to 「忘掉…」, from this conversation's memories (store and folder)."""

    def __init__(self, store: Store, knowledge: KnowledgeBase, agent_name: str) -> None:
        self.store = store
        self.knowledge = knowledge
        self.agent_name = agent_name

    def answer(self, invocation: EnrichedInvocation) -> dict[str, Any] | None:
        if forget_request(invocation.text, self.agent_name) is None:
            return None  # the common case: no store read
        scope = invocation.event.conversation.id
        here = remembered_here(
            self.store.context.memory_in_scope(scope), self.knowledge.sections, scope
        )
        return forget_reply(invocation, here, self.agent_name)


def _words(what: str, own: list[Remembered], others: list[Remembered], english: bool) -> str:
    said = []
    if english:
        if own:
            said.append(
                f"OK: from now on I will not use what I had noted here ({_titles(own, '; ')}); "
                "a reviewer confirms its removal from the notes."
            )
        if others:
            said.append(
                f"Someone else taught me {_titles(others, '; ')}, so I have passed your request "
                "to an administrator; until they approve it, I still use it."
            )
        if not said:
            said.append(f'I have nothing remembered here about "{what or "that"}".')
        said.append(
            "What I cannot erase: your own messages in the chat history (recall or delete "
            "them in DingTalk) and replies I have already sent."
        )
        return " ".join(said)
    if own:
        said.append(
            f"好，从现在起我在这里不再使用记下的「{_titles(own, '；')}」；"
            "从笔记里删除要等审核人确认。"
        )
    if others:
        said.append(
            f"「{_titles(others, '；')}」是别人教我的，我已把你的请求转给管理员审核，"
            "审核通过前我还会用它。"
        )
    if not said:
        said.append(f"关于「{what or '这个'}」，我这里没有记下任何内容。")
    said.append(
        "我删不掉的：你在聊天记录里发过的消息（需要在钉钉里自己撤回或删除），以及我之前发出的回复。"
    )
    return "".join(said)


def _titles(memories: list[Remembered], sep: str) -> str:
    return sep.join(m.title for m in memories)
