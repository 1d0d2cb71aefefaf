"""The one boundary with TRL (train/trl_backend.py, issue 43): the private surface of TRL it relies
on is the installed TRL's, a change is one message naming it, the installed TRL is in the range
pyproject.toml declares; and the dense LM head computes what TRL's fused head computes."""

from __future__ import annotations

import copy
import inspect
import re
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from cascade_rl.train import trl_backend
from cascade_rl.train.machine import lm_head as resolve_lm_head
from cascade_rl.train.trl_backend import TRL_PRIVATE, dense_supported, install_lm_head, trl_surface_problems

OUTPUTS = ("log_probs", "entropy", "is_top1", "log_sum_sq_probs", "mean_logits")


@pytest.fixture()
def heads(tiny_checkpoint):
    """The same model twice, patched by TRL; the second then given the dense head."""
    from trl.trainer.utils import add_fused_lm_head

    base = AutoModelForCausalLM.from_pretrained(tiny_checkpoint)
    fused, dense = copy.deepcopy(base), copy.deepcopy(base)
    for model in (fused, dense):
        add_fused_lm_head(model, temperature=0.7, outputs=OUTPUTS)
    assert install_lm_head(dense, "dense", temperature=0.7, outputs=OUTPUTS) == "dense"
    return fused, dense


def batch(vocab: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(0, vocab, (4, 24), generator=generator)
    attention = torch.ones_like(ids)
    attention[1, :5] = 0  # a left-padded row
    labels = ids.masked_fill(attention == 0, -100)
    labels[:, :10] = -100  # the prompt is not scored
    labels[2] = -100  # a row with nothing to score
    return ids, attention, labels


def test_dense_head_matches_fused_outputs_and_gradients(heads):
    fused, dense = heads
    ids, attention, labels = batch(fused.config.vocab_size)
    outputs = [m(input_ids=ids, attention_mask=attention, labels=labels, fused_lm_head=True) for m in (fused, dense)]
    for name in (*OUTPUTS, "loss", "label_mask"):
        a, b = (getattr(o, name) for o in outputs)
        assert a.shape == b.shape and a.dtype == b.dtype, name
        assert torch.allclose(a.float(), b.float(), atol=1e-5), name
    assert torch.all(outputs[1].log_probs[2] == 0) and torch.all(outputs[1].entropy[:, :9] == 0)
    for out in outputs:
        (out.loss + 0.1 * out.entropy.sum()).backward()
    for (name, a), b in zip(fused.named_parameters(), dense.parameters()):
        assert torch.allclose(a.grad, b.grad, atol=1e-4), name


def test_dense_head_divides_by_the_batch_token_count_it_is_given(heads):
    _, dense = heads
    ids, attention, labels = batch(dense.config.vocab_size)
    own = dense(input_ids=ids, attention_mask=attention, labels=labels, fused_lm_head=True)
    given = dense(input_ids=ids, attention_mask=attention, labels=labels, fused_lm_head=True, num_items_in_batch=100)
    assert torch.isclose(given.loss * 100, own.loss * own.label_mask.sum())


def test_an_all_masked_micro_batch_backpropagates_zero(heads):
    _, dense = heads
    ids, attention, _ = batch(dense.config.vocab_size)
    out = dense(input_ids=ids, attention_mask=attention, labels=torch.full_like(ids, -100), fused_lm_head=True)
    out.loss.backward()
    assert out.loss.item() == 0.0
    assert all(p.grad is None or torch.all(p.grad == 0) for p in dense.parameters())


def test_plain_forward_is_untouched(heads):
    fused, dense = heads
    ids, attention, _ = batch(fused.config.vocab_size)
    plain = [m(input_ids=ids, attention_mask=attention).logits for m in (fused, dense)]
    assert torch.equal(*plain)


def test_choice_resolution_and_unsupported_models_keep_trl_head(tiny_checkpoint):
    from trl.trainer.utils import add_fused_lm_head

    assert resolve_lm_head("auto") == ("fused" if torch.cuda.is_available() else "dense")
    assert resolve_lm_head("fused") == "fused"
    with pytest.raises(ValueError, match="lm_head must be"):
        resolve_lm_head("sparse")
    model = AutoModelForCausalLM.from_pretrained(tiny_checkpoint)
    add_fused_lm_head(model)
    trl_forward = model.forward
    assert install_lm_head(model, "fused") == "fused" and model.forward is trl_forward
    model.config.final_logit_softcapping = 30.0  # only TRL's kernel applies soft-capping
    assert not dense_supported(model)
    assert install_lm_head(model, "dense") == "fused" and model.forward is trl_forward


# ----------------------------------------------------------------------------- TRL's private surface
def test_every_private_method_overridden_is_pinned_and_the_installed_trl_has_it():
    from trl import GRPOTrainer

    overridden = {
        f"GRPOTrainer.{name}"
        for name, member in vars(trl_backend.OnPolicyTrainer).items()
        if name.startswith("_") and not name.startswith("__") and inspect.isfunction(member)
        if hasattr(GRPOTrainer, name)  # the trainer's own helpers are not TRL's
    }
    assert overridden <= set(TRL_PRIVATE), overridden - set(TRL_PRIVATE)  # an override not pinned
    assert trl_surface_problems() == ()


def test_the_installed_trl_is_in_the_range_the_project_declares():
    import trl
    from packaging.specifiers import SpecifierSet

    text = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    declared = re.search(r'"trl([^"]+)"', text).group(1)
    assert trl.__version__ in SpecifierSet(declared), (trl.__version__, declared)


def test_a_changed_private_method_fails_the_first_trainer_with_one_message_naming_it(monkeypatch):
    from trl import GRPOTrainer

    monkeypatch.setattr(GRPOTrainer, "_calculate_rewards", lambda self, inputs, prompts, completions: None)
    monkeypatch.delattr(GRPOTrainer, "_log_metric")
    problems = trl_surface_problems.__wrapped__()
    assert len(problems) == 2 and all(problem.startswith("trl ") for problem in problems)
    assert "_calculate_rewards" in problems[0] and "completion_ids_list" in problems[0]
    assert problems[1].endswith("GRPOTrainer._log_metric is gone")
    monkeypatch.setattr(trl_backend, "trl_surface_problems", lambda: problems)
    with pytest.raises(RuntimeError) as error:
        trl_backend.check_trl()
    assert "\n" not in str(error.value) and "_log_metric is gone" in str(error.value)


@pytest.fixture()
def trainer(tiny_checkpoint, tmp_path):
    """An on-policy trainer on the tiny model, one prompt of two rollouts a step."""
    from datasets import Dataset
    from transformers import AutoTokenizer

    from cascade_rl.recipe import DynamicFilter
    from cascade_rl.train.schedule import PromptSchedule
    from cascade_rl.train.verification import RolloutScorer

    tokenizer = AutoTokenizer.from_pretrained(tiny_checkpoint)
    from trl import GRPOConfig

    return trl_backend.OnPolicyTrainer(
        model=str(tiny_checkpoint),
        reward_funcs=[RolloutScorer(tokenizer)],
        args=GRPOConfig(
            str(tmp_path),
            per_device_train_batch_size=2,
            num_generations=2,
            use_cpu=True,
            bf16=False,  # float32: the same log-probabilities at any width
            report_to="none",
        ),
        train_dataset=Dataset.from_list([{"prompt": "hi", "_pidx": 0, "_mode": "think"}]),
        processing_class=tokenizer,
        schedule=PromptSchedule([0], prompts_per_batch=1, thinking="think", dynamic_filter=DynamicFilter()),
        row_of=lambda prompt, mode: prompt,
        steps=1,
    )


def test_the_trainer_has_the_private_attributes_the_backend_reads(trainer):
    """And TRL treats the scoring step's tensor as every process's rewards: one reward column."""
    vllm_only = {"_last_loaded_step"}  # TRL sets it with its own vLLM; the backend sets it for ours
    for name in set(trl_backend.TRL_PRIVATE_ATTRIBUTES) - vllm_only:
        assert hasattr(trainer, name), name
    assert set(trainer._metrics) >= {"train"} and trainer.reward_func_names == ["cascade"]


def test_trls_rollout_hook_takes_the_episodes_masks_and_columns_as_the_backend_hands_them():
    """The multi-turn path (train/episodes.py) rides on what TRL 1.16's ``_generate`` does with a
    ``rollout_func``: it skips its weight sync when ``_last_loaded_step`` is the current step, keeps
    ``env_mask`` as the tool mask, and hands every other key to the reward functions' rows."""
    from trl import GRPOTrainer

    generate = inspect.getsource(GRPOTrainer._generate)
    assert "self.rollout_func(prompts, self)" in generate
    assert "self.state.global_step != self._last_loaded_step" in generate
    assert 'extra_fields.pop("env_mask", None)' in generate
    scoring = inspect.getsource(GRPOTrainer._generate_and_score_completions)
    assert "inp[key] = values[i]" in scoring and "completion_mask * tool_mask" in scoring
    assert 'inputs["tool_mask"]' in inspect.getsource(GRPOTrainer._compute_loss)


def test_each_chunk_is_computed_at_its_own_width_with_the_same_log_probabilities(trainer):
    """TRL pads a step's rollouts to its longest prompt and completion; a forward pass over a chunk
    of shorter ones runs without the columns none of its rows attends, and gives the same
    log-probabilities and entropies (zero where TRL's padding gives zero)."""
    from trl import GRPOTrainer

    prompt_pad, completion_pad = [30, 2, 31], [0, 25, 24]  # the step's longest prompt is row 1's
    ids = torch.randint(5, trainer.model.config.vocab_size, (3, 32 + 28), generator=torch.Generator().manual_seed(1))
    attention = torch.ones_like(ids)
    for row, (left, right) in enumerate(zip(prompt_pad, completion_pad)):
        attention[row, :left] = 0
        attention[row, ids.size(1) - right :] = 0
    widths: list[int] = []
    hook = trainer.model.register_forward_pre_hook(
        lambda _, args, kwargs: widths.append(kwargs["input_ids"].size(1)), with_kwargs=True
    )
    with torch.no_grad():
        ours = trainer._get_per_token_logps_and_entropies(trainer.model, ids, attention, 28, 1, compute_entropy=True)
        hook.remove()
        trls = GRPOTrainer._get_per_token_logps_and_entropies(
            trainer, trainer.model, ids, attention, 28, 1, compute_entropy=True
        )
    assert widths == [32 - 30 + 28, 60 - 2 - 25, 32 - 31 + 28 - 24]
    for a, b in zip(ours[:2], trls[:2]):
        assert a.shape == b.shape == (3, 28)
        assert torch.allclose(a, b, atol=1e-5)
    assert torch.all(ours[0][1, 3:] == 0) and torch.all(ours[1][2, 4:] == 0)
