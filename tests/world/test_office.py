"""The toy office: two-turn tool episodes on each task's own tiny database, judged by the workplace
environment; their SFT rows are the reference episodes with the environment's real results."""

import json
import random

from cascade_rl.chat import render
from cascade_rl.data.loading import rl_normaliser
from cascade_rl.rewards.environment import start_episode
from cascade_rl.world.office import KINDS, office_task, rl_row, sft_row


def tasks(count, seed=0):
    rng = random.Random(seed)
    return [office_task(rng) for _ in range(count)]


def test_the_reference_episode_scores_one_and_doing_nothing_scores_zero():
    drawn = tasks(60)
    assert {t.kind for t in drawn} == set(KINDS)
    for index, task in enumerate(drawn):
        row = rl_normaliser(None)(rl_row(task, str(index)))  # loads as an RL row of domain workplace
        episode = start_episode(row)
        for name, arguments in task.calls:
            step = episode.step(f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>")
            assert not step.done and "Error" not in step.messages[0]["content"]
        assert episode.step(task.answer).end == "answered"
        assert episode.score().reward == 1.0, task
        idle = start_episode(row)
        idle.step("I cannot do that.")
        assert idle.score().reward == 0.0


def test_the_second_call_needs_what_the_first_returns():
    for task in tasks(40, seed=1):
        first_result = json.loads(sft_row(task, "x")["messages"][2]["content"])["output"]
        needed = next(
            iter(v for k, v in task.calls[1][1].items() if k in ("recipient", "email_id", "task_id", "customer_id"))
        )
        assert needed in json.dumps(first_result)  # an address or id the model can only read from the result


def test_sft_rows_are_whole_episodes_that_render_with_the_template():
    row = sft_row(tasks(1, seed=2)[0], "office-0")
    roles = [m["role"] for m in row["messages"]]
    assert roles == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    text = render(row["messages"], row["tools"])
    assert text.count("<tool_response>") == 2 and text.count("<tool_call>") >= 2 and " /no_think" in text
