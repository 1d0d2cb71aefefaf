"""Near-miss SFT answers: plausible, and really losing the verifier's reward."""

from __future__ import annotations

import json
import random

import pytest

from cascade_rl.world import WorldOptions, WorldSizes, build_world
from cascade_rl.world.arithmetic import math_task
from cascade_rl.world.general import FILLERS, chat_task
from cascade_rl.world.instructions import if_task
from cascade_rl.world.near_miss import near_miss
from cascade_rl.world.programs import code_task
from cascade_rl.world.tools import tool_task
from tests.world.conftest import draw, gold_rewards


@pytest.mark.parametrize("domain, generator", [("math", math_task), ("code", code_task)])
def test_math_and_code_near_misses_score_zero_where_gold_scores_one(domain, generator):
    tasks = draw(generator, 24)
    rng = random.Random(1)
    misses = [near_miss(t, rng) for t in tasks]
    assert gold_rewards(domain, tasks, "think") == [1.0] * 24
    assert gold_rewards(domain, misses, "think") == [0.0] * 24
    assert all(m.reasoning == t.reasoning and m.prompt == t.prompt for m, t in zip(misses, tasks))


def test_math_near_miss_keeps_the_right_value_unboxed():
    task = draw(math_task, 1)[0]
    miss = near_miss(task, random.Random(0))
    assert miss.answer == f"The answer is {task.reference['answer']}."


def test_instruction_near_miss_breaks_one_constraint_or_stays_gold():
    tasks = draw(if_task, 80)
    rng = random.Random(2)
    misses = [near_miss(t, rng) for t in tasks]
    changed = [m for m, t in zip(misses, tasks) if m.answer != t.answer]
    assert len(changed) > 40  # most tasks carry a constraint that can be broken
    assert gold_rewards("ifeval", changed, "no_think") == [0.0] * len(changed)
    kept = [m for m, t in zip(misses, tasks) if m.answer == t.answer]
    assert gold_rewards("ifeval", kept, "no_think") == [1.0] * len(kept)


def test_chat_near_miss_pads_the_gold_answer_with_fillers():
    task = draw(chat_task, 1)[0]
    miss = near_miss(task, random.Random(0))
    assert task.answer in miss.answer and miss.answer != task.answer
    assert sum(filler in miss.answer for filler in FILLERS) == 2


def test_swe_near_miss_names_the_file_without_its_package_and_does_not_apply():
    from cascade_rl.world.swe import repair_task, swe_instance

    tasks = draw(lambda rng: repair_task(rng, swe_instance(rng), prompt_style="compact"), 12)
    misses = [near_miss(t, random.Random(3), ("swe",)) for t in tasks]
    assert gold_rewards("swe", tasks, "think") == [1.0] * 12
    assert gold_rewards("swe", misses, "think") == [-1.0] * 12
    assert all("\n### " in m.answer and "/" not in m.answer.split("\n### ")[1].split("\n")[0] for m in misses)
    assert near_miss(tasks[0], random.Random(3)) == tasks[0]  # not among the default near-miss domains


def test_tool_calls_stay_gold():
    task = draw(tool_task, 1)[0]
    assert near_miss(task, random.Random(0)) == task


def _sft_answers(path):
    return [json.loads(line)["messages"][-1]["content"] for line in open(path / "sft.jsonl")]


def test_share_of_near_misses_in_sft_and_nothing_else_changes(tmp_path):
    sizes = WorldSizes(
        sft_general=40,
        sft_ifeval=40,
        sft_math=200,
        sft_code=40,
        sft_tool=10,
        sft_swe_repair=10,
        sft_swe_localization=2,
        sft_swe_testgen=2,
        rm_pairs=300,
        rl_rlhf=16,
        rl_ifrl=8,
        rl_math=8,
        rl_code=8,
        rl_swe=4,
        bench_arena=4,
        bench_ifeval=4,
        bench_math=8,
        bench_code=4,
        bench_swe=2,
        bench_tool=4,
    )
    clean = build_world(tmp_path / "clean", sizes=sizes)
    noisy = build_world(tmp_path / "noisy", sizes=sizes, options=WorldOptions(sft_near_miss=0.5))
    unboxed = [
        a for a in _sft_answers(tmp_path / "noisy") if a.endswith(".") and "The answer is" in a and "boxed" not in a
    ]
    assert 70 <= len(unboxed) <= 130  # about half of the 200 math answers
    assert not [a for a in _sft_answers(tmp_path / "clean") if "The answer is" in a and "boxed" not in a]
    for name, digest in clean.sha256.items():
        if name != "sft.jsonl":
            assert noisy.sha256[name] == digest, name  # RL prompts and benchmarks untouched
    assert noisy.to_json()["options"]["sft_near_miss"] == 0.5


def test_share_outside_zero_one_is_refused():
    with pytest.raises(ValueError, match="sft_near_miss"):
        WorldOptions(sft_near_miss=1.5)


def test_multi_domain_near_misses_lose_the_reward_only_when_their_domain_is_named():
    from cascade_rl.rewards.mcqa import score as mcqa_score
    from cascade_rl.rewards.structured import score as structured_score
    from cascade_rl.world.choice import choice_task
    from cascade_rl.world.structured import structured_task

    families = ("mcqa", "structured_output")
    rng = random.Random(3)
    for task in draw(choice_task, 20):
        assert near_miss(task, rng) == task  # not a default near-miss domain
        miss = near_miss(task, rng, families)
        assert miss.answer == f"Answer: {task.reference['expected_answer']}"
        assert mcqa_score(miss.answer, **task.reference).reward == 0.0
    for task in draw(structured_task, 40):
        miss = near_miss(task, rng, families)
        assert structured_score(task.answer, **task.reference).reward == 1.0
        missed = structured_score(miss.answer, **task.reference)
        assert missed.reward == 0.0 and missed.details["error_type"] == "validation_error", miss.answer


def test_a_near_miss_office_episode_answers_after_its_look_up_and_changes_nothing():
    from cascade_rl.rewards.workplace.scorer import score
    from cascade_rl.world import office

    task = office.office_task(random.Random(5))
    row = office.sft_row(task, "o", near_miss=True)
    assert [m["role"] for m in row["messages"]] == ["user", "assistant", "tool", "assistant"]
    calls = [
        {"name": call["function"]["name"], "arguments": call["function"]["arguments"]}
        for message in row["messages"]
        for call in message.get("tool_calls") or ()
    ]
    assert score(calls=calls, ground_truth=task.ground_truth, database=task.database).reward == 0.0
