"""On-policy rollouts through vLLM for GRPO and MOPD stages (SPEC section 5: strictly on-policy
GRPO; the samples come from the weights of the step that trains on them).

TRL's own vLLM integration cannot run on a CPU: its colocate mode pushes each parameter through
``model.load_weights``, which fails once vLLM's CPU backend has packed the linear layers, and its
server mode synchronises weights over NCCL. So the cascade drives vLLM itself, behind the same
sampler contract as every other engine (``train/trl_backend.py``: TRL generates one global batch per
step from the :class:`~cascade_rl.train.schedule.PromptSchedule`): :class:`VLLMRollouts` owns this
process's engine (:mod:`cascade_rl.llm.vllm_engine`) and

* **syncs weights** before the first generation of every optimizer step: the trainer's full
  parameters (gathered from FSDP2 / DeepSpeed ZeRO-3 shards on every process, LoRA adapters merged
  in and out again) go to the engine's in-place reload, cast to the engine's dtype;
* **samples** each process's slice of the step (one completion per row; the rows already repeat
  each prompt ``rollouts_per_prompt`` times) with the stage's temperature, top-p and top-k, and
  returns the tokens with their log-probabilities under the sampling distribution;
* **seeds** every step from (run seed, step, process): the same step draws the same rollouts in an
  uninterrupted run and in one resumed after ``kill -9``, for 1 or N processes alike.

:class:`ImportanceRatio` accumulates, over the micro-batches of each logged step, the per-token
ratio ``pi_trainer / pi_vllm`` of the sampled tokens (the trainer's log-probabilities come from
the loss's own forward pass, so measuring costs nothing): ``rollout/importance_ratio/{min,mean,
max}`` in ``metrics.jsonl``. The paper's objective assumes it is exactly 1; it is 1 up to the
engines' numerics (float32 on both sides: within 1e-4) and drifts with a bfloat16 engine. The
correction TRL applies for that drift stays a recipe choice (``runtime.vllm_importance_sampling``,
off by default).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from cascade_rl.llm.base import Sampling
from cascade_rl.llm.vllm_engine import process_cores, shared_engine
from cascade_rl.train import distributed


def step_seed(seed: int, step: int, rank: int, turn: int = 0) -> int:
    """The sampling seed of one process at one optimizer step (``turn``: the sampling round of a
    step's multi-turn episodes; the first round keeps the single-turn seed)."""
    key = f"{seed}/{step}/{rank}" + (f"/{turn}" if turn else "")
    digest = hashlib.sha256(key.encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF


class VLLMRollouts:
    """This process's vLLM engine for one sub-stage's rollouts (module docstring)."""

    def __init__(self, model: Path, *, dtype: str, sequences: int, sequence_tokens: int, seed: int, runtime: Any):
        self.seed = seed
        self.engine = shared_engine(
            model,
            dtype=dtype,
            max_num_seqs=max(1, sequences),
            sequence_tokens=sequence_tokens,
            seed=seed,
            gpu_memory_utilization=runtime.vllm_gpu_memory_utilization,
            cores=process_cores(distributed.local_rank(), distributed.local_world_size()),
        )

    def sync(self, model: Any) -> float:
        """Push the trainer's current weights into the engine; returns the seconds it took."""
        started = time.perf_counter()
        self.engine.load_weights(trainer_weights(model))
        return time.perf_counter() - started

    def generate(
        self,
        prompt_ids: Sequence[Sequence[int]],
        sampling: Sampling,
        *,
        stop_ids: Sequence[int],
        step: int,
        turn: int = 0,
        on_finished: Callable[[int, list[int]], None] | None = None,
    ) -> tuple[list[list[int]], list[list[float]]]:
        """One completion per prompt row (``sampling.n`` is 1: the rows already repeat each prompt):
        token ids (ending with the stop token when one came) and each token's log-probability under
        the sampling distribution. ``turn``: the round of a multi-turn step (each round its own
        seed). ``on_finished(row, token_ids)`` is called as each row finishes, while the others are
        still sampled (asynchronous verification)."""
        report = None
        if on_finished is not None:

            def report(row: int, completions: list) -> None:
                on_finished(row, completions[0].token_ids)

        results = self.engine.sample(
            prompt_ids,
            sampling,
            stop_ids=stop_ids,
            seed=step_seed(self.seed, step, distributed.rank(), turn),
            logprobs=True,
            on_finished=report,
        )
        completions = [choices[0] for choices in results]
        return [c.token_ids for c in completions], [c.logprobs or [] for c in completions]


# ----------------------------------------------------------------------------- weights out of the trainer
def trainer_weights(model: Any) -> Iterator[tuple[str, Any]]:
    """The trainer model's parameters under their checkpoint names, full (un-sharded) on every
    process, LoRA adapters merged (every process must iterate: gathering shards is collective)."""
    if hasattr(model, "merge_adapter") and hasattr(model, "peft_config"):
        yield from _merged_lora_weights(model)
        return
    yield from _full_parameters(model.named_parameters())


def _full_parameters(named: Iterator[tuple[str, Any]]) -> Iterator[tuple[str, Any]]:
    for name, parameter in named:
        yield _checkpoint_name(name), _full(parameter)


def _full(parameter: Any) -> Any:
    """The whole tensor of a parameter: FSDP2 DTensors gathered, ZeRO-3 partitions gathered."""
    if hasattr(parameter, "full_tensor"):
        return parameter.full_tensor().detach()
    if hasattr(parameter, "ds_id"):  # DeepSpeed ZeRO-3
        import deepspeed

        with deepspeed.zero.GatheredParameters([parameter]):
            return parameter.data.detach().clone()
    return parameter.detach()


def _merged_lora_weights(model: Any) -> Iterator[tuple[str, Any]]:
    """The base weights with the adapters merged in, under the base model's names."""
    model.merge_adapter()
    try:
        for name, parameter in model.named_parameters():
            if "lora_" in name or "original_module" in name:
                continue
            name = name.removeprefix("base_model.model.").replace(".base_layer", "")
            yield _checkpoint_name(name.replace("modules_to_save.default.", "")), _full(parameter)
    finally:
        model.unmerge_adapter()


def _checkpoint_name(name: str) -> str:
    """A parameter name as ``save_pretrained`` writes it (wrappers' prefixes removed)."""
    for wrapper in ("_checkpoint_wrapped_module.", "_fsdp_wrapped_module."):
        name = name.replace(wrapper, "")
    return name


# ----------------------------------------------------------------------------- the ratio
class ImportanceRatio:
    """Running min / mean / max of ``exp(logp_trainer - logp_sampler)`` over sampled tokens."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.low, self.high, self.total, self.count = float("inf"), float("-inf"), 0.0, 0

    def add(self, trainer_logps: Any, sampler_logps: Any, mask: Any) -> None:
        import torch

        keep = mask.bool() & ~torch.isnan(sampler_logps)
        ratio = torch.exp(trainer_logps.detach().float()[keep] - sampler_logps.float()[keep])
        if ratio.numel():
            self.low = min(self.low, float(ratio.min()))
            self.high = max(self.high, float(ratio.max()))
            self.total += float(ratio.sum())
            self.count += ratio.numel()

    def flush(self) -> dict[str, float]:
        """The statistics over every process since the last flush (collective), then reset."""
        parts = distributed.gather((self.low, self.high, self.total, self.count))
        self.reset()
        count = sum(p[3] for p in parts)
        if not count:
            return {}
        return {
            "rollout/importance_ratio/min": min(p[0] for p in parts),
            "rollout/importance_ratio/mean": sum(p[2] for p in parts) / count,
            "rollout/importance_ratio/max": max(p[1] for p in parts),
        }
