"""The Math RL reward (SPEC section 6, "Math RL"): 1 if the last ``\\boxed{}`` of the answer equals
the ground truth, else 0; language mixing anywhere in the response -> -1.

Order of the checks in :func:`score`:

1. language mixing anywhere in the response (reasoning or answer; the prompt sets the allowed
   script, see :mod:`cascade_rl.rewards.language`) -> ``language_penalty`` (paper: -1);
2. unfinished thinking (``<think>`` never closed) -> 0;
3. no box in the answer after ``</think>`` -> 0 (a box only inside the reasoning does not count);
4. the last box of the answer is compared with ``answer``: 1 if equivalent, else 0.

Equivalence is decided by a fast path when it is *certain* (:func:`fast_verdict`: identical after
harmless LaTeX normalisation; plain numbers compared exactly, respecting math-verify's 6-decimal
tolerance; polynomials compared exactly; constants and sets / intervals of constants proven
different, or equal when math-verify would prove them equal too) and otherwise by
``math_verify.parse`` + ``math_verify.verify``, whose verdicts are memoised. math-verify's own
timeout uses SIGALRM (main thread only), so it is disabled and math-verify runs instead in a
persistent worker process with a hard deadline (:class:`cascade_rl.rewards.timeout.WorkerPool`):
an answer that makes sympy hang (for example ``9^{9^{9^{9}}}``) scores 0 with
``details["timeout"] = True`` after ``timeout`` seconds, from any thread, and the worker is
replaced. ``benchmarks/bench_math.py`` measures both the speed-up and the agreement with
math-verify.

**Why one file of about 820 lines** (DESIGN.md: files over ~500 lines say why): one module
per reward domain (the registry's ``cascade_rl.rewards.math:score``). Most of it is the fast
path's exact reader of arithmetic answers, which must never decide differently from
math-verify; it is kept beside the extraction and the order of checks it serves so the whole
verdict reads top to bottom (sections: extraction, fast path, arithmetic, math-verify, the
reward).
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Mapping, Sequence
from fractions import Fraction
from functools import lru_cache
from typing import NamedTuple

import mpmath

from cascade_rl.chat import split_thinking
from cascade_rl.rewards.base import Score
from cascade_rl.rewards.language import detect_mixing
from cascade_rl.rewards.timeout import CallTimeout, WorkerDied, WorkerPool

__all__ = [
    "Equivalence",
    "equivalent",
    "extract_boxed",
    "fast_verdict",
    "math_verify_equal",
    "normalize_answer",
    "score",
    "strip_math_delimiters",
    "verifier_pool",
]

# ----------------------------------------------------------------------------- extraction
_BOX_COMMAND = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])")
_BRACE_TOKEN = re.compile(r"\\.|[{}]", re.DOTALL)
_SPACE_FORM_TOKEN = re.compile(r"[^\s$]+")


def extract_boxed(text: str) -> str | None:
    """The content of the LAST ``\\boxed{...}`` / ``\\fbox{...}`` in ``text`` (nested braces
    balanced, escaped ``\\{ \\}`` ignored), or of the space form ``\\boxed 5`` (up to the next
    space or ``$``, without a trailing ``.,;``). None when there is no box, or when the last one
    is malformed (its brace never closes, nothing follows it): a cut-off final box is no answer.
    """
    if not isinstance(text, str):
        raise TypeError(f"extract_boxed: text must be a str, got {type(text).__name__}")
    last = None
    for last in _BOX_COMMAND.finditer(text):  # noqa: B007 - keep the last match
        pass
    if last is None:
        return None
    start = last.end()
    while start < len(text) and text[start] in " \t":
        start += 1
    if text.startswith("{", start):
        return _braced_content(text, start)
    token = _SPACE_FORM_TOKEN.match(text, start)
    content = token.group().rstrip(".,;") if token else ""
    return content or None


def _braced_content(text: str, open_brace: int) -> str | None:
    depth = 0
    for token in _BRACE_TOKEN.finditer(text, open_brace):
        if token.group() == "{":
            depth += 1
        elif token.group() == "}":
            depth -= 1
            if depth == 0:
                return text[open_brace + 1 : token.start()]
    return None


# ----------------------------------------------------------------------------- fast path
_MATH_DELIMITERS = (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"))
_SPACING_MACROS = re.compile(r"\\[!,;:]|\\left(?![A-Za-z])|\\right(?![A-Za-z])")
_DISPLAY_FRACTION = re.compile(r"\\[dt]frac(?![A-Za-z])")
_LOOSE_SPACE = re.compile(r"(?<![A-Za-z0-9])\s+|\s+(?![A-Za-z0-9])")
_BRACED_SINGLE_EXPONENT = re.compile(r"\^\{([A-Za-z0-9])\}(?![A-Za-z0-9])")
_PLAIN_NUMBERS = (
    re.compile(r"(?P<num>[+-]?\d+)"),
    re.compile(r"(?P<num>[+-]?(?:\d+\.\d+|\.\d+))"),
    re.compile(r"(?P<num>[+-]?\d+)/(?P<den>\d+)"),
    re.compile(r"(?P<sign>[+-]?)\\frac\{(?P<num>[+-]?\d+)\}\{(?P<den>[+-]?\d+)\}"),
    re.compile(r"(?P<sign>[+-]?)\\frac ?(?P<num>\d)(?P<den>\d)"),
)
#: two numbers with a decimal among them that differ by more than this are surely different
#: for math-verify, which rounds floats to 6 decimals (relative part: float precision)
_DECIMAL_MARGIN, _RELATIVE_MARGIN = 1e-5, 1e-9


def strip_math_delimiters(text: str) -> str:
    """``text`` without surrounding whitespace and ``$ $``, ``$$ $$``, ``\\( \\)``, ``\\[ \\]``."""
    text = text.strip()
    stripped = True
    while stripped:
        stripped = False
        for opener, closer in _MATH_DELIMITERS:
            if len(text) > len(opener) + len(closer) and text.startswith(opener) and text.endswith(closer):
                text, stripped = text[len(opener) : -len(closer)].strip(), True
                break
    return text


def normalize_answer(text: str) -> str:
    """A form in which two answers that are written the same way compare equal: no math
    delimiters, ``\\dfrac``/``\\tfrac`` -> ``\\frac``, no ``\\left``/``\\right``/spacing macros,
    no whitespace except between two letters or digits (``\\sin x`` and ``1 000`` keep theirs),
    ``x^{2}`` -> ``x^2`` (unless a letter or digit follows)."""
    text = strip_math_delimiters(text)
    text = _DISPLAY_FRACTION.sub(r"\\frac", text)
    text = _SPACING_MACROS.sub("", text)
    text = _LOOSE_SPACE.sub("", text)
    text = _BRACED_SINGLE_EXPONENT.sub(r"^\1", text)
    return re.sub(r"\s+", " ", text)


class _PlainNumber(NamedTuple):
    value: Fraction
    decimal: bool


def _plain_number(text: str) -> _PlainNumber | None:
    """An integer, decimal or simple fraction written plainly, as an exact value; else None."""
    if len(text) > 1000:
        return None
    for pattern in _PLAIN_NUMBERS:
        match = pattern.fullmatch(text)
        if match is None:
            continue
        parts = match.groupdict()
        denominator = int(parts.get("den") or 1)
        if denominator == 0:
            return None
        value = Fraction(parts["num"]) / denominator
        return _PlainNumber(-value if parts.get("sign") == "-" else value, "." in text)
    return None


def fast_verdict(prediction: str, reference: str) -> tuple[bool, str] | None:
    """``(equal, method)`` when the verdict is certain without sympy, else None (ask math-verify).

    Every rule below was checked against math-verify (tests, and the benchmark's 10,000 pairs):

    * identical after :func:`normalize_answer` -> ``(True, "exact")``, also after math-verify's
      own rewrites (a trailing degree sign dropped; ``x=3`` against a non-equation read as 3);
    * two plain numbers (integers, decimals, ``a/b``, ``\\frac{a}{b}``) -> ``(equal, "numeric")``
      with exact arithmetic; when a decimal is involved and the values are within math-verify's
      6-decimal rounding of each other (``1/3`` vs ``0.333333``) the verdict is left to it;
    * two expressions of the small grammar below (no decimals): polynomials with rational
      coefficients are compared exactly (equal or not, proven); other values are computed to 50
      digits -> ``(False, "numeric")`` when they clearly differ (variables take one fixed value,
      which proves a difference, never an equality), ``(True, "numeric")`` for equal constants
      without nested roots or logarithms (whose identities math-verify must prove itself);
    * two sets ``\\{...\\}`` or two intervals (ends may be infinite) of such constants ->
      ``(False, "numeric")`` when they clearly differ; sets of plain numbers also equal.
    """
    predicted, expected = normalize_answer(prediction), normalize_answer(reference)
    if predicted and predicted == expected:
        return True, "exact"
    predicted, expected = _as_math_verify_reads(predicted, expected)
    if predicted and predicted == expected:
        return True, "exact"
    a, b = _plain_number(predicted), _plain_number(expected)
    if a is not None and b is not None:
        return _compare_plain_numbers(a, b)
    if "." in predicted or "." in expected:
        return None  # decimals are floats to math-verify, with its own rounding rules
    for read, compare in _SHAPES:
        left, right = read(predicted), read(expected)
        if left is not None and right is not None:
            return compare(left, right)
        if left is not None or right is not None:
            return None  # different shapes: math-verify has rules for those
    return None


_DEGREES = re.compile(r"(?<=[\d}])\^(?:\\circ|\{\\circ\})$")
_ASSIGNMENT = re.compile(r"([a-df-hj-z])=([^=<>,]+)")


def _as_math_verify_reads(predicted: str, expected: str) -> tuple[str, str]:
    """Two of math-verify's own equivalences, applied as it applies them: a trailing degree sign
    is dropped (``30^\\circ`` is 30), and an assignment ``x=3`` compared with a non-equation is
    compared by its right-hand side."""
    predicted, expected = _DEGREES.sub("", predicted), _DEGREES.sub("", expected)
    if "=" not in expected:
        predicted = _assigned_value(predicted)
    elif "=" not in predicted:
        expected = _assigned_value(expected)
    return predicted, expected


def _assigned_value(text: str) -> str:
    match = _ASSIGNMENT.fullmatch(text)
    if match is None or match.group(1) in match.group(2):
        return text  # not a plain assignment (x=x+1 would not stay an equation)
    return match.group(2)


def _compare_plain_numbers(a: _PlainNumber, b: _PlainNumber) -> tuple[bool, str] | None:
    if a.value == b.value:
        return True, "numeric"
    if not (a.decimal or b.decimal):
        return False, "numeric"
    margin = max(_DECIMAL_MARGIN, _RELATIVE_MARGIN * float(max(abs(a.value), abs(b.value))))
    if abs(a.value - b.value) > margin:
        return False, "numeric"
    return None


# ----------------------------------------------------------------------------- fast path: arithmetic
# A deliberately small LaTeX arithmetic grammar that math-verify (latex2sympy + its normaliser)
# reads the same way: integers, + -, explicit multiplication (\cdot \times *), implicit
# multiplication only before a letter, \pi, \sqrt or \ln, ^ with a braced or one-character
# exponent, \frac, \sqrt (no index), \pi, e (Euler's number, as latex2sympy reads it), \ln of a
# group or number that ends at + - or a closing bracket (\ln 2x is ln(2x) there), parentheses and
# braces, and the single-letter variables below. Everything else is "unsure" and goes to
# math-verify: decimals, /, other functions, i, subscripts, spaces between numbers, 2(3) and
# 2\frac12 (mixed numbers to latex2sympy), x(2) (a call), x2, x^23, and letters that its
# normaliser strips as units (3m, 2t, 5c, 2ab, 3yr).
_VARIABLES = "aknpquvxyz"
_TOKENS = re.compile(r"\\[A-Za-z]+|\d+|[A-Za-z]|[-+*^(){}]| |.")
_COMMANDS_TAKING_SPACE = ("\\pi", "\\cdot", "\\times", "\\sqrt", "\\frac", "\\ln")
_IMPLICIT_FACTORS = ("\\pi", "\\sqrt", "\\ln", "e")  # may follow a factor as an implicit product
_FUNCTION_ENDS = ("", "+", "-", ")", "}")  # what may follow \ln's argument
_AMBIGUOUS_FACTORS = ("(", "{", "\\frac")  # after a factor: mixed number or function call


class _Unsure(Exception):
    """The text is outside the grammar the fast path reads with certainty."""


class _Polynomial:
    """A polynomial with rational coefficients: ``{((variable, power), ...): coefficient}``."""

    __slots__ = ("terms",)

    def __init__(self, terms: dict[tuple, Fraction]) -> None:
        self.terms = {monomial: c for monomial, c in terms.items() if c != 0}

    @classmethod
    def constant(cls, value: Fraction) -> _Polynomial:
        return cls({(): value})

    def value(self) -> Fraction | None:
        """The constant this polynomial is, or None if it has variables."""
        if any(self.terms.keys() - {()}):
            return None
        return self.terms.get((), Fraction(0))

    def degree(self) -> int:
        return max((sum(power for _, power in monomial) for monomial in self.terms), default=0)

    def __add__(self, other: _Polynomial) -> _Polynomial:
        terms = dict(self.terms)
        for monomial, coefficient in other.terms.items():
            terms[monomial] = terms.get(monomial, 0) + coefficient
        return _Polynomial(terms)

    def __neg__(self) -> _Polynomial:
        return _Polynomial({monomial: -c for monomial, c in self.terms.items()})

    def __sub__(self, other: _Polynomial) -> _Polynomial:
        return self + -other

    def __mul__(self, other: _Polynomial) -> _Polynomial:
        terms: dict[tuple, Fraction] = {}
        for left, a in self.terms.items():
            for right, b in other.terms.items():
                powers = dict(left)
                for variable, power in right:
                    powers[variable] = powers.get(variable, 0) + power
                monomial = tuple(sorted(powers.items()))
                terms[monomial] = terms.get(monomial, 0) + a * b
        return _Polynomial(terms)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Polynomial) and self.terms == other.terms

    __hash__ = None  # type: ignore[assignment]


class _Exact:
    """Polynomials with rational coefficients: equal or different, proven. No \\pi, no roots."""

    largest_degree = 24

    def number(self, value: int) -> _Polynomial:
        return _Polynomial.constant(Fraction(value))

    def variable(self, name: str) -> _Polynomial:
        return _Polynomial({((name, 1),): Fraction(1)})

    def pi(self) -> _Polynomial:
        raise _Unsure

    e = pi

    def sqrt(self, radicand: _Polynomial) -> _Polynomial:
        raise _Unsure

    ln = sqrt

    def divide(self, numerator: _Polynomial, denominator: _Polynomial) -> _Polynomial:
        value = denominator.value()
        if not value:  # a variable or zero denominator
            raise _Unsure
        return numerator * _Polynomial.constant(1 / value)

    def power(self, base: _Polynomial, exponent: _Polynomial) -> _Polynomial:
        value = exponent.value()
        if value is None or value.denominator != 1 or not 0 <= value <= self.largest_degree:
            raise _Unsure
        result = _Polynomial.constant(Fraction(1))
        for _ in range(int(value)):
            result = self.check(result * base)
        return result

    def check(self, value: _Polynomial) -> _Polynomial:
        if value.degree() > self.largest_degree or len(value.terms) > 200:
            raise _Unsure
        if any(abs(c.numerator) > 10**60 or c.denominator > 10**60 for c in value.terms.values()):
            raise _Unsure
        return value


_CTX = mpmath.MPContext()
_CTX.dps = 50


class _Approximate:
    """Real numbers to 50 digits (mpmath); variables take fixed algebraic values. Proves that two
    values differ; equal values are only evidence."""

    points = {name: _CTX.sqrt(prime) / 7 for name, prime in zip(_VARIABLES, (2, 3, 5, 7, 11, 13, 17, 19, 23, 29))}
    largest = _CTX.mpf(10) ** 30

    def number(self, value: int) -> mpmath.mpf:
        return self.check(_CTX.mpf(value))

    def variable(self, name: str) -> mpmath.mpf:
        return self.points[name]

    def pi(self) -> mpmath.mpf:
        return _CTX.pi

    def e(self) -> mpmath.mpf:
        return _CTX.e

    def sqrt(self, radicand: mpmath.mpf) -> mpmath.mpf:
        if radicand < 0:
            raise _Unsure
        return _CTX.sqrt(radicand)

    def ln(self, argument: mpmath.mpf) -> mpmath.mpf:
        if argument <= 0:
            raise _Unsure
        return _CTX.ln(argument)

    def divide(self, numerator: mpmath.mpf, denominator: mpmath.mpf) -> mpmath.mpf:
        if denominator == 0:
            raise _Unsure
        return self.check(numerator / denominator)

    def power(self, base: mpmath.mpf, exponent: mpmath.mpf) -> mpmath.mpf:
        if base < 0 and exponent != int(exponent) or base == 0 and exponent <= 0:
            raise _Unsure
        return self.check(base**exponent)

    def check(self, value: mpmath.mpf) -> mpmath.mpf:
        if not abs(value) < self.largest:
            raise _Unsure
        return value


class _Reading(NamedTuple):
    value: object  # _Polynomial (exact) or mpmath.mpf (approximate)
    variables: frozenset[str]
    needs_proof: bool


class _Reader:
    """Recursive-descent reading of one expression of the grammar above, in ``arithmetic``."""

    def __init__(self, text: str, arithmetic: _Exact | _Approximate) -> None:
        self.tokens = _TOKENS.findall(text)
        self.arithmetic = arithmetic
        self.position = 0
        self.variables: set[str] = set()
        self.root_depth = 0
        self.needs_proof = False

    def read(self) -> _Reading:
        if not self.tokens or len(self.tokens) > 200:
            raise _Unsure
        value = self.expression()
        if self.position != len(self.tokens):
            raise _Unsure
        return _Reading(value, frozenset(self.variables), self.needs_proof)

    def peek(self) -> str:
        return self.tokens[self.position] if self.position < len(self.tokens) else ""

    def take(self) -> str:
        token = self.peek()
        if not token:
            raise _Unsure
        self.position += 1
        if self.peek() == " ":
            if token not in _COMMANDS_TAKING_SPACE:
                raise _Unsure  # "2 3", "x y": readings differ between parsers
            self.position += 1
        return token

    def expression(self):
        value = self.term()
        while self.peek() in ("+", "-"):
            sign = self.take()
            value = self.arithmetic.check(value + self.term() if sign == "+" else value - self.term())
        return value

    def term(self):
        value = self.signed()
        while True:
            token = self.peek()
            if token in ("\\cdot", "\\times", "*"):
                self.take()
                value = self.arithmetic.check(value * self.signed())
            elif token in _IMPLICIT_FACTORS or token and token in _VARIABLES:
                value = self.arithmetic.check(value * self.power())
            elif token in _AMBIGUOUS_FACTORS or token.isdigit():
                raise _Unsure
            else:
                return value

    def signed(self):
        if self.peek() in ("+", "-"):
            return self.signed() if self.take() == "+" else -self.signed()
        return self.power()

    def power(self):
        base = self.atom()
        if self.peek() != "^":
            return base
        self.take()
        exponent = self.argument()
        if self.peek() == "^":
            raise _Unsure  # a^b^c
        return self.arithmetic.power(base, exponent)

    def atom(self):
        token = self.take()
        if token.isdigit():
            return self.arithmetic.number(int(token))
        if token and token in _VARIABLES:
            self.variables.add(token)
            return self.arithmetic.variable(token)
        if token == "\\pi":
            return self.arithmetic.pi()
        if token == "e":
            return self.arithmetic.e()
        if token in ("(", "{"):
            value = self.expression()
            if self.take() != (")" if token == "(" else "}"):
                raise _Unsure
            return value
        if token == "\\sqrt":
            self.needs_proof |= self.root_depth > 0
            self.root_depth += 1
            radicand = self.argument()
            self.root_depth -= 1
            return self.arithmetic.sqrt(radicand)
        if token == "\\frac":
            return self.arithmetic.divide(self.argument(), self.argument())
        if token == "\\ln":
            return self.logarithm()
        raise _Unsure

    def logarithm(self):
        """``\\ln`` of a group or a number, which must end there (at + - or a bracket)."""
        self.needs_proof = True  # log identities are left to math-verify's simplify
        token = self.peek()
        if token in ("(", "{"):
            argument = self.atom()
        elif token.isdigit() or token and token in _VARIABLES:
            argument = self.atom()
        else:
            raise _Unsure
        if self.peek() not in _FUNCTION_ENDS:
            raise _Unsure  # \ln 2x, \ln 3 \cdot 2, \ln(3)^2 read differently
        return self.arithmetic.ln(argument)

    def argument(self):
        """A macro argument: ``{...}``, or one digit / letter / ``\\pi`` (``\\frac12``, ``x^2``)."""
        token = self.peek()
        if token == "{" or token == "\\pi" or token and token in _VARIABLES:
            return self.atom()
        if token.isdigit() and len(token) == 1:
            return self.atom()
        raise _Unsure  # \frac123, x^23, x^-1, \sqrt[3]{x}


def _read(text: str, arithmetic: _Exact | _Approximate) -> _Reading | None:
    try:
        return _Reader(text, arithmetic).read()
    except (_Unsure, ValueError, ZeroDivisionError, OverflowError, TypeError, RecursionError):
        return None


_EXACT, _APPROXIMATE = _Exact(), _Approximate()
_SAME, _APART = _CTX.mpf(10) ** -30, _CTX.mpf(10) ** -12


def _apart(a: mpmath.mpf, b: mpmath.mpf) -> bool:
    return abs(a - b) > _APART * max(1, abs(a), abs(b))


def _same(a: mpmath.mpf, b: mpmath.mpf) -> bool:
    return abs(a - b) <= _SAME * max(1, abs(a), abs(b))


def _read_expression(text: str) -> _Reading | None:
    """The exact polynomial the text is, else its approximate value, else None."""
    return _read(text, _EXACT) or _read(text, _APPROXIMATE)


def _compare_expressions(a: _Reading, b: _Reading) -> tuple[bool, str] | None:
    if isinstance(a.value, _Polynomial) and isinstance(b.value, _Polynomial):
        if a.value != b.value:
            return False, "numeric"
        # a lone variable goes through math-verify's symbol rules, which compare names only
        lone = any(
            len(r.variables) == 1 and r.value.degree() == 1 and len(r.value.terms) == 1 and 1 in r.value.terms.values()
            for r in (a, b)
        )
        return None if lone else (True, "numeric")
    if isinstance(a.value, _Polynomial) or isinstance(b.value, _Polynomial):
        a, b = _approximate(a), _approximate(b)  # type: ignore[assignment]
        if a is None or b is None:
            return None
    if _apart(a.value, b.value):
        return False, "numeric"
    constant = not (a.variables or b.variables)
    if constant and _same(a.value, b.value) and not (a.needs_proof or b.needs_proof):
        return True, "numeric"
    return None


def _approximate(reading: _Reading) -> _Reading | None:
    """An exact polynomial reading as an approximate value at the fixed point."""
    if not isinstance(reading.value, _Polynomial):
        return reading
    total = _CTX.mpf(0)
    for monomial, coefficient in reading.value.terms.items():
        term = _CTX.mpf(coefficient.numerator) / coefficient.denominator
        for variable, power in monomial:
            term *= _Approximate.points[variable] ** power
        total += term
    return _Reading(total, reading.variables, False)


def _split_top_level(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for index, char in enumerate(text):
        if char in "({[":
            depth += 1
        elif char in ")}]":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:index])
            start = index + 1
    return parts + [text[start:]]


def _constants(parts: list[str]) -> list[mpmath.mpf] | None:
    readings = [_read(part, _APPROXIMATE) for part in parts]
    if any(reading is None or reading.variables for reading in readings):
        return None
    return [reading.value for reading in readings]  # type: ignore[union-attr]


class _FiniteSet(NamedTuple):
    values: list[mpmath.mpf]
    plain: frozenset[Fraction] | None  # exact values when every element is a plain number


def _read_set(text: str) -> _FiniteSet | None:
    if not (text.startswith("\\{") and text.endswith("\\}")) or len(text) < 5:
        return None
    parts = _split_top_level(text[2:-2])
    values = _constants(parts)
    if values is None:
        return None
    plain = [_plain_number(part) for part in parts]
    exact = None if any(p is None for p in plain) else frozenset(p.value for p in plain)  # type: ignore[union-attr]
    return _FiniteSet(values, exact)


def _compare_sets(a: _FiniteSet, b: _FiniteSet) -> tuple[bool, str] | None:
    if a.plain is not None and b.plain is not None:
        return a.plain == b.plain, "numeric"

    def has_stranger(one: list, other: list) -> bool:
        return any(all(_apart(x, y) for y in other) for x in one)

    return (False, "numeric") if has_stranger(a.values, b.values) or has_stranger(b.values, a.values) else None


_INTERVAL = re.compile(r"([\[(])(.+)([\])])")
_INFINITE_ENDS = {"-\\infty": -_CTX.inf, "\\infty": _CTX.inf, "+\\infty": _CTX.inf}


class _Interval(NamedTuple):
    left: str  # "(" or "[", "(" at an infinite end (sympy makes those open)
    start: mpmath.mpf
    end: mpmath.mpf
    right: str


def _read_interval(text: str) -> _Interval | None:
    match = _INTERVAL.fullmatch(text)
    parts = _split_top_level(match.group(2)) if match else []
    if len(parts) != 2:
        return None
    infinite = [_INFINITE_ENDS.get(part) for part in parts]
    finite = _constants([part for part, end in zip(parts, infinite) if end is None])
    if finite is None:
        return None
    start, end = (value if value is not None else finite.pop(0) for value in infinite)
    if not (start < end and (_CTX.isinf(start) or _CTX.isinf(end) or _apart(start, end))):
        return None  # sympy would turn it into a point or the empty set
    left = "(" if _CTX.isinf(start) else match.group(1)  # type: ignore[union-attr]
    right = ")" if _CTX.isinf(end) else match.group(3)  # type: ignore[union-attr]
    return _Interval(left, start, end, right)


def _compare_intervals(a: _Interval, b: _Interval) -> tuple[bool, str] | None:
    if a.left != b.left or a.right != b.right or _ends_apart(a.start, b.start) or _ends_apart(a.end, b.end):
        return False, "numeric"
    return None


def _ends_apart(a: mpmath.mpf, b: mpmath.mpf) -> bool:
    if _CTX.isinf(a) or _CTX.isinf(b):
        return a != b
    return _apart(a, b)


_SHAPES = ((_read_set, _compare_sets), (_read_interval, _compare_intervals), (_read_expression, _compare_expressions))


# ----------------------------------------------------------------------------- math-verify
def math_verify_equal(prediction: str, reference: str) -> bool:
    """math-verify's verdict (``verify(parse(gold), parse(prediction))``, both given as a box),
    in-process and without math-verify's SIGALRM timeout: call it under a deadline (a worker)."""
    from math_verify import parse, verify

    logging.getLogger("math_verify").setLevel(logging.ERROR)  # its "timeout disabled" warning
    gold = parse(f"\\boxed{{{strip_math_delimiters(reference)}}}", parsing_timeout=None)
    predicted = parse(f"\\boxed{{{strip_math_delimiters(prediction)}}}", parsing_timeout=None)
    return bool(verify(gold, predicted, timeout_seconds=None))


_WARM_UP_PAIRS = (
    ("\\frac{1}{2}", "\\{x + 1, 2\\}"),
    ("x = 3", "3"),
    ("\\ln 6", "\\ln 2 + \\ln 3"),
    ("e^{2}", "\\sqrt{e^4}"),
    ("(-\\infty, 3]", "[-\\infty, 3]"),
    ("50\\%", "0.5"),
    ("30^\\circ", "\\frac{\\pi}{6}"),
    ("(x+1)^2", "x^2 + 2x + 1"),
)


def warm_up() -> None:
    """Build math-verify's parsers and sympy's lazily loaded machinery once (run by each new
    worker, outside any deadline), so that first calls are not slower than later ones."""
    for prediction, reference in _WARM_UP_PAIRS:
        math_verify_equal(prediction, reference)


_POOL_LOCK = threading.Lock()
_VERIFIER_POOL: WorkerPool | None = None
#: address-space cap of a math-verify worker: sympy building a giant integer fails fast instead
#: of eating the machine's memory
WORKER_MEMORY_MB = 4096


def verifier_pool() -> WorkerPool:
    """The shared pool of math-verify workers (started on first use, up to 4 processes)."""
    global _VERIFIER_POOL
    with _POOL_LOCK:
        if _VERIFIER_POOL is None:
            _VERIFIER_POOL = WorkerPool(
                min(4, os.cpu_count() or 1), preload=(f"{__name__}:warm_up",), memory_limit_mb=WORKER_MEMORY_MB
            )
        return _VERIFIER_POOL


class Equivalence(NamedTuple):
    equal: bool
    method: str  # "exact" | "numeric" | "math_verify"
    timed_out: bool = False
    error: str | None = None


def equivalent(prediction: str, reference: str, *, timeout: float = 5.0) -> Equivalence:
    """Whether ``prediction`` equals ``reference``: the fast path when certain, else math-verify
    in a worker process under a hard ``timeout`` (a timeout or a crashed worker: not equal).

    math-verify verdicts are memoised per (prediction, reference, timeout): the G rollouts of a
    GRPO group often box the same answer, and a pathological one then costs one timeout, not G.
    """
    verdict = fast_verdict(prediction, reference)
    if verdict is not None:
        return Equivalence(*verdict)
    memoised = len(prediction) + len(reference) <= _MEMO_MAX_CHARS
    try:
        return (_memoised_math_verify if memoised else _math_verify)(prediction, reference, timeout)
    except WorkerDied as error:  # not memoised: the next call gets a fresh worker
        return Equivalence(False, "math_verify", error=str(error))


def _math_verify(prediction: str, reference: str, timeout: float) -> Equivalence:
    try:
        equal = verifier_pool().call(math_verify_equal, prediction, reference, timeout=timeout)
    except CallTimeout:
        return Equivalence(False, "math_verify", timed_out=True)
    return Equivalence(bool(equal), "math_verify")


_MEMO_MAX_CHARS = 2000  # keeps the memo small: 16384 entries of at most this many characters
_memoised_math_verify = lru_cache(maxsize=16384)(_math_verify)


# ----------------------------------------------------------------------------- the reward
def _reference_answer(answer: object) -> str:
    """The ground truth as a string: ``"42"``, ``42``, ``"$x^2$"``, ``"\\boxed{5}"`` all work."""
    if isinstance(answer, bool) or not isinstance(answer, (str, int, float)):
        raise TypeError(f"math score: 'answer' must be a string or a number, got {type(answer).__name__}")
    text = str(answer).strip()
    boxed = extract_boxed(text) if "\\boxed" in text or "\\fbox" in text else None
    text = strip_math_delimiters(boxed if boxed is not None else text)
    if not text:
        raise ValueError("math score: 'answer' is empty")
    return text


def score(
    response: str,
    *,
    answer: str | int | float,
    prompt: str | Sequence[Mapping] | None = None,
    language_penalty: float = -1.0,
    timeout: float = 5.0,
    mixing_min_letters: int = 1,
) -> Score:
    """The Math RL reward of one response (see the module docstring for the rules).

    ``answer``: the ground truth. ``prompt``: text or chat messages; sets the script the response
    may use. ``language_penalty``: reward for a language-mixed response (paper: -1).
    ``timeout``: hard deadline in seconds for the math-verify check. ``mixing_min_letters``: how
    many foreign-script letters flag mixing (paper: 1). Details: ``extracted``, ``method``,
    ``reason``, ``timeout``, ``language_mixing`` (+ ``mixing_scripts`` and ``prompt_script``).
    """
    if not isinstance(response, str):
        raise TypeError(f"math score: response must be a str, got {type(response).__name__}")
    if not timeout > 0:
        raise ValueError(f"math score: timeout must be > 0 seconds, got {timeout!r}")
    reference = _reference_answer(answer)
    mixing = detect_mixing(response, prompt, min_letters=mixing_min_letters)
    reasoning, final, finished = split_thinking(response)
    extracted = extract_boxed(final) if finished else None
    details: dict = {"extracted": extracted, "language_mixing": mixing.mixed, "timeout": False}
    if mixing.mixed:
        details.update(reason="language_mixing", mixing_scripts=mixing.scripts, prompt_script=mixing.prompt_script)
        return Score(float(language_penalty), details)
    if not finished:
        return Score(0.0, {**details, "reason": "unfinished"})
    if extracted is None:
        in_reasoning = extract_boxed(reasoning) is not None
        return Score(0.0, {**details, "reason": "box_only_in_reasoning" if in_reasoning else "no_box"})
    if not extracted.strip():
        return Score(0.0, {**details, "reason": "empty_box"})
    result = equivalent(extracted, reference, timeout=timeout)
    details.update(
        method=result.method,
        timeout=result.timed_out,
        reason="timeout" if result.timed_out else ("correct" if result.equal else "wrong"),
    )
    if result.error:
        details["error"] = result.error
    return Score(1.0 if result.equal else 0.0, details)
