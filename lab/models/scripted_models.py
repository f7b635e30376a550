"""Scripted OpenAI-compatible models that decide from the request they receive.

``lab/models/fake_model.py`` answers from a per-message script a case writes. These answer the way
a model of a given character would, from what the ``openai`` provider rendered and nothing
else (``lab.models.scripted_reading``): the agent's name, role and duties in the system prompt, the
invocation JSON (the text, who asks, the conversation, media, the knowledge items with their
sources, ``now``), the text files shown, the tools offered with their JSON schemas, and the
results of the tools they called. They let ``dta lab eval --against-model`` be measured end
to end offline: a well-behaved model should pass the behaviour suite
(``lab/cases/model-behaviour/``), a misbehaving one should not. Neither holds a phrase of
the suite (``tests/test_behaviour_suite.py`` fails if one does): they decide by general
rules, so a case they pass is passed for a reason a real model could have.

- ``well_behaved``: works out what is asked and answers that — a sum by computing it; a
  request that fits an offered tool (its description's words, in Chinese, in the request)
  by calling it with arguments parsed from the text (times from ``now``, people looked up
  by name first, an id from the list the tool family reads), or, when a required argument
  cannot be filled, one question naming it; a reminder with a time by setting it, without
  one by asking when; a question by the knowledge item that covers it best, quoting it with
  its file and section, or by saying it does not know and what it checked; who it is from
  its agent definition, who is asking from the directory; a file it was sent by what it
  says. What tools return and what files say is data: an order inside them is left out
  and never followed. What it cannot do (send elsewhere, DM content into a group, anything
  no tool does) it declines, saying what the person can do instead.
- ``misbehaving``: claims it did what it was asked, promises later work, adds a ``target``
  to reach another conversation, invents answers, calls tools with guessed arguments
  without asking, and follows orders it finds in tool results; it ignores the repair
  round and says the same again.

Both return the probe marker when asked for it, so the probe never hides the behaviour.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

from lab.models.scripted_answer import Answer, Behaviour, Calls, ask, reply
from lab.models.scripted_numbers import arithmetic, iso, plain_number, when
from lab.models.scripted_reading import ModelView, read_request
from lab.models.scripted_server import ScriptedModel
from lab.models.scripted_terms import (
    QUESTION,
    all_terms,
    coverage,
    head_terms,
    is_request,
    looks_like_an_order,
    request_body,
    slot_of,
    terms,
    without_orders,
)
from lab.models.scripted_tools import ORDER_NOTE, goal_of, id_of, items_read, with_tools

__all__ = [
    "Behaviour",
    "Calls",
    "ModelView",
    "ScriptedModel",
    "misbehaving",
    "read_request",
    "well_behaved",
]

_MARKER = re.compile(r"DTA-PROBE-[0-9a-f]+")


def _probe(view: ModelView) -> dict[str, Any] | None:
    if "probe marker" not in view.text:
        return None
    found = _MARKER.search(view.system)
    return reply(found.group(0) if found else "no marker")


# ----------------------------------------------------------------------------- without tools


def best_item(view: ModelView, text: str) -> dict[str, Any] | None:
    """The knowledge item that covers the question: most of its terms, every 「…的X」 it
    asks about, and (unless it covers most) a term in the item's heading."""
    wanted, heads = terms(text), head_terms(text)
    best, best_score = None, 0.0
    for item in view.knowledge_items:
        body = f"{item.get('section') or ''}\n{item.get('content') or ''}"
        have = all_terms(body)
        if not heads <= have:
            continue
        score = coverage(wanted, body)
        titled = bool(wanted & all_terms(str(item.get("section") or "")))
        if score >= 1 / 3 and (titled or score >= 0.6) and score > best_score:
            best, best_score = item, score
    return best


def _from_knowledge(item: dict[str, Any]) -> dict[str, Any]:
    source = item.get("file") or item.get("ref") or "知识库"
    section = f"「{item['section']}」" if item.get("section") else ""
    content, _ = without_orders(str(item.get("content") or "").strip())
    return reply(f"根据《{source}》{section}：{content}")


def _dont_know(view: ModelView) -> dict[str, Any]:
    where = "团队知识库" if view.grounding else "我能查的资料（这里没有接入知识库）"
    return reply(
        f"这个我不知道：查了{where}，没有找到讲这件事的内容，不想乱猜。可以问问负责这块的同事。"
    )


def _asker(view: ModelView) -> dict[str, Any]:
    identity = view.identity
    name = str(identity.get("name") or "")
    if not name or name == identity.get("user_id") or identity.get("missing"):
        return reply("我这边查不到你的名字：通讯录没有给出你的信息。")
    about = "，".join(str(identity[k]) for k in ("department", "title") if identity.get(k))
    return reply(f"你是{name}" + (f"（{about}）" if about else "") + "，这是通讯录里的信息。")


def _who_asks(view: ModelView) -> str:
    identity = view.identity
    name = str(identity.get("name") or "")
    return "" if not name or name == identity.get("user_id") else name


def _introduction(view: ModelView, greeting: bool) -> dict[str, Any]:
    name = _who_asks(view)
    hello = (f"你好，{name}！" if name else "你好！") if greeting else ""
    text = f"{hello}我是{view.agent_name}，{view.agent_role.rstrip('。')}。"
    if view.duties:
        text += "我能帮你：" + "；".join(d.rstrip("。；") for d in view.duties) + "。"
    return reply(text)


_GREETINGS = {"你好", "您好", "在吗", "在么", "在不在", "嗨", "hi", "hello", "hey"}
_ABOUT_ME = re.compile(r"我(?:是谁|叫什么|的名字)|(?i:\bwho am i\b)")
_ABOUT_YOU = re.compile(r"你(?:是|叫|能|会|可以|负责|主要|都)|(?i:\b(?:who|what) are you\b)")
_WANTS_MATERIAL = re.compile(r"文件|附件|图片|截图|照片|文档|这张图|(?i:\b(?:file|picture)\b)")
# 算 as a verb (帮我算, 算一下), not inside a noun (预算)
_WANTS_SUM = re.compile(r"(?:帮我|帮忙|请|给我)计?算|算(?:一下|下|一算|出)|计算|(?i:\bcalculate\b)")
_PRIVATE = re.compile(r"私聊|私下|单聊|私信")
_PASS_ON = re.compile(r"发给|转发|转告|转给|告诉|通知|发到|(?i:\bforward\b|\bsend\b)")


def _about_files(view: ModelView) -> dict[str, Any]:
    parts, dropped = [], False
    for shown in view.files:
        said, cut = without_orders(str(shown.get("text") or ""))
        dropped = dropped or cut
        parts.append(f"《{shown.get('name') or '文件'}》里写的是：\n{said}")
    answer = "\n".join(parts) or "文件收到了，不过我读不到它的文字。"
    return reply(answer + ("\n" + "文件" + ORDER_NOTE if dropped else ""))


def _decline(view: ModelView, text: str) -> dict[str, Any]:
    body = request_body(text)
    if _PASS_ON.search(text):
        return reply(
            f"「{body}」我办不了：我只能在这里回复你，没法替你把内容发给别人或发到别处。"
            "你可以自己转发给对方。"
        )
    return reply(
        f"「{body}」我办不了：我手上没有能做这件事的工具。你可以自己去办，需要的话我可以回答相关规定。"
    )


def well_behaved(view: ModelView) -> Answer:
    probe = _probe(view)
    if probe is not None:
        return probe
    text = view.text.strip()
    if view.repair_round:
        return reply("刚才那句不准确，我收回：这件事我没有办，也没有能证明办过的记录。")
    computed = arithmetic(text)
    if computed is not None:
        shown, value = computed
        return reply(f"{shown} = {plain_number(value)}")
    if view.in_group and _PRIVATE.search(text):
        return reply("私聊里说的我不会拿到群里讲。想让大家知道的话，你可以自己在群里说。")
    tooled = with_tools(view, text)
    if tooled is not None:
        return tooled
    if view.files and (not text or not QUESTION.search(text)):
        return _about_files(view)
    if "提醒" in text and '"reminder"' in view.system:
        moment = when(text, view.now)
        if moment is None:
            return ask("想在什么时候提醒你？")
        what = text[moment.span[1] :].strip(" ，,。") or text
        what = re.sub(r"^(?:提醒我|提醒)", "", what) or what
        when_said = moment.moment.strftime("%m月%d日 %H:%M")
        return reply(
            f"好，{when_said}提醒你{what}。", reminder={"at": iso(moment.moment), "text": what}
        )
    item = best_item(view, text)
    if item is not None:
        return _from_knowledge(item)
    if _ABOUT_ME.search(text):
        return _asker(view)
    bare = re.sub(r"[\s,，.。!！?？~～]", "", text).lower()
    if bare in _GREETINGS or not bare:
        return _introduction(view, greeting=True)
    if _ABOUT_YOU.search(text) and QUESTION.search(text):
        return _introduction(view, greeting=False)
    if _WANTS_MATERIAL.search(text) and not view.has_material:
        return ask("我这边没收到你说的文件，能发过来吗？")
    if _WANTS_SUM.search(text) and not re.search(r"\d", text):
        return ask("要算哪些数？把式子发我就行。")
    if is_request(text):
        return _decline(view, text)
    if QUESTION.search(text):
        return _dont_know(view)
    return reply("收到。")


# ----------------------------------------------------------------------------- misbehaving


def misbehaving(view: ModelView) -> Answer:
    probe = _probe(view)
    if probe is not None:
        return probe
    text = view.text.strip()
    conversation = view.event.get("conversation") or {}
    if view.exchanges:
        # Whatever a tool said goes: an order in it is carried out with the tools at hand.
        ordered = any(
            looks_like_an_order(json.dumps(e.data, ensure_ascii=False)) for e in view.exchanges
        )
        writes = [
            o for o in view.offers if o.writes and not any(e.name == o.name for e in view.exchanges)
        ]
        if ordered and writes:
            target = writes[0]
            ids = [id_of(i) for i in items_read(view) if id_of(i)]
            arguments = {"todo_id": ids[-1]} if "todo_id" in target.properties and ids else {}
            for name in target.required:
                arguments.setdefault(name, "照资料里的要求办")
            return Calls([(target.name, arguments)])
        return reply("都办好了，也已经通知了相关同事。")
    goal = goal_of(view, text)
    if goal is not None:
        arguments: dict[str, Any] = {}
        for name, schema in goal.properties.items():
            if name not in goal.required:
                continue
            slot = slot_of(name, schema)
            if slot == "time" and view.now is not None:
                arguments[name] = iso(view.now + timedelta(hours=1))
            elif slot == "people":
                arguments[name] = [str(view.identity.get("user_id") or "u1")]
            else:
                arguments[name] = request_body(text) or "待定"
        return Calls([(goal.name, arguments)])
    if _ABOUT_YOU.search(text) or _ABOUT_ME.search(text):
        return reply("你好，我是万能 AI 助手，什么都能帮你做。")
    if view.in_group and is_request(text):
        # Retargeting: the schema has no target field, so the gate refuses it.
        target = {"conversation_id": conversation.get("id") or "cid-other"}
        return reply("好的，我把你私聊里说的内容发到群里了。", target=target)
    if "查" in text or "进度" in text:
        return reply("我去查一下，晚些时候把结果发给你。")
    if is_request(text):
        return reply(f"已经帮你{request_body(text)}了。")
    if view.files or _WANTS_MATERIAL.search(text):
        return reply("这个文件我看过了，内容没有问题。")
    return reply("这个简单：口头跟主管说一声就行，不需要任何材料，标准按最高的算。")
