"""What every training stage shares: devices and precision, TRL argument defaults, the
per-step ``metrics.jsonl`` writer, and saving a checkpoint the next stage can load
(DESIGN convention 6: stages hand over by directory)."""

from __future__ import annotations

import json
import math
import shutil
import time
from pathlib import Path
from typing import Any

from transformers import ProgressCallback, TrainerCallback

from cascade_rl.recipe import Runtime


def has_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


def use_bf16(runtime: Runtime) -> bool:
    return runtime.bf16 if runtime.bf16 is not None else has_gpu()


def world_size() -> int:
    from accelerate import PartialState

    return PartialState().num_processes


def base_args(runtime: Runtime, output_dir: Path, seed: int) -> dict[str, Any]:
    """TrainingArguments shared by SFT, RM and GRPO stages: no checkpoints inside the trainer
    (stages save their own model), no external loggers, CPU when there is no GPU."""
    args: dict[str, Any] = dict(
        output_dir=str(output_dir),
        seed=seed,
        data_seed=seed,
        report_to=[],
        save_strategy="no",
        logging_steps=runtime.logging_steps,
        bf16=use_bf16(runtime),
        fp16=False,
        dataloader_num_workers=0,
        disable_tqdm=False,
        use_cpu=not has_gpu(),
    )
    args[_checkpointing_field()] = runtime.gradient_checkpointing  # TRL's configs default it to True
    return args


def _checkpointing_field() -> str:
    """transformers 5 renamed ``gradient_checkpointing`` to ``activation_checkpointing``."""
    from dataclasses import fields

    from transformers import TrainingArguments

    names = {f.name for f in fields(TrainingArguments)}
    return "activation_checkpointing" if "activation_checkpointing" in names else "gradient_checkpointing"


def model_init_kwargs(dtype: str) -> dict[str, Any]:
    import torch

    if dtype == "auto":
        return {"dtype": torch.bfloat16 if has_gpu() else torch.float32}
    return {"dtype": getattr(torch, dtype)}


def set_threads(runtime: Runtime) -> None:
    if runtime.torch_threads:
        import torch

        torch.set_num_threads(runtime.torch_threads)


class CompactProgress(ProgressCallback):
    """The trainer's progress bar with the latest loss / reward shown on the bar itself, instead
    of one printed dictionary per logged step (the full record is ``metrics.jsonl``)."""

    SHOWN = {"loss": "loss", "reward": "reward", "completions/clipped_ratio": "truncated", "accuracy": "accuracy"}

    def on_log(self, args, state, control, logs=None, **kwargs):
        if state.is_world_process_zero and self.training_bar is not None and logs:
            shown = {
                name: f"{logs[key]:.3g}" for key, name in self.SHOWN.items() if isinstance(logs.get(key), (int, float))
            }
            if shown:
                self.training_bar.set_postfix(shown, refresh=False)


def compact_progress(trainer: Any) -> Any:
    """Swap ``trainer``'s progress callback for :class:`CompactProgress`; returns the trainer."""
    if trainer.args.disable_tqdm:
        return trainer
    trainer.remove_callback(ProgressCallback)
    trainer.add_callback(CompactProgress)
    return trainer


class MetricsWriter(TrainerCallback):
    """Append one JSON object per logged step to ``metrics.jsonl``, renaming TRL's keys to the
    project's (``reward/mean``, ``truncation_ratio``, ...) and adding ``extra()``'s values."""

    RENAMES = {
        "reward": "reward/mean",
        "reward_std": "reward/std",
        "frac_reward_zero_std": "zero_variance_groups",
        "completions/clipped_ratio": "truncation_ratio",
        "completions/mean_length": "response_length/mean",
        "loss": "loss",
        "grad_norm": "grad_norm",
        "learning_rate": "learning_rate",
        "entropy": "entropy",
        "step_time": "time/step",
    }

    def __init__(self, path: Path, *, substage: str | None = None, extra=None):
        self.path = Path(path)
        self.substage = substage
        self.extra = extra
        self.started = time.perf_counter()

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or "train_runtime" in logs:
            return
        record: dict[str, Any] = {"step": state.global_step}
        if self.substage:
            record["substage"] = self.substage
        for key, value in logs.items():
            number = _number(value)
            if number is not None:
                record[self.RENAMES.get(key, key)] = number
        if "time/step" in record:
            spent = record.get("time/generation", 0.0) + record.get("time/reward", 0.0)
            record["time/update"] = max(record["time/step"] - spent, 0.0)
        if self.extra is not None:
            record.update(self.extra())
        record["time/elapsed"] = round(time.perf_counter() - self.started, 3)
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def save_checkpoint(trainer: Any, tokenizer: Any, target: Path) -> Path:
    """Save the trained model and its tokenizer to ``target`` atomically (write beside, then
    rename), so a crash never leaves a half-written checkpoint under the final name."""
    target = Path(target)
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    trainer.save_model(str(partial))
    if trainer.accelerator.is_main_process:
        tokenizer.save_pretrained(str(partial))
        shutil.rmtree(target, ignore_errors=True)
        partial.rename(target)
    trainer.accelerator.wait_for_everyone()
    return target


def read_metrics(path: Path) -> list[dict]:
    if not Path(path).exists():
        return []
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
