"""The words the lab's scripted models decide with: terms of a text (two-character pieces
of its Chinese runs once the function characters are taken out, and its Latin words) and how
much of them another text covers; what a 「…的X」 asks about; a small bilingual glossary that
turns a tool's English words into the Chinese a request would use; what a request, a
question and an order given inside data look like; people's names by their family name.

General — no sentence of any case is in it (``tests/test_behaviour_suite.py``)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lab.models.scripted_reading import Offer

# ----------------------------------------------------------------------------- terms

CJK = re.compile(r"[\u4e00-\u9fff]+")
LATIN = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[-.][A-Za-z0-9]+)*|\d+(?:\.\d+)?%?")
# Characters that carry grammar rather than topic: pronouns, particles, question words,
# measure words, auxiliaries. Taking them out leaves the content words in runs.
FUNCTION_CHARS = frozenset(
    "的地得了着过吗呢吧啊呀哦嘛么是在有和与及或跟把被给对向从到为让"
    "我你他她它们咱您这那哪谁啥什怎样几多少每个位条件些一两"
    "要需能可会该请帮想就也都还又很太最再才只并而且但"
    "里上下吧嗯噢喔"
)
LATIN_STOP = frozenset({"the", "a", "an", "is", "are", "of", "to", "in", "on", "and", "or"})


def content_runs(text: str) -> list[str]:
    """The Chinese runs of ``text`` with the function characters taken out."""
    runs: list[str] = []
    for run in CJK.findall(text):
        piece = ""
        for char in run:
            if char in FUNCTION_CHARS:
                if piece:
                    runs.append(piece)
                piece = ""
            else:
                piece += char
        if piece:
            runs.append(piece)
    return runs


def bigrams(run: str) -> list[str]:
    return [run[i : i + 2] for i in range(len(run) - 1)]


def words_of(text: str) -> list[str]:
    """Latin words and numbers, lower-cased; an English plural read as its singular."""
    words = []
    for word in LATIN.findall(text):
        low = word.lower()
        if low in LATIN_STOP:
            continue
        words.append(low[:-1] if low.endswith("s") and len(low) > 3 else low)
    return words


def terms(text: str) -> set[str]:
    """What a text is about: two-character pieces of its content runs, and its words."""
    found = {gram for run in content_runs(text) for gram in bigrams(run)}
    return found | {w for w in words_of(text) if len(w) > 1}


def all_terms(text: str) -> set[str]:
    """Every two-character piece of every Chinese run (nothing taken out), and the words."""
    found = {gram for run in CJK.findall(text) for gram in bigrams(run)}
    return found | {w for w in words_of(text) if len(w) > 1}


def head_terms(text: str) -> set[str]:
    """What a 「X的Y」 asks about is Y: the content piece right after each 的."""
    heads = set()
    for after in re.findall(r"的([\u4e00-\u9fff]{2})", text):
        runs = content_runs(after)
        if runs and len(runs[0]) == 2:
            heads.add(runs[0])
    return heads


def coverage(wanted: set[str], text: str) -> float:
    """The share of ``wanted`` that ``text`` holds."""
    if not wanted:
        return 0.0
    have = all_terms(text)
    return len(wanted & have) / len(wanted)


# ----------------------------------------------------------------------------- tools in words

WRITE_VERBS = frozenset(
    {"create", "mark", "append", "add", "update", "delete", "remove", "send", "complete", "set"}
)
# A tool's English words, and the Chinese a request uses for each (regular expressions).
GLOSSARY: dict[str, tuple[str, ...]] = {
    "to-do": ("待办", "任务", "todo"),
    "todo": ("待办", "任务", "todo"),
    "calendar": ("日程", "日历"),
    "event": ("日程", "会议", "开会", "[个场次]会", "开.{0,6}会"),
    "create": ("建", "创建", "添加", "加[个一]", "安排", "约", "开.{0,6}会"),
    "find": ("找", "查", "搜"),
    "search": ("找", "查", "搜"),
    "directory": ("通讯录",),
    "colleague": ("同事", "是谁", "做什么", "职位", "部门", "岗位"),
    "title": ("职位", "头衔", "做什么", "岗位"),
    "busy": ("忙", "有空", "空闲"),
    "open": ("没做完", "未完成", "没完成", "还有"),
    "list": ("哪些", "列出", "有什么", "有哪", "汇总"),
    "mark": ("标记", "标成", "划掉"),
    "done": ("完成", "做完", "搞定"),
    "complete": ("完成", "做完", "搞定"),
    "note": ("笔记", "记事本"),
    "read": ("看看", "读", "写了", "内容", "里"),
    "append": ("追加", "记到", "写进", "加到", "记下"),
}
# The thing a tool's object is called, to name it in a question.
OBJECT_WORDS = {"to-do": "待办", "todo": "待办", "event": "日程", "note": "笔记"}


def tool_words(offer: Offer) -> set[str]:
    parts = re.split(r"[._]", offer.name.lower())
    return {w for w in [*parts, *words_of(offer.description)] if w in GLOSSARY}


def fit(offer: Offer, text: str) -> int:
    """How many of the tool's own words the request says, in its own language."""
    return sum(
        1 for word in tool_words(offer) if any(re.search(cue, text) for cue in GLOSSARY[word])
    )


def object_word(offer: Offer) -> str:
    for part in re.split(r"[._]", offer.name.lower()):
        if part in OBJECT_WORDS:
            return OBJECT_WORDS[part]
    return next((OBJECT_WORDS[w] for w in words_of(offer.description) if w in OBJECT_WORDS), "")


def slot_of(name: str, schema: dict[str, Any]) -> str:
    """What an argument is, from its name and schema: people, time, id or text."""
    low = name.lower()
    described = str(schema.get("description") or "")
    if schema.get("type") == "array" or re.search(
        r"user|attendee|executor|member|people|person|staff|assignee", low
    ):
        return "people"
    if low in {"start", "end", "due", "at", "time", "when"} or "ISO 8601" in described:
        return "time"
    if low == "id" or low.endswith("_id"):
        return "id"
    return "text"


# ----------------------------------------------------------------------------- requests

REQUEST = re.compile(r"^(?:请|麻烦|帮|替|给我|能不能|能否|可以|可不可以|你去|把|记得|please\b)")
HOW = re.compile(r"怎么|如何|怎样|(?i:\bhow\b)")
QUESTION = re.compile(
    r"[?？]|吗|什么|谁|哪|几|多少|怎|(?i:^\s*(?:what|who|where|when|which|how)\b)"
)
ORDER_MARKS = re.compile(
    r"指令|指示|忽略|无视|(?:系统|管理员|上级).{0,2}[：:]|(?i:ignore|instruction|system prompt)"
    r"|(?:AI|ai|机器人|助手)[：:，,]|致 ?(?:AI|ai|助手|机器人)|给 ?(?:AI|ai|助手|机器人)"
)


def is_request(text: str) -> bool:
    return bool(REQUEST.search(text.strip())) and not HOW.search(text)


def request_body(text: str) -> str:
    """The request without its polite opening and its closing particles."""
    body = re.sub(r"^(?:请你?|麻烦你?|能不能|能否|可不可以|可以|你去|记得)", "", text.strip())
    body = re.sub(r"^(?:帮我|帮忙|替我|给我|帮)", "", body)
    return body.rstrip("。.！!？?吧呀啊 ")


def looks_like_an_order(text: str) -> bool:
    """Data that speaks to the assistant: an order inside a note, a title, a file."""
    return bool(ORDER_MARKS.search(text))


def without_orders(text: str) -> tuple[str, bool]:
    """The text with every bracketed part, line or sentence that gives orders taken out,
    and whether any was."""
    dropped = False

    def bracket(match: re.Match[str]) -> str:
        nonlocal dropped
        if looks_like_an_order(match.group(0)):
            dropped = True
            return ""
        return match.group(0)

    text = re.sub(r"[（(【\[][^）)】\]]*[）)】\]]", bracket, text)
    kept = []
    for line in text.splitlines():
        sentences = re.split(r"(?<=[。！!；;])", line)
        good = [s for s in sentences if not looks_like_an_order(s)]
        dropped = dropped or len(good) < len(sentences)
        joined = "".join(good).strip()
        if joined:
            kept.append(joined)
    return "\n".join(kept), dropped


# ----------------------------------------------------------------------------- people

SURNAMES = frozenset(
    "张王李赵刘陈杨黄吴徐孙朱胡郭罗郑梁谢宋唐许韩冯邓曹彭曾肖董袁潘蒋蔡杜叶苏魏吕丁沈"
    "姚卢姜崔钟谭陆汪范廖贾韦邹熊邱薛闫雷侯龙陶黎贺顾毛郝龚邵覃武戴莫孔汤尹"
)
NOT_IN_NAMES = frozenset(FUNCTION_CHARS | set("明今昨后前天年月日号点分时周星说做约开聊建发是"))


def person_names(text: str) -> list[str]:
    """Two-character names (family name and one more) the text seems to give; a longer
    name is found by looking the two up."""
    names = []
    for index, char in enumerate(text[:-1]):
        nxt = text[index + 1]
        if char in SURNAMES and CJK.fullmatch(nxt) and nxt not in NOT_IN_NAMES:
            if index > 0 and CJK.fullmatch(text[index - 1]) and text[index - 1] in SURNAMES:
                continue
            names.append(char + nxt)
    return list(dict.fromkeys(names))
