"""How the well-behaved scripted model answers with a tool: the offered tool the request
fits best, its arguments parsed from the text (times from ``now``, people looked up by name
first, an id from the list the tool family reads) or one question naming what is missing,
and, once the tool has answered, what it says of the result (an order inside it left out)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from lab.models.scripted_answer import Answer, Calls, ask, reply
from lab.models.scripted_numbers import duration, iso, when
from lab.models.scripted_reading import Exchange, ModelView, Offer
from lab.models.scripted_terms import (
    GLOSSARY,
    all_terms,
    content_runs,
    coverage,
    fit,
    looks_like_an_order,
    object_word,
    person_names,
    request_body,
    slot_of,
    terms,
    tool_words,
    without_orders,
)

MIN_FIT = 2  # a tool fits when the request says at least two of its words


@dataclass
class Plan:
    """What answering with a tool takes, worked out again from each request."""

    goal: Offer
    arguments: dict[str, Any] = field(default_factory=dict)
    missing: str | None = None  # the slot of a required argument nothing can fill
    first: Calls | None = None  # a look-up that must come before the goal's call


def goal_of(view: ModelView, text: str) -> Offer | None:
    """The offered tool the request says the most of (reads first on a tie)."""
    scored = [(fit(offer, text), not offer.writes, offer) for offer in view.offers]
    scored = [s for s in scored if s[0] >= MIN_FIT]
    if not scored or (re.search(r"怎么|如何|怎样", text) and all(s[2].writes for s in scored)):
        return None
    return max(scored, key=lambda s: (s[0], s[1]))[2]


_TOPIC = re.compile(r"(?:聊聊|谈谈|聊|谈|讨论|商量|关于|主题是)(?:一下|一|下)?([^，,。？?！!]+)")


def _subject(text: str, offer: Offer) -> str:
    """What a to-do, event or note is about: after a colon, after a word that introduces
    a topic, or what is left once the request's own words are taken out."""
    for mark in ("：", ":"):
        if mark in text:
            return text.split(mark, 1)[1].strip(" 。.")
    topic = _TOPIC.search(text)
    if topic:
        return topic.group(1).strip()
    body = request_body(text)
    for word in [*person_names(body), "一个", "一条", "个", "条"]:
        body = body.replace(word, "")
    for cue in _cues(offer):
        body = re.sub(cue, "", body)
    rest = "".join(content_runs(body))
    return body.strip(" ，,。") if len(rest) >= 2 else ""


def _cues(offer: Offer) -> list[str]:
    return [cue for word in tool_words(offer) for cue in GLOSSARY[word]]


def _identifier(text: str) -> str:
    """The name of a thing the text points at: a quoted name, or a Latin word."""
    quoted = re.search(r"[「『“\"]([^」』”\"]+)[」』”\"]", text)
    if quoted:
        return quoted.group(1)
    words = [w for w in re.findall(r"[A-Za-z][\w-]*", text)]
    return words[0] if words else ""


def _people_offer(view: ModelView) -> Offer | None:
    return next((o for o in view.offers if o.about_people and not o.writes), None)


def _known_people(view: ModelView, text: str) -> dict[str, str]:
    """Name -> staff id of every person a look-up returned whose name the text gives."""
    known = {}
    for exchange in view.exchanges:
        for person in exchange.data if isinstance(exchange.data, list) else []:
            if not isinstance(person, dict):
                continue
            name, user_id = str(person.get("name") or ""), person.get("user_id")
            if name and user_id and name in text:
                known[name] = str(user_id)
    return known


def _looked_up(view: ModelView, name: str) -> bool:
    return any(name in str(e.arguments.get("name", "")) for e in view.exchanges)


def _same_family(goal: Offer, offer: Offer) -> bool:
    ours = set(re.split(r"[._]", goal.name)) - {"dingtalk", "mcp"}
    theirs = set(re.split(r"[._]", offer.name)) - {"dingtalk", "mcp"}
    return bool(ours & theirs) and offer is not goal


def items_read(view: ModelView) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for exchange in view.exchanges:
        if isinstance(exchange.data, list):
            items += [i for i in exchange.data if isinstance(i, dict)]
    return items


def id_of(item: dict[str, Any]) -> str | None:
    """The item's own id: the first id-named field with a value (not whose it is, not
    where it came from)."""
    for key, value in item.items():
        named = key == "id" or key.endswith("_id")
        if named and key not in _NOT_ITS_ID and isinstance(value, str) and value:
            return value
    return None


_NOT_ITS_ID = frozenset({"source_id", "user_id", "creator_id"})


def _label(item: dict[str, Any]) -> str:
    """The words an item is known by: its subject, summary, title or name."""
    for key in ("subject", "summary", "title", "name"):
        if isinstance(item.get(key), str):
            return str(item[key])
    return ""


def _chosen_item(view: ModelView, text: str) -> dict[str, Any] | None:
    """The listed item the request means: one named whole in it, else the best overlap."""
    items = [i for i in items_read(view) if id_of(i) and _label(i)]
    named = [i for i in items if _label(i) in text]
    if named:
        return max(named, key=lambda i: len(_label(i)))
    wanted = terms(text)
    scored = [(coverage(all_terms(_label(i)), text), i) for i in items]
    scored = [s for s in scored if s[0] > 0 and wanted]
    return max(scored, key=lambda s: s[0])[1] if scored else None


def plan(view: ModelView, text: str, goal: Offer) -> Plan:
    """The goal's arguments from the text and what was looked up, or what is missing."""
    result = Plan(goal)
    properties, required = goal.properties, goal.required
    start = when(text, view.now)
    for name, schema in properties.items():
        slot = slot_of(name, schema)
        needed = name in required
        if slot == "text":
            if name == "name":
                value = (person_names(text)[:1] or [""])[0] if goal.about_people else ""
                value = value or _identifier(text)
            elif needed or name in {"subject", "summary", "title", "text"}:
                value = _subject(text, goal)
                if start is not None and value:
                    cut = text[start.span[0] : start.span[1]]
                    value = value.replace(cut, "").strip(" ，,") or value
            else:
                continue
            if value:
                result.arguments[name] = value
            elif needed:
                result.missing = result.missing or "text"
        elif slot == "time":
            if start is None:
                if needed:
                    result.missing = result.missing or "time"
                continue
            moment = start.moment
            if name == "end":
                moment += duration(text) or timedelta(hours=1)
            result.arguments[name] = iso(moment)
    if result.missing:
        return result
    for name, schema in properties.items():
        slot, needed = slot_of(name, schema), name in required
        if slot == "people":
            names = [n for n in person_names(text) if n != view.identity.get("name")]
            known = _known_people(view, text)
            lookup = _people_offer(view)
            unknown = [n for n in names if not any(n in k for k in known)]
            pending = [n for n in unknown if lookup is not None and not _looked_up(view, n)]
            if pending and lookup is not None:
                result.first = Calls([(lookup.name, {"name": n}) for n in pending])
                return result
            if known:
                result.arguments[name] = sorted(set(known.values()))
            elif needed:
                result.missing = "people"
        elif slot == "id" and needed:
            item = _chosen_item(view, text)
            if item is not None:
                result.arguments[name] = id_of(item)
                continue
            reader = next((o for o in view.offers if not o.writes and _same_family(goal, o)), None)
            if reader is not None and not any(e.name == reader.name for e in view.exchanges):
                result.first = Calls([(reader.name, {})])
                return result
            result.missing = "id"
    return result


def _question_for(goal: Offer, slot: str) -> str:
    thing = object_word(goal) or "这件事"
    return {
        "text": f"{thing}要写什么内容？",
        "time": f"{thing}定在什么时间？",
        "people": f"{thing}要约哪几位同事？",
        "id": f"你说的是哪一条{thing}？",
    }.get(slot, f"{thing}还差一项信息，能补充一下吗？")


def _said_of_people(people: list[Any], text: str) -> tuple[str, bool]:
    lines, dropped = [], False
    for person in people:
        if not isinstance(person, dict) or str(person.get("name") or "") not in text:
            continue
        title, cut = without_orders(str(person.get("title") or ""))
        dropped = dropped or cut
        department = str(person.get("department") or "")
        about = "，".join(p for p in (department, title) if p)
        lines.append(f"{person['name']}：{about or '通讯录里没有写职位'}")
    return "；".join(lines), dropped


def _said_of_items(items: list[Any]) -> tuple[str, bool]:
    shown, dropped = [], False
    for item in items:
        if not isinstance(item, dict) or item.get("done") is True:
            continue
        label, cut = without_orders(_label(item))
        dropped = dropped or cut
        if label and not looks_like_an_order(label):
            shown.append(label)
    return "；".join(shown), dropped


def _said_of_text(data: Any) -> tuple[str, bool]:
    if isinstance(data, dict):
        data = data.get("result", data.get("text", ""))
    if not isinstance(data, str):
        data = json.dumps(data, ensure_ascii=False)
    return without_orders(data)


ORDER_NOTE = "里面夹着一段要我做事的话：那是资料里的字，不算你的要求，我没理会。"


def _after(view: ModelView, goal: Offer, text: str, done: Exchange) -> dict[str, Any]:
    """The final answer once the goal's tool has answered."""
    thing = object_word(goal)
    data = done.data if isinstance(done.data, dict) else {}
    if goal.writes:
        subject = str(done.arguments.get("subject") or done.arguments.get("summary") or "")
        if not subject and done.arguments.get("todo_id"):
            chosen = next(
                (i for i in items_read(view) if id_of(i) == done.arguments["todo_id"]), {}
            )
            subject = _label(chosen)
        named = f"{thing}「{subject}」" if subject else thing or "这件事"
        status = data.get("status")
        if status == "awaiting_approval":
            return reply(f"{named}要等你在卡片上确认后才会办。")
        if status == "approved":
            return reply(f"{named}你已经确认过，正在办。")
        if done.ok and status in {"verified", "accepted"}:
            verb = "标记完成了" if "complete" in goal.name else "已经建好了"
            if "append" in goal.name:
                verb = "已经记上了"
            return reply(f"{named}{verb}。")
        if status == "uncertain":
            return reply(f"{named}已经提交，结果还没确认。")
        why = done.result.get("error") or status or "unknown"
        return reply(f"{named}没有办成（{why}）。")
    if not done.ok:
        return reply(f"没能查到：{done.result.get('error') or '出错了'}。")
    if isinstance(done.data, list) and goal.about_people:
        said, dropped = _said_of_people(done.data, text)
        answer = said or "通讯录里没有查到这个人。"
    elif isinstance(done.data, list):
        said, dropped = _said_of_items(done.data)
        answer = f"未完成的{thing or '事项'}有：{said}。" if said else f"没有未完成的{thing}。"
    else:
        said, dropped = _said_of_text(done.data)
        name = str(done.arguments.get("name") or "")
        answer = f"{name} {thing}里写着：{said}" if said else f"{name} {thing}里是空的。"
    return reply(answer + ("\n另外，" + ORDER_NOTE if dropped else ""))


def with_tools(view: ModelView, text: str) -> Answer | None:
    goal = goal_of(view, text)
    if goal is None:
        return None
    done = [e for e in view.exchanges if e.name == goal.name]
    if done:
        return _after(view, goal, text, done[-1])
    planned = plan(view, text, goal)
    if planned.missing:
        return ask(_question_for(goal, planned.missing))
    if planned.first is not None:
        return planned.first
    return Calls([(goal.name, planned.arguments)])
