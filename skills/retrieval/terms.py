"""The search terms of a text, for Chinese without a word segmenter.

Chinese runs become character bigrams (weight 1.0) and single characters (0.3: too common
to count as evidence alone); ASCII text becomes lower-cased words with a crude plural fold.
Stop words are removed first, from questions and notes alike: they can neither match nor
dilute.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

_CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_WORD = re.compile(r"[a-z0-9]+")
# Removed (longest first) from both questions and notes: they can neither match nor dilute.
_CJK_STOPWORD_TEXT = """
请问 什么时候 什么 怎么 怎样 如何 为什么 哪些 哪里 哪个 哪天 哪儿 几点 何时 时候 多少
可以 能否 是否 需要 告诉 知道 一下 我们 你们 他们 这个 那个 一个 有没有 是不是
吗 呢 吧 啊 呀 嘛 么 的 了 是 我 你
"""
_CJK_STOPWORDS = sorted(_CJK_STOPWORD_TEXT.split(), key=len, reverse=True)
_CJK_STOP = re.compile("|".join(map(re.escape, _CJK_STOPWORDS)))
_ASCII_STOPWORD_TEXT = """
a an the is are was were be do does did how what which who where when why can could
i me my we our you your it its to of in on for and or with please tell about there this that
"""
_ASCII_STOPWORDS = frozenset(_ASCII_STOPWORD_TEXT.split())
BIGRAM_WEIGHT = 1.0
UNIGRAM_WEIGHT = 0.3
WORD_WEIGHT = 1.0


def without_stopwords(text: str) -> str:
    """The text with the Chinese stop words blanked out (lower-cased)."""
    return _CJK_STOP.sub(" ", text.lower())


def term_stream(text: str) -> Iterator[tuple[str, float]]:
    """Every search term of a text in order, with its weight: CJK bigrams and characters,
    and ASCII words (repeats included, so a ranking can count them)."""
    lowered = text.lower()
    for run in _CJK_RUN.findall(_CJK_STOP.sub(" ", lowered)):
        for index in range(len(run) - 1):
            yield run[index : index + 2], BIGRAM_WEIGHT
        for char in run:
            yield char, UNIGRAM_WEIGHT
    for word in _WORD.findall(lowered):
        if word in _ASCII_STOPWORDS or (len(word) < 2 and not word.isdigit()):
            continue
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]  # crude plural folding: "refunds" finds "refund"
        yield word, WORD_WEIGHT


def terms(text: str) -> dict[str, float]:
    """Weighted search terms of a text: CJK bigrams and characters, and ASCII words.

    A character that is also a one-character bigram stays at its higher weight."""
    found: dict[str, float] = {}
    for term, weight in term_stream(text):
        if weight > found.get(term, 0.0):
            found[term] = weight
    return found
