"""Supervised fine-tuning in sub-stages on TRL's ``SFTTrainer`` (SPEC section 3).

Each sub-stage (paper: 16K then 32K, one epoch each) trains on its data mix with upsampling
factors, from the previous sub-stage's checkpoint. Samples longer than the sub-stage's
``max_length`` are dropped, not truncated (the paper filters them out). Loss is on assistant
tokens only (the Cascade chat template marks them with ``{% generation %}``). Parallel thinking
and non-thinking samples of one prompt are separate rows and both are kept.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cascade_rl.chat import token_count
from cascade_rl.data.loading import LoadReport, load_sources, normalise_sft
from cascade_rl.recipe import Runtime, SFTStage, SFTSubstage
from cascade_rl.train import distributed
from cascade_rl.train.common import (
    CheckpointMarker,
    MetricsWriter,
    base_args,
    compact_progress,
    model_init_kwargs,
    peft_config,
    prune_checkpoints,
    resume_or_start,
    save_checkpoint,
    world_size,
)
from cascade_rl.train.curriculum import merge_substage_metrics, run_substages
from cascade_rl.train.lm_head import install_lm_head

log = logging.getLogger(__name__)


def drop_overlong(rows: list[dict], tokenizer: Any, max_length: int, report: LoadReport) -> list[dict]:
    kept = []
    for row in rows:
        length = token_count(tokenizer, row["messages"], tools=row.get("tools"))
        if length <= max_length:
            kept.append(row)
        else:
            report.skip(f"longer than max_length {max_length}", f"{length} tokens")
    report.kept = len(kept)
    return kept


def accumulation(batch_size: int, per_device: int) -> int:
    """Gradient-accumulation steps that make ``batch_size`` sequences per optimizer step."""
    return max(1, batch_size // (per_device * world_size()))


def run_sft_stage(
    stage: SFTStage,
    *,
    model_in: Path,
    stage_dir: Path,
    runtime: Runtime,
    seed: int,
    variables: Mapping[str, str] | None = None,
    model_dtype: str = "auto",
) -> Path:
    """Run every sub-stage; write ``stage_dir/model`` and ``metrics.jsonl``."""

    def run_substage(index: int, sub: SFTSubstage, model: Path, substage_dir: Path) -> dict:
        from datasets import Dataset
        from transformers import AutoTokenizer
        from trl import SFTConfig, SFTTrainer

        tokenizer = AutoTokenizer.from_pretrained(model, local_files_only=True)
        rows, report = load_sources(sub.data, normalise_sft, seed=seed + index, variables=dict(variables or {}))
        rows = drop_overlong(rows, tokenizer, sub.max_length, report)
        log.info("%s/%s: %s", stage.name, sub.name, report.summary())
        if not rows:
            raise ValueError(f"{stage.name}/{sub.name}: no usable SFT rows ({report.summary()})")
        if not any(row.get("tools") for row in rows):
            rows = [{k: v for k, v in row.items() if k != "tools"} for row in rows]
        args = base_args(runtime, substage_dir / "trainer", seed, run_name=f"{stage.name}/{sub.name}")
        args.update(
            max_length=sub.max_length,
            num_train_epochs=sub.epochs,
            max_steps=sub.max_steps or -1,
            learning_rate=sub.learning_rate,
            lr_scheduler_type=sub.lr_scheduler,
            warmup_steps=sub.warmup_ratio,
            weight_decay=sub.weight_decay,
            per_device_train_batch_size=sub.per_device_batch_size,
            gradient_accumulation_steps=accumulation(sub.batch_size, sub.per_device_batch_size),
            assistant_only_loss=True,
            packing=False,
            model_init_kwargs=model_init_kwargs(model_dtype),
            train_sampling_strategy="group_by_length",  # batches of similar length: little padding
            remove_unused_columns=True,
        )
        trainer = SFTTrainer(
            model=str(model),
            args=SFTConfig(**args),
            train_dataset=Dataset.from_list(rows),
            processing_class=tokenizer,
            callbacks=[MetricsWriter(substage_dir / "metrics.jsonl", substage=sub.name), CheckpointMarker()],
            peft_config=peft_config(stage.lora),
        )
        install_lm_head(trainer.model, runtime.lm_head, outputs=("log_probs", "entropy", "is_top1"))
        resume = resume_or_start(substage_dir / "trainer", substage_dir / "metrics.jsonl")
        compact_progress(trainer).train(resume_from_checkpoint=str(resume.path) if resume else None)
        save_checkpoint(trainer, tokenizer, substage_dir / "model")
        prune_checkpoints(substage_dir / "trainer")
        return {"rows": len(rows), "steps": trainer.state.global_step, "data": report.summary()}

    model = run_substages(stage.substages, stage_dir, model_in, run_substage)
    _merge_metrics(stage_dir, len(stage.substages))
    return model


def _merge_metrics(stage_dir: Path, count: int) -> None:
    merge_substage_metrics(stage_dir, count)
    if not distributed.is_main():
        return
    reports = {}
    for index in range(1, count + 1):
        marker = stage_dir / f"substage-{index}" / "done"
        if marker.exists():
            reports[f"substage-{index}"] = json.loads(marker.read_text())
    (stage_dir / "data_report.json").write_text(json.dumps(reports, indent=1))
