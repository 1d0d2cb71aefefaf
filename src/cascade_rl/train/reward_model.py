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
from pathlib import Path

from cascade_rl.data.loading import load_sources, normalise_preference
from cascade_rl.recipe import RewardModelStage, expand
from cascade_rl.train.common import base_args, train_supervised
from cascade_rl.train.context import StageContext
from cascade_rl.train.sft import accumulation

log = logging.getLogger(__name__)


def run_reward_model_stage(stage: RewardModelStage, context: StageContext) -> Path:
    """Train the reward model into ``stage_dir/model`` from ``context.policy`` (``base: policy``)
    or the checkpoint ``base`` names; returns that directory."""
    from transformers import AutoTokenizer

    base = context.policy if stage.base == "policy" else Path(expand(stage.base)).expanduser()
    tokenizer = AutoTokenizer.from_pretrained(base, local_files_only=True)
    pairs, report = load_sources(stage.data, normalise_preference, seed=context.seed, variables=dict(context.variables))
    log.info("%s: %s", stage.name, report.summary())
    if not pairs:
        raise ValueError(f"{stage.name}: no usable preference pairs ({report.summary()})")
    stage_dir = context.stage_dir
    args = base_args(
        context.runtime, stage_dir / "trainer", context.seed, run_name=stage.name, dtype=context.dtypes.train
    )
    args.update(
        max_length=stage.max_length,
        num_train_epochs=stage.epochs,
        max_steps=stage.max_steps or -1,
        learning_rate=stage.learning_rate,
        lr_scheduler_type="linear",
        warmup_steps=0,
        per_device_train_batch_size=stage.per_device_batch_size,
        gradient_accumulation_steps=accumulation(stage.batch_size, stage.per_device_batch_size),
        center_rewards_coefficient=None,
    )
    train_supervised("reward", base, args, pairs, tokenizer, context)
    return stage_dir / "model"


def pairwise_accuracy(reward_model: str | Path, pairs: list[dict]) -> float:
    """Share of pairs the reward model ranks chosen above rejected (RewardBench-style)."""
    from cascade_rl.rewards.preference import load_reward_model

    model = load_reward_model(str(reward_model))
    chosen = model.score([p["prompt"] + p["chosen"] for p in pairs])
    rejected = model.score([p["prompt"] + p["rejected"] for p in pairs])
    return sum(c > r for c, r in zip(chosen, rejected)) / max(len(pairs), 1)
