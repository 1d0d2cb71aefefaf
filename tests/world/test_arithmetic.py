"""Toy math: traces compute the right numbers, gold answers score 1.0 with rewards.math,
the generator is deterministic and the mix covers every family."""

import random
import re

import pytest

from cascade_rl.world import arithmetic
from tests.world.conftest import draw


def final_value(trace: str) -> int:
    return int(trace.strip().splitlines()[-1].split("=")[-1])


@pytest.mark.parametrize("a,b", [(0, 0), (9, 9), (47, 85), (999, 1), (5, 120), (99, 99)])
def test_addition_trace_ends_with_the_sum(a, b):
    assert final_value(arithmetic.add_trace(a, b)) == a + b


def test_traces_are_right_on_random_operands():
    rng = random.Random(7)
    for _ in range(500):
        a, b = rng.randint(0, 999), rng.randint(0, 999)
        assert final_value(arithmetic.add_trace(a, b)) == a + b
        x, y = sorted((rng.randint(0, 99), rng.randint(0, 99)), reverse=True)
        assert final_value(arithmetic.sub_trace(x, y)) == x - y
        m = rng.randint(0, 9)
        assert final_value(arithmetic.mul_trace(a, m)) == a * m


def test_column_addition_writes_every_carry():
    trace = arithmetic.add_trace(47, 85)
    assert trace.splitlines() == ["47 + 85", "7 + 5 = 12, so far 2, carry 1",
                                  "4 + 8 + 1 = 13, so far 32, carry 1", "so far 132", "47 + 85 = 132"]


def test_subtraction_writes_borrows():
    assert "borrow" in arithmetic.sub_trace(52, 17)
    with pytest.raises(ValueError, match="sub_trace"):
        arithmetic.sub_trace(3, 5)


def test_same_seed_same_tasks_and_other_seed_differs():
    assert draw(arithmetic.math_task, 50) == draw(arithmetic.math_task, 50)
    assert draw(arithmetic.math_task, 50) != draw(arithmetic.math_task, 50, seed=1)


def test_default_mix_draws_every_family():
    kinds = {t.kind for t in draw(arithmetic.math_task, 400)}
    assert kinds == {f"{family}{level}" for family, level in arithmetic.DEFAULT_MIX}


def test_gold_answers_score_one_and_boxed_value_matches_reference(score_gold):
    tasks = draw(arithmetic.math_task, 120)
    assert score_gold("math", tasks, "think") == [1.0] * len(tasks)
    for task in tasks:
        assert re.search(r"\\boxed\{(\d+)\}", task.answer).group(1) == task.reference["answer"]
        assert final_value(task.reasoning) == int(task.reference["answer"])
