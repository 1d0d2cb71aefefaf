"""Toy math: traces compute the right numbers in both styles, gold answers score 1.0 with
rewards.math, the generator is deterministic and the mix covers every family."""

import random
import re

import pytest

from cascade_rl.world import arithmetic
from tests.world.conftest import draw


def final_value(trace: str) -> int:
    return int(trace.strip().splitlines()[-1].split("=")[-1].strip(" ."))


def test_counting_trace_names_every_step():
    assert (
        arithmetic.count_trace("+", 7, 5)
        == "7 + 5: count 5 up from 7. 8 is 1, 9 is 2, 10 is 3, 11 is 4, 12 is 5. So 7 + 5 = 12."
    )
    assert (
        arithmetic.count_trace("-", 31, 3) == "31 - 3: count 3 down from 31. 30 is 1, 29 is 2, 28 is 3. So 31 - 3 = 28."
    )
    with pytest.raises(ValueError, match="count_trace"):
        arithmetic.count_trace("-", 2, 5)


def test_column_addition_writes_every_carry():
    assert arithmetic.add_trace(47, 85).splitlines() == [
        "47 + 85",
        "7 + 5 = 12, so far 2, carry 1",
        "4 + 8 + 1 = 13, so far 32, carry 1",
        "so far 132",
        "47 + 85 = 132",
    ]
    assert "borrow" in arithmetic.sub_trace(52, 17)


def test_traces_are_right_on_random_operands():
    rng = random.Random(7)
    for _ in range(500):
        a, b, m = rng.randint(0, 999), rng.randint(0, 999), rng.randint(0, 9)
        assert final_value(arithmetic.add_trace(a, b)) == a + b
        assert final_value(arithmetic.mul_trace(a, m)) == a * m
        x, y = sorted((rng.randint(0, 99), rng.randint(0, 99)), reverse=True)
        assert final_value(arithmetic.sub_trace(x, y)) == x - y
        assert final_value(arithmetic.count_trace("+", a, m + 1)) == a + m + 1


@pytest.mark.parametrize("style", ["count", "column"])
def test_same_seed_same_tasks_and_other_seed_differs(style):
    def generate(rng):
        return arithmetic.math_task(rng, style=style)

    assert draw(generate, 50) == draw(generate, 50)
    assert draw(generate, 50) != draw(generate, 50, seed=1)


def test_default_mix_draws_every_family():
    kinds = {t.kind for t in draw(arithmetic.math_task, 400)}
    assert kinds == {f"{family}{level}" for family, level in arithmetic.DEFAULT_MIX}


def test_harder_levels_have_longer_traces():
    tasks = draw(arithmetic.math_task, 400)
    mean = {
        level: sum(len(t.reasoning) for t in tasks if t.kind == f"arith{level}")
        / max(1, sum(t.kind == f"arith{level}" for t in tasks))
        for level in (1, 2, 3)
    }
    assert mean[1] < mean[2] < mean[3]


@pytest.mark.parametrize("style", ["count", "column"])
def test_gold_answers_score_one_and_match_the_trace(score_gold, style):
    tasks = draw(lambda rng: arithmetic.math_task(rng, style=style), 120)
    assert score_gold("math", tasks, "think") == [1.0] * len(tasks)
    for task in tasks:
        assert re.search(r"\\boxed\{(\d+)\}", task.answer).group(1) == task.reference["answer"]
        assert final_value(task.reasoning) == int(task.reference["answer"])
