"""The Math RL reward's fast path (SPEC section 6, "Math RL"): a verdict on two answers without
sympy, given only when it is *certain* to be math-verify's (:func:`fast_verdict`); otherwise
``None`` and :mod:`cascade_rl.rewards.math` asks math-verify in a worker process.

Answers are first normalised (:func:`normalize_answer`: math delimiters, ``\\dfrac``, spacing
macros, loose white space), then compared as plain numbers (exact fractions, with math-verify's
6-decimal tolerance when a decimal is involved), as expressions of the small grammar of
:mod:`cascade_rl.rewards.math_reader`, or as finite sets and intervals of constants.
``benchmarks/bench_math.py`` measures the speed-up and the agreement with math-verify.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import NamedTuple

import mpmath

from cascade_rl.rewards.math_reader import (
    APPROXIMATE,
    CTX,
    Polynomial,
    Reading,
    apart,
    approximate,
    read,
    read_expression,
    same,
)

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
    for read_shape, compare in _SHAPES:
        left, right = read_shape(predicted), read_shape(expected)
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


def _compare_expressions(a: Reading, b: Reading) -> tuple[bool, str] | None:
    if isinstance(a.value, Polynomial) and isinstance(b.value, Polynomial):
        if a.value != b.value:
            return False, "numeric"
        # a lone variable goes through math-verify's symbol rules, which compare names only
        lone = any(
            len(r.variables) == 1 and r.value.degree() == 1 and len(r.value.terms) == 1 and 1 in r.value.terms.values()
            for r in (a, b)
        )
        return None if lone else (True, "numeric")
    if isinstance(a.value, Polynomial) or isinstance(b.value, Polynomial):
        a, b = approximate(a), approximate(b)  # type: ignore[assignment]
        if a is None or b is None:
            return None
    if apart(a.value, b.value):
        return False, "numeric"
    constant = not (a.variables or b.variables)
    if constant and same(a.value, b.value) and not (a.needs_proof or b.needs_proof):
        return True, "numeric"
    return None


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
    readings = [read(part, APPROXIMATE) for part in parts]
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
        return any(all(apart(x, y) for y in other) for x in one)

    return (False, "numeric") if has_stranger(a.values, b.values) or has_stranger(b.values, a.values) else None


_INTERVAL = re.compile(r"([\[(])(.+)([\])])")
_INFINITE_ENDS = {"-\\infty": -CTX.inf, "\\infty": CTX.inf, "+\\infty": CTX.inf}


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
    if not (start < end and (CTX.isinf(start) or CTX.isinf(end) or apart(start, end))):
        return None  # sympy would turn it into a point or the empty set
    left = "(" if CTX.isinf(start) else match.group(1)  # type: ignore[union-attr]
    right = ")" if CTX.isinf(end) else match.group(3)  # type: ignore[union-attr]
    return _Interval(left, start, end, right)


def _compare_intervals(a: _Interval, b: _Interval) -> tuple[bool, str] | None:
    if a.left != b.left or a.right != b.right or _ends_apart(a.start, b.start) or _ends_apart(a.end, b.end):
        return False, "numeric"
    return None


def _ends_apart(a: mpmath.mpf, b: mpmath.mpf) -> bool:
    if CTX.isinf(a) or CTX.isinf(b):
        return a != b
    return apart(a, b)


_SHAPES = ((_read_set, _compare_sets), (_read_interval, _compare_intervals), (read_expression, _compare_expressions))
