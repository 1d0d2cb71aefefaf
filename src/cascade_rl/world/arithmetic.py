"""Toy math: arithmetic and small algebra word problems with step-by-step thinking (issue 4).

The answer is ``The answer is \\boxed{n}.`` (scored by ``rewards.math``); the thinking trace
spells out every step a tiny model can actually carry out, one digit column at a time:

    47 + 85
    7 + 5 = 12, so far 2, carry 1
    4 + 8 + 1 = 13, so far 32, carry 1
    so far 132
    47 + 85 = 132

Each line needs one single-digit fact (from a table of ~200) and a copy of the previous
"so far" with one digit put in front: local steps instead of the carry look-ahead that a plain
``a+b=c`` answer demands (which a sub-million-parameter model learned to 11% only, issue 4).

Families (``kind``) and their difficulty ``level`` (1 easy .. 3 hard) let the world mix easy
and hard problems so that a freshly fine-tuned tiny model lands in the learnable band.
"""

from __future__ import annotations

import random
from typing import Callable

from cascade_rl.world.tasks import Task, pick, user
from cascade_rl.world.vocab import ITEMS, NAMES


def _digits(n: int) -> list[int]:
    """Digits of ``n`` from the ones column up."""
    return [int(d) for d in reversed(str(n))]


def add_trace(a: int, b: int) -> str:
    """Column addition of two non-negative integers, ones column first."""
    if a < 10 and b < 10:
        return f"{a} + {b} = {a + b}"
    top, bottom = _digits(a), _digits(b)
    lines, carry, so_far = [f"{a} + {b}"], 0, ""
    for column in range(max(len(top), len(bottom))):
        x = top[column] if column < len(top) else 0
        y = bottom[column] if column < len(bottom) else 0
        total = x + y + carry
        expression = f"{x} + {y} + {carry}" if carry else f"{x} + {y}"
        carry, so_far = total // 10, f"{total % 10}{so_far}"
        line = f"{expression} = {total}, so far {so_far}"
        lines.append(line + (f", carry {carry}" if carry else ""))
    if carry:
        lines.append(f"so far {carry}{so_far}")
    lines.append(f"{a} + {b} = {a + b}")
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
    lines, carry, so_far = [f"{a} * {b}"], 0, ""
    for x in _digits(a):
        total = x * b + carry
        expression = f"{x} * {b} + {carry}" if carry else f"{x} * {b}"
        carry, so_far = total // 10, f"{total % 10}{so_far}"
        line = f"{expression} = {total}, so far {so_far}"
        lines.append(line + (f", carry {carry}" if carry else ""))
    if carry:
        lines.append(f"so far {carry}{so_far}")
    lines.append(f"{a} * {b} = {a * b}")
    return "\n".join(lines)


def boxed(value: int) -> str:
    return f"The answer is \\boxed{{{value}}}."


def _task(kind: str, level: int, request: str, reasoning: str, value: int) -> Task:
    return Task(domain="math", kind=f"{kind}{level}", prompt=user(request), reasoning=reasoning,
                answer=boxed(value), source="math", reference={"answer": str(value)})


def _number(rng: random.Random, level: int) -> int:
    """A random operand: level 1 one digit, level 2 two digits, level 3 three digits."""
    low, high = {1: (1, 9), 2: (10, 99), 3: (100, 999)}[level]
    return rng.randint(low, high)


def addition(rng: random.Random, level: int) -> Task:
    a = _number(rng, level)
    b = _number(rng, max(1, level - rng.randint(0, 1)))
    a, b = (a, b) if rng.random() < 0.5 else (b, a)
    request = pick(rng, ("What is {a} + {b}?", "Compute {a} + {b}.", "Add {a} and {b}."))
    return _task("add", level, request.format(a=a, b=b), add_trace(a, b), a + b)


def subtraction(rng: random.Random, level: int) -> Task:
    if level == 1:
        a, b = rng.randint(2, 20), rng.randint(1, 9)
    else:
        a, b = rng.randint(20, 99), rng.randint(2, 98)
    a, b = max(a, b), min(a, b)
    request = pick(rng, ("What is {a} - {b}?", "Compute {a} - {b}.", "Subtract {b} from {a}."))
    return _task("sub", level, request.format(a=a, b=b), sub_trace(a, b), a - b)


def multiplication(rng: random.Random, level: int) -> Task:
    a, b = _number(rng, level), rng.randint(2, 9)
    request = pick(rng, ("What is {a} * {b}?", "Compute {a} * {b}.", "Multiply {a} by {b}."))
    return _task("mul", level, request.format(a=a, b=b), mul_trace(a, b), a * b)


def word_problem(rng: random.Random, level: int) -> Task:
    """One-operation story: gets more (add), gives away (subtract), bags of (multiply)."""
    name, items = pick(rng, NAMES), pick(rng, ITEMS)
    operation = pick(rng, ("add", "sub", "mul"))
    if operation == "add":
        a, b = _number(rng, level), _number(rng, max(1, level - 1))
        text = pick(rng, ("{n} has {a} {i}. {n} gets {b} more. How many {i} does {n} have now?",
                          "{n} had {a} {i} and found {b} more. How many {i} in total?"))
        trace, value = add_trace(a, b), a + b
    elif operation == "sub":
        a = rng.randint(10, 20) if level == 1 else rng.randint(21, 99)
        b = rng.randint(1, 9) if level == 1 else rng.randint(2, a - 1)
        text = pick(rng, ("{n} has {a} {i}. {n} gives away {b}. How many {i} are left?",
                          "{n} had {a} {i} and lost {b}. How many {i} remain?"))
        trace, value = sub_trace(a, b), a - b
    else:
        a, b = rng.randint(2, 9) if level == 1 else _number(rng, 2), rng.randint(2, 9)
        text = pick(rng, ("{n} buys {a} bags with {b} {i} in each. How many {i} in all?",
                          "{n} fills {a} boxes with {b} {i} each. How many {i} is that?"))
        trace, value = mul_trace(a, b), a * b
    request = text.format(n=name, i=items, a=a, b=b)
    return _task("word", level, request, trace, value)


def two_step_problem(rng: random.Random, level: int) -> Task:
    """Gets some more, then gives some away: an addition then a subtraction."""
    name, items = pick(rng, NAMES), pick(rng, ITEMS)
    a, b = (rng.randint(10, 90) if level > 1 else _number(rng, 1)), _number(rng, 1)
    c = rng.randint(2, a + b - 1) if level > 1 else rng.randint(1, min(9, a + b - 1))
    request = (f"{name} has {a} {items}, gets {b} more, then gives away {c}. "
               f"How many {items} are left?")
    reasoning = add_trace(a, b) + "\n" + sub_trace(a + b, c)
    return _task("twostep", level, request, reasoning, a + b - c)


def linear_equation(rng: random.Random, level: int) -> Task:
    """``x + a = b``, ``x - a = b`` or ``k * x = b``, solved by one inverse operation."""
    form = pick(rng, ("plus", "minus", "times"))
    if form == "plus":
        x, a = _number(rng, level if level < 3 else 2), _number(rng, 1 if level == 1 else 2)
        b = x + a
        if b >= 100:
            return linear_equation(rng, level)
        reasoning = f"x = {b} - {a}\n" + sub_trace(b, a)
        request = f"Solve for x: x + {a} = {b}."
    elif form == "minus":
        x, a = _number(rng, level if level < 3 else 2), _number(rng, 1)
        b = x - a
        if b < 1:
            return linear_equation(rng, level)
        reasoning = f"x = {b} + {a}\n" + add_trace(b, a)
        request = f"Solve for x: x - {a} = {b}."
    else:
        k, x = rng.randint(2, 9), rng.randint(2, 9)
        b = k * x
        reasoning = f"x = {b} / {k}\n{k} * {x} = {b}, so {b} / {k} = {x}"
        request = f"Solve for x: {k}x = {b}."
    return _task("linear", level, request, reasoning, x)


FAMILIES: dict[str, Callable[[random.Random, int], Task]] = {
    "add": addition, "sub": subtraction, "mul": multiplication, "word": word_problem,
    "twostep": two_step_problem, "linear": linear_equation,
}

#: (family, level) -> weight of the default mix: mostly single-digit facts inside words and
#: equations (a tiny model learns these in its SFT budget), plus two-digit column work as the
#: harder tier that RL can still move.
DEFAULT_MIX: dict[tuple[str, int], float] = {
    ("add", 1): 3, ("sub", 1): 2, ("mul", 1): 2, ("word", 1): 3, ("linear", 1): 2,
    ("twostep", 1): 1, ("add", 2): 2, ("word", 2): 1, ("linear", 2): 1,
}


def math_task(rng: random.Random, mix: dict[tuple[str, int], float] | None = None) -> Task:
    """One math task drawn from ``mix`` ((family, level) -> weight)."""
    mix = mix or DEFAULT_MIX
    keys = sorted(mix)
    family, level = rng.choices(keys, weights=[mix[k] for k in keys])[0]
    return FAMILIES[family](rng, level)
