"""The paper recipes at the scale docs/scale.md recommends (nodes of 8 x 80 GB GPUs): every GRPO
step splits over the recommended process counts, the resolved TRL configs are strictly
on-policy, SFT and RM batches divide exactly, and the memory arithmetic of the guide (policy
GPUs in vLLM server mode) fits 80 GB with the guide's micro-batch sizes.

The arithmetic is the guide's, not a measurement: :func:`policy_gpu_gb` states its terms."""

from dataclasses import dataclass
from pathlib import Path

import pytest

from cascade_rl.recipe import GRPOStage, RecipeError, RewardModelStage, SFTStage, load_recipe
from cascade_rl.train import distributed
from cascade_rl.train.cascade import check_process_layout
from cascade_rl.train.grpo import grpo_config
from cascade_rl.train.on_policy import cascade_serves_rollouts

ROOT = Path(__file__).resolve().parents[1]
GB = 1e9


@dataclass(frozen=True)
class Dims:
    """A decoder's sizes (the models' own config.json values)."""

    params: float
    hidden: int
    layers: int
    kv_heads: int
    head_dim: int
    vocab: int


QWEN3_8B = Dims(8.19e9, 4096, 36, 8, 128, 151_936)
QWEN3_14B = Dims(14.77e9, 5120, 40, 8, 128, 151_936)
QWEN25_72B = Dims(72.7e9, 8192, 80, 8, 128, 152_064)

# docs/scale.md, "Layout": training processes (GPUs; one `accelerate launch` runs every stage,
# the RM's training included) and the micro-batch (per_device_batch_size) per GRPO stage for
# 80 GB GPUs where it differs from the recipe.
LAYOUT = {
    "nemotron-cascade-8b": {"dims": QWEN3_8B, "processes": 32, "per_device": {"math": 1}},
    "nemotron-cascade-14b-thinking": {
        "dims": QWEN3_14B,
        "processes": 64,
        "per_device": {"rlhf": 2, "ifrl": 2, "math": 1},
    },
}
BUDGET_GB = 72.0  # of 80 GB: 10% left to allocator fragmentation
OVERHEAD_GB = 5.0  # CUDA context, NCCL buffers, the gathered layers of ZeRO-3 / FSDP prefetch


def policy_gpu_gb(dims: Dims, processes: int, micro_batch: int, sequence: int, completion: int) -> float:
    """Peak memory of one training GPU (vLLM elsewhere): sharded states + activations + overhead.

    * states: 16 bytes per parameter sharded over the processes (fp32 weights and gradients,
      AdamW's two fp32 moments; ZeRO-3 with bf16 and FSDP2 with bf16 mixed precision alike);
    * layer checkpoints (gradient checkpointing): one bf16 hidden state per token and layer;
    * one layer recomputed in the backward pass: about 34 bytes x hidden per token (attention
      and MLP intermediates with flash attention, Korthikanti et al. 2022);
    * logits and their gradient, bf16, for the completion tokens (TRL's fused log-prob kernel
      on CUDA materialises no fp32 copy).
    """
    states = 16 * dims.params / processes
    tokens = micro_batch * sequence
    checkpoints = tokens * dims.hidden * dims.layers * 2
    recompute = tokens * 34 * dims.hidden
    logits = 2 * micro_batch * completion * dims.vocab * 2
    return (states + checkpoints + recompute + logits) / GB + OVERHEAD_GB


def rm_gpu_gb(dims: Dims, processes: int, sequence: int) -> float:
    """Peak memory of one GPU training the 72B reward model (a scalar head: no vocabulary logits)."""
    return (16 * dims.params / processes + sequence * dims.hidden * (2 * dims.layers + 34)) / GB + OVERHEAD_GB


def kv_cache_tokens(dims: Dims, gpu_share_gb: float) -> int:
    """Tokens of vLLM KV cache one GPU holds next to the bf16 weights (tensor parallel 1)."""
    per_token = dims.layers * dims.kv_heads * dims.head_dim * 2 * 2
    return int((gpu_share_gb - 2 * dims.params / GB - 3.0) * GB / per_token)


def recipe(name: str):
    return load_recipe(ROOT / "recipes" / f"{name}.yaml")


def grpo_steps(name: str):
    return [(stage, step) for stage in recipe(name).stages if isinstance(stage, GRPOStage) for step in stage.curriculum]


def longest_prompt(stage: GRPOStage, step) -> int:
    """Prompt tokens budgeted: the sub-stage's input limit (SWE) or 2,048 (the other domains' prompts)."""
    return step.max_prompt_length or 2048


@pytest.fixture
def processes(monkeypatch):
    """Resolve configs as if launched with N processes."""

    def set_processes(count: int) -> None:
        monkeypatch.setattr(distributed, "world_size", lambda: count)

    return set_processes


@pytest.mark.parametrize("name", sorted(LAYOUT))
@pytest.mark.parametrize("scale", [1, 2])
def test_every_grpo_step_splits_over_the_recommended_processes(name, scale, processes, tmp_path):
    count = LAYOUT[name]["processes"] * scale  # the recommended count, and twice as many nodes
    check_process_layout(recipe(name), count)  # the engine's own check before any compute
    processes(count)
    for stage, step in grpo_steps(name):
        config = grpo_config(stage, step, recipe(name).runtime, tmp_path, 42, "bfloat16")
        completions = stage.prompts_per_batch * stage.rollouts_per_prompt
        assert config.per_device_train_batch_size * config.gradient_accumulation_steps * count == completions
        assert config.steps_per_generation == config.gradient_accumulation_steps  # one optimizer step per rollout batch
        assert config.num_generations == stage.rollouts_per_prompt
        assert config.max_completion_length == step.max_response_length
        # strictly on-policy, no KL, token-level loss, group z-scores (SPEC section 5)
        assert config.num_iterations == 1 and config.beta == 0.0
        assert config.vllm_importance_sampling_correction is False
        assert config.loss_type == "dapo" and config.scale_rewards == "group"
        assert config.use_vllm is False and cascade_serves_rollouts(recipe(name).runtime)  # the cascade's engine


@pytest.mark.parametrize("name", sorted(LAYOUT))
def test_a_process_count_that_does_not_split_the_step_is_refused(name):
    with pytest.raises(RecipeError, match="prompts_per_batch: 128 is not divisible by the 12 processes"):
        check_process_layout(recipe(name), 12)


@pytest.mark.parametrize("name", sorted(LAYOUT))
def test_sft_and_rm_batches_divide_exactly_over_the_recommended_processes(name):
    layout = LAYOUT[name]
    for stage in recipe(name).stages:
        if isinstance(stage, SFTStage):
            for sub in stage.substages:
                assert sub.batch_size % (sub.per_device_batch_size * layout["processes"]) == 0, sub.name
        if isinstance(stage, RewardModelStage):
            assert stage.batch_size % (stage.per_device_batch_size * layout["processes"]) == 0


@pytest.mark.parametrize("name", sorted(LAYOUT))
def test_policy_gpus_fit_80_gb_with_the_guides_micro_batches(name, processes, tmp_path):
    layout = LAYOUT[name]
    processes(layout["processes"])
    for stage, step in grpo_steps(name):
        micro_batch = layout["per_device"].get(stage.name, stage.per_device_batch_size)
        stage = stage.model_copy(update={"per_device_batch_size": micro_batch})
        config = grpo_config(stage, step, recipe(name).runtime, tmp_path, 42, "bfloat16")
        sequence = longest_prompt(stage, step) + step.max_response_length
        memory = policy_gpu_gb(
            layout["dims"], layout["processes"], config.per_device_train_batch_size, sequence, step.max_response_length
        )
        assert memory <= BUDGET_GB, f"{name} {stage.name} {step.max_response_length}: {memory:.1f} GB"


@pytest.mark.parametrize("name", sorted(LAYOUT))
def test_the_recipes_own_micro_batches_overflow_where_the_guide_changes_them(name, processes, tmp_path):
    """The guide's changes are needed: with the recipe's value, the same stage would not fit."""
    layout = LAYOUT[name]
    for stage, step in grpo_steps(name):
        if stage.name in layout["per_device"]:
            sequence = longest_prompt(stage, step) + step.max_response_length
            memory = policy_gpu_gb(
                layout["dims"], layout["processes"], stage.per_device_batch_size, sequence, step.max_response_length
            )
            if step is stage.curriculum[-1]:
                assert memory > BUDGET_GB, f"{stage.name}: {memory:.1f} GB fits; drop it from the guide's changes"


@pytest.mark.parametrize("name", sorted(LAYOUT))
def test_the_72b_reward_model_trains_on_the_same_processes_and_not_on_two_nodes(name):
    (stage,) = [s for s in recipe(name).stages if isinstance(s, RewardModelStage)]
    assert rm_gpu_gb(QWEN25_72B, LAYOUT[name]["processes"], stage.max_length) <= BUDGET_GB
    assert rm_gpu_gb(QWEN25_72B, 16, stage.max_length) > 80


def test_vllm_kv_cache_colocated_versus_on_a_generation_node():
    """Colocated at the recipes' 0.35 share of 80 GB, a Qwen3-14B does not even load (weights
    29.5 GB > 28 GB) and a Qwen3-8B keeps about one 40K-token rollout; a generation node at 0.9
    holds several full-length rollouts per GPU."""
    assert kv_cache_tokens(QWEN3_14B, 0.35 * 80) < 0
    assert kv_cache_tokens(QWEN3_8B, 0.35 * 80) < 2 * 41_000
    assert kv_cache_tokens(QWEN3_8B, 0.9 * 80) > 8 * 41_000
    assert kv_cache_tokens(QWEN3_14B, 0.9 * 80) > 4 * 51_200
