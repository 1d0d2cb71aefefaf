"""One domain-wise RL stage: GRPO with the paper's semantics on TRL (SPEC sections 5-6).

The paper's objective maps onto TRL's ``GRPOTrainer`` configuration:

* strictly on-policy — one optimizer step per rollout batch (``steps_per_generation`` equals
  the gradient-accumulation steps, ``num_iterations = 1``), so TRL never computes old
  log-probabilities and the importance ratio is exactly 1;
* no KL term and no reference model (``beta = 0``), no entropy bonus (``entropy_coef = 0``);
* token-level loss: the sum over every token of the batch divided by the total token count
  (``loss_type = "dapo"``); group z-score advantages (``scale_rewards = "group"``);
* overlong filtering — the reward function returns ``None`` for truncated rollouts (left out of
  group statistics) and ``mask_truncated_completions`` leaves them out of the loss;
* a constant learning rate with AdamW.

What TRL cannot be configured to do lives in :class:`CascadeGRPOTrainer` (a sampler for
epoch-level dynamic filtering and half/half thinking batches; a timer around generation) and
in callbacks (``metrics.jsonl``, the curriculum's truncation stop rule).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trl import GRPOConfig, GRPOTrainer

from cascade_rl.chat import token_count, with_mode
from cascade_rl.data.loading import LoadReport, load_sources, rl_normaliser
from cascade_rl.recipe import CurriculumStep, GRPOStage, Runtime
from cascade_rl.rewards.adapter import CascadeReward, ScoredBatch
from cascade_rl.train.common import (
    MetricsWriter,
    base_args,
    compact_progress,
    model_init_kwargs,
    save_checkpoint,
    world_size,
)
from cascade_rl.train.curriculum import TruncationStop, merge_substage_metrics, run_substages
from cascade_rl.train.filtering import MODES, FilterState, PromptSampler

log = logging.getLogger(__name__)


class _SkippedRolloutNotice(logging.Filter):
    """TRL warns for every rollout that no reward function scored. Overlong filtering skips
    truncated rollouts on purpose (counted in ``overlong/skipped``), so that warning is noise."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "All reward functions returned None" not in record.getMessage()


logging.getLogger("trl.trainer.grpo_trainer").addFilter(_SkippedRolloutNotice())


class CascadeGRPOTrainer(GRPOTrainer):
    """TRL's GRPOTrainer drawing prompts from a :class:`PromptSampler` and timing generation."""

    def __init__(self, *args: Any, prompt_sampler: PromptSampler, **kwargs: Any):
        self.prompt_sampler = prompt_sampler
        super().__init__(*args, **kwargs)

    def _get_train_sampler(self, dataset: Any = None) -> PromptSampler:
        return self.prompt_sampler

    def _generate(self, prompts: list):
        import time

        start = time.perf_counter()
        result = super()._generate(prompts)
        self._log_metric("time/generation", time.perf_counter() - start)
        return result


@dataclass
class RLData:
    """The stage's prompts as TRL rows (one per prompt and thinking mode) and how they loaded."""

    rows: list[dict]
    num_prompts: int
    report: LoadReport


def build_rl_data(stage: GRPOStage, *, seed: int, variables: Mapping[str, str] | None = None) -> RLData:
    prompts, report = load_sources(stage.data, rl_normaliser(stage.domain), seed=seed, variables=dict(variables or {}))
    modes = MODES if stage.thinking == "half" else (stage.thinking,)
    rows = []
    for index, prompt in enumerate(prompts):
        for mode in modes:
            rows.append(
                {
                    "prompt": with_mode(prompt["prompt"], mode),
                    "_ref": json.dumps(prompt["reference"]),
                    "_pidx": index,
                    "_mode": mode,
                    "_domain": prompt["domain"],
                }
            )
    return RLData(rows, len(prompts), report)


def drop_long_prompts(data: RLData, tokenizer: Any, limit: int | None) -> RLData:
    """Keep prompts whose rendered length fits the input-context budget (SWE curriculum)."""
    if limit is None:
        return data
    too_long = {
        row["_pidx"] for row in data.rows if token_count(tokenizer, row["prompt"], add_generation_prompt=True) > limit
    }
    if not too_long:
        return data
    report = LoadReport(
        read=data.report.read,
        kept=data.num_prompts - len(too_long),
        skipped=data.report.skipped.copy(),
        examples=dict(data.report.examples),
    )
    report.skipped[f"prompt longer than {limit} tokens"] += len(too_long)
    kept = sorted({row["_pidx"] for row in data.rows} - too_long)
    renumber = {old: new for new, old in enumerate(kept)}
    rows = [{**row, "_pidx": renumber[row["_pidx"]]} for row in data.rows if row["_pidx"] in renumber]
    return RLData(rows, len(kept), report)


def grpo_config(
    stage: GRPOStage, step: CurriculumStep, runtime: Runtime, output_dir: Path, seed: int, model_dtype: str = "auto"
) -> GRPOConfig:
    """The TRL configuration of one curriculum sub-stage (see the module docstring)."""
    completions = stage.prompts_per_batch * stage.rollouts_per_prompt
    processes = world_size()
    if completions % processes or stage.prompts_per_batch % processes:
        raise ValueError(
            f"prompts_per_batch ({stage.prompts_per_batch}) must be divisible by the number of processes ({processes})"
        )
    per_device = stage.per_device_batch_size or completions // processes
    if (completions // processes) % per_device:
        raise ValueError(
            f"per_device_batch_size ({per_device}) must divide the completions per process per step "
            f"({completions // processes})"
        )
    accumulation = completions // processes // per_device
    args = base_args(runtime, output_dir, seed)
    args.update(
        per_device_train_batch_size=per_device,
        gradient_accumulation_steps=accumulation,
        steps_per_generation=accumulation,
        num_iterations=1,
        num_generations=stage.rollouts_per_prompt,
        max_completion_length=step.max_response_length,
        max_steps=step.max_steps,
        temperature=stage.temperature,
        top_p=stage.top_p,
        top_k=stage.top_k or 0,
        learning_rate=stage.learning_rate,
        lr_scheduler_type="constant",
        warmup_steps=0,
        weight_decay=stage.weight_decay,
        max_grad_norm=stage.max_grad_norm,
        beta=stage.stabilisers.kl_coef,
        loss_type="dapo" if stage.stabilisers.loss == "token" else "grpo",
        scale_rewards="group",
        mask_truncated_completions=step.overlong_filter,
        entropy_coef=0.0,
        shuffle_dataset=False,
        remove_unused_columns=False,
        log_completions=False,
        model_init_kwargs=model_init_kwargs(model_dtype),
        use_vllm=runtime.use_vllm,
        vllm_mode=runtime.vllm_mode,
    )
    if runtime.use_vllm:
        args.update(vllm_gpu_memory_utilization=runtime.vllm_gpu_memory_utilization)
        if runtime.vllm_server_base_url:
            args.update(vllm_server_base_url=runtime.vllm_server_base_url)
    return GRPOConfig(**args)


def run_grpo_stage(
    stage: GRPOStage,
    *,
    model_in: Path,
    stage_dir: Path,
    runtime: Runtime,
    seed: int,
    reward_options: Mapping[str, Mapping[str, Any]],
    variables: Mapping[str, str] | None = None,
    model_dtype: str = "auto",
) -> Path:
    """Run every curriculum sub-stage of ``stage``; write ``stage_dir/model`` and
    ``stage_dir/metrics.jsonl``. Returns the model directory."""
    from transformers import AutoTokenizer

    data = build_rl_data(stage, seed=seed, variables=variables)
    log.info("%s: %s", stage.name, data.report.summary())
    stage_dir.mkdir(parents=True, exist_ok=True)
    (stage_dir / "data_report.json").write_text(
        json.dumps({"kept": data.report.kept, "read": data.report.read, "skipped": dict(data.report.skipped)})
    )
    state_holder: dict[str, FilterState] = {}

    def run_substage(index: int, step: CurriculumStep, model: Path, substage_dir: Path) -> dict:
        tokenizer = AutoTokenizer.from_pretrained(model, local_files_only=True)
        substage_data = drop_long_prompts(data, tokenizer, step.max_prompt_length)
        state = _load_filter_state(stage, stage_dir, index, seed)
        state_holder["state"] = state
        reward = CascadeReward(
            tokenizer,
            domain=None,
            options=reward_options,
            overlong_filter=step.overlong_filter,
            workers=runtime.reward_workers,
            shaping=stage.stabilisers.reward_shaping,
            on_scored=lambda batch: _record(state, batch),
        )
        sampler = PromptSampler(
            substage_data.num_prompts,
            prompts_per_batch=stage.prompts_per_batch,
            rollouts=stage.rollouts_per_prompt,
            thinking=stage.thinking,
            state=state,
            total_steps=step.max_steps,
            seed=seed,
        )
        stop = TruncationStop(step.stop_truncation_ratio)
        writer = MetricsWriter(
            substage_dir / "metrics.jsonl", substage=f"{index + 1}", extra=lambda: _filter_metrics(state)
        )
        from datasets import Dataset

        trainer = CascadeGRPOTrainer(
            model=str(model),
            reward_funcs=[reward],
            args=grpo_config(stage, step, runtime, substage_dir / "trainer", seed, model_dtype),
            train_dataset=Dataset.from_list(substage_data.rows),
            processing_class=tokenizer,
            callbacks=[writer, stop],
            prompt_sampler=sampler,
        )
        compact_progress(trainer).train()
        save_checkpoint(trainer, tokenizer, substage_dir / "model")
        (substage_dir / "filter_state.json").write_text(json.dumps(state.to_dict()))
        return {
            "steps": trainer.state.global_step,
            "max_response_length": step.max_response_length,
            "stopped_on_truncation": stop.stopped_at is not None,
            "truncation_ratio": stop.ratio,
        }

    model = run_substages(stage.curriculum, stage_dir, model_in, run_substage)
    merge_substage_metrics(stage_dir, len(stage.curriculum))
    return model


def _record(state: FilterState, batch: ScoredBatch) -> None:
    for prompt, reward in zip(batch.prompt_indices, batch.rewards):
        state.record(prompt, reward)


def _filter_metrics(state: FilterState) -> dict[str, float]:
    metrics = {f"filter/{name}": float(count) for name, count in state.counts.items()}
    metrics["filter/epoch"] = float(state.epoch)
    return metrics


def _load_filter_state(stage: GRPOStage, stage_dir: Path, index: int, seed: int) -> FilterState:
    """The dynamic filter carries over from the previous sub-stage (its prompts' pass rates)."""
    previous = stage_dir / f"substage-{index}" / "filter_state.json"
    if index > 0 and previous.exists():
        return FilterState.from_dict(stage.dynamic_filter, json.loads(previous.read_text()))
    return FilterState(stage.dynamic_filter, seed=seed)
