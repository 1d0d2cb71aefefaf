"""Toy code: small stdin/stdout programs with tests (issue 4; SPEC section 6 "Code RL").

Each family reads one line (two integers, one integer, a list of integers or a word),
computes one thing and prints it; a constant ``k`` varies per task so that the model has to
read the statement, not only recognise it. The gold answer is a fenced python block (scored by
``rewards.code`` against ``tests = {"inputs", "outputs"}``); the thinking trace states the plan
in one line. Expected outputs are produced by running the gold program itself on the inputs,
so statement, program and tests cannot drift apart.

Statements are short and end with an example (``Example: 3 4 -> 7``, as real problem
statements show one): at most eight fixed words come before a number, so two tasks of a family
rarely share a 9-gram and toy test prompts stay disjoint from training prompts (see
:mod:`.decontam`; ``tests/world`` checks the word counts).
"""

from __future__ import annotations

import io
import random
from contextlib import redirect_stdout
from dataclasses import dataclass

from cascade_rl.world.tasks import Task, pick, user

READERS = {
    "two": "a, b = map(int, input().split())",
    "one": "n = int(input())",
    "list": "xs = list(map(int, input().split()))",
    "word": "s = input().strip()",
}
WORDS = (
    "apple",
    "banana",
    "river",
    "planet",
    "garden",
    "summer",
    "rocket",
    "pencil",
    "window",
    "dragon",
    "silver",
    "forest",
    "castle",
    "butter",
    "marble",
    "yellow",
    "tunnel",
    "meadow",
    "orange",
    "lemon",
    "candle",
    "bridge",
    "pocket",
    "ladder",
    "basket",
    "button",
    "carpet",
    "dinner",
    "engine",
    "finger",
    "guitar",
    "hammer",
    "island",
    "jacket",
    "kitten",
    "letter",
    "mirror",
    "needle",
    "oyster",
    "parrot",
    "rabbit",
    "saddle",
    "ticket",
    "violin",
    "wallet",
)


@dataclass(frozen=True)
class Family:
    """A program family: statement and plan (``str.format`` over ``k``), the computing line,
    the input kind and the range of ``k``."""

    name: str
    reads: str
    statement: str
    plan: str
    line: str
    k_range: tuple[int, int] | None = None


FAMILIES: tuple[Family, ...] = (
    Family("two_sum", "two", "Read two integers. Print their sum.", "Print a + b.", "print(a + b)"),
    Family("two_diff", "two", "Read a and b. Print a - b.", "Print a - b.", "print(a - b)"),
    Family("two_prod", "two", "Read two integers. Print their product.", "Print a * b.", "print(a * b)"),
    Family("two_max", "two", "Read two integers. Print the larger one.", "Print max(a, b).", "print(max(a, b))"),
    Family("two_min", "two", "Read two integers. Print the smaller one.", "Print min(a, b).", "print(min(a, b))"),
    Family(
        "two_sum_k",
        "two",
        "Read two integers. Print their sum plus {k}.",
        "Print a + b + {k}.",
        "print(a + b + {k})",
        (2, 30),
    ),
    Family(
        "two_prod_k",
        "two",
        "Read two integers. Print their product minus {k}.",
        "Print a * b - {k}.",
        "print(a * b - {k})",
        (2, 30),
    ),
    Family("one_times", "one", "Read an integer n. Print n times {k}.", "Print n * {k}.", "print(n * {k})", (2, 12)),
    Family("one_plus", "one", "Read an integer n. Print n plus {k}.", "Print n + {k}.", "print(n + {k})", (2, 50)),
    Family("one_mod", "one", "Read an integer n. Print n modulo {k}.", "Print n % {k}.", "print(n % {k})", (2, 12)),
    Family("one_square", "one", "Read an integer n. Print its square.", "Print n * n.", "print(n * n)"),
    Family(
        "one_triangle", "one", "Read n. Print 1 + 2 + ... + n.", "Print n * (n + 1) // 2.", "print(n * (n + 1) // 2)"
    ),
    Family(
        "one_parity",
        "one",
        "Read an integer. Print even or odd.",
        "Check n % 2.",
        'print("even" if n % 2 == 0 else "odd")',
    ),
    Family("list_sum", "list", "Read integers. Print their sum.", "Print sum(xs).", "print(sum(xs))"),
    Family("list_max", "list", "Read integers. Print the largest.", "Print max(xs).", "print(max(xs))"),
    Family("list_min", "list", "Read integers. Print the smallest.", "Print min(xs).", "print(min(xs))"),
    Family(
        "list_even",
        "list",
        "Read integers. Count the even ones.",
        "Count x with x % 2 == 0.",
        "print(sum(1 for x in xs if x % 2 == 0))",
    ),
    Family(
        "list_count_gt",
        "list",
        "Read integers. Count those above {k}.",
        "Count x with x > {k}.",
        "print(sum(1 for x in xs if x > {k}))",
        (5, 40),
    ),
    Family(
        "list_sum_gt",
        "list",
        "Read integers. Sum those above {k}.",
        "Sum x with x > {k}.",
        "print(sum(x for x in xs if x > {k}))",
        (5, 40),
    ),
    Family("list_sorted", "list", "Read integers. Print them sorted.", "Print sorted(xs).", "print(*sorted(xs))"),
    Family("list_reversed", "list", "Read integers. Print them reversed.", "Print xs reversed.", "print(*xs[::-1])"),
    Family(
        "list_spread",
        "list",
        "Read integers. Print largest minus smallest.",
        "Print max(xs) - min(xs).",
        "print(max(xs) - min(xs))",
    ),
    Family("word_reverse", "word", "Read a word. Print it backwards.", "Print s[::-1].", "print(s[::-1])"),
    Family("word_upper", "word", "Read a word. Print it in uppercase.", "Print s.upper().", "print(s.upper())"),
    Family("word_length", "word", "Read a word. Print its length.", "Print len(s).", "print(len(s))"),
    Family(
        "word_repeat", "word", "Read a word. Print it {k} times joined.", "Print s * {k}.", "print(s * {k})", (2, 5)
    ),
    Family(
        "word_prefix", "word", "Read a word. Print its first {k} letters.", "Print s[:{k}].", "print(s[:{k}])", (1, 4)
    ),
)
FAMILIES_BY_NAME = {family.name: family for family in FAMILIES}


def program(family: Family, k: int | None) -> str:
    return READERS[family.reads] + "\n" + family.line.format(k=k) + "\n"


def random_input(rng: random.Random, reads: str) -> str:
    if reads == "two":
        return f"{rng.randint(0, 99)} {rng.randint(0, 99)}\n"
    if reads == "one":
        return f"{rng.randint(0, 60)}\n"
    if reads == "list":
        return " ".join(str(rng.randint(0, 50)) for _ in range(rng.randint(3, 7))) + "\n"
    return pick(rng, WORDS) + "\n"


def run_program(source: str, stdin: str) -> str:
    """Run a trusted gold program in-process on ``stdin`` and return its stdout."""
    lines = iter(stdin.splitlines())
    output = io.StringIO()
    with redirect_stdout(output):
        exec(compile(source, "<gold>", "exec"), {"__builtins__": __builtins__, "input": lambda: next(lines)})
    return output.getvalue()


def distinct_tests(rng: random.Random, family: Family, source: str, num_tests: int) -> tuple[list[str], list[str]]:
    """``num_tests`` different inputs whose outputs are not all the same (so that a program
    printing a constant cannot pass), and their outputs."""
    for _ in range(50):
        inputs: list[str] = []
        while len(inputs) < num_tests:
            stdin = random_input(rng, family.reads)
            if stdin not in inputs:
                inputs.append(stdin)
        outputs = [run_program(source, stdin) for stdin in inputs]
        if len(set(outputs)) > 1:
            return inputs, outputs
    raise RuntimeError(f"family {family.name!r} keeps producing identical outputs")


#: Families with a constant are drawn twice as often: they make the model read the statement
#: (the others are solved from the first words once learned).
WEIGHTS = tuple(2.0 if family.k_range else 1.0 for family in FAMILIES)


def code_task(rng: random.Random, families: tuple[Family, ...] = FAMILIES, *, num_tests: int = 4) -> Task:
    """A code task (domain ``code``) with ``num_tests`` stdin/stdout tests."""
    weights = WEIGHTS if families is FAMILIES else None
    family = rng.choices(families, weights=weights)[0]
    k = rng.randint(*family.k_range) if family.k_range else None
    source = program(family, k)
    inputs, outputs = distinct_tests(rng, family, source, num_tests)
    example = random_input(rng, family.reads)
    statement = f"{family.statement.format(k=k)} Example: {example.strip()} -> {run_program(source, example).strip()}"
    plan = family.plan.format(k=k)
    return Task(
        domain="code",
        kind=family.name,
        prompt=user(statement),
        reasoning=plan,
        answer=f"```python\n{source}```",
        source="code",
        reference={"tests": {"inputs": inputs, "outputs": outputs, "fn_name": None}},
    )
