"""Toy instruction following: IFEval wording, compatible constraints, gold answers that the
real IFEval checker accepts."""

import random

from cascade_rl.rewards.ifeval import build_description
from cascade_rl.world import instructions
from tests.world.conftest import draw


def test_same_seed_same_tasks():
    assert draw(instructions.if_task, 40) == draw(instructions.if_task, 40)


def test_prompts_carry_the_registry_descriptions():
    for task in draw(instructions.if_task, 60):
        ids, kwargs = task.reference["instruction_id_list"], task.reference["kwargs"]
        assert 1 <= len(ids) <= 3 and len(set(ids)) == len(ids)
        for instruction, arguments in zip(ids, kwargs):
            assert build_description(instruction, arguments) in task.request


def test_conflicting_constraints_are_never_drawn_together():
    rng = random.Random(0)
    for _ in range(300):
        ids = set(instructions.draw_constraints(rng, 3))
        assert not any(pair <= ids for pair in instructions.CONFLICTS)


def test_every_toy_instruction_is_used():
    used = {i for t in draw(instructions.if_task, 300) for i in t.reference["instruction_id_list"]}
    assert used == set(instructions.INSTRUCTION_IDS)


def test_gold_answers_follow_every_instruction_strictly(score_gold):
    tasks = draw(instructions.if_task, 200)
    for mode in ("no_think", "think"):
        assert score_gold("ifeval", tasks, mode) == [1.0] * len(tasks)


def test_an_answer_without_the_rewrite_fails():
    tasks = [
        t
        for t in draw(instructions.if_task, 80)
        if "change_case:english_lowercase" in t.reference["instruction_id_list"]
    ]
    from tests.world.conftest import gold_rewards

    shouting = [t.__class__(**{**t.__dict__, "answer": t.answer.upper()}) for t in tasks]
    assert set(gold_rewards("ifeval", shouting, "no_think")) == {0.0}
