"""Multi-turn episodes in a GRPO stage under ``torchrun --nproc_per_node 2`` (gloo, CPU) against the
same stage in one process, with a real tool-calling model (tests/episode_assets.py): the same
prompts drawn, every rollout played as an episode and recorded once, every recorded reward the
offline verdict of the episode's own calls (``cascade score``'s) and the same on both processes,
and ``kill -9`` of a process mid-stage, then ``--resume``, reaching the uninterrupted run's
episodes and weights."""

import json
from collections import Counter
from pathlib import Path

import pytest
import torch
import yaml
from episode_assets import build_caller, caller_rows
from test_multiprocess import draws, kill_mid_stage, run, weights

from cascade_rl.rewards.workplace.scorer import score

STEPS = 6
PROMPTS, ROLLOUTS = 4, 4


@pytest.fixture(scope="module")
def stage_recipe(tmp_path_factory):
    folder = tmp_path_factory.mktemp("episodes-mp")
    model = build_caller(folder / "model")
    data = folder / "rl.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in caller_rows(8)))
    recipe = {
        "name": "episodes-mp",
        "seed": 0,
        "model": {"path": str(model)},
        "runtime": {"save_steps": 2, "torch_threads": 1, "reward_workers": 1},
        "stages": [
            {
                "kind": "grpo",
                "name": "toy",
                "data": str(data),
                "thinking": "no_think",
                "rollouts_per_prompt": ROLLOUTS,
                "prompts_per_batch": PROMPTS,
                "per_device_batch_size": 4,  # 1 process: 4 micro-batches per step; 2 processes: 2 each
                "learning_rate": 0.002,  # moves the weights, keeps the chain's two calls
                "temperature": 1.0,
                "top_p": 1.0,
                "max_turns": 2,
                "curriculum": [{"max_response_length": 1200, "max_steps": STEPS}],
            }
        ],
    }
    path = folder / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return path


def episodes(out: Path) -> list[dict]:
    lines = (out / "01-toy" / "substage-1" / "episodes.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


@pytest.fixture(scope="module")
def one_process(stage_recipe, tmp_path_factory):
    out = tmp_path_factory.mktemp("one") / "run"
    run(stage_recipe, out, 1)
    return out


@pytest.fixture(scope="module")
def two_processes(stage_recipe, tmp_path_factory):
    out = tmp_path_factory.mktemp("two") / "run"
    run(stage_recipe, out, 2)
    return out


@pytest.mark.parametrize("processes", [1, 2])
def test_every_rollout_is_one_multi_turn_episode_whose_reward_is_the_verdict_of_its_calls(
    processes, stage_recipe, one_process, two_processes
):
    out = one_process if processes == 1 else two_processes
    rows = [json.loads(line) for line in (stage_recipe.parent / "rl.jsonl").read_text().splitlines()]
    played = episodes(out)
    drawn = draws(out)
    # each drawn prompt's rollouts, once each, in every step
    assert Counter((e["step"], e["prompt"]) for e in played) == Counter(
        {(d["step"], p): ROLLOUTS for d in drawn for p in d["prompts"]}
    )
    assert all(e["turns"] == 2 and e["end"] == "step budget" and e["model_tokens"] == 8 for e in played), Counter(
        (e["turns"], e["end"], e["model_tokens"]) for e in played
    )
    assert all(e["tokens"] > e["model_tokens"] for e in played)  # the first turn's tool results are in it
    for episode in played:  # the trainer's reward is what `cascade score` gives the episode's calls
        row = rows[episode["prompt"]]
        offline = score(calls=episode["calls"], ground_truth=row["ground_truth"], database=row["database"])
        assert episode["reward"] == offline.reward
    rewards = Counter(e["reward"] for e in played)
    assert rewards[1.0] and rewards[0.0]  # groups with variance: the update has something to learn
    metrics = [json.loads(line) for line in (out / "01-toy" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == list(range(1, STEPS + 1))
    for step, logged in zip(sorted({e["step"] for e in played}), metrics):
        mine = [e["reward"] for e in played if e["step"] == step]
        assert logged["reward/workplace/mean"] == pytest.approx(sum(mine) / len(mine))
        assert logged["reward/workplace/turns"] == 2.0 and logged["rollouts/scored"] == PROMPTS * ROLLOUTS


def test_two_processes_draw_the_same_prompts_as_one_and_agree_on_every_step(one_process, two_processes):
    single, double = draws(one_process), draws(two_processes)
    assert [(d["prompts"], d["modes"]) for d in double] == [(d["prompts"], d["modes"]) for d in single]
    # both processes' schedules hold the same results after every step: each reward of the step, the
    # other process's episodes included, reached both (the samples themselves differ with the
    # process count: each process seeds its own sampling)
    assert all(len(d["schedule_digests"]) == 2 and len(set(d["schedule_digests"])) == 1 for d in double)
    assert all(d["rollouts"] == d["scored"] == PROMPTS * ROLLOUTS for d in double)


@pytest.mark.parametrize("processes, victim_rank", [(1, 0), (2, 1)])
def test_kill_9_mid_stage_then_resume_replays_the_same_episodes_to_the_same_weights(
    processes, victim_rank, stage_recipe, one_process, two_processes, tmp_path
):
    reference = one_process if processes == 1 else two_processes
    out = tmp_path / "run"
    kill_mid_stage(stage_recipe, out, processes, victim_rank)
    run(stage_recipe, out, processes, "--resume")
    assert json.loads((out / "01-toy" / "substage-1" / "done").read_text())["resumed_from_step"] in (2, 4)
    assert episodes(out) == episodes(reference)
    for resumed, uninterrupted in zip(weights(out), weights(reference)):
        assert torch.equal(resumed, uninterrupted)
