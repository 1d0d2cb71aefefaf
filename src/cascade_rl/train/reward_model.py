"""The reward model for RLHF: Bradley-Terry on chosen/rejected pairs with TRL's
``RewardTrainer`` (SPEC section 4).

A scalar head (``AutoModelForSequenceClassification`` with one label: a linear layer on the
last hidden state) trained to maximise ``log sigmoid(r(x, y+) - r(x, y-))``; one epoch,
LR 2e-6, AdamW, batch 256 by default (the paper found longer training worse). The base is the
current policy checkpoint (``base: policy``) or any local checkpoint (the paper used
Qwen2.5-72B-Instruct). Pairs longer than ``max_length`` are dropped. Thinking flags are not
part of the RM's input, neither here nor when it scores rollouts
(:mod:`cascade_rl.rewards.preference`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cascade_rl.data.loading import load_sources, normalise_preference
from cascade_rl.recipe import RewardModelStage, Runtime, expand
from cascade_rl.train.common import (
    CheckpointMarker,
    MetricsWriter,
    base_args,
    compact_progress,
    model_init_kwargs,
    prune_checkpoints,
    resume_or_start,
    save_checkpoint,
)
from cascade_rl.train.sft import accumulation

log = logging.getLogger(__name__)


def run_reward_model_stage(
    stage: RewardModelStage,
    *,
    policy: Path,
    stage_dir: Path,
    runtime: Runtime,
    seed: int,
    variables: Mapping[str, str] | None = None,
    model_dtype: str = "auto",
) -> Path:
    """Train the reward model into ``stage_dir/model``; returns that directory."""
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import RewardConfig, RewardTrainer

    base = Path(policy) if stage.base == "policy" else Path(expand(stage.base)).expanduser()
    tokenizer = AutoTokenizer.from_pretrained(base, local_files_only=True)
    pairs, report = load_sources(stage.data, normalise_preference, seed=seed, variables=dict(variables or {}))
    log.info("%s: %s", stage.name, report.summary())
    if not pairs:
        raise ValueError(f"{stage.name}: no usable preference pairs ({report.summary()})")
    args = base_args(runtime, stage_dir / "trainer", seed, run_name=stage.name)
    args.update(
        max_length=stage.max_length,
        num_train_epochs=stage.epochs,
        max_steps=stage.max_steps or -1,
        learning_rate=stage.learning_rate,
        lr_scheduler_type="linear",
        warmup_steps=0,
        per_device_train_batch_size=stage.per_device_batch_size,
        gradient_accumulation_steps=accumulation(stage.batch_size, stage.per_device_batch_size),
        model_init_kwargs=model_init_kwargs(model_dtype),
        center_rewards_coefficient=None,
    )
    trainer = RewardTrainer(
        model=str(base),
        args=RewardConfig(**args),
        train_dataset=Dataset.from_list(pairs),
        processing_class=tokenizer,
        callbacks=[MetricsWriter(stage_dir / "metrics.jsonl"), CheckpointMarker()],
    )
    _set_pad_token(trainer.model, tokenizer)
    resume = resume_or_start(stage_dir / "trainer", stage_dir / "metrics.jsonl")
    compact_progress(trainer).train(resume_from_checkpoint=str(resume.path) if resume else None)
    model = save_checkpoint(trainer, tokenizer, stage_dir / "model")
    prune_checkpoints(stage_dir / "trainer")
    return model


def _set_pad_token(model: Any, tokenizer: Any) -> None:
    if getattr(model.config, "pad_token_id", None) is None:
        model.config.pad_token_id = tokenizer.pad_token_id


def pairwise_accuracy(reward_model: str | Path, pairs: list[dict]) -> float:
    """Share of pairs the reward model ranks chosen above rejected (RewardBench-style)."""
    from cascade_rl.rewards.preference import load_reward_model

    model = load_reward_model(str(reward_model))
    chosen = model.score([p["prompt"] + p["chosen"] for p in pairs])
    rejected = model.score([p["prompt"] + p["rejected"] for p in pairs])
    return sum(c > r for c, r in zip(chosen, rejected)) / max(len(pairs), 1)
