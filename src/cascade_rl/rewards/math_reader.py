"""The Math RL reward's exact reader of arithmetic answers (SPEC section 6, "Math RL"): the fast
path of :mod:`cascade_rl.rewards.math_fast` reads both answers with it and decides only when the
reading makes the verdict certain, so that it never decides differently from math-verify.

An answer is read twice over the same grammar: as a polynomial with rational coefficients
(:class:`Polynomial`, compared exactly: equal or different, proven) and, when that fails (``\\pi``,
roots, logarithms), as a real number to 50 digits (mpmath) with the variables at fixed algebraic
points, which proves a difference but only suggests an equality. Text outside the grammar is
"unsure" (``None``) and goes to math-verify.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import NamedTuple

import mpmath

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


class Polynomial:
    """A polynomial with rational coefficients: ``{((variable, power), ...): coefficient}``."""

    __slots__ = ("terms",)

    def __init__(self, terms: dict[tuple, Fraction]) -> None:
        self.terms = {monomial: c for monomial, c in terms.items() if c != 0}

    @classmethod
    def constant(cls, value: Fraction) -> Polynomial:
        return cls({(): value})

    def value(self) -> Fraction | None:
        """The constant this polynomial is, or None if it has variables."""
        if any(self.terms.keys() - {()}):
            return None
        return self.terms.get((), Fraction(0))

    def degree(self) -> int:
        return max((sum(power for _, power in monomial) for monomial in self.terms), default=0)

    def __add__(self, other: Polynomial) -> Polynomial:
        terms = dict(self.terms)
        for monomial, coefficient in other.terms.items():
            terms[monomial] = terms.get(monomial, 0) + coefficient
        return Polynomial(terms)

    def __neg__(self) -> Polynomial:
        return Polynomial({monomial: -c for monomial, c in self.terms.items()})

    def __sub__(self, other: Polynomial) -> Polynomial:
        return self + -other

    def __mul__(self, other: Polynomial) -> Polynomial:
        terms: dict[tuple, Fraction] = {}
        for left, a in self.terms.items():
            for right, b in other.terms.items():
                powers = dict(left)
                for variable, power in right:
                    powers[variable] = powers.get(variable, 0) + power
                monomial = tuple(sorted(powers.items()))
                terms[monomial] = terms.get(monomial, 0) + a * b
        return Polynomial(terms)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Polynomial) and self.terms == other.terms

    __hash__ = None  # type: ignore[assignment]


class _Exact:
    """Polynomials with rational coefficients: equal or different, proven. No \\pi, no roots."""

    largest_degree = 24

    def number(self, value: int) -> Polynomial:
        return Polynomial.constant(Fraction(value))

    def variable(self, name: str) -> Polynomial:
        return Polynomial({((name, 1),): Fraction(1)})

    def pi(self) -> Polynomial:
        raise _Unsure

    e = pi

    def sqrt(self, radicand: Polynomial) -> Polynomial:
        raise _Unsure

    ln = sqrt

    def divide(self, numerator: Polynomial, denominator: Polynomial) -> Polynomial:
        value = denominator.value()
        if not value:  # a variable or zero denominator
            raise _Unsure
        return numerator * Polynomial.constant(1 / value)

    def power(self, base: Polynomial, exponent: Polynomial) -> Polynomial:
        value = exponent.value()
        if value is None or value.denominator != 1 or not 0 <= value <= self.largest_degree:
            raise _Unsure
        result = Polynomial.constant(Fraction(1))
        for _ in range(int(value)):
            result = self.check(result * base)
        return result

    def check(self, value: Polynomial) -> Polynomial:
        if value.degree() > self.largest_degree or len(value.terms) > 200:
            raise _Unsure
        if any(abs(c.numerator) > 10**60 or c.denominator > 10**60 for c in value.terms.values()):
            raise _Unsure
        return value


CTX = mpmath.MPContext()
CTX.dps = 50


class _Approximate:
    """Real numbers to 50 digits (mpmath); variables take fixed algebraic values. Proves that two
    values differ; equal values are only evidence."""

    points = {name: CTX.sqrt(prime) / 7 for name, prime in zip(_VARIABLES, (2, 3, 5, 7, 11, 13, 17, 19, 23, 29))}
    largest = CTX.mpf(10) ** 30

    def number(self, value: int) -> mpmath.mpf:
        return self.check(CTX.mpf(value))

    def variable(self, name: str) -> mpmath.mpf:
        return self.points[name]

    def pi(self) -> mpmath.mpf:
        return CTX.pi

    def e(self) -> mpmath.mpf:
        return CTX.e

    def sqrt(self, radicand: mpmath.mpf) -> mpmath.mpf:
        if radicand < 0:
            raise _Unsure
        return CTX.sqrt(radicand)

    def ln(self, argument: mpmath.mpf) -> mpmath.mpf:
        if argument <= 0:
            raise _Unsure
        return CTX.ln(argument)

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


class Reading(NamedTuple):
    value: object  # Polynomial (exact) or mpmath.mpf (approximate)
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

    def read(self) -> Reading:
        if not self.tokens or len(self.tokens) > 200:
            raise _Unsure
        value = self.expression()
        if self.position != len(self.tokens):
            raise _Unsure
        return Reading(value, frozenset(self.variables), self.needs_proof)

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


def read(text: str, arithmetic: _Exact | _Approximate) -> Reading | None:
    try:
        return _Reader(text, arithmetic).read()
    except (_Unsure, ValueError, ZeroDivisionError, OverflowError, TypeError, RecursionError):
        return None


_EXACT, APPROXIMATE = _Exact(), _Approximate()
_SAME, _APART = CTX.mpf(10) ** -30, CTX.mpf(10) ** -12


def apart(a: mpmath.mpf, b: mpmath.mpf) -> bool:
    return abs(a - b) > _APART * max(1, abs(a), abs(b))


def same(a: mpmath.mpf, b: mpmath.mpf) -> bool:
    return abs(a - b) <= _SAME * max(1, abs(a), abs(b))


def read_expression(text: str) -> Reading | None:
    """The exact polynomial the text is, else its approximate value, else None."""
    return read(text, _EXACT) or read(text, APPROXIMATE)


def approximate(reading: Reading) -> Reading | None:
    """An exact polynomial reading as an approximate value at the fixed point."""
    if not isinstance(reading.value, Polynomial):
        return reading
    total = CTX.mpf(0)
    for monomial, coefficient in reading.value.terms.items():
        term = CTX.mpf(coefficient.numerator) / coefficient.denominator
        for variable, power in monomial:
            term *= _Approximate.points[variable] ** power
        total += term
    return Reading(total, reading.variables, False)
