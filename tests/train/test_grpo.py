"""GRPO exactly as the paper (SPEC section 5), checked on TRL's real trainer with a tiny model."""

import json
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
from datasets import Dataset

from cascade_rl.recipe import parse_recipe
from cascade_rl.train.common import read_metrics
from cascade_rl.train.context import StageContext
from cascade_rl.train.grpo import grpo_config, run_grpo_stage
from cascade_rl.train.on_policy import cascade_serves_rollouts
from cascade_rl.train.rewards import VerifierFailure
from cascade_rl.train.rl_data import build_rl_data
from cascade_rl.train.schedule import PromptSchedule
from cascade_rl.train.trl_backend import OnPolicyTrainer
from cascade_rl.train.verification import RolloutScorer

sys.path.insert(0, str(Path(__file__).parents[1] / "llm"))
from llm_helpers import free_port  # noqa: E402

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


def make_trainer(tiny_checkpoint, recipe, tmp_path, trainer_class=OnPolicyTrainer):
    from transformers import AutoTokenizer

    stage = recipe.stages[0]
    step = stage.curriculum[0]
    tokenizer = AutoTokenizer.from_pretrained(tiny_checkpoint)
    data = build_rl_data(stage, seed=0)
    schedule = PromptSchedule(
        data.prompts,
        prompts_per_batch=stage.prompts_per_batch,
        thinking=stage.thinking,
        dynamic_filter=stage.dynamic_filter,
    )
    reward = RolloutScorer(
        tokenizer,
        options=stage.reward_options,
        overlong_filter=step.overlong_filter,
        workers=2,
        max_masked_share=stage.max_masked_share,
        mask_groups_at_or_below=stage.mask_groups_at_or_below,
    )
    rows = data.row_index()
    return trainer_class(
        model=str(tiny_checkpoint),
        reward_funcs=[reward],
        args=grpo_config(stage, step, recipe.runtime, tmp_path / "trainer", 0),
        train_dataset=Dataset.from_list(data.rows),
        processing_class=tokenizer,
        schedule=schedule,
        row_of=lambda prompt, mode: rows[(prompt, mode)],
        steps=step.max_steps,
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

    class Spy(OnPolicyTrainer):
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


def test_rollouts_come_from_the_local_decoder_and_log_probs_from_the_dense_head(
    tiny_checkpoint, rl_file, tmp_path, monkeypatch
):
    """Without vLLM or a GPU: rollouts from llm/decode.py, log-probabilities from the dense head."""
    import cascade_rl.llm.decode as decoding
    from cascade_rl.train import trl_backend

    calls = {"decode": 0, "dense": 0}
    real_decode, real_dense = decoding.decode, trl_backend.dense_log_probs

    def counting_decode(*args, **kwargs):
        calls["decode"] += 1
        return real_decode(*args, **kwargs)

    def counting_dense(*args, **kwargs):
        calls["dense"] += 1
        return real_dense(*args, **kwargs)

    monkeypatch.setattr(decoding, "decode", counting_decode)
    monkeypatch.setattr(trl_backend, "dense_log_probs", counting_dense)
    trainer = make_trainer(tiny_checkpoint, recipe_stage(rl_file), tmp_path)
    trainer.train()
    assert calls["decode"] == trainer.state.global_step == 2
    assert calls["dense"] >= 2


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


def test_idle_rollouts_left_out_of_the_update_give_the_same_gradient(tiny_checkpoint, rl_file, tmp_path):
    """Zero-advantage and overlong (all-masked) rollouts skip the forward pass; the gradient is
    the one of the whole micro-batch, because the loss's denominator is the step's token total."""
    recipe = recipe_stage(rl_file)
    trainer = make_trainer(tiny_checkpoint, recipe, tmp_path)
    assert trainer.drop_idle_rollouts  # the paper's settings allow it
    model = trainer.model
    torch.manual_seed(0)
    completion_mask = torch.tensor([[1] * 6, [1] * 3 + [0] * 3, [0] * 6, [1] * 2 + [0] * 4])
    inputs = {
        "prompt_ids": torch.randint(5, 100, (4, 5)),
        "prompt_mask": torch.ones(4, 5, dtype=torch.long),
        "completion_ids": torch.randint(5, 100, (4, 6)),
        "completion_mask": completion_mask,
        "advantages": torch.tensor([1.0, 0.0, 0.5, -2.0]),  # row 1 no variance, row 2 overlong
        "num_items_in_batch": completion_mask.sum(),
    }
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = trainer.args.gradient_accumulation_steps
    seen = []
    hook = model.register_forward_pre_hook(
        lambda _, args, kwargs: seen.append(kwargs["input_ids"].shape[0]), with_kwargs=True
    )

    def grads(drop):
        trainer.drop_idle_rollouts = drop
        model.zero_grad()
        trainer._compute_loss(model, dict(inputs)).backward()
        return [p.grad.detach().clone() for p in model.parameters() if p.grad is not None]

    dropped, whole = grads(True), grads(False)
    hook.remove()
    assert seen == [2, 4]  # the forward pass saw 2 of the 4 rollouts
    assert len(dropped) == len(whole) and any(g.abs().sum() > 0 for g in whole)
    for a, b in zip(dropped, whole):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)


class FixedCompletions(OnPolicyTrainer):
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
    trainer = make_trainer(tiny_checkpoint, recipe, tmp_path, FixedCompletions)
    out = score_fixed(trainer, ["3", "5", "3", "3 3 3"], truncate={3})
    assert trainer.scored.rewards == [1.0, 0.0, 1.0, 1.0]
    assert out["completion_mask"][3].sum().item() > 0


ONE_STEP = [{"max_response_length": 6, "overlong_filter": False, "max_steps": 1}]


def test_a_rollout_without_a_verdict_is_out_of_group_statistics_and_loss(tiny_checkpoint, rl_file, tmp_path):
    """Masked, not zeroed (issue 45): the verifier failed on rollout 2, so it takes no part in
    its group's mean and standard deviation, and none of its tokens reaches the loss or its
    token count."""
    recipe = recipe_stage(rl_file, domain="tiny_assets:fails_on", curriculum=ONE_STEP)
    trainer = make_trainer(tiny_checkpoint, recipe, tmp_path, FixedCompletions)
    trainer.model.train()
    out = score_fixed(trainer, ["a", "b", "c FAIL", "e"], truncate=set())
    assert trainer.scored.rewards == [1.0, 0.0, None, 1.0]  # first-letter parity; 2 has no verdict
    expected = torch.tensor([1.0, 0.0, 1.0])
    z = (expected - expected.mean()) / (expected.std() + 1e-4)
    torch.testing.assert_close(out["advantages"][[0, 1, 3]], z, rtol=1e-4, atol=1e-4)
    assert out["advantages"][2].item() == 0.0 and out["completion_mask"][2].sum().item() == 0
    assert out["num_items_in_batch"].item() == out["completion_mask"].sum().item() == 3 * 2  # a letter + eos each
    assert trainer._metrics["train"]["masked/tiny_assets:fails_on/scorer_raised_connectionerror"] == [1.0]


def test_a_group_scoring_at_most_the_threshold_leaves_the_loss_and_the_others_train(tiny_checkpoint, rl_file, tmp_path):
    """Nemotron-Cascade 2's SWE RL: a prompt whose rollouts all score <= 0.5 is masked from the
    loss though its rewards differ (its advantages are not zero); a group with one rollout above
    0.5 trains; without the option the low group trains too (Nemotron-Cascade 1)."""
    masking = recipe_stage(rl_file, domain="tiny_assets:tenths", curriculum=ONE_STEP, mask_groups_at_or_below=0.5)
    trainer = make_trainer(tiny_checkpoint, masking, tmp_path / "a", FixedCompletions)
    trainer.model.train()
    low = score_fixed(trainer, ["2", "5", "0", "4"], truncate=set())
    assert trainer.scored.rewards == [0.2, 0.5, 0.0, 0.4] and trainer.scored.masked == [None] * 4
    assert low["advantages"].abs().sum().item() > 0  # GRPO alone would train on it
    assert low["completion_mask"].sum().item() == 0 and low["num_items_in_batch"].item() == 0
    high = score_fixed(trainer, ["2", "6", "0", "4"], truncate=set())
    assert high["completion_mask"].sum().item() == high["num_items_in_batch"].item() == 4 * 2  # a digit + eos each
    assert trainer._metrics["train"]["rollouts/low_groups_masked"] == [1.0, 0.0]
    plain = make_trainer(tiny_checkpoint, recipe_stage(rl_file, domain="tiny_assets:tenths", curriculum=ONE_STEP),
                         tmp_path / "b", FixedCompletions)  # fmt: skip
    plain.model.train()
    assert score_fixed(plain, ["2", "5", "0", "4"], truncate=set())["num_items_in_batch"].item() == 4 * 2
    assert "rollouts/low_groups_masked" not in plain._metrics["train"]


def test_the_low_group_mask_is_refused_beside_tanh_z_shaping(rl_file):
    from cascade_rl.recipe import RecipeError

    with pytest.raises(RecipeError, match=r"\(toy\)\.mask_groups_at_or_below: it reads the verifier's rewards"):
        recipe_stage(rl_file, mask_groups_at_or_below=0.5, stabilisers={"reward_shaping": "tanh_z"})


@pytest.fixture
def code_file(tmp_path):
    rows = [{"prompt": "Read n, print n + 1.", "tests": {"inputs": ["1"], "outputs": ["2"]}}] * 2
    path = tmp_path / "code.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def kill_sandboxes(stop: threading.Event) -> None:
    """SIGKILL every sandbox (bubblewrap) this test process starts, until ``stop``."""
    import psutil

    while not stop.is_set():
        for child in psutil.Process().children(recursive=True):
            try:
                if child.name() == "bwrap":
                    child.kill()
            except psutil.NoSuchProcess:
                pass
        time.sleep(0.05)


def test_a_sandbox_that_dies_masks_its_rollouts_and_a_step_mostly_masked_stops_the_stage(
    tiny_checkpoint, code_file, tmp_path
):
    slow = "```python\nimport time\ntime.sleep(3)\nprint(int(input()) + 1)\n```"
    from cascade_rl.sandbox import isolation

    if isolation() != "bwrap":  # probed (once per process) before the killer starts
        pytest.skip("the sandbox to kill is bubblewrap's")
    stop = threading.Event()
    killer = threading.Thread(target=kill_sandboxes, args=(stop,), daemon=True)
    killer.start()
    try:
        stopping = make_trainer(tiny_checkpoint, recipe_stage(code_file, domain="code", curriculum=ONE_STEP),
                                tmp_path / "a", FixedCompletions)  # fmt: skip
        with pytest.raises(VerifierFailure, match=r"step 1: 4 of 4 rollouts \(100%\) have no verdict") as error:
            score_fixed(stopping, [slow] * 4, truncate=set())
        assert "code: 4 x 'sandbox failed: " in str(error.value)
        tolerant = recipe_stage(code_file, domain="code", curriculum=ONE_STEP, max_masked_share=1.0)
        trainer = make_trainer(tiny_checkpoint, tolerant, tmp_path / "b", FixedCompletions)
        out = score_fixed(trainer, [slow] * 4, truncate=set())
    finally:
        stop.set()
        killer.join()
    assert trainer.scored.rewards == [None] * 4 and all("sandbox failed" in m for m in trainer.scored.masked)
    assert out["completion_mask"].sum().item() == 0 and out["num_items_in_batch"].item() == 0


def test_a_reward_model_server_that_is_down_stops_the_stage(tiny_checkpoint, rl_file, tmp_path):
    dead = {"reward_model": f"http://127.0.0.1:{free_port()}", "max_retries": 0, "timeout": 2}
    recipe = recipe_stage(rl_file, domain="preference", reward_options={"preference": dead}, curriculum=ONE_STEP)
    trainer = make_trainer(tiny_checkpoint, recipe, tmp_path, FixedCompletions)
    with pytest.raises(VerifierFailure, match="preference: 4 x 'reward-model server: "):
        score_fixed(trainer, ["3", "5", "3", "4"], truncate=set())


def test_a_judge_that_times_out_masks_its_group(tiny_checkpoint, rl_file, tmp_path, judge_url):
    judge = {"base_url": judge_url, "model": "judge", "timeout": 0.5, "max_retries": 0}
    options = {"genrm": {"judge": judge}}
    recipe = recipe_stage(rl_file, domain="genrm", reward_options=options, curriculum=ONE_STEP, max_masked_share=1.0)
    trainer = make_trainer(tiny_checkpoint, recipe, tmp_path, FixedCompletions)
    trainer.model.train()
    started = time.monotonic()
    out = score_fixed(trainer, ["HANG a", "HANG b", "HANG c", "HANG d"], truncate=set())
    assert time.monotonic() - started < 10  # one timeout, then the judge's guard fails fast
    assert trainer.scored.rewards == [None] * 4 and out["completion_mask"].sum().item() == 0
    assert all(m.startswith("judge failed") for m in trainer.scored.masked)
    assert any("timed out" in m for m in trainer.scored.masked), trainer.scored.masked
    metrics = trainer._metrics["train"]
    assert metrics["masked/genrm/judge_failed"] == [4.0] and metrics["verify/genrm/judge_failures"] == [4.0]


def test_a_genrm_judge_named_under_the_run_directory_is_loaded_from_it(tiny_checkpoint, rl_file, tmp_path):
    """``local:${run}/...`` in a judge spec is the run's own directory (a stage's saved model, as
    recipes/tiny-cascade2.yaml's judge), expanded when the stage starts, not read from the shell."""
    from cascade_rl.recipe import run_variables

    run_dir = tmp_path / "run"
    (run_dir / "01-sft").mkdir(parents=True)
    (run_dir / "01-sft" / "model").symlink_to(tiny_checkpoint)
    options = {"genrm": {"judge": "local:${run}/01-sft/model", "max_tokens": 4, "parse_retries": 0}}
    recipe = recipe_stage(rl_file, domain="genrm", reward_options=options, curriculum=ONE_STEP)
    stage_dir = run_dir / "02-rlhf"
    context = StageContext.settle(
        policy=tiny_checkpoint, stage_dir=stage_dir, runtime=recipe.runtime, seed=0, variables=run_variables(run_dir)
    )
    run_grpo_stage(recipe.stages[0], context)
    (metrics,) = read_metrics(stage_dir / "metrics.jsonl")
    assert metrics["verify/genrm/judge_calls"] == 8.0  # two groups of four, circular pairs
    assert metrics["rollouts/masked"] == 0 and metrics["verify/genrm/judge_failures"] == 0


def test_stage_runs_curriculum_writes_metrics_and_changes_parameters(tiny_checkpoint, rl_file, tmp_path):
    from transformers import AutoModelForCausalLM

    recipe = recipe_stage(
        rl_file,
        thinking="half",
        domain="tiny_assets:first_char_parity",
        dynamic_filter={"enabled": True},
        curriculum=[
            {"max_response_length": 4, "overlong_filter": True, "max_steps": 2},
            {
                "max_response_length": 6,
                "overlong_filter": False,
                "max_steps": 3,
                "stop_truncation_ratio": 0.01,
                "stop_window": 1,
                "stop_direction": "rises",
                "stop_min_steps": 1,
            },
        ],
    )
    stage_dir = tmp_path / "stage"
    model_dir = run_grpo_stage(
        recipe.stages[0],
        StageContext.settle(policy=tiny_checkpoint, stage_dir=stage_dir, runtime=recipe.runtime, seed=0),
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
    ):  # a step whose rollouts were all overlong-filtered has no reward/mean: look across steps
        assert any(key in m for m in metrics), key
    done = json.loads((stage_dir / "substage-2" / "done").read_text())
    assert (done["stopped_by"], done["stopped_at"]) == ("truncation_ratio", 1)
    tuned = AutoModelForCausalLM.from_pretrained(model_dir)
    base = AutoModelForCausalLM.from_pretrained(tiny_checkpoint)
    assert any(not torch.equal(a, b) for a, b in zip(tuned.parameters(), base.parameters()))


@pytest.fixture
def many_prompts(tmp_path):
    rows = [{"prompt": f"what is {a} plus {a + 1}?", "answer": str(2 * a + 1)} for a in range(10)]
    path = tmp_path / "many.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def run_stage(tiny_checkpoint, data_path, stage_dir, **overrides):
    recipe = recipe_stage(data_path, **overrides)
    run_grpo_stage(
        recipe.stages[0],
        StageContext.settle(policy=tiny_checkpoint, stage_dir=stage_dir, runtime=recipe.runtime, seed=0),
    )
    return [json.loads(line) for line in (stage_dir / "substage-1" / "draws.jsonl").read_text().splitlines()]


def test_every_drawn_prompt_is_generated_and_trained_once_whatever_the_micro_batches(
    tiny_checkpoint, many_prompts, tmp_path
):
    settings = dict(prompts_per_batch=4, rollouts_per_prompt=2, thinking="half", domain="tiny_assets:first_char_parity")
    curriculum = [{"max_response_length": 4, "overlong_filter": False, "max_steps": 3}]
    whole = run_stage(tiny_checkpoint, many_prompts, tmp_path / "whole", curriculum=curriculum, **settings)
    micro = run_stage(
        tiny_checkpoint, many_prompts, tmp_path / "micro", curriculum=curriculum, per_device_batch_size=2, **settings
    )
    # 4 prompts x 2 rollouts in micro-batches of 2: 4 micro-batches per step, one generation
    assert [d["step"] for d in micro] == [1, 2, 3]
    assert all(len(d["prompts"]) == 4 and d["rollouts"] == d["scored"] == 8 for d in micro)
    assert all(d["modes"].count("think") == 2 for d in micro)
    assert [(d["prompts"], d["modes"]) for d in micro] == [(d["prompts"], d["modes"]) for d in whole]
    metrics = read_metrics(tmp_path / "micro" / "metrics.jsonl")
    assert [m["rollouts/total"] for m in metrics] == [8.0, 8.0, 8.0]
    expected = PromptSchedule(
        range(10),
        prompts_per_batch=4,
        thinking="half",
        dynamic_filter=recipe_stage(many_prompts).stages[0].dynamic_filter,
    )
    planned = []
    for _ in range(3):
        draw = expected.draw()
        expected.record(draw.step, [], [])
        planned.append(list(draw.prompts))
    assert [d["prompts"] for d in micro] == planned


def test_a_stage_killed_mid_way_resumes_from_its_checkpoint_to_the_same_weights(
    tiny_checkpoint, many_prompts, tmp_path, monkeypatch
):
    from transformers import AutoModelForCausalLM

    settings = dict(
        prompts_per_batch=2,
        rollouts_per_prompt=2,
        domain="tiny_assets:first_char_parity",
        dynamic_filter={"enabled": True},
        curriculum=[{"max_response_length": 4, "overlong_filter": False, "max_steps": 5}],
    )
    recipe = recipe_stage(many_prompts, **settings)
    recipe.runtime.save_steps = 2
    common = dict(policy=tiny_checkpoint, runtime=recipe.runtime, seed=0)
    run_grpo_stage(recipe.stages[0], StageContext.settle(stage_dir=tmp_path / "whole", **common))

    original = OnPolicyTrainer.training_step

    def crash_after_step_three(self, *args, **kwargs):
        if self.state.global_step == 3:
            raise KeyboardInterrupt("killed")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(OnPolicyTrainer, "training_step", crash_after_step_three)
    with pytest.raises(KeyboardInterrupt):
        run_grpo_stage(recipe.stages[0], StageContext.settle(stage_dir=tmp_path / "resumed", **common))
    assert (tmp_path / "resumed" / "substage-1" / "trainer" / "checkpoint-2" / "cascade.json").exists()
    monkeypatch.setattr(OnPolicyTrainer, "training_step", original)
    run_grpo_stage(recipe.stages[0], StageContext.settle(stage_dir=tmp_path / "resumed", **common))

    done = json.loads((tmp_path / "resumed" / "substage-1" / "done").read_text())
    assert done["resumed_from_step"] == 2 and done["steps"] == 5
    for name in ("draws.jsonl",):
        assert (tmp_path / "resumed" / "substage-1" / name).read_text() == (
            tmp_path / "whole" / "substage-1" / name
        ).read_text()
    assert [m["step"] for m in read_metrics(tmp_path / "resumed" / "metrics.jsonl")] == [1, 2, 3, 4, 5]
    whole = AutoModelForCausalLM.from_pretrained(tmp_path / "whole" / "substage-1" / "model")
    resumed = AutoModelForCausalLM.from_pretrained(tmp_path / "resumed" / "substage-1" / "model")
    for a, b in zip(whole.parameters(), resumed.parameters()):
        assert torch.equal(a, b)
    assert not list((tmp_path / "resumed" / "substage-1" / "trainer").glob("checkpoint-*"))  # pruned when done


@pytest.mark.parametrize("recipe_file", ["nemotron-cascade-8b.yaml", "nemotron-cascade-14b-thinking.yaml"])
def test_paper_recipes_are_strictly_on_policy_even_with_vllm(recipe_file, tmp_path):
    from pathlib import Path

    from cascade_rl.recipe import load_recipe

    recipe = load_recipe(Path(__file__).resolve().parents[2] / "recipes" / recipe_file)
    assert recipe.runtime.use_vllm is True and recipe.runtime.vllm_importance_sampling == "off"
    assert cascade_serves_rollouts(recipe.runtime)  # colocated: the cascade's engine, not TRL's client
    for stage in recipe.stages:
        if stage.kind != "grpo":
            continue
        for step in stage.curriculum:
            config = grpo_config(stage, step, recipe.runtime, tmp_path, 0)
            assert not config.use_vllm and config.vllm_importance_sampling_correction is False, stage.name
            assert config.num_iterations == 1 and config.beta == 0.0 and config.entropy_coef == 0.0
            assert config.steps_per_generation == config.gradient_accumulation_steps


def test_the_vllm_correction_is_a_recipe_choice(rl_file, tmp_path):
    recipe = recipe_stage(rl_file)
    recipe.runtime.vllm_importance_sampling = "token_mask"
    recipe.runtime.vllm_importance_sampling_min, recipe.runtime.vllm_importance_sampling_max = 0.5, 2.0
    stage = recipe.stages[0]
    config = grpo_config(stage, stage.curriculum[0], recipe.runtime, tmp_path, 0)
    assert config.vllm_importance_sampling_correction is True
    assert config.vllm_importance_sampling_mode == "token_mask"
    assert (config.vllm_importance_sampling_clip_min, config.vllm_importance_sampling_clip_max) == (0.5, 2.0)


def test_report_to_tensorboard_logs_every_step_with_the_projects_metrics(tiny_checkpoint, many_prompts, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    recipe = recipe_stage(
        many_prompts,
        prompts_per_batch=2,
        rollouts_per_prompt=2,
        domain="tiny_assets:first_char_parity",
        dynamic_filter={"enabled": True},
        curriculum=[{"max_response_length": 4, "max_steps": 3}],
    )
    recipe.runtime.report_to = ["tensorboard"]
    stage_dir = tmp_path / "run" / "03-toy"
    run_grpo_stage(
        recipe.stages[0],
        StageContext.settle(policy=tiny_checkpoint, stage_dir=stage_dir, runtime=recipe.runtime, seed=0),
    )
    logs = list((tmp_path / "run" / "tensorboard").rglob("events.out.tfevents.*"))
    assert logs and logs[0].is_relative_to(tmp_path / "run" / "tensorboard" / "toy" / "substage-1")
    events = EventAccumulator(str(logs[0].parent))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    for tag in (
        "train/reward",
        "train/reward/tiny_assets:first_char_parity/mean",
        "train/filter/epoch",
        "train/rollouts/total",
        "train/time/generation",
    ):
        assert tag in tags, sorted(tags)
    assert [e.step for e in events.Scalars("train/rollouts/total")] == [1, 2, 3]


# ----------------------------------------------------------------------------- per-sub-stage data, plateau rule
def two_data_sets(tmp_path):
    first = [{"prompt": f"what is {a} plus {a + 1}?", "answer": str(2 * a + 1)} for a in range(10)]
    second = [{"prompt": f"name the colour number {n}", "answer": str(n)} for n in range(6)]
    paths = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    for path, rows in zip(paths, (first, second)):
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return paths


def switching_recipe(tmp_path):
    """Sub-stage 1 trains the stage's data until its reward plateaus (two windows of 2 steps: 4
    steps at least, 6 at most); sub-stage 2 its own data, rewarded by another domain."""
    first, second = two_data_sets(tmp_path)
    recipe = recipe_stage(
        first,
        data={"path": str(first), "domain": "tiny_assets:first_char_parity"},
        domain=None,
        prompts_per_batch=2,
        rollouts_per_prompt=2,
        dynamic_filter={"enabled": True, "readd_hard": 0.5, "readd_easy": 0.5},
        curriculum=[
            {
                "max_response_length": 4,
                "max_steps": 6,
                "plateau_window": 2,
                "plateau_tolerance": 0.5,
                "stop_min_steps": 1,
            },
            {"max_response_length": 4, "max_steps": 4, "data": {"path": str(second), "domain": SCORER}},
        ],
    )
    recipe.runtime.save_steps = 1
    return recipe


def run_crashing(recipe, stage_dir, tiny_checkpoint, monkeypatch, *, substage=None, at_step=None):
    """Run the stage; with ``substage``, stop it (as a kill would) when that sub-stage's trainer
    reaches ``at_step``, then resume it."""
    context = StageContext.settle(policy=tiny_checkpoint, stage_dir=stage_dir, runtime=recipe.runtime, seed=0)
    if substage is None:
        return run_grpo_stage(recipe.stages[0], context)
    original = OnPolicyTrainer.training_step

    def crash(self, *args, **kwargs):
        if f"substage-{substage}" in self.args.output_dir and self.state.global_step == at_step:
            raise KeyboardInterrupt("killed")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(OnPolicyTrainer, "training_step", crash)
    with pytest.raises(KeyboardInterrupt):
        run_grpo_stage(recipe.stages[0], context)
    monkeypatch.setattr(OnPolicyTrainer, "training_step", original)
    return run_grpo_stage(recipe.stages[0], context)


def stage_draws(stage_dir, substage):
    return [json.loads(line) for line in (stage_dir / f"substage-{substage}" / "draws.jsonl").read_text().splitlines()]


def test_a_substage_trains_its_own_data_after_a_plateau_and_a_resume_anywhere_is_exact(
    tiny_checkpoint, tmp_path, monkeypatch
):
    from transformers import AutoModelForCausalLM

    recipe = switching_recipe(tmp_path)
    whole = tmp_path / "whole"
    run_crashing(recipe, whole, tiny_checkpoint, monkeypatch)

    first_done = json.loads((whole / "substage-1" / "done").read_text())
    stop = first_done["stopped_at"]
    assert first_done["stopped_by"] == "reward_plateau" and stop == first_done["steps"] and 4 <= stop < 6
    window = first_done["plateau"]
    assert len(window["earlier_rewards"]) == len(window["last_rewards"]) == 2 and window["gain"] <= 0.5
    metrics = read_metrics(whole / "substage-1" / "metrics.jsonl")
    assert window["last_rewards"] == [m["reward/mean"] for m in metrics[-2:]]  # the window is the logged rewards
    assert json.loads((whole / "substage-2" / "done").read_text())["stopped_by"] == "max_steps"

    # sub-stage 2 draws from its own six prompts, in a new schedule numbered on from sub-stage 1's
    second = stage_draws(whole, 2)
    assert [d["step"] for d in second] == [stop + 1, stop + 2, stop + 3, stop + 4]
    assert {p for d in second for p in d["prompts"]} <= set(range(6)) and second[0]["epochs"] == [0, 0]
    assert json.loads((whole / "substage-2" / "data_report.json").read_text())["kept"] == 6
    assert json.loads((whole / "data_report.json").read_text())["kept"] == 16  # both sets
    rewards = [
        {k for k in m if k.endswith("/mean") and "tiny_assets" in k} for m in read_metrics(whole / "metrics.jsonl")
    ]
    assert all(keys == {"reward/tiny_assets:first_char_parity/mean"} for keys in rewards[:stop])
    assert all(keys == {"reward/tiny_assets:contains_answer/mean"} for keys in rewards[stop:])

    for substage, step in ((1, 3), (2, 2)):  # killed before the plateau, and after the switch
        resumed = tmp_path / f"resumed-{substage}"
        run_crashing(recipe, resumed, tiny_checkpoint, monkeypatch, substage=substage, at_step=step)
        done = [json.loads((resumed / f"substage-{i}" / "done").read_text()) for i in (1, 2)]
        assert done[substage - 1]["resumed_from_step"] == step  # a checkpoint every step
        assert done[0]["stopped_at"] == stop and done[0]["plateau"] == window  # the rule's state was replayed
        for i in (1, 2):
            assert stage_draws(resumed, i) == stage_draws(whole, i), (substage, i)
        final = AutoModelForCausalLM.from_pretrained(resumed / "substage-2" / "model")
        reference = AutoModelForCausalLM.from_pretrained(whole / "substage-2" / "model")
        for a, b in zip(final.parameters(), reference.parameters()):
            assert torch.equal(a, b)


def test_a_substage_killed_after_its_stop_rule_fired_does_not_train_on_when_resumed(
    tiny_checkpoint, tmp_path, monkeypatch
):
    """The rule ended sub-stage 1 and its last checkpoint was written, but the process died before
    the sub-stage's model was: the resumed run replays the rule, which has ended the sub-stage."""
    from cascade_rl.train import on_policy

    recipe = switching_recipe(tmp_path)
    recipe.stages[0].curriculum = recipe.stages[0].curriculum[:1]
    context = dict(policy=tiny_checkpoint, runtime=recipe.runtime, seed=0)
    run_grpo_stage(recipe.stages[0], StageContext.settle(stage_dir=tmp_path / "whole", **context))
    stop = json.loads((tmp_path / "whole" / "substage-1" / "done").read_text())["stopped_at"]

    original = on_policy.fit

    def killed_before_saving(trainer, *args, **kwargs):
        trainer.train(resume_from_checkpoint=str(args[2].path) if args[2] else None)
        raise KeyboardInterrupt("killed")

    monkeypatch.setattr(on_policy, "fit", killed_before_saving)
    resumed = tmp_path / "resumed"
    with pytest.raises(KeyboardInterrupt):
        run_grpo_stage(recipe.stages[0], StageContext.settle(stage_dir=resumed, **context))
    assert (resumed / "substage-1" / "trainer" / f"checkpoint-{stop}").exists()
    monkeypatch.setattr(on_policy, "fit", original)
    run_grpo_stage(recipe.stages[0], StageContext.settle(stage_dir=resumed, **context))
    done = json.loads((resumed / "substage-1" / "done").read_text())
    assert (done["steps"], done["stopped_at"], done["resumed_from_step"]) == (stop, stop, stop)
    assert stage_draws(resumed, 1) == stage_draws(tmp_path / "whole", 1)


def test_asynchronous_verification_trains_exactly_what_synchronous_verification_trains(
    early_stopping_checkpoint, many_prompts, tmp_path
):
    """Issue 39 item 1: rollouts scored as each finishes (the decoder reports rows that end early)
    give the step the same rewards, decisions and weights as scoring after generation; the
    verification hidden behind generation is logged."""
    from transformers import AutoModelForCausalLM

    scorer = "tiny_assets:slow_parity"  # first-letter parity after 20 ms: depends on what was sampled
    settings = dict(
        prompts_per_batch=4,
        rollouts_per_prompt=2,
        per_device_batch_size=2,  # four micro-batches per step
        domain=scorer,
        reward_options={scorer: {"delay": 0.02}},
        dynamic_filter={"enabled": True},
        curriculum=[{"max_response_length": 12, "overlong_filter": False, "max_steps": 3}],
    )
    runs = {}
    for asynchronous in (True, False):
        recipe = recipe_stage(many_prompts, **settings)
        recipe.runtime.async_rewards = asynchronous
        stage_dir = tmp_path / ("async" if asynchronous else "sync")
        run_grpo_stage(
            recipe.stages[0],
            StageContext.settle(policy=early_stopping_checkpoint, stage_dir=stage_dir, runtime=recipe.runtime, seed=0),
        )
        runs[asynchronous] = stage_dir
    draws = {a: (d / "substage-1" / "draws.jsonl").read_text() for a, d in runs.items()}
    assert draws[True] == draws[False]
    metrics = {a: read_metrics(d / "metrics.jsonl") for a, d in runs.items()}
    for key in ("reward/mean", "reward/std", "zero_variance_groups", "response_length/mean", "rollouts/scored"):
        assert [m.get(key) for m in metrics[True]] == [m.get(key) for m in metrics[False]], key
    lengths = [m["completions/min_length"] < m["completions/max_length"] for m in metrics[True]]
    assert all(lengths)  # rollouts of every step ended at different times
    assert sum(m["time/verification_hidden"] for m in metrics[True]) > 0
    assert all(m["time/verification_hidden"] == 0 for m in metrics[False])
    models = [AutoModelForCausalLM.from_pretrained(runs[a] / "substage-1" / "model") for a in (True, False)]
    for a, b in zip(*(model.parameters() for model in models)):
        assert torch.equal(a, b)
