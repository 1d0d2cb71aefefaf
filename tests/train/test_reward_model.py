"""Bradley-Terry reward model stage (SPEC section 4) and the RLHF / IF+RM rewards on it."""

import json

import pytest

from cascade_rl.recipe import parse_recipe
from cascade_rl.rewards.combine import combine, group_z_scores
from cascade_rl.rewards.preference import score_batch
from cascade_rl.train.context import StageContext
from cascade_rl.train.reward_model import pairwise_accuracy, run_reward_model_stage


def pairs():
    rows = []
    for a in range(8):
        question = f"what is {a} plus 1?"
        rows.append(
            {
                "prompt": [{"role": "user", "content": question}],
                "chosen": [{"role": "assistant", "content": f"The answer is {a + 1}."}],
                "rejected": [{"role": "assistant", "content": "hello world hello world hello world"}],
            }
        )
    return rows


@pytest.fixture(scope="module")
def reward_model(tiny_checkpoint, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rm")
    data = tmp / "pairs.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in pairs()) + "\n")
    recipe = parse_recipe(
        {
            "name": "t",
            "model": {"path": str(tiny_checkpoint)},
            "stages": [
                {
                    "kind": "reward_model",
                    "data": str(data),
                    "batch_size": 8,
                    "per_device_batch_size": 8,
                    "learning_rate": 1e-2,
                    "epochs": 30,
                    "max_length": 128,
                }
            ],
        }
    )
    return run_reward_model_stage(
        recipe.stages[0],
        StageContext.settle(policy=tiny_checkpoint, stage_dir=tmp / "stage", runtime=recipe.runtime, seed=0),
    )


def test_reward_model_learns_to_rank_chosen_above_rejected(reward_model, tiny_checkpoint):
    assert pairwise_accuracy(reward_model, pairs()) == 1.0
    metrics = [json.loads(line) for line in (reward_model.parent / "metrics.jsonl").read_text().splitlines()]
    assert metrics[-1]["loss"] < metrics[0]["loss"]


def test_rlhf_reward_scores_the_answer_and_penalises_language_mixing(reward_model):
    prompt = [{"role": "user", "content": "what is 3 plus 1?"}]
    requests = [
        {"messages": prompt, "prompt": "what is 3 plus 1?", "response": r}
        for r in (
            "<think>hello world hello world</think>The answer is 4.",
            "The answer is 4.",
            "hello world hello world hello world",
            "The answer is 4. Ответ четыре.",
        )
    ]
    scores = score_batch(requests, reward_model=str(reward_model))
    rewards = [s.reward for s in scores]
    assert rewards[0] == pytest.approx(rewards[1], abs=1e-5)  # only the answer after </think> is scored
    assert rewards[1] > rewards[2]
    assert rewards[3] == pytest.approx(min(s.details["rm_score"] for s in scores) - 10)
    assert scores[3].details["language_mixing"] is True


def test_unfinished_thinking_is_scored_whole(reward_model):
    requests = [{"messages": [{"role": "user", "content": "q"}], "response": "<think>The answer is 4."}]
    assert score_batch(requests, reward_model=str(reward_model))[0].details["finished"] is False


def test_combined_if_rm_reward_follows_the_formula():
    groups = ["a", "a", "a", "b", "b"]
    rm = [1.0, 2.0, 3.0, 5.0, 5.0]
    z = group_z_scores(rm, groups)
    assert z[:3] == pytest.approx([-1.2247, 0.0, 1.2247], abs=1e-4) and z[3:] == [0.0, 0.0]
    rewards = combine([1, 0, 1, 1, 0], rm, groups)
    assert rewards[0] == pytest.approx(1 + 1 / (1 + 2.718281828**1.2247), abs=1e-4)
    assert rewards[1] == 0.0 and rewards[2] > rewards[0] and rewards[3] == 1.5 and rewards[4] == 0.0
