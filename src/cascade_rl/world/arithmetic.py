"""Toy math: arithmetic and small algebra word problems with step-by-step thinking (issue 4).

The answer is ``The answer is \\boxed{n}.`` (scored by ``rewards.math``); the thinking trace
spells out steps a tiny model can actually carry out. Two trace styles:

* ``count`` (default): add or subtract ``b`` by counting, each step naming the next number and
  how many steps have been taken::

      7 + 5: count 5 up from 7. 8 is 1, 9 is 2, 10 is 3, 11 is 4, 12 is 5. So 7 + 5 = 12.

  Every step is a successor / predecessor of the number before it (a rule on the last digit,
  not a table of facts) and a copy; the count stops when it reaches ``b``, which is written
  next to the count. Longer counts are longer traces, which is what the math stage's length
  curriculum acts on.
* ``column``: digit columns with carries and borrows (``7 + 5 = 12, so far 2, carry 1``).
  Each line needs a single-digit fact from a table of ~200; a model of a few million
  parameters fine-tuned for minutes did not learn the table (docs/toy-world.md), a larger
  one can.

Families (``kind`` = family + level): plain sums and differences, one-operation word problems,
two-step word problems and one-step linear equations. Level 1 counts 1-4 steps from a number
up to 20, level 2 2-5 steps from a two-digit number, level 3 6-9 steps from a two-digit number.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Literal

from cascade_rl.world.tasks import Task, pick, user
from cascade_rl.world.vocab import ITEMS, NAMES

Style = Literal["count", "column"]
Step = tuple[str, int, int]  # (operator, a, b)


# ---- counting traces ----------------------------------------------------------------------


def count_trace(operator: str, a: int, b: int) -> str:
    """``a + b`` or ``a - b`` by counting ``b`` steps up or down from ``a``."""
    if operator not in "+-" or b < 1 or (operator == "-" and b > a):
        raise ValueError(f"count_trace needs + or - with 1 <= b (and b <= a for -), got {a} {operator} {b}")
    direction, word = (1, "up") if operator == "+" else (-1, "down")
    steps = ", ".join(f"{a + direction * i} is {i}" for i in range(1, b + 1))
    return f"{a} {operator} {b}: count {b} {word} from {a}. {steps}. So {a} {operator} {b} = {a + direction * b}."


# ---- column traces ------------------------------------------------------------------------


def _digits(n: int) -> list[int]:
    """Digits of ``n`` from the ones column up."""
    return [int(d) for d in reversed(str(n))]


def add_trace(a: int, b: int) -> str:
    """Column addition of two non-negative integers, ones column first."""
    if a < 10 and b < 10:
        return f"{a} + {b} = {a + b}"
    top, bottom = _digits(a), _digits(b)
    width = max(len(top), len(bottom))
    top, bottom = top + [0] * (width - len(top)), bottom + [0] * (width - len(bottom))
    return _carry_trace(f"{a} + {b}", [(f"{x} + {y}", x + y) for x, y in zip(top, bottom)], a + b)


def _carry_trace(head: str, columns: list[tuple[str, int]], result: int) -> str:
    """A column trace: each column's ``(expression, value)`` plus the carry from the column
    before, the digits so far, then ``head = result``."""
    lines, carry, so_far = [head], 0, ""
    for expression, value in columns:
        total = value + carry
        expression = f"{expression} + {carry}" if carry else expression
        carry, so_far = total // 10, f"{total % 10}{so_far}"
        line = f"{expression} = {total}, so far {so_far}"
        lines.append(line + (f", carry {carry}" if carry else ""))
    if carry:
        lines.append(f"so far {carry}{so_far}")
    lines.append(f"{head} = {result}")
    return "\n".join(lines)


def sub_trace(a: int, b: int) -> str:
    """Column subtraction ``a - b`` (``a >= b``, ``a < 100``) with borrows written out."""
    if not 0 <= b <= a < 100:
        raise ValueError(f"sub_trace needs 0 <= b <= a < 100, got {a} - {b}")
    if a <= 20 and b < 10:
        return f"{a} - {b} = {a - b}"
    top, bottom = _digits(a), _digits(b)
    lines, borrow, so_far = [f"{a} - {b}"], 0, ""
    for column in range(len(top)):
        x = top[column] - borrow
        y = bottom[column] if column < len(bottom) else 0
        step = f"{top[column]} - 1 = {x}, " if borrow else ""
        if x < y:
            borrow, result = 1, x + 10 - y
            step += f"{x} - {y}: borrow, {x + 10} - {y} = {result}"
        else:
            borrow, result = 0, x - y
            step += f"{x} - {y} = {result}"
        so_far = f"{result}{so_far}"
        lines.append(f"{step}, so far {so_far}")
    lines.append(f"{a} - {b} = {a - b}")
    return "\n".join(lines)


def mul_trace(a: int, b: int) -> str:
    """``a * b`` with ``b`` a single digit, ones column of ``a`` first."""
    if not 0 <= b < 10:
        raise ValueError(f"mul_trace needs a single-digit multiplier, got {b}")
    if a < 10:
        return f"{a} * {b} = {a * b}"
    return _carry_trace(f"{a} * {b}", [(f"{x} * {b}", x * b) for x in _digits(a)], a * b)


COLUMN = {"+": add_trace, "-": sub_trace, "*": mul_trace}


def trace(steps: list[Step], style: Style) -> str:
    """The thinking trace of a chain of operations in ``style``."""
    if style == "count":
        return "\n".join(count_trace(*step) for step in steps)
    if style == "column":
        return "\n".join(COLUMN[operator](a, b) for operator, a, b in steps)
    raise ValueError(f"style must be 'count' or 'column', got {style!r}")


# ---- problems -----------------------------------------------------------------------------


def boxed(value: int) -> str:
    return f"The answer is \\boxed{{{value}}}."


def operands(rng: random.Random, level: int) -> tuple[int, int]:
    """(start, steps) of a count at ``level`` (see the module docstring)."""
    if level == 1:
        return rng.randint(1, 20), rng.randint(1, 4)
    if level == 2:
        return rng.randint(10, 90), rng.randint(2, 5)
    if level == 3:
        return rng.randint(10, 90), rng.randint(6, 9)
    raise ValueError(f"level must be 1, 2 or 3, got {level}")


def _sum_or_difference(rng: random.Random, level: int) -> tuple[str, int, int]:
    """An addition, or a subtraction whose result stays positive."""
    a, b = operands(rng, level)
    if rng.random() < 0.5:
        return "+", a, b
    return "-", a + b, b


ASK = {
    "+": ("What is {a} + {b}?", "Compute {a} + {b}.", "Add {a} and {b}."),
    "-": ("What is {a} - {b}?", "Compute {a} - {b}.", "Subtract {b} from {a}."),
    "*": ("What is {a} * {b}?", "Compute {a} * {b}.", "Multiply {a} by {b}."),
}
STORY = {
    "+": (
        "{n} has {a} {i}. {n} gets {b} more. How many {i} does {n} have now?",
        "{n} had {a} {i} and found {b} more. How many {i} in total?",
    ),
    "-": (
        "{n} has {a} {i}. {n} gives away {b}. How many {i} are left?",
        "{n} had {a} {i} and lost {b}. How many {i} remain?",
    ),
    "*": (
        "{n} buys {a} bags with {b} {i} in each. How many {i} in all?",
        "{n} fills {a} boxes with {b} {i} each. How many {i} is that?",
    ),
}


def _value(operator: str, a: int, b: int) -> int:
    return a + b if operator == "+" else a - b if operator == "-" else a * b


def arithmetic_problem(rng: random.Random, level: int, style: Style) -> tuple[str, str, list[Step]]:
    operator, a, b = _sum_or_difference(rng, level)
    if style == "column" and rng.random() < 0.3:
        operator, a, b = "*", rng.randint(2, 9 if level == 1 else 99), rng.randint(2, 9)
    return "arith", pick(rng, ASK[operator]).format(a=a, b=b), [(operator, a, b)]


def word_problem(rng: random.Random, level: int, style: Style) -> tuple[str, str, list[Step]]:
    operator, a, b = _sum_or_difference(rng, level)
    if style == "column" and rng.random() < 0.3:
        operator, a, b = "*", rng.randint(2, 9), rng.randint(2, 9)
    text = pick(rng, STORY[operator]).format(n=pick(rng, NAMES), i=pick(rng, ITEMS), a=a, b=b)
    return "word", text, [(operator, a, b)]


def two_step_problem(rng: random.Random, level: int, style: Style) -> tuple[str, str, list[Step]]:
    """Gets some more, then gives some away: an addition then a subtraction."""
    a, b = operands(rng, level)
    c = rng.randint(1, min(b + a - 1, 4 if level == 1 else 5 if level == 2 else 9))
    name, items = pick(rng, NAMES), pick(rng, ITEMS)
    text = f"{name} has {a} {items}, gets {b} more, then gives away {c}. How many {items} are left?"
    return "twostep", text, [("+", a, b), ("-", a + b, c)]


def linear_equation(rng: random.Random, level: int, style: Style) -> tuple[str, str, list[Step]]:
    """``x + b = c`` (solved as c - b) or ``x - b = c`` (solved as c + b)."""
    operator, a, b = _sum_or_difference(rng, level)
    if operator == "+":  # x - b = a  ->  x = a + b
        return "linear", f"Solve for x: x - {b} = {a}.", [("+", a, b)]
    return "linear", f"Solve for x: x + {b} = {a}.", [("-", a, b)]


FAMILIES: dict[str, Callable[[random.Random, int, Style], tuple[str, str, list[Step]]]] = {
    "arith": arithmetic_problem,
    "word": word_problem,
    "twostep": two_step_problem,
    "linear": linear_equation,
}

#: (family, level) -> weight of the default mix. After enough SFT a tiny model solves plain
#: short counts almost always; equations, two-step problems and long counts are what keeps the
#: pass rate in the band where RL has something to learn (docs/toy-world.md).
DEFAULT_MIX: dict[tuple[str, int], float] = {
    ("arith", 1): 1,
    ("arith", 2): 2,
    ("arith", 3): 2,
    ("word", 1): 1,
    ("word", 2): 2,
    ("word", 3): 2,
    ("twostep", 1): 2,
    ("twostep", 2): 2,
    ("linear", 1): 2,
    ("linear", 2): 2,
}


def math_task(rng: random.Random, mix: dict[tuple[str, int], float] | None = None, style: Style = "count") -> Task:
    """One math task drawn from ``mix`` ((family, level) -> weight) with a ``style`` trace."""
    mix = mix or DEFAULT_MIX
    keys = sorted(mix)
    family, level = rng.choices(keys, weights=[mix[k] for k in keys])[0]
    kind, request, steps = FAMILIES[family](rng, level, style)
    prefix = ""
    if kind == "linear":
        operator, a, b = steps[0]
        prefix = f"x = {a} {operator} {b}\n"
    reasoning = prefix + trace(steps, style)
    value = _value(*steps[-1])
    return Task(
        domain="math",
        kind=f"{kind}{level}",
        prompt=user(request),
        reasoning=reasoning,
        answer=boxed(value),
        source="math",
        reference={"answer": str(value)},
    )
