"""Figures in an answer, and whether each one comes from somewhere (pure).

A knowledge answer that says 300 美元 where the retrieved section says 180 美元 is wrong in
the one way its reader cannot see. So every figure an answer gives — an amount, count,
percentage, date, time of day, duration or plain number — must be one that its sources (the
knowledge items and tool results it used) or the question hold, or the result of a
computation the answer shows, whose arithmetic checks out and whose operands are themselves
grounded. This module finds the figures; ``gates/figure_grounding.py`` judges them
(``ungrounded``, ``problem_detail``), from the patterns of ``gates/figure_patterns.py`` and
the numerals and units of ``gates/figure_numbers.py``.

    figures("住宿 180 美元/晚，共两晚")          # -> [180 美元 (USD 180), 两晚 (night 2)]
    ungrounded("标准是 300 美元。", ["住宿标准：180 美元/晚"])            # -> [300 美元]
    ungrounded("180 美元 × 2 晚 = 360 美元", ["180 美元/晚", "住 2 晚"])   # -> []
    ungrounded("180 × 2 = 380", ["180 美元/晚，2 晚"])                     # -> [380]
    problem_detail(found, ["住宿标准：180 美元/晚，最多 3 晚"])
    # -> "says 300 美元; the sources say 180 美元, 3 晚"

Figures are compared by value, not by spelling: 三百元 is 300 元, 1.5万 is 15000, ¥ and RMB are
元, 2026-12-05 is 12月5日 when 2026 is the year the sources speak of, 2 小时 is 120 分钟. A
figure written without a unit (「180 × 2」) matches any source figure with that number, and a
source number without a unit (a tool's JSON, a table under 「金额（元）」) grounds the same
number with any unit: the check is for figures nobody gave, not for a unit the source leaves
to its header.

Not figures (they name or order things, or need today's date to mean anything):
- list and heading numbers (「1.」「2、」「(3)」「## 2.1 标准」), ordinals (第一, 第3天, 3rd);
- references and ids: #12, No. 5, 工号/编号/单号/电话/会议室/id followed by a code, phone
  numbers, digit runs of 7 or more, codes that mix letters and digits (A3, TASK-12, 5G, v1.2),
  version numbers (1.2.3, 版本 2.1), 3号楼, 7×24, 24/7, 步骤 2, 表 1, Q3;
- relative dates (明天, 下周五, next Friday) and weekdays (周三): they are read against today,
  which no source holds (the count inside 「三天后」 is still a duration, 3 天);
- a Chinese numeral with no unit (一些, 万一, 十分, 千万不要), 一 as an article (一个问题,
  再试一次), approximations written as two numerals (三四天, 两三个), fractions in words
  (三分之一), and 一点/两点 unless they are clearly a time (下午两点, 两点半).
Signs are not part of a figure (下降 5% gives 5 percent); times of day are figures, so an
answer that repeats the question's 「下午3点」 as 15:00 passes.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from decimal import Decimal

from gates.figure_patterns import _RULES, _SCANNER

# ---------------------------------------------------------------------------- figures


@dataclass(frozen=True)
class Figure:
    """One figure as written (``text``) and as compared (``kind``, ``unit``, ``value``).

    ``kind`` is amount, count, percent, date, time, duration or number (no unit). ``unit`` is
    canonical ("USD", "CNY", "day", "hour", "person", "percent", …; "" for a plain number).
    A date's value is YYYYMMDD with 0 for a part not given (12月5日 -> 1205); a time's is
    minutes after midnight, unit "clock", or "clock12" when it may be either half of the day
    (3点). ``start``/``end`` locate it in the text; ``step`` is the precision it is written
    to (66.7% -> 0.1, 1.5万 -> 1000), which a shown computation may round to.
    """

    text: str
    kind: str
    unit: str
    value: Decimal
    start: int = 0
    end: int = 0
    step: Decimal = Decimal(1)


def figures(text: str) -> list[Figure]:
    """Every figure in ``text``, in order (see the module docstring for what is not one)."""
    norm, where = _fold(text)
    found: list[Figure] = []
    for match in _SCANNER.finditer(norm):
        name = match.lastgroup
        assert name is not None
        rule, handler = _RULES[name]
        inner = rule.match(norm, match.start())
        assert inner is not None  # the same pattern, at the same place
        for kind, unit, value, step in handler(inner):
            start, end = where[inner.start()], where[inner.end() - 1] + 1
            found.append(Figure(text[start:end].strip(), kind, unit, value, start, end, step))
    return found


def _fold(text: str) -> tuple[str, list[int]]:
    """``text`` with full-width forms folded to ASCII, spaces to " ", and format characters
    (zero-width spaces) and Markdown strong emphasis (**…**) dropped; with, for each
    character kept, where it was. The full-width comma stays: 「180，120」 is two numbers."""
    chars: list[str] = []
    where: list[int] = []
    i = 0
    while i < len(text):
        c = text[i]
        if text.startswith(("**", "__"), i):
            i += 2
            continue
        category = unicodedata.category(c)
        if category == "Cf":
            i += 1
            continue
        if "\uff01" <= c <= "\uff5e" and c != "，":
            c = chr(ord(c) - 0xFEE0)
        elif category == "Zs":
            c = " "
        chars.append(c)
        where.append(i)
        i += 1
    return "".join(chars), where
