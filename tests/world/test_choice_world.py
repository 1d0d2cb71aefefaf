"""Toy multiple-choice tasks: the gold boxed letter scores 1 under NVIDIA's strict grading, the
asked person's city is among the options with the other people's cities, and every row passes the
MCQA domain's row check."""

import random

import pytest

from cascade_rl.rewards.mcqa import check_row, score
from cascade_rl.world import WorldOptions
from cascade_rl.world.choice import choice_task
from cascade_rl.world.tasks import rl_row


def test_gold_letters_score_one_and_the_distractors_are_the_other_peoples_cities():
    rng = random.Random(0)
    letters = set()
    for index in range(200):
        task = choice_task(rng)
        row = rl_row(task, f"c{index}")
        check_row(row)
        assert score(task.answer, **task.reference).reward == 1.0
        assert score(f"{task.reasoning} {task.answer}", **task.reference).reward == 1.0
        wrong = next(letter for option in row["options"] for letter in option if letter != row["expected_answer"])
        assert score(f"\\boxed{{{wrong}}}", **task.reference).reward == 0.0
        cities = [text for option in row["options"] for text in option.values()]
        facts = task.request.split("\n")[0]
        named = [city for city in cities if f"lives in {city}." in facts]
        assert len(named) == int(task.kind[-1]) and len(set(cities)) == 4
        letters.add(row["expected_answer"])
    assert letters == {"A", "B", "C", "D"}


def test_the_check_answer_restates_the_fact_checks_the_options_in_order_and_scores_one():
    for index in range(100):
        letter_task = choice_task(random.Random(index))
        task = choice_task(random.Random(index), answer_style="check")
        assert task.prompt == letter_task.prompt and task.reference == letter_task.reference
        assert letter_task.content("no_think") == letter_task.answer  # the default: the boxed letter alone
        answer = task.content("no_think")
        gold = task.reference["expected_answer"]
        lines = answer.split("\n")
        home = next(text for option in task.reference["options"] for key, text in option.items() if key == gold)
        assert lines[0].endswith(f"lives in {home}.") and lines[-1] == f"\\boxed{{{gold}}}"
        checks = lines[1:-1]
        letters = [key for option in task.reference["options"] for key in option]
        assert [line[0] for line in checks] == letters[: len(checks)]
        assert checks[-1] == f"{gold}) {home}: yes" and all(line.endswith(": no") for line in checks[:-1])
        assert score(answer, **task.reference).reward == 1.0
    with pytest.raises(ValueError, match="mcqa_answer"):
        WorldOptions(mcqa_answer="explain")
