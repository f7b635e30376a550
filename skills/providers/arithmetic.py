"""Exact arithmetic on expressions found inside chat messages.

The text comes from a chat, so it is never handed to Python's evaluator: a tiny tokenizer
and a recursive-descent parser accept numbers, ``+ - * / × ÷``, unary signs and
parentheses, and nothing else. Values are ``Decimal`` so that decimal input stays exact
(0.1 + 0.2 is 0.3, as a person expects).

Finding the expression is deliberately conservative: a bare number, a date such as
2024-05-01 or a phone number such as 138-1234-5678 is not a sum somebody asked for.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from decimal import Decimal, Inexact, InvalidOperation, localcontext

SIGNIFICANT_DIGITS = 10  # shown for results that are not exact (1/3)
MAX_EXPRESSION_CHARS = 200
MAX_NESTING = 30
MAX_RESULTS = 3

_BINARY = {"+", "-", "*", "/"}
_SHOWN = {"+": "+", "-": "-", "*": "×", "/": "÷"}
# NFKC handles full-width digits, （）＋－＊／ and ＝; these few it leaves alone.
_SYMBOLS = str.maketrans({"×": "*", "÷": "/", "−": "-", "–": "-", "·": "*"})
_RUN = re.compile(r"[0-9.+\-*/() ]+")
_TOKEN = re.compile(r"\s*(?:(\d+(?:\.\d*)?|\.\d+)|([-+*/()]))")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
# Words that show a calculation is wanted. Without one, "1-2周" is a range, not a sum.
_CUE = re.compile(
    r"等于|等於|多少|几|算|结果|=|what(?:'s| is)|calculate|compute|equals?|how much|solve",
    re.IGNORECASE,
)
_FILLER = re.compile(r"[\s\W_]*")
_DIGIT = re.compile(r"\d")
_DASHED = re.compile(r"\d+(?:-\d+)+")
_SLASHED = re.compile(r"\d+(?:/\d+)+")
_SEPARATOR = re.compile(r"[-/]")


class ExpressionError(ValueError):
    """The text is not an expression this module accepts."""


@dataclass(frozen=True)
class Calculation:
    """One expression found in a message and its outcome.

    ``result`` is None exactly when the expression divides by zero.
    """

    expression: str  # normalised for display, e.g. "(3 + 4) × 6"
    result: str | None

    @property
    def divides_by_zero(self) -> bool:
        return self.result is None


def normalize(text: str) -> str:
    """Fold full-width characters and multiplication/division signs to ASCII."""
    return _THOUSANDS.sub("", unicodedata.normalize("NFKC", text).translate(_SYMBOLS))


def tokenize(expression: str) -> list[str]:
    """Split into numbers, operators and parentheses; anything else is an error."""
    tokens: list[str] = []
    position = 0
    stripped = expression.rstrip()
    while position < len(stripped):
        match = _TOKEN.match(stripped, position)
        if match is None:
            raise ExpressionError(f"unexpected character at {position}: {stripped[position]!r}")
        tokens.append(match.group(1) or match.group(2))
        position = match.end()
    return tokens


class _Parser:
    """expr := term (('+'|'-') term)* ; term := unary (('*'|'/') unary)* ;
    unary := ('+'|'-') unary | atom ; atom := NUMBER | '(' expr ')'."""

    def __init__(self, tokens: list[str]) -> None:
        self.tokens = tokens
        self.index = 0
        self.depth = 0
        self.binary_ops = 0
        self.shown: list[str] = []

    def parse(self) -> Decimal:
        if not self.tokens:
            raise ExpressionError("empty expression")
        value = self._expression()
        if self.index != len(self.tokens):
            raise ExpressionError(f"unexpected {self.tokens[self.index]!r}")
        return value

    def _peek(self) -> str | None:
        return self.tokens[self.index] if self.index < len(self.tokens) else None

    def _take(self) -> str:
        token = self._peek()
        if token is None:
            raise ExpressionError("expression ends too early")
        self.index += 1
        return token

    def _binary(self, token: str) -> None:
        self.binary_ops += 1
        self.shown.append(f" {_SHOWN[token]} ")

    def _expression(self) -> Decimal:
        value = self._term()
        while self._peek() in ("+", "-"):
            operator = self._take()
            self._binary(operator)
            right = self._term()
            value = value + right if operator == "+" else value - right
        return value

    def _term(self) -> Decimal:
        value = self._unary()
        while self._peek() in ("*", "/"):
            operator = self._take()
            self._binary(operator)
            right = self._unary()
            if operator == "*":
                value = value * right
            elif right == 0:
                raise ZeroDivisionError("division by zero")
            else:
                value = value / right
        return value

    def _unary(self) -> Decimal:
        if self._peek() in ("+", "-"):
            sign = self._take()
            self.shown.append(sign)
            self._enter()
            value = self._unary()
            self.depth -= 1
            return -value if sign == "-" else value
        return self._atom()

    def _atom(self) -> Decimal:
        token = self._take()
        if token == "(":
            self.shown.append("(")
            self._enter()
            value = self._expression()
            self.depth -= 1
            if self._take() != ")":
                raise ExpressionError("missing ')'")
            self.shown.append(")")
            return value
        if token in _BINARY or token == ")":
            raise ExpressionError(f"expected a number, got {token!r}")
        self.shown.append(token.rstrip(".") if token.endswith(".") else token)
        return Decimal(token)

    def _enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise ExpressionError("expression nested too deeply")


def format_number(value: Decimal, *, exact: bool = True) -> str:
    """Plain notation without trailing zeros; inexact values keep 10 significant digits."""
    if not value.is_finite():
        raise ExpressionError("result is not a finite number")
    if value.is_zero():
        return "0"
    if not exact:
        quantum = Decimal(1).scaleb(value.adjusted() - SIGNIFICANT_DIGITS + 1)
        value = value.quantize(quantum)
    value = value.normalize()
    if value.adjusted() > 30:  # absurdly large: plain digits would be unreadable
        return f"{value:.{SIGNIFICANT_DIGITS - 1}e}"
    text = format(value, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def calculate(expression: str) -> Calculation:
    """Evaluate one expression; raise ExpressionError if it is not a real calculation."""
    return _calculate(normalize(expression))


def _calculate(normalized: str) -> Calculation:
    if len(normalized) > MAX_EXPRESSION_CHARS:
        raise ExpressionError("expression too long")
    parser = _Parser(tokenize(normalized))
    with localcontext() as context:
        context.prec = 50
        context.clear_flags()
        try:
            value = parser.parse()
        except ZeroDivisionError:
            value = None
        except InvalidOperation as exc:
            raise ExpressionError("invalid number") from exc
        exact = not context.flags[Inexact]
        shown = "".join(parser.shown).strip()
        if parser.binary_ops == 0:
            raise ExpressionError("no operator between two numbers")
        result = None if value is None else format_number(value, exact=exact)
    return Calculation(expression=shown, result=result)


def _looks_like_date_or_phone(run: str) -> bool:
    """Digits joined by only '-' (or only '/') without spaces read as dates or phone numbers."""
    compact = run.strip()
    if not (_DASHED.fullmatch(compact) or _SLASHED.fullmatch(compact)):
        return False  # spaces, other operators or mixed separators: written as a sum
    parts = _SEPARATOR.split(compact)
    if len(parts) >= 3:  # 2024-05-01, 138-1234-5678, 5/1/2024
        return True
    leading_zero = any(len(p) > 1 and p.startswith("0") for p in parts)
    return leading_zero or any(len(p) >= 7 for p in parts)  # 2024-05, 010-12345678


def find_calculations(text: str) -> list[Calculation]:
    """Every real calculation in the message, in order (at most three).

    An expression counts when the message asks for a result (等于, 多少, =, "what is" ...)
    or when the message is nothing but the expression and punctuation.
    """
    normalized = normalize(text)
    runs = [m for m in _RUN.finditer(normalized) if _DIGIT.search(m.group(0))]
    cue = _CUE.search(normalized) is not None
    found: list[Calculation] = []
    for match in runs:
        run = match.group(0).strip().rstrip(".")
        rest = normalized[: match.start()] + normalized[match.end() :]
        if not cue and not _FILLER.fullmatch(rest):
            continue
        if _looks_like_date_or_phone(run):
            continue
        try:
            found.append(_calculate(run))  # already normalised, with the whole text
        except ExpressionError:
            continue
        if len(found) == MAX_RESULTS:
            break
    return found


def answer(text: str, *, english: bool = False) -> str | None:
    """A short reply such as "7 + 5 = 12", or None when the text holds no calculation."""
    lines = []
    for calc in find_calculations(text):
        if calc.divides_by_zero:
            lines.append(
                f"{calc.expression}: can't divide by zero."
                if english
                else f"{calc.expression} 没法算：不能除以 0。"
            )
        else:
            lines.append(f"{calc.expression} = {calc.result}")
    return "\n".join(lines) or None
