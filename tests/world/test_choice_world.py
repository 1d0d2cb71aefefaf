"""Toy multiple-choice tasks: the gold boxed letter scores 1 under NVIDIA's strict grading, the
asked person's city is among the options with the other people's cities, and every row passes the
MCQA domain's row check."""

import random

from cascade_rl.rewards.mcqa import check_row, score
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
