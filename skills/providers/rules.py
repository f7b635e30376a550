"""The embedded default provider: deterministic, offline and cheap enough to run per message.

It answers what can be answered without a model and says so honestly when it cannot.
The checks run in a fixed order and the first hit produces the single reply:

1. requests to send, forward or broadcast elsewhere, or to speak as someone else, are
   declined with a safe alternative (the answer only ever goes back to the origin);
2. arithmetic, computed exactly (see ``arithmetic``);
3. self-introduction from the agent definition;
4. a matching section of the team's Markdown knowledge folder, with its source (a line of
   a PDF, Word or Excel file the person sent comes first: ``skills/documents.py``);
5. otherwise "I don't know", naming what was checked.

A request to be reminded (「明天上午10点提醒我交报销」, "remind me at 3pm to …") is answered
with one short reply that says when, carrying the reminder for the action gate
(``reminders``); the heartbeat delivers it.

Before those, ``followup`` reads the invocation as a whole: a waiting task, a quote, a
request that is missing what it needs (one short ``ask``), the actor's name.

Replies are worded like a colleague would talk; the reply is the same in a group and in
a DM because the transport adds the @ mention.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from agent.contracts import ActionKind, AgentDefinition, ConversationType, EnrichedInvocation
from skills import documents, media
from skills.language import clean_text, is_english
from skills.loader import Skill, allowed_actions
from skills.providers import arithmetic, followup, reminders
from skills.providers.base import ProviderReply, ask, reply, silence
from skills.retrieval.doc_items import cited, doc_sections
from skills.retrieval.folder import KnowledgeBase, excerpt
from skills.retrieval.sections import Section
from skills.retrieval.strict import Match, best_match


def _compile(*patterns: str) -> re.Pattern[str]:
    """One pattern that matches where any of ``patterns`` does (one scan, not several)."""
    return re.compile("|".join(f"(?:{p})" for p in patterns))


# English verbs like "post", "share" and "message" are also nouns, so they only count in
# request position: at the start, or after "please", "can you", "and" ...
_EN_REQUEST = r"(?:^|\b(?:please|pls|can you|could you|would you|will you|and|then|also|just)\s+)"
_TO_ELSEWHERE = _compile(
    # 把这个发给张三 / 把我们的私聊内容发到群里 / 把消息发给 u2
    r"(?:把|将(?!来|近|要|会))[^，,。！!？?]{0,30}?(?:发给|发到|发去|发送给|发送到|发在|转发|"
    r"转给|转到|转告|传给|贴到|贴给|分享给|分享到|同步给|同步到|告诉|通知)(?!我|咱)",
    # 帮我转发到xx群 / 替我告诉张三 / 替我@所有人
    r"(?:帮我|替我|代我|请你|你去|麻烦你?)[^，,。！!？?]{0,6}?"
    r"(?:转发|转给|转告|发给|发到|发送给|私信|群发|通知|告诉|@|艾特)(?!我|咱)",
    r"转发(?:到|给|至)",
    r"[@＠](?:所有人|全体成员|全体|全员|大家)",
    rf"(?i:{_EN_REQUEST}(?:send|forward|relay|pass|post|share|repost|cross-?post)\b"
    r"[^.?!]{0,40}?\b(?:to|in|into|on|with)\b(?!\s+(?:me|us)\b))",
    r"(?i:@(?:all|everyone|here|channel)\b|\b(?:mention|notify|ping|tag)\s+(?:everyone|all)\b)",
    rf"(?i:{_EN_REQUEST}(?:dm|message|email|text|ping|tell|notify))\s+(?!Me\b|Us\b)[A-Z][a-z]+",
)
_AS_SOMEONE_ELSE = _compile(
    # 以老板的身份通知大家 / 你现在是管理员 / 冒充 / 代表经理宣布
    r"以[^，,。！!？?]{1,12}?(?:的)?(?:身份|名义|口吻)",
    r"冒充|假冒|假装(?:你)?(?:是|成)|扮演|伪装成",
    r"你(?:现在)?就?是(?:我们的)?(?:管理员|老板|群主|主管|经理|领导|人事|hr|admin)",
    r"代表[^，,。！!？?]{1,10}?(?:通知|发|宣布|回复|承诺|答应|表态)",
    r"(?i:\b(?:pretend|impersonate|pose as|posing as|act as|speak as|on behalf of)\b"
    r"|\bin the name of\b"
    r"|\byou are now (?:an? |the )?(?:admin|administrator|boss|manager|owner)\b)",
)
# Asking *how* to do something, or *who* to send it to, is a question, not a request.
_HOW_OR_WHO = re.compile(
    r"怎么|如何|怎样|(?:发给|发到|转给|转发给|转发到|通知|告诉)(?:谁|哪)"
    r"|(?i:^\s*(?:who|what|where|when|which|how|why)\b|\b(?:should|do|can|must|may) (?:i|we)\b)"
)
_SELF_INTRO = re.compile(
    r"你是谁|你叫什么|你的名字|介绍(?:一下)?(?:你)?自己|自我介绍"
    r"|你(?:能|会|可以)(?:帮(?:我|我们)?)?(?:做|干)?(?:些|点)?(?:什么|啥)"
    r"|你有(?:什么|哪些)(?:功能|本事|能力|技能)|你的(?:职责|功能|作用|能力)"
    r"|能帮(?:我|我们|忙)?(?:做|干)?(?:些|点)?(?:什么|啥)"
    r"|(?i:\bwho are you\b|\bwhat(?:'s| is) your name\b|\bintroduce yourself\b"
    r"|\bwhat (?:can|do) you do\b|\bwhat are you\b|\bhow can you help\b)"
)
_GREETING = re.compile(
    r"(?i:你好|您好|hi|hello|hey|在吗|在么|在不在|help|帮助)[吗呀啊]?[\s!！。.~～?？]*"
)

# "paste what we said in private here": in a group, about a one-to-one chat's content
_DM_CONTENT = re.compile(
    r"(?:私聊|单聊|私信|私下|私底下)[^，,。！!？?]{0,12}?"
    r"(?:内容|说的|聊的|讲的|发的|记录|消息|信息|那些|那段|那个)"
    r"|(?i:\b(?:our|my|the) (?:dm|private (?:chat|conversation|messages?))\b)"
)
_DM_STAYS_ZH = (
    "这个不方便：私聊里的内容只留在私聊里，我不会在群里复述或转发。"
    "需要的话你可以私聊问我，或者自己决定要不要分享。"
)
_DM_STAYS_EN = (
    "I'd rather not: what was said in a private chat stays there, and I won't repeat or "
    "forward it in a group. Ask me privately, or share it yourself if you choose to."
)
_ASK_FILE_ZH = "没看到你说的文件或图片，发过来我看看？"
_ASK_FILE_EN = "I don't see the file or picture you mean — could you send it to me?"

_FORWARD_ZH = (
    "这个我帮不了：我只能在这里回复你，不能把消息发到别的地方，也不会转发私聊内容或替人@大家。"
    "需要的话你可以自己转发；如果是别人的信息，最好请信息的主人自己分享。"
)
_FORWARD_EN = (
    "I can't do that: I can only reply to you here, in this conversation. I don't send "
    "messages elsewhere, forward private conversations or @ people on someone's behalf. "
    "You're welcome to forward it yourself, or ask the owner of the information to share it."
)
_IMPERSONATE_ZH = (
    "这个我不能做：我只能以自己的身份、在这个对话里回复你，不能冒充别人或替别人发通知、表态，"
    "也不会把消息发到别处。如果需要通知大家，请本人或有权限的同事直接发。"
)
_IMPERSONATE_EN = (
    "I can't do that: I only speak as myself, and only in this conversation. I won't pretend "
    "to be someone else, post in their name or send messages elsewhere. If people need to "
    "be told, the person concerned (or someone with the right permissions) can post it directly."
)


def redirect_kind(text: str) -> str | None:
    """'impersonate', 'forward' or None: does the message ask to act beyond the origin?"""
    if _HOW_OR_WHO.search(text):
        return None
    if _AS_SOMEONE_ELSE.search(text):
        return "impersonate"
    if _TO_ELSEWHERE.search(text):
        return "forward"
    return None


def wants_introduction(text: str) -> bool:
    return not text or bool(_SELF_INTRO.search(text)) or bool(_GREETING.fullmatch(text))


class RulesProvider:
    """Answers from rules, arithmetic and the knowledge folder; never from guesses."""

    name: str = "rules"

    def __init__(
        self,
        agent: AgentDefinition,
        knowledge_dir: Path | None,
        timezone: ZoneInfo | None = None,
    ) -> None:
        self.agent = agent
        self.knowledge = KnowledgeBase(knowledge_dir)
        self.timezone = timezone or ZoneInfo("Asia/Shanghai")  # how reminder times are read

    async def respond(
        self, invocation: EnrichedInvocation, skills: Sequence[Skill]
    ) -> ProviderReply:
        """One request for the invocation; silence if this run may not reply at all."""
        permitted = set(invocation.allowed_actions) & set(allowed_actions(skills))
        if ActionKind.REPLY not in permitted:
            if ActionKind.SILENCE in permitted:
                return ProviderReply(
                    [silence("reply is not allowed for this run; rules only reply")]
                )
            return ProviderReply([])
        return ProviderReply([self.answer_invocation(invocation)])

    def answer_invocation(self, invocation: EnrichedInvocation) -> dict[str, Any]:
        """The reply in context: a waiting task, a quote, a bare request, then the text."""
        text = clean_text(invocation.text, self.agent.name)
        english = is_english(text)
        if invocation.continuation is not None:
            resumed = self._resume(invocation, text, english)
            if resumed is not None:
                return resumed
        group = invocation.event.conversation.type is ConversationType.GROUP
        if group and _DM_CONTENT.search(text):
            return reply(_DM_STAYS_EN if english else _DM_STAYS_ZH)
        # a question about a PDF, Word or Excel file sent with it or just before: its lines
        from_file = documents.answer_from_documents(invocation, text, english)
        if from_file is not None:
            return from_file
        own_media = any(m.part_of == "message" for m in invocation.media)
        about = media.about_media(invocation, english) if invocation.media else None
        if own_media and about is not None:
            if not (text and media.pictures_only(invocation) and not media.wants_file(text)):
                return about
            # A question with a screenshot: answer the question; the picture is mentioned
            # only where it matters (when the words alone found no answer).
            answer = self._answer(
                text, english, redirect_kind(text), visible_to(invocation), invocation
            )
            if answer["text"] == self._dont_know(english):
                answer["text"] += "\n" + media.picture_note(invocation, english)
            return answer
        quoted = followup.from_quote(invocation, text, english)
        if quoted is not None:
            return quoted
        if about is not None and (followup.refers_to_quote(text) or media.wants_file(text)):
            return about
        if media.wants_file(text) and invocation.quote is None and not invocation.media:
            return {**ask(_ASK_FILE_EN if english else _ASK_FILE_ZH), "task": media.file_task()}
        kind = redirect_kind(text)
        if kind is None:
            if followup.wants_calculation(text):
                return followup.ask_for_expression()
            remembered = followup.remember(text)
            if remembered is not None:
                return remembered
            sent_at = invocation.event.created_at
            reminder = reminders.reminder_reply(text, sent_at, self.timezone, english)
            if reminder is not None:
                return reminder
        answer = self._answer(text, english, kind, visible_to(invocation), invocation)
        if answer["text"] == self._dont_know(english):  # the file was read, and said nothing
            answer["text"] = documents.not_in_documents(invocation, english) + answer["text"]
        if wants_introduction(text) and answer["kind"] == "reply":
            answer["text"] = followup.greeting(invocation, english) + answer["text"]
        return answer

    @staticmethod
    def _resume(invocation: EnrichedInvocation, text: str, english: bool) -> dict[str, Any] | None:
        """The answer to a waiting task this provider (or the host) opened, if it is ours."""
        task = invocation.continuation
        assert task is not None
        if task.goal != media.FILE_GOAL:
            return followup.continue_task(task, text, english)
        about = media.about_media(invocation, english)
        if about is not None:
            return {**about, "task": {"status": "completed"}}
        if media.wants_file(text) or not text:
            return {**ask(_ASK_FILE_EN if english else _ASK_FILE_ZH), "task": media.file_task()}
        return None

    def answer(self, text: str) -> dict[str, Any]:
        """The single reply for a message text (pure apart from reading the knowledge)."""
        cleaned = clean_text(text, self.agent.name)
        return self._answer(cleaned, is_english(cleaned), redirect_kind(cleaned))

    def _answer(
        self,
        cleaned: str,
        english: bool,
        kind: str | None,
        visible: Callable[[Section], bool] | None = None,
        invocation: EnrichedInvocation | None = None,
    ) -> dict[str, Any]:
        if kind == "impersonate":
            return reply(_IMPERSONATE_EN if english else _IMPERSONATE_ZH)
        if kind == "forward":
            return reply(_FORWARD_EN if english else _FORWARD_ZH)
        calculated = arithmetic.answer(cleaned, english=english)
        if calculated is not None:
            return reply(calculated)
        if wants_introduction(cleaned):
            return reply(self._introduction(english))
        # without a conversation to scope it to, no published memory is served at all
        match = self.knowledge.search(cleaned, visible or (lambda s: s.memory_id is None))
        if match is None and invocation is not None:  # the DingTalk docs the asker may read
            match = best_match(cleaned, doc_sections(invocation))
        if match is not None:
            return reply(_from_knowledge(match, english, self.timezone))
        grounding = invocation.knowledge if invocation is not None else None
        if grounding is not None and grounding.unreadable:
            return reply(_UNREADABLE_EN if english else _UNREADABLE_ZH)
        if grounding is not None and grounding.unchecked:
            return reply(_UNCHECKED_EN if english else _UNCHECKED_ZH)
        return reply(self._dont_know(english))

    def _introduction(self, english: bool) -> str:
        agent = self.agent
        role = agent.role.rstrip("。.")
        duties = [d.rstrip("。.；;") for d in agent.duties if d.strip()]
        if english:
            text = f"I'm {agent.name}: {role}."
            if duties:
                text += " I can help with: " + "; ".join(duties) + "."
            return text + " Just ask me here."
        text = f"我是{agent.name}，{role}。"
        if duties:
            text += "我可以帮你：" + "；".join(duties) + "。"
        return text + "有问题直接在这里问我就好。"

    def _dont_know(self, english: bool) -> str:
        if not self.knowledge.configured:
            checked_zh = "我这边还没有接入团队知识库，没有资料可查"
            checked_en = "no team knowledge base is set up for me, so I had nothing to check"
        elif (count := self.knowledge.file_count) == 0:
            checked_zh = "我查了团队知识库，但里面目前没有资料"
            checked_en = "I checked the team knowledge base, but it is empty right now"
        else:
            checked_zh = f"我查了团队知识库（{count} 个文件），没有找到相关内容"
            files = "file" if count == 1 else "files"
            checked_en = f"I checked the team knowledge base ({count} {files}) and found nothing"
        if english:
            return (
                f"I don't know, and I'd rather not guess: {checked_en}. A colleague who "
                "owns this topic is your best bet; if it comes up often, adding it to the "
                "knowledge base would let me answer next time."
            )
        return (
            f"这个我不知道，不想乱说：{checked_zh}。建议问问负责这方面的同事；"
            "如果这是常见问题，可以把答案补进知识库，以后我就能直接回答。"
        )


# A DingTalk doc matched, but the asker may not open it: said, never quoted.
_UNREADABLE_ZH = (
    "有一份相关的钉钉文档，但你没有查看它的权限，所以我不能引用里面的内容。"
    "可以请文档的负责人给你开通权限，或者问问负责这方面的同事。"
)
_UNREADABLE_EN = (
    "There is a DingTalk doc on this, but you don't have access to it, so I can't quote it. "
    "Ask its owner for access, or a colleague who handles this."
)


# ... or its right could not be checked just now: not shown on a guess, not called a "no"
_UNCHECKED_ZH = (
    "有一份相关的钉钉文档，但我现在没法向钉钉确认你能否查看它，所以先不引用。请稍后再问一次。"
)
_UNCHECKED_EN = (
    "There is a DingTalk doc on this, but I can't confirm with DingTalk right now that you may "
    "open it, so I won't quote it yet. Please ask again in a moment."
)


def visible_to(invocation: EnrichedInvocation) -> Callable[[Section], bool]:
    """Which sections this run may be given: published memory only in its own
    conversation, and none that someone asked to forget."""
    scope = invocation.event.conversation.id
    grounding = invocation.knowledge
    withdrawn = frozenset(grounding.withdrawn) if grounding is not None else frozenset()
    return lambda section: section.visible_in(scope, withdrawn)


def _from_knowledge(match: Match, english: bool, tz: ZoneInfo) -> str:
    section = match.section
    content = excerpt(section.content)
    if section.doc is not None:
        where, link = cited(section, tz, english)
        own = section.heading if section.heading != section.doc.title else None
        if english:
            where += f', section "{own}"' if own else ""
            return f"From {where}:\n{content}{link}"
        where += f"“{own}”一节" if own else ""
        return f"根据{where}：\n{content}{link}"
    if english:
        where = f'"{section.source}"'
        if section.level:
            where += f', section "{section.heading}"'
        return f"From {where}:\n{content}"
    where = f"《{section.source}》"
    if section.level:
        where += f"“{section.heading}”一节"
    return f"根据{where}：\n{content}"
