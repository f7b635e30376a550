"""What a reply says was done, or will be done later (pure).

The robot may say it did something only when something in this run backs it: a verified
receipt of an act, a tool's result. Until then 「已经帮你发给张三了」 is a claim nobody made
true, and the person would believe it. A final answer that promises later work
(「我去查一下，稍后发你」) is the same kind of untruth unless a follow-up was opened — a
reminder, or a task the heartbeat follows up — since nothing else would ever come.

Both are found by phrase: a done-verb in the past or perfect (已/已经/已为你/帮你…了, "I've
sent", "has been forwarded"), and a first-person promise of later (稍后/回头/等会儿 …你,
"I'll get back to you"). An adjective use is not a claim: 「已创建的表格在共享盘」 describes a
table, 「截止时间已经过了」 a deadline. ``lab/claims/sentences.json`` holds the sentences these
are measured on, each way (tests/test_claims.py; the rates are quoted in docs/lab.md).

    done_claim("已经帮你发给张三了，他已确认收到。")   # -> "发给张三了"
    later_promise("我去查一下，稍后发给你")            # -> "稍后发给你"
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# Acts whose doing someone else would notice: telling or sending to people, making or
# booking or approving things in the workspace. (Remembering, cancelling a reminder or
# replying here are not: they are this robot's own work, or this very message.)
_DONE_VERBS_ZH = (
    "发送|发给|发到|发过去|发出|转发|转告|转交|转达|告诉|通知|提醒|催|抄送|"
    "创建|新建|建好|建了|预订|预定|订好|订了|约好|约了|安排好|安排了|"
    "审批|批准|同意了|提交|报名|登记|预约|邀请|拉.{0,6}进.{0,6}群|添加|加上|加好|设置好|"
    "改好|修改了|更新了|删除|删掉|上传|共享给|分享给"
)
# 已(经)… in the perfect (also 已经帮你给张三创建了: for someone), or 帮你/给你/替你/为你 … 了:
# "I have (done it for you)". Not when
# someone else is its subject (「你已经提交过的申请」) or it describes a thing (「已创建的表格」).
_FOR_YOU = "(?:帮你|给你|替你|为你|帮您|给您|替您|为您)"
_DONE_ZH = re.compile(
    rf"(?<![你您他她它])(?:已经?|都已经?)\s*{_FOR_YOU}?\s*(?:(?:给|替|为)[^，,。！？\s]{{1,6}}?)?"
    rf"(?:把.{{0,12}}?)?(?:{_DONE_VERBS_ZH})(?!过?的)"
    rf"|(?:{_FOR_YOU}|我)\s*(?:{_DONE_VERBS_ZH})\S{{0,12}}?了"
    rf"|我(?:已经?)?(?:给|帮|替)\S{{1,8}}?(?:发|转|{_DONE_VERBS_ZH})\S{{0,8}}?了"
)
_DONE_VERBS_EN = (
    r"sent|forwarded|notified|told|informed|emailed|messaged|pinged|reminded|"
    r"created|booked|scheduled|reserved|approved|submitted|filed|invited|added|shared|"
    r"uploaded|deleted|registered|placed|signed (?:you )?up|set up"
)
_DONE_EN = re.compile(
    rf"\b(?:I(?:'ve| have| just)?|we(?:'ve| have)?)\s+(?:already\s+|just\s+)?(?:{_DONE_VERBS_EN})\b"
    rf"|\b(?:has|have)\s+(?:already\s+)?been\s+(?:{_DONE_VERBS_EN})\b"
    rf"|\b(?:it's|it is)\s+(?:done|sent|booked|approved)\b",
    re.IGNORECASE,
)

_LATER = r"(?:稍后|稍候|晚点|晚些|回头|过会儿?|等会儿?|一会儿?|待会儿?|之后|随后|改天)"
_TO_YOU = (
    r"(?:发你|发给你|告诉你|回复你|回你|通知你|联系你|给你|找你|答复你|跟你说|同步给你|反馈给你)"
)
_PROMISE_ZH = re.compile(
    rf"{_LATER}\s*(?:我)?\s*(?:再|就|会)?\s*(?:把.{{0,12}}?)?(?:{_TO_YOU}|发过来|发过去|回复|答复|反馈|同步)"
    rf"|我(?:先)?(?:去|来)?(?:查|问|确认|核实|看|找|研究|了解)(?:一下|下|清楚)?\S{{0,8}}?[，,、\s]*"
    rf"(?:再|然后|之后|后)\s*(?:{_TO_YOU}|回复|答复)"
    rf"|(?:等)?(?:有)?了?(?:结果|消息|进展|答复)(?:了|后)?\s*(?:我)?\s*(?:再|就|会|第一时间)\s*"
    rf"(?:{_TO_YOU}|通知|发)"
)
_LATER_EN = r"(?:later|soon|shortly|tomorrow)"
_PROMISE_EN = re.compile(
    r"\bI(?:'ll| will)\s+(?:get back to you|follow up|circle back|come back to you"
    rf"|send (?:it|them|this|that|you)[^.?!]{{0,30}}\b{_LATER_EN}"
    r"|let you know\b[^.?!]{0,40}\b(?:later|soon|once|when|as soon as)"
    r"|check and (?:get back|reply|let you know))"
    r"|\blet me (?:check|look into (?:it|this|that)|find out)[^.?!]{0,20}\b(?:and|then) "
    r"(?:get back|reply|let you know|come back)",
    re.IGNORECASE,
)


# Quotes are recognised piece by piece: a sentence, or a clause after 「根据…：」 or a comma.
_PIECE_END = re.compile(r"(?<=[。！？!?；;\n：:，,])")
# A piece this short could be the robot's own words that happen to occur in a source
# (「已通知财务」): only longer pieces count as quoted.
MIN_QUOTE_CHARS = 8
_SPACE = re.compile(r"\s+")


def unquoted(text: str, sources: Sequence[str]) -> str:
    """``text`` without the sentences it quotes from ``sources`` (the knowledge and memory
    the run was given): 「报销单提交后已通知财务」 quoted from the notes is the notes' claim,
    not the robot's."""
    if not sources:
        return text
    plain = [_SPACE.sub("", source) for source in sources]
    kept = []
    for piece in _PIECE_END.split(text):
        bare = _SPACE.sub("", piece).strip("「」“”\"'：:，,。.")
        if len(bare) >= MIN_QUOTE_CHARS and any(bare in source for source in plain):
            continue
        kept.append(piece)
    return "".join(kept)


def done_claim(text: str) -> str | None:
    """The words in ``text`` that say something was done (sent, told, created, booked,
    approved …), or None."""
    for pattern in (_DONE_ZH, _DONE_EN):
        found = pattern.search(text)
        if found is not None:
            return found.group(0).strip()
    return None


# Claims of an effect in the workspace: only an act that was carried out (read back, or an
# MCP tool's own result) backs these — not a look-up, not an approval that was only asked.
_WORKSPACE_CLAIM = re.compile(
    r"创建|新建|建好|建了|预订|预定|订好|订了|约好|约了|安排好|安排了|审批|批准|添加|加上|"
    r"加好|设置好|改好|修改了|更新了|删除|删掉|上传|完成了|标记"
    r"|\b(?:created|booked|scheduled|reserved|approved|added|deleted|uploaded|set up|completed)\b",
    re.IGNORECASE,
)


def workspace_claim(claim: str) -> bool:
    """Does the claim say something was made or changed in the workspace?"""
    return _WORKSPACE_CLAIM.search(claim) is not None


def later_promise(text: str) -> str | None:
    """The words in ``text`` that promise the robot will come back later with something,
    or None."""
    for pattern in (_PROMISE_ZH, _PROMISE_EN):
        found = pattern.search(text)
        if found is not None:
            return found.group(0).strip()
    return None
