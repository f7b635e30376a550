"""Text as the claim checks read it: one form for every way a sentence can be written, then
cut into clauses.

A claim hides as easily in its spelling as in its grammar: 「已經幫你創建了待辦」 is
traditional, ``I’ve created`` has a typographic apostrophe, 「创\\u200b建」 has a zero-width
space, ``**已发送**`` is emphasised, 「已 发 送」 is spaced. Before anything is judged the text
is normalised: traditional → simplified (OpenCC's own data, not a hand table), NFKC (full-width
letters and digits), format characters (zero-width spaces, joiners, direction marks) removed,
typographic quotes and apostrophes folded, Markdown emphasis and code marks stripped, and the
spaces between CJK characters dropped. The result is only read, never sent.

    normalise("**已經**幫你創\\u200b建了待辦")   # -> "已经帮你创建了待办"
    clauses("已经发给张三了。然后通知了李四")    # -> ["已经发给张三了", "然后通知了李四"]
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

import opencc

_QUOTES = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201a": "'",
        "\u201b": "'",
        "\u2032": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u201e": '"',
        "\u201f": '"',
        "\u2033": '"',
    }
)
# Markdown that changes how a word looks, never what it says
_EMPHASIS = re.compile(r"(\*\*|__|~~|\*|`+)")
_CJK = r"[\u3400-\u9fff\uf900-\ufaff\u3000-\u303f\uff00-\uffef「」『』]"
_CJK_SPACE = re.compile(rf"(?<={_CJK})[ \t\u00a0]+(?={_CJK})")
# Where one clause ends and the next begins: sentence ends, list items, semicolons, commas
# and the conjunctions that join two claims (「…，并通知了他」).
_CLAUSE_END = re.compile(
    r"[。！？!?；;\n]+|(?<=[，,、：])|(?<=:)(?!//|\d)|(?:^|\n)\s*(?:[-*•·]|\d+[.、)])\s+"
    r"|(?=不知道(?:是否|有没有|您|你))"
)


@lru_cache(maxsize=1)
def _to_simplified() -> opencc.OpenCC:
    return opencc.OpenCC("t2s")


def normalise(text: str) -> str:
    """``text`` in the one form the checks read (see the module's docstring)."""
    if not text:
        return ""
    if text.isascii():  # nothing to fold but emphasis: no width, quote, format or script
        return _EMPHASIS.sub("", text)
    folded = unicodedata.normalize("NFKC", text).translate(_QUOTES)
    folded = "".join(ch for ch in folded if unicodedata.category(ch) != "Cf")
    folded = _EMPHASIS.sub("", folded)
    folded = _to_simplified().convert(folded)
    return _CJK_SPACE.sub("", folded)


# A quotation is one piece: what it says is never cut into clauses of the robot's own.
_QUOTATION = re.compile(r"「[^」]*」|『[^』]*』|“[^”]*”|\"[^\"\n]*\"")
_INSIDE = "，,、：:；;。！？!?"
_KEPT = {mark: chr(0xE000 + i) for i, mark in enumerate(_INSIDE)}
_BACK = str.maketrans({kept: mark for mark, kept in _KEPT.items()})


def _keep_quotes(text: str) -> str:
    return _QUOTATION.sub(lambda m: m.group(0).translate(str.maketrans(_KEPT)), text)


def clauses(text: str) -> list[str]:
    """The clauses of a normalised text, each stripped, none empty (a quotation whole)."""
    parts = _CLAUSE_END.split(_keep_quotes(text))
    kept = [part.strip(" \t，,、：:") for part in parts if part and part.strip(" \t，,、：:")]
    return [part.translate(_BACK) for part in kept]


def sentences(text: str) -> list[str]:
    """The sentences of a normalised text (clauses joined by commas stay together)."""
    # an English full stop ends a sentence too ("… 10 days.  I'm going back …"), never a
    # decimal point, a version or a file name
    parts = re.split(r"(?<=[。！？!?；;\n])|(?<=[a-z)\]'\"][.])\s+(?=[A-Z])", _keep_quotes(text))
    return [part.strip().translate(_BACK) for part in parts if part.strip()]


_NOT_WORD = re.compile(r"[\W_]+", re.UNICODE)
# the shorter of two wordings must keep at least this share of the longer's characters
MIN_SHARE = 0.6


def normalised(text: str) -> str:
    """An object's words with case, width, spaces and punctuation folded away."""
    return _NOT_WORD.sub("", unicodedata.normalize("NFKC", text).casefold())


def _subsequence(short: str, long: str) -> bool:
    letters = iter(long)
    return all(char in letters for char in short)


def same_object(a: str, b: str) -> bool:
    """Two wordings of one object: equal once normalised; or the shorter (at least
    ``MIN_SHARE`` of the longer) is in the longer in order (「续费域名」 in 「续费公司域名」) or
    reordered with the same characters (「域名续费」); never 「买咖啡豆」 and 「买咖啡杯」."""
    a, b = normalised(a), normalised(b)
    if a == b:
        return True
    short, long = sorted((a, b), key=len)
    if len(short) < 2 or len(short) < MIN_SHARE * len(long):
        return False
    if _subsequence(short, long):
        return True
    return len(short) == len(long) and Counter(short) == Counter(long)


Tense = Literal["done", "promise"]


@dataclass(frozen=True)
class Claim:
    text: str  # the clause, as read (normalised)
    tense: Tense
    effect: str
    people: tuple[str, ...] = ()  # names, or "他" (someone else), or "你" (the asker)
    objects: tuple[str, ...] = ()  # what it quotes (「续费域名」)
    unconfirmed: bool = False  # worded as done but not yet confirmed / result unknown


_QUOTED = re.compile(r"[「『“\"《]([^」』”\"》]{1,60})[」』”\"》]")
_UNCONFIRMED = re.compile(
    r"还没(?:有)?(?:能)?确认|未确认|尚未确认|没法(?:再)?核对|无法核对|未核对|还没核对|待确认|不确定(?:是否|有没有)"
    r"|结果(?:还)?(?:不明|未知|还没)|没能确认|等待确认|未能核对|not (?:yet )?(?:confirmed|verified)"
    r"|couldn't (?:check|confirm|verify)|could not (?:check|confirm|verify)|unconfirmed|unknown"
)


def objects(clause: str) -> tuple[str, ...]:
    """What a clause quotes (「续费域名」): the objects it names."""
    return tuple(m.group(1).strip() for m in _QUOTED.finditer(clause) if m.group(1).strip())


def unconfirmed(text: str) -> bool:
    """Worded as done but not yet confirmed, or with its result unknown."""
    return _UNCONFIRMED.search(text) is not None
