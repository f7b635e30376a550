"""Arithmetic: exact results, real expressions only, and never Python's evaluator."""

from __future__ import annotations

import inspect
import re
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skills.providers import arithmetic
from skills.providers.arithmetic import (
    ExpressionError,
    answer,
    calculate,
    find_calculations,
    format_number,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("7 + 5 等于多少？请直接回答。", "7 + 5 = 12"),
        ("(3+4)×6 是多少", "(3 + 4) × 6 = 42"),
        ("12 * 3 是多少", "12 × 3 = 36"),
        ("2 + 2 等于几", "2 + 2 = 4"),
        ("1 + 1 等于几", "1 + 1 = 2"),
        ("算一下 3.5*2", "3.5 × 2 = 7"),
        ("100/8=?", "100 ÷ 8 = 12.5"),
        ("what is 2+3*4", "2 + 3 × 4 = 14"),
        ("What's 9 - 12?", "9 - 12 = -3"),
        ("（３＋４）×６是多少", "(3 + 4) × 6 = 42"),
        ("１２＊３等于几", "12 × 3 = 36"),
        ("８÷２－１＝？", "8 ÷ 2 - 1 = 3"),
        ("１０／４等于多少", "10 ÷ 4 = 2.5"),
        ("3+4", "3 + 4 = 7"),
        ("@小钉 6*7", None),  # a mention is text, not filler: the caller strips it first
    ],
)
def test_phrasings(text: str, expected: str | None) -> None:
    assert answer(text) == expected


@pytest.mark.parametrize(
    ("expression", "result"),
    [
        ("2+3*4", "14"),
        ("(2+3)*4", "20"),
        ("2*3+4", "10"),
        ("10-4-3", "3"),  # left-associative
        ("100/10/5", "2"),
        ("2*(3+(4-1))*2", "24"),
        ("-3+5", "2"),
        ("-(2+3)", "-5"),
        ("4*-2", "-8"),
        ("3--4", "7"),
        ("+7-2", "5"),
        ("0.1+0.2", "0.3"),
        ("1.50*1", "1.5"),
        ("1.1*1.1", "1.21"),
        ("10/4", "2.5"),
        ("1/3", "0.3333333333"),
        ("2/3", "0.6666666667"),
        ("1/8", "0.125"),
        ("100*100", "10000"),
        ("3-3", "0"),
        ("0-0.0", "0"),
        (".5+.5", "1"),
        ("123456789*1000", "123456789000"),
    ],
)
def test_precedence_parentheses_and_decimals(expression: str, result: str) -> None:
    assert calculate(expression).result == result


def test_display_uses_multiplication_and_division_signs() -> None:
    assert calculate("-3*(2/1)").expression == "-3 × (2 ÷ 1)"


@pytest.mark.parametrize("text", ["7/0 等于几", "5 ÷ (2-2) = ?", "1/0.0="])
def test_division_by_zero(text: str) -> None:
    (calc,) = find_calculations(text)
    assert calc.divides_by_zero
    reply = answer(text)
    assert reply is not None
    assert "不能除以 0" in reply
    assert "zero" in (answer(text, english=True) or "")


@pytest.mark.parametrize(
    "text",
    [
        "2024-05-01 是星期几",
        "会议改到 2024/05/01 了，是多少号来着",
        "我的电话是 138-1234-5678",
        "138-1234-5678 是多少",
        "2024-12-25 是几号",
        "12/25/2024 算工作日吗",
        "座机 010-12345678 是多少",
        "2024-05 的报表",
        "第3季度的目标是多少",
        "42",
        "42 是多少",
        "我们 3 个人 - 2 个请假",
        "需要 1-2 周",
        "版本 v1.2.3",
        "2^10 = ?",
        "2*(3+4",
        "3 4 5 等于几",
        "",
        "__import__('os').system('echo hi')",
        "1+1; import os",  # no question asked and more than an expression: just text
    ],
)
def test_not_arithmetic(text: str) -> None:
    assert find_calculations(text) == []
    assert answer(text) is None


def test_thousands_separators_are_numbers_not_lists() -> None:
    assert answer("1,000 + 2 = ?") == "1000 + 2 = 1002"


def test_several_expressions_are_answered_in_order() -> None:
    assert answer("1+1 和 2*3 分别等于多少") == "1 + 1 = 2\n2 × 3 = 6"


@pytest.mark.parametrize("bad", ["", "()", "1+", "*2", "1..2+1", "(1+2))", "1 2 + 3", "2+x"])
def test_calculate_rejects_malformed(bad: str) -> None:
    with pytest.raises(ExpressionError):
        calculate(bad)


def test_bare_number_is_not_a_calculation() -> None:
    with pytest.raises(ExpressionError, match="no operator"):
        calculate("-5")


def test_limits_guard_against_abuse() -> None:
    assert calculate("(" * 20 + "1+1" + ")" * 20).result == "2"
    with pytest.raises(ExpressionError, match="nested too deeply"):
        calculate("(" * 60 + "1+1" + ")" * 60)
    with pytest.raises(ExpressionError, match="nested too deeply"):
        calculate("-" * 60 + "1+1")
    with pytest.raises(ExpressionError, match="too long"):
        calculate("1+" * 200 + "1")


@pytest.mark.parametrize(
    ("value", "exact", "text"),
    [
        (Decimal("1.500"), True, "1.5"),
        (Decimal("1E+3"), True, "1000"),
        (Decimal("-0"), True, "0"),
        (Decimal("0.000001"), True, "0.000001"),
        (Decimal("12.3456789012345"), False, "12.3456789"),
        (Decimal("98765.4321987654"), False, "98765.4322"),
        (Decimal("0.333333333333333333"), False, "0.3333333333"),
    ],
)
def test_format_number(value: Decimal, exact: bool, text: str) -> None:
    assert format_number(value, exact=exact) == text


def test_source_never_uses_python_evaluation() -> None:
    source = inspect.getsource(arithmetic)
    for forbidden in ("eval(", "exec(", "literal_eval", "__import__", "import ast"):
        assert forbidden not in source
    assert re.search(r"(?<![\w.])compile\(", source) is None  # re.compile is fine


def test_injection_text_is_not_executed(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    monkeypatch.setattr(os, "system", lambda *_: pytest.fail("os.system was called"))
    assert answer("__import__('os').system('touch /tmp/pwned') 1+1") is None
    assert answer("算一下 __import__('os').system('x')") is None


@given(
    a=st.integers(-10_000, 10_000),
    b=st.integers(-10_000, 10_000),
    c=st.integers(1, 10_000),
)
def test_matches_integer_arithmetic(a: int, b: int, c: int) -> None:
    assert calculate(f"{a} + {b} * {c}").result == str(a + b * c)
    assert calculate(f"({a} - {b}) * {c}").result == str((a - b) * c)
    quotient = Decimal(a * c) / Decimal(c)
    assert calculate(f"{a * c} / {c}").result == format_number(quotient)
