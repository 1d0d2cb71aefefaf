"""Supervised fine-tuning in sub-stages on TRL's ``SFTTrainer`` (SPEC section 3).

Each sub-stage (paper: 16K then 32K, one epoch each) trains on its data mix with upsampling
factors, from the previous sub-stage's checkpoint. Samples longer than the sub-stage's
``max_length`` are dropped, not truncated (the paper filters them out). Parallel thinking
and non-thinking samples of one prompt are separate rows and both are kept.

Loss is on assistant tokens only. The Cascade chat template marks them with
``{% generation %}`` (TRL's ``assistant_only_loss``). A model's own template without those
markers (SmolLM2's, most released chat models') cannot say which tokens are the assistant's, so
each row becomes a prompt (every message before the last) and a completion (the last, assistant
message): TRL renders the prompt with the generation prompt and trains only on the tokens after
it (``completion_only_loss``). Earlier assistant turns of a multi-turn row are then context, not
targets.

A source with ``rejection`` settings holds RL prompts, not SFT rows: before the sub-stage trains,
its input model answers each prompt ``k`` times and the answers the row's verifier accepts become
its SFT rows (:mod:`cascade_rl.data.rejection`, on the main process, through the run's sampling
engine), written once to ``substage-N/rejection-M.jsonl`` and resumed from there.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cascade_rl.chat import token_count
from cascade_rl.data.loading import LoadReport, load_sources, normalise_sft
from cascade_rl.recipe import DataSource, Runtime, SFTStage, SFTSubstage
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


def marks_assistant_tokens(template: str | None) -> bool:
    """Whether a chat template marks assistant tokens with ``{% generation %}`` (any whitespace control)."""
    import re

    return bool(template and re.search(r"{%-?\s*generation\s*-?%}", template))


def as_prompt_completion(row: dict) -> dict:
    """A ``messages`` row as TRL's conversational prompt / completion pair (module docstring)."""
    messages = list(row["messages"])
    if not messages or messages[-1].get("role") != "assistant":
        raise ValueError("an SFT row must end with the assistant's message")
    rest = {k: v for k, v in row.items() if k != "messages"}
    return {**rest, "prompt": messages[:-1], "completion": messages[-1:]}


def sampled_source(
    source: DataSource, rows_file: Path, model: Path, sampling: tuple[Runtime, str, int], variables: Any
) -> DataSource:
    """The SFT source that a rejection-sampled source became (module docstring): its rows file,
    written on the main process the first time."""
    distributed.on_main(
        f"rejection sampling into {rows_file.name}",
        lambda: _rejection_sample(source, rows_file, model, sampling, dict(variables or {})),
    )
    return DataSource(path=str(rows_file), upsample=source.upsample)


def _rejection_sample(
    source: DataSource, rows_file: Path, model: Path, sampling: tuple[Runtime, str, int], variables: dict
) -> None:
    from cascade_rl.data.rejection import rejection_sample
    from cascade_rl.llm.base import sampling_settings
    from cascade_rl.llm.local import LocalGenerator
    from cascade_rl.train.machine import local_engine

    runtime, dtype, seed = sampling
    settings = source.rejection
    prompts_file = rows_file.with_suffix(".prompts.jsonl")
    if not prompts_file.exists():  # written once: the job's fingerprint includes its inputs
        rows, _ = load_sources([source.model_copy(update={"rejection": None, "upsample": 1.0})], dict, seed=seed,
                               variables=variables)  # fmt: skip
        rows_file.parent.mkdir(parents=True, exist_ok=True)
        temporary = prompts_file.with_suffix(".tmp")
        temporary.write_text("".join(json.dumps(row) + "\n" for row in rows))
        temporary.replace(prompts_file)
    generator = LocalGenerator(
        model, engine=local_engine(runtime), dtype=None if dtype == "auto" else dtype, batch_size=256
    )
    import torch

    torch.manual_seed(seed)
    summary = rejection_sample(
        [prompts_file],
        rows_file,
        generator,
        k=settings.k,
        keep=settings.keep,
        mode=settings.mode,
        pass_threshold=settings.pass_threshold,
        sampling=sampling_settings(settings.temperature, settings.top_p, settings.max_tokens, settings.top_k),
        workers=runtime.reward_workers,
        spec=str(model),
    )
    log.info("rejection sampling %s: %s", rows_file.name, summary)


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
    sample_dtype: str | None = None,
) -> Path:
    """Run every sub-stage; write ``stage_dir/model`` and ``metrics.jsonl``. ``sample_dtype``:
    the weights that answer rejection-sampled sources (None = ``model_dtype``)."""

    def run_substage(index: int, sub: SFTSubstage, model: Path, substage_dir: Path) -> dict:
        from datasets import Dataset
        from transformers import AutoTokenizer
        from trl import SFTConfig, SFTTrainer

        tokenizer = AutoTokenizer.from_pretrained(model, local_files_only=True)
        sampling = (runtime, sample_dtype or model_dtype, seed)
        sources = [
            sampled_source(source, substage_dir / f"rejection-{i + 1}.jsonl", model, sampling, variables)
            if source.rejection
            else source
            for i, source in enumerate(sub.data)
        ]
        rows, report = load_sources(sources, normalise_sft, seed=seed + index, variables=dict(variables or {}))
        rows = drop_overlong(rows, tokenizer, sub.max_length, report)
        log.info("%s/%s: %s", stage.name, sub.name, report.summary())
        if not rows:
            raise ValueError(f"{stage.name}/{sub.name}: no usable SFT rows ({report.summary()})")
        if not any(row.get("tools") for row in rows):
            rows = [{k: v for k, v in row.items() if k != "tools"} for row in rows]
        marked = marks_assistant_tokens(tokenizer.chat_template)
        rows = rows if marked else [as_prompt_completion(row) for row in rows]
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
            assistant_only_loss=marked,
            completion_only_loss=None if marked else True,
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
