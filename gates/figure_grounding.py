"""Whether each figure of an answer comes from somewhere: its sources, the question, or a
computation the answer shows whose arithmetic holds (pure; what a figure is: ``gates/figures.py``).

    ungrounded("标准是 300 美元。", ["住宿标准：180 美元/晚"])            # -> [300 美元]
    ungrounded("180 美元 × 2 晚 = 360 美元", ["180 美元/晚", "住 2 晚"])   # -> []
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal, DecimalException

from gates.figure_numbers import _MONTHS, _SECONDS
from gates.figures import Figure, _fold, figures

# ---------------------------------------------------------------------------- grounding


def ungrounded(answer: str, sources: Sequence[str], question: str = "") -> list[Figure]:
    """The figures in ``answer`` that no source and not the question gives, and that no
    computation shown in the answer yields from grounded figures; [] when every figure
    comes from somewhere."""
    found = figures(answer)
    if not found:
        return []
    given = [figure for text in (*sources, question) for figure in figures(text)]
    years = _years(given)
    grounded = {i for i, figure in enumerate(found) if _given(figure, given, years)}
    computed: list[Figure] = []
    # Until nothing changes: a computation's result, once accepted, may be the operand of
    # another (180 × 2 = 360, 360 + 120 = 480) whichever of them is written first.
    steps = _computations(answer, found)
    changed = True
    while changed:
        changed = False
        for step in steps:
            if step.result in grounded or not step.holds:
                continue
            if all(_operand(found[i], i in grounded, computed, years) for i in step.operands):
                # its scale constants (× 100%) are the computation's, like its result
                grounded |= {step.result, *step.operands}
                computed.append(found[step.result])
                changed = True
    # A result said again later (「…= 360 美元，共 360 美元」) is the computation's.
    grounded |= {i for i, figure in enumerate(found) if _given(figure, computed, years)}
    return [figure for i, figure in enumerate(found) if i not in grounded]


def problem_detail(found: list[Figure], sources: Sequence[str]) -> str:
    """The refusal's detail: the ungrounded figures as written and the figures the sources
    do give (a few, those of the same kinds first), e.g. 「says 300 美元; the sources say
    180 美元, 3 晚」."""
    if not found:
        return ""
    said = _distinct(found, key=lambda figure: figure.text)[:MAX_NAMED]
    have = _distinct(
        [figure for text in sources for figure in figures(text)],
        key=lambda figure: (figure.unit, figure.value),
    )
    kinds = {figure.kind for figure in found}
    have = sorted(have, key=lambda figure: figure.kind not in kinds)[:MAX_SOURCE_FIGURES]
    says = ", ".join(figure.text for figure in said)
    if not have:
        return f"says {says}; the sources give no figures"
    return f"says {says}; the sources say {', '.join(figure.text for figure in have)}"


MAX_NAMED = 5  # ungrounded figures named in a refusal's detail
MAX_SOURCE_FIGURES = 8  # the sources' figures listed beside them


def _distinct(found: list[Figure], key: Callable[[Figure], object]) -> list[Figure]:
    seen: set[object] = set()
    kept = []
    for figure in found:
        if key(figure) not in seen:
            seen.add(key(figure))
            kept.append(figure)
    return kept


def _given(figure: Figure, given: Sequence[Figure], years: set[int]) -> bool:
    return any(_grounds(source, figure, years) for source in given)


def _grounds(source: Figure, figure: Figure, years: set[int]) -> bool:
    """Does ``source`` give ``figure``: the same value, in the same kind and unit (a plain
    number on either side: the same number)?"""
    if figure.kind == "date":
        return _date_grounds(source, figure, years)
    if figure.kind == "time":
        return source.kind == "time" and bool(_clock_values(source) & _clock_values(figure))
    if not figure.unit:
        return figure.value in _numbers(source)
    if not source.unit:
        return source.value == figure.value
    return _measured(source) == _measured(figure)


def _date_grounds(source: Figure, figure: Figure, years: set[int]) -> bool:
    """Every part the answer's date gives is the source's: 12月5日 from 2026-12-05; 2026年 from
    any date in 2026; 2026-12-05 from 12月5日 when the sources or the question name 2026."""
    y, m, d = _parts(figure.value)
    if source.kind != "date":
        return not source.unit and not m and not d and source.value == y
    sy, sm, sd = _parts(source.value)
    if (m and m != sm) or (d and d != sd):
        return False
    return not y or y == sy or (sy == 0 and y in years)


def _parts(value: Decimal) -> tuple[int, int, int]:
    whole = int(value)
    return whole // 10000, whole // 100 % 100, whole % 100


def _years(given: Sequence[Figure]) -> set[int]:
    """The years the sources and the question speak of: a date's, or a plain 2026."""
    years = {_parts(figure.value)[0] for figure in given if figure.kind == "date"}
    plain = {int(f.value) for f in given if not f.unit and f.value == f.value.to_integral_value()}
    return (years | {y for y in plain if 1900 <= y <= 2100}) - {0}


def _numbers(source: Figure) -> set[Decimal]:
    """The numbers a plain number in the answer may be: the figure's own, or a date's
    parts (the 2026 of 2026-12-05)."""
    if source.kind == "date":
        return {Decimal(part) for part in _parts(source.value) if part}
    if source.kind == "time":
        return set()
    return {source.value}


def _clock_values(figure: Figure) -> set[int]:
    minutes = int(figure.value) % 1440
    return {minutes, (minutes + 720) % 1440} if figure.unit == "clock12" else {minutes}


def _measured(figure: Figure) -> tuple[str, Decimal]:
    if figure.unit in _SECONDS:
        return "seconds", figure.value * _SECONDS[figure.unit]
    if figure.unit in _MONTHS:
        return "months", figure.value * _MONTHS[figure.unit]
    return figure.unit, figure.value


# ---------------------------------------------------------------------------- computations


@dataclass(frozen=True)
class _Step:
    """A computation the answer shows: its operands and its result (indices into the
    answer's figures), and whether the arithmetic holds."""

    operands: tuple[int, ...]
    result: int
    holds: bool


# Scale constants a shown computation may use without a source: ×100 for a percentage.
_CONSTANTS = {("", Decimal(100)), ("percent", Decimal(100))}


def _operand(figure: Figure, grounded: bool, computed: list[Figure], years: set[int]) -> bool:
    if grounded or (figure.unit, figure.value) in _CONSTANTS:
        return True
    return _given(figure, computed, years)


_OPERATORS = {"+": "+", "-": "-", "−": "-", "–": "-", "*": "*", "×": "*", "x": "*", "X": "*"}
_OPERATORS |= {"·": "*", "/": "/", "÷": "/"}
_OPERATOR_WORDS = re.compile(r"乘以|乘|除以|加上|加|减去|减|(?i:times|plus|minus|divided\s+by)")
_WORD_OPERATOR = {"乘以": "*", "乘": "*", "除以": "/", "加上": "+", "加": "+", "减去": "-"}
_WORD_OPERATOR |= {"减": "-", "times": "*", "plus": "+", "minus": "-"}
# 180 美元/晚 × 2 晚: the 「/晚」 of a rate, not a division.
_RATE = re.compile(r"\s*(?:/|每)\s*[\u4e00-\u9fffA-Za-z]{1,4}(?=\s*[^\s\u4e00-\u9fffA-Za-z])")
_EQUALS = re.compile(r"\s*([)\s]*)(?:=|≈|≒|约等于|等于|约为|约合|(?i:equals))\s*(?:约\s*)?")


def _operator(gap: str) -> list[str] | None:
    """The tokens between two operands (「 × 」, 「)/(」, 「/晚 × 」), or None when the text
    between them is not one operator with parentheses."""
    gap = _RATE.sub("", _fold(gap)[0], count=1)
    gap = _OPERATOR_WORDS.sub(lambda m: f" {_WORD_OPERATOR[m.group(0).split()[0].lower()]} ", gap)
    tokens = [c if c in "()" else _OPERATORS.get(c, "?") for c in gap if not c.isspace()]
    if "?" in tokens or sum(t not in "()" for t in tokens) != 1:
        return None
    return tokens


def _equals(gap: str) -> list[str] | None:
    """The closing parentheses before an equals sign (「) ≈ 」), or None when the text is
    not one."""
    found = _EQUALS.fullmatch(_fold(gap)[0])
    return None if found is None else [c for c in found.group(1) if c == ")"]


def _computations(answer: str, found: list[Figure]) -> list[_Step]:
    """Every computation the answer shows: operands joined by operators, then = or ≈ and
    the result (「180 美元 × 2 晚 = 360 美元」「(300-180)/180 ≈ 66.7%」)."""
    steps = []
    i = 0
    while i < len(found):
        tokens: list[Decimal | str] = ["("] * _opening(answer[: found[i].start])
        tokens.append(_value(found[i]))
        j = i
        while j + 1 < len(found) and found[j + 1].kind not in ("date", "time"):
            between = _operator(answer[found[j].end : found[j + 1].start])
            if between is None or found[j].kind in ("date", "time"):
                break
            tokens += [*between, _value(found[j + 1])]
            j += 1
        closing = None
        if j > i and j + 1 < len(found) and found[j].end <= found[j + 1].start:
            closing = _equals(answer[found[j].end : found[j + 1].start])
        if closing is None:
            i = max(j, i + 1)
            continue
        result = found[j + 1]
        value = _evaluate(_balanced([*tokens, *closing]))
        holds = value is not None and _rounds_to(value, result)
        steps.append(_Step(tuple(range(i, j + 1)), j + 1, holds))
        i = j + 1  # the result may begin the next step: 180 × 2 = 360 + 120 = 480
    return steps


def _opening(before: str) -> int:
    """How many ( open just before the first operand."""
    tail = re.search(r"[(\s]*$", _fold(before)[0])
    return tail.group(0).count("(") if tail else 0


def _balanced(tokens: list[Decimal | str]) -> list[Decimal | str]:
    """Drop the leading ( that the computation never closes (「（注：180 × 2 = 360）」)."""
    extra = tokens.count("(") - tokens.count(")")
    while extra > 0 and tokens and tokens[0] == "(":
        tokens, extra = tokens[1:], extra - 1
    return tokens


def _value(figure: Figure) -> Decimal:
    return figure.value / 100 if figure.kind == "percent" else figure.value


def _rounds_to(value: Decimal, result: Figure) -> bool:
    """Is ``value`` the shown result, rounded to the precision it is written to? A shown
    percentage may be of a fraction (… /180 ≈ 66.7%) or of a number already ×100."""
    tolerance = result.step / 2
    if result.kind == "percent":
        return (
            abs(value - result.value / 100) <= tolerance / 100
            or abs(value - result.value) <= tolerance
        )
    return abs(value - result.value) <= tolerance


def _evaluate(tokens: list[Decimal | str]) -> Decimal | None:
    """The value of numbers, + - * / and parentheses; None when they are not an expression
    or divide by zero. Never Python's evaluator: the text is a model's."""
    position = 0

    def peek() -> Decimal | str | None:
        return tokens[position] if position < len(tokens) else None

    def take() -> Decimal | str | None:
        nonlocal position
        position += 1
        return tokens[position - 1] if position <= len(tokens) else None

    def expression() -> Decimal:
        value = term()
        while peek() in ("+", "-"):
            value = value + term() if take() == "+" else value - term()
        return value

    def term() -> Decimal:
        value = atom()
        while peek() in ("*", "/"):
            value = value * atom() if take() == "*" else value / atom()
        return value

    def atom() -> Decimal:
        token = take()
        if token == "(":
            value = expression()
            if take() != ")":
                raise ValueError("unclosed (")
            return value
        if token == "-":
            return -atom()
        if not isinstance(token, Decimal):
            raise ValueError(f"expected a number, got {token!r}")
        return token

    try:
        value = expression()
    except (ValueError, ZeroDivisionError, DecimalException):
        return None
    return value if position == len(tokens) else None
