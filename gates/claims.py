"""What a reply says was done, or will be done later, and what each claim is about (pure).

The robot may say it did something only when an act of this run backs that very claim
(``gates/backing.py``): 「已经帮你发给张三了」 is a claim of a *message* to *张三*, and a to-do
created for the asker does not make it true. So every clause of the text — after
``gates/claims_text.py`` folded its spelling (traditional characters, full-width forms,
zero-width spaces, emphasis) — is read for:

- a **claim**: an effect in the world said to be done, in any of its forms: the perfect
  (已/已经/都已 …), a result (…好了 / …完了 / 成功 / 搞定 / 办妥 / 发出去了), the passive
  (已被…, …was created), a bare past with no 已 or 我 (「然后发给张三了」), a list line
  (「- 会议：已预约」), English perfect, past and passive forms;
- a **promise**: in-progress narration (「正在为你创建待办」) or a bare promise of later work
  (「我马上帮你通知张三」「回头告诉你」, "I'll follow up");
- neither: a question or an offer (「需要我帮你建一个待办吗？」), a negation (「我还没有发送
  任何消息」), a condition or a process (「审批通过后会自动到账」), what the person may do
  (「你可以直接发给张三」), what someone else said (「张三说他已经提交了」), a description
  (「已创建的表格」).

The Chinese reading is ``gates/claims_zh.py``, the English ``gates/claims_en.py``; what both
read is normalised first (``gates/claims_text.py``). Each claim or promise names its
``effect`` (message, todo, event, approve, submit, delete, update, upload, group, pay, done,
or other for 办好了), the people it names as touched, the objects it quotes, and whether it
is worded as not yet confirmed (「已提交，还没确认」).

    find_claims("已给张三发了消息。会议已安排")
    # -> [Claim("已给张三发了消息", "done", "message", ("张三",)), Claim("会议已安排", "done",
    #     "event", ())]
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from functools import lru_cache

from gates.claims_en import _EN_NOT, _EN_THIRD, read_en
from gates.claims_text import (
    _QUOTED,
    Claim,
    clauses,
    normalise,
    objects,
    sentences,
    unconfirmed,
)
from gates.claims_zh import people, read_zh
from gates.claims_zh_words import GATED


def find_claims(text: str, sources: Sequence[str] = ()) -> list[Claim]:
    """Every claim and promise in ``text``, clause by clause (what it quotes from
    ``sources`` is theirs, not the robot's). A claim is worded as not yet confirmed when
    its sentence says so (「待办已提交，结果还没确认」)."""
    return list(_found(text, tuple(sources)))


@lru_cache(maxsize=256)
def _found(text: str, sources: tuple[str, ...]) -> tuple[Claim, ...]:
    # A pure reading, asked twice of each reply (the claims and the promises check) and
    # again for each frame of a streamed card: read once.
    found: list[Claim] = []
    for sentence in sentences(unquoted(normalise(text), [normalise(s) for s in sources])):
        hedged = unconfirmed(sentence)
        parts = clauses(sentence)
        asks = bool(_ASKS.search(sentence))
        # an offer gated on the person (「等你点了同意，我再去创建」), a request to them
        # ("Please reach out … and I will process it"): its promises are offers
        offered = bool(
            GATED.search(sentence) or _EN_OFFERED.search(sentence) or _ASKED_OF.match(sentence)
        )
        # 「钉钉提示：该消息已被对方撤回」: what follows a system's or someone's own words
        reported = bool(
            _SHOWN.match(sentence) or _EN_THIRD.match(sentence) or _EN_WHEN.match(sentence)
        )
        # 「我翻了下审批记录，这张单子上周五就已经归档了」: what a look-up found, not a deed
        looked = bool(parts) and _LOOKED.match(parts[0]) is not None
        for index, clause in enumerate(parts):
            if asks and index == len(parts) - 1:
                continue  # the question itself (a claim before it still counts)
            if _CONTINUES.match(clause) and _EN_NOT.search(sentence):
                continue  # a fragment of a negated English sentence ("…, is archived")
            if index and _QUOTE_ONLY.fullmatch(clause) and _SAYING.search(parts[index - 1]):
                continue  # 「你可以回复对方：「已收到，稍后处理」」: words to say, quoted
            claim = _read(clause)
            if claim is None or (offered and claim.tense == "promise"):
                continue
            if looked and index and claim.tense == "done" and not _OWN_DEED.search(clause):
                continue
            if claim.tense == "promise" and _policy(parts[:index], clause):
                continue  # 「如果您的退货被批准，我们将以 E-mail 通知您」: a rule, told
            if index and claim.tense == "promise" and _BEFORE_IT.search(parts[index - 1]):
                continue  # 「在安排预约之前，我们会询问您几个问题」: a process, told
            if reported and claim.tense == "done":
                continue
            if hedged and claim.tense == "done":
                claim = replace(claim, unconfirmed=True)
            found.append(claim)
    return tuple(found)


_ASKED_OF = re.compile(
    r"^(?:麻烦|请(?!假|客|教|柬|您放心|你放心|放心)|需要的话|如果需要|要的话|有需要)"
)
_SHOWN = re.compile(
    r"^[^，。：:]{0,12}(?:提示|显示|返回|报告|写着|(?<![已未])通知)[：:]"
    r"|^(?:据|根据)[^，。]{0,10}(?:记录|纪录|显示|反馈|消息|通知|日志)[，,：:]"
)
_ASKS = re.compile(r"[?？]\s*$|吗\s*$|吗[？?。]?\s*$")
_EN_OFFERED = re.compile(r"\b(?:please|if you|once you|when you|after you)\b", re.IGNORECASE)
# a condition or a time the sentence is about ("When I delete the appointment, … is sent")
_EN_WHEN = re.compile(
    r"^(?:when|whenever|if|once|before|unless|according to|as per|per the)\b", re.IGNORECASE
)
_BEFORE_IT = re.compile(r"^在[^，。]*(?:之前|以前|时)$")
_LOOKED = re.compile(
    r"^(?:我)?(?:刚)?(?:查|翻|看|问|核对|搜)(?:了|过)(?:一?下)?"
    r"|^(?:i|we) (?:looked it up|checked)\b",
    re.IGNORECASE,
)
_OWN_DEED = re.compile(
    r"帮你|给你|替你|为你|我(?:已|把|给|帮)|\b(?:i|we)(?:'ve| have)\b", re.IGNORECASE
)
_QUOTE_ONLY = re.compile(r"[「『\"“][^」』\"”]*[」』\"”]")
_SAYING = re.compile(r"(?:说|回复|回|写|发|告诉|转告|通知|答复)[^，。]{0,6}$")
# a condition or a moment before it (「如果…」「收到您的物品后」)
_LEADS = re.compile(r"^(?:如果|若|一旦|当|待|收到[^，。]{2,})|(?:后|之后|以后|时)$")


def _policy(before: Sequence[str], clause: str) -> bool:
    """A company's rule (「…后，我们将…」), not the robot's promise: 我们 after a condition."""
    return "我们" in clause and any(_LEADS.search(part) for part in before)


_CONTINUES = re.compile(r"^(?:is|are|was|were|or|and)\b", re.IGNORECASE)


def _read(clause: str) -> Claim | None:
    """A clause read with what it quotes masked (「报销已付款」 is a label, not a claim) —
    unless the quote is all it says."""
    if _FIELD_ALONE.fullmatch(clause.strip()):
        return None  # a data field's name, cut at its colon ("done": false)
    masked = _FIELD_NAME.sub("○:", _QUOTED.sub(_masked, clause))
    masked = _MENTIONS.sub("", masked)  # 「@maipaorun 后续会支持…」: whom it is said to
    masked = _TAG.sub("", masked)  # 「（小助手）你已经同意了」: who speaks, not what is said
    if not masked.strip('「」『』“”"《》○ '):
        masked = clause.strip('「」『』“”"《》 ')
    claim = _read_masked(masked)
    return replace(claim, text=clause, objects=objects(clause)) if claim is not None else None


# a data field pasted as JSON ("done": false) names a field, it says nothing was done
_MENTIONS = re.compile(r"^(?:@\S+\s+)+")
# a short label in brackets opening the clause: a speaker's tag, not part of the sentence
_TAG = re.compile(
    r"^\s*(?:\([^()]{1,12}\)|【[^【】]{1,12}】|\[(?![xX ]?\])[^\[\]]{1,12}\])\s*(?=\S)"
)
_FIELD_ALONE = re.compile(r"[{\[,\s]*[\"'][A-Za-z_]\w*[\"']")
_FIELD_NAME = re.compile(r"[\"'][A-Za-z_]\w*[\"']\s*:|[\"“]○+[\"”]\s*:")


def _masked(quote: re.Match[str]) -> str:
    whole = quote.group(0)
    return whole[0] + "○" * (len(whole) - 2) + whole[-1]


def _read_masked(clause: str) -> Claim | None:
    latin = sum(ch.isascii() and ch.isalpha() for ch in clause)
    han = sum("\u4e00" <= ch <= "\u9fff" for ch in clause)
    claim = None
    if han or latin:  # digits and signs alone ("7 + 3 = 10") have no verb to read
        first, second = (read_zh, read_en) if han >= 3 or latin <= 2 * han else (read_en, read_zh)
        claim = first(clause)
        if claim is None and (han if second is read_zh else latin > 8):
            claim = second(clause)
    if claim is None and _CHECKED.match(clause):
        claim = Claim(clause, "done", "other", people(clause), objects(clause))
    return claim


# a checked list item: ✅ 已完成, [x] emailed Bob
_CHECKED = re.compile(r"^\s*(?:[-*•]\s*)?(?:✅|☑|✔|\[x\])", re.IGNORECASE)


def done_claim(text: str, sources: Sequence[str] = ()) -> str | None:
    """The first clause of ``text`` that says something was done, or None."""
    return next((c.text for c in find_claims(text, sources) if c.tense == "done"), None)


def later_promise(text: str, sources: Sequence[str] = ()) -> str | None:
    """The first clause of ``text`` that promises later work (or narrates work in
    progress), or None."""
    return next((c.text for c in find_claims(text, sources) if c.tense == "promise"), None)


# Quotes are recognised piece by piece: a sentence, or a clause after 「根据…：」 or a comma.
_PIECE_END = re.compile(r"(?<=[。！？!?；;\n：:，,])")
# A piece this short could be the robot's own words that happen to occur in a source
# (「已通知财务」): only longer pieces count as quoted, or a short one in quotation marks.
MIN_QUOTE_CHARS = 8
_SPACE = re.compile(r"\s+")
_IN_MARKS = re.compile(r"^[「“\"『].*[」”\"』]$")


def unquoted(text: str, sources: Sequence[str]) -> str:
    """``text`` without the pieces it quotes from ``sources`` (the knowledge, memory and
    tool results the run was given): 「报销单提交后已通知财务」 quoted from the notes is the
    notes' claim, not the robot's; a short piece counts only in quotation marks."""
    if not sources:
        return text
    plain = [_SPACE.sub("", source) for source in sources]
    kept = []
    for piece in _PIECE_END.split(text):
        bare = _SPACE.sub("", piece).strip("：:，,。.")
        marked = _IN_MARKS.match(bare) is not None
        inner = bare.strip("「」“”\"『』'")
        long_enough = len(inner) >= MIN_QUOTE_CHARS or (marked and len(inner) >= 3)
        if long_enough and any(inner in source for source in plain):
            continue
        kept.append(piece)
    return "".join(kept)


def workspace_claim(claim: str) -> bool:
    """Does the claim say something was made or changed in the workspace? (Kept for the
    frame checks' older callers: the effect of a ``Claim`` says it now.)"""
    found = find_claims(claim)
    return any(c.effect not in ("message", "other") for c in found)
