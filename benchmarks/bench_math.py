"""Benchmark the Math RL reward (SPEC section 6): ``cascade_rl.rewards.math.score`` against calling
math-verify directly (``verify(parse(gold), parse(prediction))`` in-process, the baseline).

    .venv/bin/python benchmarks/bench_math.py [--pairs 10000] [--baseline-sample 10000] [--seed 0]

Generates ``--pairs`` (response, answer) pairs deterministically, shaped like a GRPO batch: groups
of G = 8 rollouts per prompt (SPEC section 5). Ground truths mix integers, decimals, fractions,
expressions (surds, multiples of pi, polynomials, intervals, sets, powers) and answers with
equations, e, logarithms, degrees, infinite intervals or percentages; each prompt has its
own solve rate; rollouts are correct in the same or another form, wrong (from the prompt's few
likely mistakes), unfinished, without a box, boxed only in the reasoning, or language-mixed; most
with ``<think>`` reasoning. Both sides apply the same gating (language mixing, unfinished
thinking, last box of the answer) and the same warm-up; they differ only in how equivalence is
decided (``score``: certain fast path, else memoised math-verify in a worker process). The
baseline runs on the first ``--baseline-sample`` pairs (all by default) and its throughput is
extrapolated when that is fewer. Prints both throughputs, the speed ratio (target >= 10x) and
the number of verdict disagreements (target 0; the first 20 are printed). Exits 1 if there is
any disagreement.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter
from collections.abc import Callable
from typing import NamedTuple

from cascade_rl.chat import split_thinking
from cascade_rl.rewards.language import is_mixed
from cascade_rl.rewards.math import extract_boxed, score, verifier_pool, warm_up
from cascade_rl.rewards.math_fast import strip_math_delimiters

TARGET_RATIO = 10.0


class Pair(NamedTuple):
    response: str
    answer: str
    kind: str


# ----------------------------------------------------------------------------- ground truths
def _integer(rng: random.Random) -> tuple[str, list[str], list[str]]:
    """(gold, equivalent other forms, wrong answers)"""
    value = rng.choice([rng.randint(0, 999), rng.randint(1000, 10**6), -rng.randint(1, 99)])
    return str(value), [f"{value}.0", f"\\frac{{{2 * value}}}{{2}}"], [str(value + d) for d in (-1, 1, 2, 10)]


def _decimal(rng: random.Random) -> tuple[str, list[str], list[str]]:
    numerator, denominator = rng.randint(1, 999), rng.choice([2, 4, 5, 8, 10, 20, 25, 100])
    text = f"{numerator / denominator:g}"
    return (
        text,
        [f"\\frac{{{numerator}}}{{{denominator}}}", f"{numerator}/{denominator}"],
        [f"{numerator / denominator + delta:g}" for delta in (0.1, 1, -0.5)],
    )


def _fraction(rng: random.Random) -> tuple[str, list[str], list[str]]:
    numerator, denominator = rng.randint(1, 60), rng.randint(2, 61)
    sign = rng.choice(["", "", "-"])
    gold = rng.choice([f"{sign}\\frac{{{numerator}}}{{{denominator}}}", f"{sign}{numerator}/{denominator}"])
    others = [
        f"{sign}\\dfrac{{{numerator}}}{{{denominator}}}",
        f"{sign}\\frac{{{3 * numerator}}}{{{3 * denominator}}}",
        f"\\frac{{{sign}{numerator}}}{{{denominator}}}",
    ]
    return (
        gold,
        others,
        [f"{sign}\\frac{{{numerator + 1}}}{{{denominator}}}", f"{sign}\\frac{{{denominator}}}{{{numerator}}}"],
    )


def _expression(rng: random.Random) -> tuple[str, list[str], list[str]]:
    a, b, c = rng.randint(2, 9), rng.choice([2, 3, 5, 6, 7]), rng.randint(1, 9)
    options = [
        (f"{a}\\sqrt{{{b}}}", [f"\\sqrt{{{a * a * b}}}", f"{a} \\sqrt{{{b}}}"], [f"{a + 1}\\sqrt{{{b}}}"]),
        (f"{a}\\pi", [f"{a} \\pi", f"\\pi \\cdot {a}"], [f"{a + 1}\\pi"]),
        (
            f"\\frac{{\\sqrt{{{b}}}}}{{{a}}}",
            [f"\\dfrac{{\\sqrt{{{b}}}}}{{{a}}}", f"\\frac{{1}}{{{a}}}\\sqrt{{{b}}}"],
            [f"\\frac{{\\sqrt{{{b}}}}}{{{a + 1}}}"],
        ),
        (f"x^2 + {c}", [f"x^{{2}}+{c}", f"{c} + x^2"], [f"x^2 - {c}"]),
        (f"[{c}, {c + a})", [f"[{c},{c + a})", f"\\left[{c}, {c + a}\\right)"], [f"({c}, {c + a})"]),
        (f"\\{{{c}, {c + a}\\}}", [f"\\{{{c + a}, {c}\\}}"], [f"\\{{{c}, {c + b}\\}}"]),
        (f"2^{{{a + 5}}}", [str(2 ** (a + 5))], [f"2^{{{a + 6}}}"]),
    ]
    return rng.choice(options)


def _beyond_fast_path(rng: random.Random) -> tuple[str, list[str], list[str]]:
    """Answers outside the fast path's grammar: equations, e, logarithms, degrees, infinity,
    percentages (math-verify decides these)."""
    a, c = rng.randint(2, 9), rng.randint(1, 20)
    options = [
        (str(c), [f"x = {c}"], [f"x = {c + 1}"]),
        (f"e^{{{a}}}", [f"e^{a}", f"\\exp({a})"], [f"e^{{{a + 1}}}"]),
        (f"\\ln {a}", [f"\\ln({a})", f"\\log_e {a}"], [f"\\ln {a + 1}"]),
        (f"{10 * a}^\\circ", [f"{10 * a}", f"{10 * a}^{{\\circ}}"], [f"{10 * a + 10}^\\circ"]),
        (f"(-\\infty, {c}]", [f"(-\\infty,{c}]", f"\\left(-\\infty, {c}\\right]"], [f"(-\\infty, {c})"]),
        (f"{c}\\%", [f"{c}"], [f"{c + 5}\\%"]),
    ]
    return rng.choice(options)


_GOLD_MAKERS: list[tuple[Callable, float]] = [
    (_integer, 0.45),
    (_decimal, 0.08),
    (_fraction, 0.17),
    (_expression, 0.22),
    (_beyond_fast_path, 0.08),
]

# ----------------------------------------------------------------------------- responses
_PROSE = [
    "Let us compute the quantity step by step.",
    "We substitute $x = 2$ into the equation.",
    "By the AM-GM inequality, $a + b \\ge 2\\sqrt{ab}$.",
    "So the sum telescopes nicely.",
    "Checking small cases: 1, 2, 3 all work.",
    "Hence $f(n) = n^2 + 1$ for every $n$.",
    "Wait, let me double-check the arithmetic.",
    "The discriminant is $b^2 - 4ac$.",
    "Using the formula $\\binom{n}{k}$ we count the subsets.",
]
_FOREIGN = ["所以答案是", "Итак, ответ", "따라서 답은", "したがって"]


def _reasoning(rng: random.Random) -> str:
    return " ".join(rng.choice(_PROSE) for _ in range(rng.randint(3, 30)))


def _response(rng: random.Random, boxed: str, kind: str) -> str:
    thinking = rng.random() < 0.7
    reasoning = _reasoning(rng)
    final = f"The answer is $\\boxed{{{boxed}}}$."
    if kind == "mixed":
        reasoning += " " + rng.choice(_FOREIGN)
    if kind == "unfinished":
        return f"<think>{reasoning} so \\boxed{{{boxed}}}"
    if kind == "box_in_reasoning":
        return f"<think>{reasoning} \\boxed{{{boxed}}}</think>The answer is {boxed}."
    if kind == "no_box":
        return f"<think>{reasoning}</think>The answer is {boxed}." if thinking else f"{reasoning} So {boxed}."
    return f"<think>{reasoning}</think>{final}" if thinking else f"{reasoning}\n\n{final}"


ROLLOUTS_PER_PROMPT = 8  # GRPO group size G of Math RL (SPEC section 5)
_GATED_KINDS = [("unfinished", 0.05), ("no_box", 0.03), ("box_in_reasoning", 0.02), ("mixed", 0.08)]


def _rollout_kind(rng: random.Random, solve_rate: float) -> str:
    """What one rollout does: gated (unfinished, no box, ...) or correct / wrong by the prompt's
    solve rate; a correct answer is written in another form one time in five."""
    roll = rng.random()
    for kind, share in _GATED_KINDS:
        if roll < share:
            return kind
        roll -= share
    if rng.random() < solve_rate:
        return "correct_other_form" if rng.random() < 0.2 else "correct_same"
    return "wrong"


def make_pairs(count: int, seed: int) -> list[Pair]:
    """``count`` rollouts as GRPO produces them: groups of G rollouts of one prompt, each prompt
    with its own solve rate; a group's wrong answers come from the prompt's few likely mistakes."""
    rng = random.Random(seed)
    makers, maker_weights = zip(*_GOLD_MAKERS)
    pairs: list[Pair] = []
    while len(pairs) < count:
        gold, others, wrong = rng.choices(makers, maker_weights)[0](rng)
        if rng.random() < 0.05:
            gold = f"${gold}$"  # ground truths sometimes come with math delimiters
        solve_rate = rng.random()
        for _ in range(min(ROLLOUTS_PER_PROMPT, count - len(pairs))):
            kind = _rollout_kind(rng, solve_rate)
            boxed = {"correct_other_form": rng.choice(others), "wrong": rng.choice(wrong)}.get(
                kind, strip_math_delimiters(gold)
            )
            pairs.append(Pair(_response(rng, boxed, kind), gold, kind))
    return pairs


# ----------------------------------------------------------------------------- the two scorers
def baseline_reward(pair: Pair) -> float:
    """The same gating as ``score``, then math-verify called directly (its defaults, in-process)."""
    from math_verify import parse, verify

    if is_mixed(pair.response):
        return -1.0
    _, final, finished = split_thinking(pair.response)
    extracted = extract_boxed(final) if finished else None
    if not extracted or not extracted.strip():
        return 0.0
    gold = parse(f"\\boxed{{{strip_math_delimiters(pair.answer)}}}")
    predicted = parse(f"\\boxed{{{strip_math_delimiters(extracted)}}}")
    return 1.0 if verify(gold, predicted) else 0.0


def _timed(function: Callable[[Pair], float], pairs: list[Pair]) -> tuple[list[float], float]:
    start = time.perf_counter()
    rewards = [function(pair) for pair in pairs]
    return rewards, time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=10_000)
    parser.add_argument(
        "--baseline-sample",
        type=int,
        default=10_000,
        help="score only this many pairs with the baseline and extrapolate",
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    pairs = make_pairs(args.pairs, args.seed)
    sample = pairs[: max(1, min(args.baseline_sample, len(pairs)))]
    start = time.perf_counter()
    verifier_pool().prestart()  # start the workers (once per process)
    print(f"worker start-up (once per process, not timed below): {time.perf_counter() - start:.2f} s")
    warm_up()  # the same warm-up in this process as in each worker, for fairness

    details: list[dict] = []

    def cascade(pair: Pair) -> float:
        result = score(pair.response, answer=pair.answer)
        details.append(result.details)
        return result.reward

    ours, our_seconds = _timed(cascade, pairs)
    theirs, their_seconds = _timed(baseline_reward, sample)
    their_rate, our_rate = len(sample) / their_seconds, len(pairs) / our_seconds

    methods = Counter(d.get("method", "gated") for d in details)
    worker_calls = len(
        {(d["extracted"], pair.answer) for d, pair in zip(details, pairs) if d.get("method") == "math_verify"}
    )
    print(f"pairs: {len(pairs)} (seed {args.seed}); kinds: {dict(Counter(p.kind for p in pairs))}")
    print(
        f"cascade score: how decided: {dict(methods)}; math-verify worker calls: {worker_calls} "
        f"(the rest memoised); timeouts: {sum(d['timeout'] for d in details)}"
    )
    print(f"cascade score   : {our_rate:10.0f} pairs/s  ({our_seconds:.2f} s for {len(pairs)})")
    extrapolated = (
        ""
        if len(sample) == len(pairs)
        else (f", extrapolated from a sample of {len(sample)}: {len(pairs) / their_rate:.1f} s for {len(pairs)}")
    )
    print(f"math-verify     : {their_rate:10.0f} pairs/s  ({their_seconds:.2f} s for {len(sample)}{extrapolated})")
    ratio = our_rate / their_rate
    print(
        f"speed ratio     : {ratio:.1f}x (target >= {TARGET_RATIO:g}x: {'met' if ratio >= TARGET_RATIO else 'MISSED'})"
    )
    disagreements = [(pair, mine, base) for pair, mine, base in zip(sample, ours, theirs) if mine != base]
    print(f"disagreements   : {len(disagreements)} of {len(sample)} (target 0)")
    for pair, mine, base in disagreements[:20]:
        print(
            f"  answer={pair.answer!r} extracted={extract_boxed(split_thinking(pair.response).answer)!r}"
            f" cascade={mine} math-verify={base}"
        )
    return 1 if disagreements else 0


if __name__ == "__main__":
    sys.exit(main())
