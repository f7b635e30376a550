"""The rules provider's sense of context: tasks that wait for an answer, quotes, and names.

``RulesProvider.answer`` looks at one message text. This layer looks at the whole
invocation first:

- a bare "帮我算一下" has nothing to compute, so it asks one short question and opens a
  task that waits for the expression; the actor's next message resumes it;
- a message that answers a waiting calculation task is read as the expression;
- "算一下这个" with a quote computes what the quote says; a quote whose content never
  reached us (a robot card arrives empty) is admitted as unseen, never guessed;
- a self-introduction greets the actor by the name the directory (or envelope) gives.
"""

from __future__ import annotations

import re
from typing import Any

from agent.contracts import EnrichedInvocation, TaskCheckpoint
from skills.providers import arithmetic
from skills.providers.base import ask, reply

CALCULATION_GOAL = "帮对方计算"
CALCULATION_DONE = "计算结果已回复给对方"
_WANTS_CALCULATION = re.compile(
    r"帮(?:我|忙)?(?:算|计算)|算(?:一下|一算|下)|计算一下|(?i:\bcalculate\b|\bcompute\b)"
)
_REFERS_TO_QUOTE = re.compile(r"这个|这条|那条|上面|引用|它|(?i:\bthis\b|\bthat\b|\babove\b)")

_REMEMBER = re.compile(r"^(?:请|麻烦)?(?:帮我)?(?:记住|记一下|记下来|记下)[：:，,\s]*(?P<what>.+)$")
_ASK_EXPRESSION = "要算什么？把算式发给我就行，比如 7+5。"
_ASK_EXPRESSION_AGAIN = "还是没看到算式，直接发给我就好，比如 (3+4)×6。"
_QUOTE_EMPTY = (
    "你引用的那条消息到我这里没有内容，我的记录里也没有，不想乱猜。能把要我处理的内容直接发给我吗？"
)
_QUOTE_UNSEEN = (
    "你引用的那条消息我这边看不到内容（引用的机器人消息到我这里是空的）。"
    "能把要我处理的内容直接发给我吗？"
)


def calculation_task() -> dict[str, Any]:
    return {"goal": CALCULATION_GOAL, "waiting_for": "算式", "done_when": [CALCULATION_DONE]}


def _completed(text: str) -> dict[str, Any]:
    return {**reply(text), "task": {"status": "completed"}}


def continue_task(task: TaskCheckpoint, text: str, english: bool) -> dict[str, Any] | None:
    """The answer to a waiting task this provider opened, or None if it is not ours."""
    if task.goal != CALCULATION_GOAL:
        return None
    calculations = arithmetic.find_calculations(text)
    if not calculations:
        return {**ask(_ASK_EXPRESSION_AGAIN), "task": calculation_task()}
    return _completed(arithmetic.answer(text, english=english) or "")


def from_quote(invocation: EnrichedInvocation, text: str, english: bool) -> dict[str, Any] | None:
    """Use the quoted message when the current one only points at it."""
    quote = invocation.quote
    if quote is None or not (_REFERS_TO_QUOTE.search(text) or _WANTS_CALCULATION.search(text)):
        return None
    if quote.missing:
        return ask(_QUOTE_UNSEEN if quote.from_robot else _QUOTE_EMPTY)
    calculated = arithmetic.answer(quote.text or "", english=english)
    if calculated is None:
        return None
    lead = "About the message you quoted: " if english else "你引用的那条："
    return reply(lead + calculated)


def refers_to_quote(text: str) -> bool:
    """Does the message point at something ("这个", "上面", "this") rather than say it?"""
    return bool(_REFERS_TO_QUOTE.search(text))


def wants_calculation(text: str) -> bool:
    return bool(_WANTS_CALCULATION.search(text)) and not arithmetic.find_calculations(text)


def ask_for_expression() -> dict[str, Any]:
    return {**ask(_ASK_EXPRESSION), "task": calculation_task()}


def remember(text: str) -> dict[str, Any] | None:
    """「记住 X」 proposes X as a memory candidate; only a reviewer makes it stick."""
    match = _REMEMBER.match(text)
    if match is None:
        return None
    what = match.group("what").strip().rstrip("。.")
    if not what:
        return None
    return {
        **reply(f"好，我把「{what[:60]}」记为待审核的记忆候选；审核通过后才会生效。"),
        "memory_candidates": [
            {"kind": "semantic", "title": what[:30], "content": what, "confidence": 0.6}
        ],
    }


def greeting(invocation: EnrichedInvocation, english: bool) -> str:
    name = invocation.identity.name
    if not name:
        return ""
    return f"Hi {name}! " if english else f"你好，{name}！"
