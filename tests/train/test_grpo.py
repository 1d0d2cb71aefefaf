"""GRPO exactly as the paper (SPEC section 5), checked on TRL's real trainer with a tiny model."""

import json

import pytest
import torch
from datasets import Dataset

from cascade_rl.recipe import parse_recipe
from cascade_rl.rewards.adapter import CascadeReward
from cascade_rl.train.common import read_metrics
from cascade_rl.train.filtering import FilterState, PromptSampler
from cascade_rl.train.grpo import CascadeGRPOTrainer, build_rl_data, grpo_config, run_grpo_stage

SCORER = "tiny_assets:contains_answer"


def recipe_stage(data_path, **overrides):
    stage = {
        "kind": "grpo",
        "name": "toy",
        "data": str(data_path),
        "domain": SCORER,
        "thinking": "think",
        "rollouts_per_prompt": 4,
        "prompts_per_batch": 2,
        "learning_rate": 1e-2,
        "curriculum": [{"max_response_length": 6, "overlong_filter": True, "max_steps": 2}],
    }
    stage.update(overrides)
    return parse_recipe({"name": "t", "model": {"path": "unused"}, "stages": [stage]})


@pytest.fixture
def rl_file(tmp_path):
    rows = [{"prompt": f"what is {a} plus {b}?", "answer": str(a + b)} for a, b in [(1, 2), (3, 4), (2, 2), (5, 1)]]
    path = tmp_path / "rl.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def make_trainer(tiny_checkpoint, recipe, tmp_path, trainer_class=CascadeGRPOTrainer, scored=None):
    from transformers import AutoTokenizer

    stage = recipe.stages[0]
    step = stage.curriculum[0]
    tokenizer = AutoTokenizer.from_pretrained(tiny_checkpoint)
    data = build_rl_data(stage, seed=0)
    state = FilterState(stage.dynamic_filter)
    reward = CascadeReward(
        tokenizer,
        overlong_filter=step.overlong_filter,
        workers=1,
        on_scored=scored.append if scored is not None else None,
    )
    sampler = PromptSampler(
        data.num_prompts,
        prompts_per_batch=stage.prompts_per_batch,
        rollouts=stage.rollouts_per_prompt,
        thinking=stage.thinking,
        state=state,
        total_steps=step.max_steps,
    )
    return trainer_class(
        model=str(tiny_checkpoint),
        reward_funcs=[reward],
        args=grpo_config(stage, step, recipe.runtime, tmp_path / "trainer", 0),
        train_dataset=Dataset.from_list(data.rows),
        processing_class=tokenizer,
        prompt_sampler=sampler,
    )


def test_config_is_strictly_on_policy_without_kl_or_entropy(rl_file, tmp_path):
    recipe = recipe_stage(rl_file, per_device_batch_size=2)
    args = grpo_config(recipe.stages[0], recipe.stages[0].curriculum[0], recipe.runtime, tmp_path, 0)
    assert args.num_iterations == 1
    assert args.steps_per_generation == args.gradient_accumulation_steps == 4  # 2 prompts x 4 rollouts / 2
    assert args.beta == 0.0 and args.entropy_coef == 0.0
    assert args.loss_type == "dapo" and args.scale_rewards == "group"
    assert args.mask_truncated_completions is True
    assert args.lr_scheduler_type == "constant"


def test_importance_ratio_is_exactly_one_and_one_update_per_rollout_batch(tiny_checkpoint, rl_file, tmp_path):
    seen = {"loss_inputs": [], "generations": 0}

    class Spy(CascadeGRPOTrainer):
        def _compute_loss(self, model, inputs):
            seen["loss_inputs"].append(set(inputs))
            return super()._compute_loss(model, inputs)

        def _generate_and_score_completions(self, inputs):
            seen["generations"] += 1
            return super()._generate_and_score_completions(inputs)

    recipe = recipe_stage(rl_file, per_device_batch_size=4)
    trainer = make_trainer(tiny_checkpoint, recipe, tmp_path, Spy)
    before = [p.detach().clone() for p in trainer.model.parameters()]
    trainer.train()
    # TRL computes old log-probs only when the batch is reused off-policy; without them the
    # ratio pi/pi_old is exp(logp - logp.detach()) == 1 exactly.
    assert seen["loss_inputs"] and all("old_per_token_logps" not in keys for keys in seen["loss_inputs"])
    assert seen["generations"] == trainer.state.global_step == 2
    assert any(not torch.equal(a, b) for a, b in zip(before, trainer.model.parameters())) or all(
        r.get("grad_norm", 0) == 0 for r in trainer.state.log_history
    )


def test_token_level_loss_matches_hand_computation(tiny_checkpoint, rl_file, tmp_path):
    """loss = -(1/sum_i |o_i|) sum_i sum_t A_i * log pi(o_it) in gradient, with ratio 1."""
    recipe = recipe_stage(rl_file)
    trainer = make_trainer(tiny_checkpoint, recipe, tmp_path)
    model = trainer.model
    torch.manual_seed(0)
    prompt_ids = torch.randint(5, 100, (4, 5))
    completion_ids = torch.randint(5, 100, (4, 6))
    completion_mask = torch.tensor([[1] * 6, [1] * 3 + [0] * 3, [1] * 5 + [0], [1] * 2 + [0] * 4])
    advantages = torch.tensor([1.0, -0.5, 0.25, -2.0])
    inputs = {
        "prompt_ids": prompt_ids,
        "prompt_mask": torch.ones_like(prompt_ids),
        "completion_ids": completion_ids,
        "completion_mask": completion_mask,
        "advantages": advantages,
        "num_items_in_batch": completion_mask.sum(),
    }
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = trainer.args.gradient_accumulation_steps
    model.zero_grad()
    loss = trainer._compute_loss(model, inputs)
    loss.backward()
    trl_grads = [p.grad.detach().clone() for p in model.parameters() if p.grad is not None]

    model.zero_grad()
    logits = model(input_ids=torch.cat([prompt_ids, completion_ids], 1)).logits[:, 4:-1] / trainer.temperature
    logps = torch.log_softmax(logits.float(), -1).gather(-1, completion_ids.unsqueeze(-1)).squeeze(-1)
    objective = (advantages[:, None] * logps * completion_mask).sum() / completion_mask.sum()
    (-objective).backward()
    hand_grads = [p.grad.detach().clone() for p in model.parameters() if p.grad is not None]

    expected_value = -(advantages[:, None] * completion_mask).sum() / completion_mask.sum()
    assert loss.item() == pytest.approx(expected_value.item(), abs=1e-6)
    assert len(trl_grads) == len(hand_grads)
    for a, b in zip(trl_grads, hand_grads):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


class FixedCompletions(CascadeGRPOTrainer):
    """Generation replaced by fixed token ids so the reward path can be checked exactly."""

    completion_texts: list = []
    truncate: set = set()

    def _generate(self, prompts):
        prompt_ids, _, _ = self._tokenize_prompts(prompts)
        eos = self.processing_class.eos_token_id
        completion_ids = []
        for i, text in enumerate(self.completion_texts):
            ids = self.processing_class.encode(text, add_special_tokens=False)
            completion_ids.append(ids if i in self.truncate else ids + [eos])
        completions = [[{"role": "assistant", "content": t}] for t in self.completion_texts]
        return prompt_ids, completion_ids, None, completions, None, {}, None, []


def score_fixed(trainer, texts, truncate):
    trainer.completion_texts, trainer.truncate = texts, truncate
    batch = [trainer.train_dataset[0]] * 4  # one prompt ("what is 1 plus 2?"), four rollouts
    return trainer._generate_and_score_completions(batch)


def test_truncated_rollout_is_out_of_group_statistics_and_loss(tiny_checkpoint, rl_file, tmp_path):
    recipe = recipe_stage(rl_file)
    trainer = make_trainer(tiny_checkpoint, recipe, tmp_path, FixedCompletions)
    trainer.model.train()
    wrong_truncated = score_fixed(trainer, ["3", "5", "3", "9 9 9"], truncate={3})
    right_truncated = score_fixed(trainer, ["3", "5", "3", "3 3 3"], truncate={3})
    # Rewards of the scored rollouts: [1, 0, 1]; mean 2/3, unbiased std 0.577 -> advantages
    expected = torch.tensor([1.0, 0.0, 1.0])
    z = (expected - expected.mean()) / (expected.std() + 1e-4)
    for out in (wrong_truncated, right_truncated):
        torch.testing.assert_close(out["advantages"][:3], z, rtol=1e-4, atol=1e-4)
        assert out["advantages"][3].item() == 0.0
        assert out["completion_mask"][3].sum().item() == 0  # no token of it reaches the loss
        assert out["completion_mask"][:3].sum().item() > 0


def test_without_overlong_filtering_a_truncated_rollout_is_scored(tiny_checkpoint, rl_file, tmp_path):
    recipe = recipe_stage(rl_file, curriculum=[{"max_response_length": 6, "overlong_filter": False, "max_steps": 1}])
    scored = []
    trainer = make_trainer(tiny_checkpoint, recipe, tmp_path, FixedCompletions, scored=scored)
    out = score_fixed(trainer, ["3", "5", "3", "3 3 3"], truncate={3})
    assert scored[-1].rewards == [1.0, 0.0, 1.0, 1.0]
    assert out["completion_mask"][3].sum().item() > 0


def test_stage_runs_curriculum_writes_metrics_and_changes_parameters(tiny_checkpoint, rl_file, tmp_path):
    from transformers import AutoModelForCausalLM

    recipe = recipe_stage(
        rl_file,
        thinking="half",
        domain="tiny_assets:first_char_parity",
        dynamic_filter={"enabled": True},
        curriculum=[
            {"max_response_length": 4, "overlong_filter": True, "max_steps": 2},
            {"max_response_length": 6, "overlong_filter": False, "max_steps": 3, "stop_truncation_ratio": 0.01},
        ],
    )
    stage_dir = tmp_path / "stage"
    model_dir = run_grpo_stage(
        recipe.stages[0],
        model_in=tiny_checkpoint,
        stage_dir=stage_dir,
        runtime=recipe.runtime,
        seed=0,
        reward_options={},
    )
    metrics = read_metrics(stage_dir / "metrics.jsonl")
    assert [m["substage"] for m in metrics] == ["1", "1", "2"]  # sub-stage 2 stopped at its first step
    assert [m["step"] for m in metrics] == [1, 2, 3]
    for key in (
        "reward/mean",
        "truncation_ratio",
        "zero_variance_groups",
        "entropy",
        "learning_rate",
        "grad_norm",
        "time/generation",
        "time/reward",
        "time/update",
        "response_length/think",
        "response_length/no_think",
        "filter/epoch",
    ):
        assert key in metrics[0], key
    assert json.loads((stage_dir / "substage-2" / "done").read_text())["stopped_on_truncation"] is True
    tuned = AutoModelForCausalLM.from_pretrained(model_dir)
    base = AutoModelForCausalLM.from_pretrained(tiny_checkpoint)
    assert any(not torch.equal(a, b) for a, b in zip(tuned.parameters(), base.parameters()))
