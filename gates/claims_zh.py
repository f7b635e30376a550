"""Reading a Chinese clause: does it say a deed was done, or promise one, and which.

A deed is found by its verb (the lexicon below names each kind of effect: message, todo,
event …) and its form around it — 已/已经 close before it, 了 or a result after it, the
passive, 「会议已安排」 — and, where no listed verb carries the form, by the form alone
(已 + any deed, 帮你 … 了, a closing 了 on a deed, a check mark). What is not the robot's
claim is left out: a question or an offer, a negation before the verb, a condition or a
process, the person's own doing, someone else's words, a description (「已创建的表格」), a
known fact (「已付款订单的发票在详情页下载」).
"""

from __future__ import annotations

import re

from gates.claims_text import Claim, Tense, objects, unconfirmed
from gates.claims_zh_words import (
    ASKER,
    BY_OTHER,
    CLOSING_LE,
    CONDITION,
    DONE_AFTER,
    DONE_BEFORE,
    EFFECT_RES,
    ENDED,
    FUTURE,
    GATED,
    GENERIC_DONE,
    GENERIC_PROMISE,
    KNOWS,
    LATER,
    NAME_AFTER,
    NAMED,
    NAMED_INSIDE,
    NEGATION,
    NO_DEED,
    NOT_A_DEED,
    NOT_A_NAME,
    NOT_NAMES,
    OFFER,
    PASSIVE,
    PROMISE,
    PRONOUN,
    QUESTION,
    READS,
    REPORTED,
    RESULT,
    SAYS,
    SOON,
    STATE_AFTER_DONE,
    THEIRS_WILL,
    THEN_DONE,
    THING_SUBJECT,
    TOOL_SAYS,
    YOURS,
)


def _occurrences(clause: str) -> list[tuple[int, int, str]]:
    """Every verb of an effect in the clause, as (start, end, effect), in order of place."""
    found: dict[int, tuple[int, int, str]] = {}
    for name, pattern in EFFECT_RES:
        for match in pattern.finditer(clause):
            if match.start() not in found:  # the more specific effect keeps the place
                found[match.start()] = (match.start(), match.end(), name)
    return [found[at] for at in sorted(found)]


def people(clause: str) -> tuple[str, ...]:
    named = [
        m.group(1)
        for m in NAME_AFTER.finditer(clause)
        if m.group(1) not in NOT_NAMES and m.group(1)[0] not in "你您我他她它这那大各"
    ]
    named += [m.group(1) for m in PRONOUN.finditer(clause)]
    if ASKER.search(clause):
        named.append("你")
    return tuple(dict.fromkeys(named))


def _not_a_claim(clause: str) -> bool:
    """A question, an offer, the person's own doing, or someone else's report: whatever
    verbs it has, it says nothing was done by the robot, nor promises it."""
    if QUESTION.search(clause) or OFFER.search(clause):
        return True
    if YOURS.search(clause) or REPORTED.search(clause) or TOOL_SAYS.search(clause):
        return True
    if NO_DEED.search(clause):
        return True  # a failure, an apology, a result that would follow (重启就好了)
    if BY_OTHER.search(clause) or re.search(
        r"调用[^，。]{0,40}(?:获取|查询|读取|搜索|检索)", clause
    ):
        return True  # done by someone named; a look-up through a tool
    named = (NAMED.match(clause) and not NOT_A_NAME.match(clause)) or NAMED_INSIDE.search(clause)
    said_before = re.search(r"说过|讲过|提过", clause) and not re.search(
        r"[跟和对给向与同](?![你您])[^，。]{1,10}(?:说|讲|提)过", clause
    )
    if named or said_before:
        return True  # someone else's doing, or what was said before
    if clause.lstrip().startswith(("[ ]", "- [ ]", "☐")):
        return True  # an item still to do
    says = SAYS.search(clause)
    if says is None:
        return False
    # someone named before it said it (a first-person 我说, or 跟你说 — telling — is not)
    before = clause[: says.start()]
    return not re.search(r"我\s*$|[跟和对给向与同][你您他她我们]{0,2}$", before)


def _conditional(clause: str) -> bool:
    """A condition or a process (「审批通过后会自动到账」): what happens, not what was done."""
    return CONDITION.search(clause) is not None


def _marked_done(clause: str, at: int, end: int) -> bool:
    """The verb at ``clause[at:end]`` is said to be done: 已(经)… close before it (its own:
    nothing ended between them), or 了 / a result after it, or a passive."""
    if DONE_BEFORE.search(clause[at:end]) and not _describes_from(clause[at:]):
        return True  # 「会议已安排」: the marker is part of the form
    if clause[at:end][-1:] in ("了", "好", "完") and end - at > 1:
        return True  # 「发了」「批了」「约好」: the form says it
    if re.match(r"^[\u4e00-\u9fff]{1,2}?(?:成|好|完)?了", clause[at:end]):
        return True  # 「建成了待办」「创建了任务」: inside the verb's own words
    if re.search(r"(?:点|按|选|打|做|办)了$", clause[max(0, at - 2) : at]):
        return True  # 「点了同意」
    if re.match(r"^[^，。]{0,10}的了[~～!！。]*$", clause[end:]):
        return True  # 「单价都更新成 9 月的了」
    near = clause[max(0, at - 24) : at]
    marker = None
    for found in DONE_BEFORE.finditer(near):
        marker = found
    if marker is not None:
        between = near[marker.end() :]
        # its own verb ended (了, 过), or described a thing (已创建的表格, not 已添加到你的日历)
        ended = ENDED.search(between)
        if not ended and not _describes_from(between + clause[at:]):
            return True
    after = clause[end:]
    if DONE_AFTER.match(after):
        return True
    then = THEN_DONE.match(after)
    if then and not _describes_from(after[then.end() :]):
        return True  # 「会议已安排」, never 「申请移除已被主管排好的班表」
    rest = re.split(r"[的]|需要|可以|再|然后|之后", after, maxsplit=1)[0]
    if "了" in rest[:20]:
        return True
    base = max(0, at - 10)
    passive = PASSIVE.search(clause[base : end + 2])
    return passive is not None and not _describes_from(clause[base + passive.start() + 1 :])


def _describes_from(text: str) -> bool:
    """「已创建的表格」「已被驳回的报销单」: a verb right after the marker, then 的 — it describes
    a thing (never 「已把待办的截止时间改到…」 or 「已添加到你的日历」: a 的 after 把, 到, 你)."""
    head = text.removeprefix("被")[:6]
    at = head.find("的")
    if at <= 0 or (at >= 3 and head[at - 1] not in "好完过成" and head[at - 2 : at] != "通过"):
        return False
    if re.search(r"[把将给在到为帮替向跟和]", head[:at]):
        return False
    return head[at - 1] not in "你您我他她它们"


def _describes(clause: str, end: int) -> bool:
    """已创建的表格: the verb describes a thing (followed by 的, maybe after 好/完/过/成功)."""
    if clause[end : end + 3] in ("成功的", "完成的"):
        return True
    after = clause[end : end + 3]
    return after.startswith("的") or (after[1:2] == "的" and after[:1] in "好完过了")


# 「按你说的」「按照你的配置」: a reference to the person's words, not someone's report
_AS_YOU_SAID = re.compile(
    r"(?:按照|依照|按|照)(?:你|您)(?:说的|的意思|的)[^，。把]{0,8}?(?=走|做|改|来|办|处理|把|$)"
)
# a modal before the verb, no 已: what will happen or happens (「通知会以…方式发送」)
_WILL_BEFORE = re.compile(r"(?<![已我])(?:会|将)(?![议计员])[^，。了已]{0,14}$")
# a look-up named before 完成 (「分析完成」「检查完毕」): a read finished, no effect
_READ_BEFORE = re.compile(r"(?:分析|检查|扫描|核对|查询|评估|检索|搜索|测试|审查)$")


def read_zh(clause: str) -> Claim | None:
    clause = _AS_YOU_SAID.sub("○", clause)
    if _not_a_claim(clause):
        return None
    done: list[tuple[int, int, str]] = []
    promised: list[tuple[int, int, str]] = []
    conditional = _conditional(clause)
    for at, end, effect in _occurrences(clause):
        if NEGATION.search(clause[max(0, at - 8) : at]) or _describes(clause, end):
            continue
        marked = _marked_done(clause, at, end) or RESULT.search(clause[at : end + 4])
        soon = SOON.search(clause[:at]) and "了" not in clause[at:]
        later = (FUTURE.search(clause[:at]) or soon) and not DONE_BEFORE.search(clause[:end])
        known = KNOWS.search(clause) is not None  # 「已付款订单的发票在详情页下载」: a fact
        thing = THING_SUBJECT.match(clause) is not None  # 「1.0.9 已修复」: a release's doing
        will = _WILL_BEFORE.search(clause[:at]) and not DONE_BEFORE.search(clause[:at])
        if effect == "other" and _READ_BEFORE.search(clause[:at]):
            continue
        if marked and not conditional and not later and not known and not thing and not will:
            done.append((at, end, effect))
        elif THEIRS_WILL.search(clause[:at]):
            continue  # 「系统会立刻发送消息」: another's work to come
        elif (later and not conditional and not GATED.search(clause)) or (
            (PROMISE.search(clause[max(0, at - 12) : at + 1]) or LATER.search(clause))
            and not GATED.search(clause)
        ):
            promised.append((at, end, effect))
    done = [item for item in done if item[2] != "read"]
    chosen = _most_specific(done) or _most_specific(promised)
    generic_ok = not conditional and not FUTURE.search(clause) and not THING_SUBJECT.match(clause)
    if chosen is None and generic_ok and _generic_done(clause):
        # done, by a verb no list names: of no known kind, so only an act it names backs it
        chosen, done = "unknown", [(0, 0, "unknown")]
    if chosen is None and _generic_promise(clause):
        chosen, promised = "other", [(0, 0, "other")]  # 「马上回来」「我改改」: work going on
    if chosen is None:
        return None
    tense: Tense = "done" if done else "promise"
    hedged = unconfirmed(clause) if tense == "done" else False
    return Claim(clause, tense, chosen, people(clause), objects(clause), hedged)


def _generic_done(clause: str) -> bool:
    """A deed said done whatever its verb: 已/已经 before it (not a state: 已经是, 已满),
    帮你 … 了, a closing 了 on a deed, a check mark; never described or known facts."""
    if clause.lstrip().startswith(("[ ]", "- [ ]")) or KNOWS.search(clause):
        return False
    for found in GENERIC_DONE.finditer(clause):
        verb = found.group("v")
        if verb is None:
            looked_up = READS.search(found.group(0))  # 「帮你搜了知识库」: a look-up
            return not looked_up and not NEGATION.search(clause[: found.start()])
        if STATE_AFTER_DONE.match(verb) or _describes_from(verb + clause[found.end() :]):
            continue
        if not NEGATION.search(clause[max(0, found.start() - 12) : found.start()]):
            return True
    if re.search(r"[✅☑✔]", clause) and len(clause) <= 14:
        return True
    short = re.sub(r"[，,。.!！~～]+$", "", clause)
    if CLOSING_LE.match(short) and not NOT_A_DEED.search(short) and not NEGATION.search(short):
        return not re.search(r"吗|呢|吧$", short)
    return False


def _generic_promise(clause: str) -> bool:
    """Work going on or coming, whatever its verb — from the robot (not 「您的快递正在运输中」),
    not an offer gated on the person."""
    if GATED.search(clause) or NEGATION.search(clause[:4]) or QUESTION.search(clause):
        return False
    if re.match(r"^(?:你|您)的", clause):
        return False
    found = GENERIC_PROMISE.search(clause)
    if found is None:
        return False
    own = re.search(r"我|我们", clause) or found.start() == 0
    return bool(own)


def _most_specific(found: list[tuple[int, int, str]]) -> str | None:
    """The effect a clause's verbs name: a specific one over 办好了 (other), and a look-up
    (read) named as other."""
    if not found:
        return None
    specific = [effect for _, _, effect in found if effect not in ("other", "read")]
    return specific[0] if specific else "other"
