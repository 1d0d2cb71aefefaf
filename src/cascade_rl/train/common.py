"""What every training stage shares: trainer argument defaults (dtype, precision, checkpoints), the
experiment trackers as data (:class:`Trackers`), checkpoints inside a stage (``--resume``
continues from the last one), the per-step ``metrics.jsonl`` writer, saving a checkpoint the next
stage can load (DESIGN convention 6: stages hand over by directory), and the end of every stage's
routine (:func:`fit`); :func:`train_supervised` is the one routine of SFT and reward-model
training. Only the main process writes files."""

from __future__ import annotations

import json
import math
import os
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from transformers import ProgressCallback, TrainerCallback

from cascade_rl import hardware
from cascade_rl.recipe import Runtime
from cascade_rl.train import distributed, machine
from cascade_rl.train.context import StageContext

#: written into a trainer checkpoint after everything else: the checkpoint is complete
CHECKPOINT_MARKER = "cascade.json"


def world_size() -> int:
    return distributed.world_size()


def base_args(
    runtime: Runtime, output_dir: Path, seed: int, *, run_name: str | None = None, dtype: str = "auto"
) -> dict[str, Any]:
    """TrainingArguments shared by SFT, RM and on-policy stages: weights loaded in ``dtype``, a
    checkpoint every ``runtime.save_steps`` steps under ``output_dir`` (the stage saves its own
    final model), the recipe's experiment trackers (none by default; :class:`Trackers`), CPU when
    there is no GPU. ``auto`` settings of an unsettled runtime are settled by
    :mod:`cascade_rl.train.machine`'s rules."""
    trackers = Trackers.of(runtime, Path(output_dir), run_name)
    args: dict[str, Any] = dict(
        output_dir=str(output_dir),
        seed=seed,
        data_seed=seed,
        report_to=trackers.report_to,
        run_name=run_name,
        save_strategy="steps" if runtime.save_steps else "no",
        save_steps=runtime.save_steps or 500,
        save_total_limit=runtime.save_total_limit,
        logging_steps=runtime.logging_steps,
        bf16=machine.mixed_precision(runtime.bf16),
        fp16=False,
        dataloader_num_workers=0,
        disable_tqdm=False,
        use_cpu=not hardware.has_gpu(),
        model_init_kwargs=model_init_kwargs(dtype),
    )
    if trackers.project:
        args["project"] = trackers.project
    args[_checkpointing_field()] = runtime.gradient_checkpointing  # TRL's configs default it to True
    return args


@dataclass(frozen=True)
class Trackers:
    """The experiment trackers of one trainer, as data: offline-capable defaults with TensorBoard
    logs under ``<run>/tensorboard/<stage>``, W&B offline unless ``WANDB_MODE`` says otherwise,
    projects named after the run. TensorBoard gets its directory through its callback
    (:meth:`callbacks`), Trackio its project through the trainer's ``project`` argument; W&B reads
    only its environment, so :meth:`environment` sets it for the duration of training and
    restores it after (:func:`fit`)."""

    report_to: list[str] | str = "none"
    tensorboard_dir: Path | None = None
    project: str | None = None
    wandb: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, runtime: Runtime, output_dir: Path, run_name: str | None) -> Trackers:
        chosen = list(runtime.report_to)
        stage_dir = next((p for p in [output_dir, *output_dir.parents] if p.name[:3].rstrip("-").isdigit()), None)
        if not chosen or stage_dir is None:  # outside a run directory: the trackers' own defaults
            return cls(report_to=chosen or "none")
        run_dir = stage_dir.parent
        wandb = {"WANDB_MODE": "offline", "WANDB_DIR": str(run_dir), "WANDB_PROJECT": run_dir.name}
        return cls(
            report_to=[name for name in chosen if name != "tensorboard"] or "none",
            tensorboard_dir=run_dir / "tensorboard" / (run_name or stage_dir.name) if "tensorboard" in chosen else None,
            project=os.environ.get("TRACKIO_PROJECT", run_dir.name),
            wandb=tuple(wandb.items()) if "wandb" in chosen else (),
        )

    def callbacks(self) -> list[TrainerCallback]:
        if self.tensorboard_dir is None:
            return []
        from transformers.integrations import TensorBoardCallback

        callback = TensorBoardCallback()
        callback.logging_dir = str(self.tensorboard_dir)
        return [callback]

    @contextmanager
    def environment(self) -> Iterator[None]:
        """W&B's settings in the environment while a trainer trains (a variable the user set wins)."""
        added = [name for name, _ in self.wandb if name not in os.environ]
        for name, value in self.wandb:
            os.environ.setdefault(name, value)
        try:
            yield
        finally:
            for name in added:
                os.environ.pop(name, None)


def _checkpointing_field() -> str:
    """transformers 5 renamed ``gradient_checkpointing`` to ``activation_checkpointing``."""
    from dataclasses import fields

    from transformers import TrainingArguments

    names = {f.name for f in fields(TrainingArguments)}
    return "activation_checkpointing" if "activation_checkpointing" in names else "gradient_checkpointing"


def model_init_kwargs(dtype: str) -> dict[str, Any]:
    """The weights' dtype as the trainers load them (``auto``: :func:`cascade_rl.train.machine.training_dtype`)."""
    import torch

    return {"dtype": getattr(torch, machine.training_dtype(dtype))}


def peft_config(lora: Any) -> Any:
    """The ``peft.LoraConfig`` of a stage's ``lora`` field (None: full fine-tuning)."""
    if lora is None:
        return None
    from peft import LoraConfig

    return LoraConfig(
        r=lora.r,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=lora.target_modules,
        task_type="CAUSAL_LM",
    )


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
    """Append one JSON object per logged step to ``metrics.jsonl`` (main process only), renaming
    TRL's keys to the project's (``reward/mean``, ``truncation_ratio``, ...)."""

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

    def __init__(self, path: Path, *, substage: str | None = None):
        self.path = Path(path)
        self.substage = substage
        self.started = time.perf_counter()

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or "train_runtime" in logs or not state.is_world_process_zero:
            return
        record: dict[str, Any] = {"step": state.global_step}
        if self.substage:
            record["substage"] = self.substage
        for key, value in logs.items():
            number = finite_number(value)
            if number is not None:
                record[self.RENAMES.get(key, key)] = number
        if "time/step" in record:
            spent = record.get("time/generation", 0.0) + record.get("time/reward", 0.0)
            record["time/update"] = max(record["time/step"] - spent, 0.0)
        record["time/elapsed"] = round(time.perf_counter() - self.started, 3)
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")


def finite_number(value: Any) -> float | None:
    """``value`` as a float, or None when it is not a finite number (what ``metrics.jsonl`` keeps)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def truncate_jsonl(path: Path, last_step: int, key: str = "step") -> None:
    """Drop the lines of a per-step log written after step ``last_step`` (a resumed run redoes them)."""
    path = Path(path)
    if path.exists():
        kept = [line for line in path.read_text().splitlines() if line.strip() and json.loads(line)[key] <= last_step]
        path.write_text("".join(line + "\n" for line in kept))


# ----------------------------------------------------------------------------- checkpoints inside a stage
class CheckpointMarker(TrainerCallback):
    """After the trainer wrote ``checkpoint-N`` (model, optimizer, scheduler, RNG states), the
    main process adds :data:`CHECKPOINT_MARKER` with ``state()``'s extra state (e.g. the prompt
    schedule): only a checkpoint with the marker is resumed from."""

    def __init__(self, state: Callable[[int], dict] | None = None):
        self.state = state

    def on_save(self, args, state, control, **kwargs):
        if not state.is_world_process_zero:
            return
        folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        extra = self.state(state.global_step) if self.state is not None else {}
        temporary = folder / (CHECKPOINT_MARKER + ".tmp")
        temporary.write_text(json.dumps({"global_step": state.global_step, **extra}))
        temporary.replace(folder / CHECKPOINT_MARKER)


@dataclass(frozen=True)
class ResumePoint:
    path: Path
    global_step: int
    state: dict


def resume_point(output_dir: Path) -> ResumePoint | None:
    """The newest complete checkpoint under a trainer's ``output_dir``, as the main process sees
    it (every process gets the same answer)."""

    def find() -> ResumePoint | None:
        best = None
        for marker in Path(output_dir).glob(f"checkpoint-*/{CHECKPOINT_MARKER}"):
            data = json.loads(marker.read_text())
            if best is None or data["global_step"] > best.global_step:
                best = ResumePoint(marker.parent, int(data["global_step"]), data)
        return best

    return distributed.agree(find() if distributed.is_main() else None)


def resume_or_start(output_dir: Path, metrics: Path) -> ResumePoint | None:
    """Where a (sub-)stage's trainer starts: its newest complete checkpoint, or None; the lines
    ``metrics`` got after that checkpoint (or all of them) are dropped, the steps being redone."""
    resume = resume_point(output_dir)
    distributed.on_main("rewind metrics", partial(truncate_jsonl, metrics, resume.global_step if resume else 0))
    return resume


def prune_checkpoints(output_dir: Path) -> None:
    """Remove a finished sub-stage's trainer checkpoints (optimizer states: twice the model)."""
    if distributed.is_main():
        for folder in Path(output_dir).glob("checkpoint-*"):
            shutil.rmtree(folder, ignore_errors=True)


def fit(trainer: Any, tokenizer: Any, out_dir: Path, resume: ResumePoint | None, trackers: Trackers) -> Path:
    """Train ``trainer`` from ``resume`` (or from the start) with its experiment trackers, save its
    model to ``out_dir/model`` and prune its checkpoints: the end of every stage's routine."""
    for callback in trackers.callbacks():
        trainer.add_callback(callback)
    with trackers.environment():
        compact_progress(trainer).train(resume_from_checkpoint=str(resume.path) if resume else None)
    model = save_checkpoint(trainer, tokenizer, Path(out_dir) / "model")
    prune_checkpoints(Path(trainer.args.output_dir))
    return model


def train_supervised(
    kind: str,
    model: Path,
    args: dict[str, Any],
    rows: list[dict],
    tokenizer: Any,
    context: StageContext,
    *,
    label: str | None = None,
    peft: Any = None,
) -> int:
    """The one routine of SFT (``kind="sft"``) and reward-model (``"reward"``) training: the
    backend's trainer over ``rows`` with the metrics writer and the checkpoint marker, resumed
    from its last checkpoint (the metrics logged after it dropped), trained, saved to ``model/``
    beside ``args``' ``output_dir`` (the trainer's directory), its checkpoints pruned. Returns the
    steps trained."""
    from datasets import Dataset

    from cascade_rl.train.trl_backend import supervised_trainer

    out_dir = Path(args["output_dir"]).parent
    parts = {"peft_config": peft} if kind == "sft" else {}
    trainer = supervised_trainer(
        kind,
        str(model),
        args,
        context.runtime.lm_head,
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        callbacks=[MetricsWriter(out_dir / "metrics.jsonl", substage=label), CheckpointMarker()],
        **parts,
    )
    resume = resume_or_start(out_dir / "trainer", out_dir / "metrics.jsonl")
    trackers = Trackers.of(context.runtime, Path(args["output_dir"]), args.get("run_name"))
    fit(trainer, tokenizer, out_dir, resume, trackers)
    return trainer.state.global_step


def save_checkpoint(trainer: Any, tokenizer: Any, target: Path) -> Path:
    """Save the trained model and its tokenizer to ``target`` atomically (write beside, then
    rename), so a crash never leaves a half-written checkpoint under the final name. Every
    process takes part (sharded models gather their weights); the main process writes. A model
    trained with LoRA is saved with its adapters merged (:func:`merged_adapters`)."""
    target = Path(target)
    partial = target.with_name(target.name + ".partial")
    if trainer.accelerator.is_main_process:
        shutil.rmtree(partial, ignore_errors=True)
    trainer.accelerator.wait_for_everyone()
    merged = merged_adapters(trainer)
    if merged is not None:
        if trainer.accelerator.is_main_process:
            merged.save_pretrained(str(partial), safe_serialization=True)
    else:
        with _full_state_dict(trainer):
            trainer.save_model(str(partial))
    if trainer.accelerator.is_main_process:
        tokenizer.save_pretrained(str(partial))
        shutil.rmtree(target, ignore_errors=True)
        partial.rename(target)
    trainer.accelerator.wait_for_everyone()
    return target


def merged_adapters(trainer: Any) -> Any:
    """The trained model with its LoRA adapters merged into float32 weights (None without
    adapters). The merge is done in float32: added to bfloat16 weights, an update smaller than
    half a bfloat16 step would round away. The trainer's model is consumed."""
    from accelerate.utils import is_peft_model

    model = trainer.accelerator.unwrap_model(trainer.model)
    if not is_peft_model(model):
        return None
    import torch

    merged = model.to(torch.float32).merge_and_unload()
    merged.config.dtype = torch.float32
    return merged


@contextmanager
def _full_state_dict(trainer: Any) -> Iterator[None]:
    """Under FSDP with ``SHARDED_STATE_DICT`` (sharded trainer checkpoints: each process writes
    its shard, fast to save and resume), transformers' ``save_model`` writes no weights at all;
    the stage's final model is gathered whole (``FULL_STATE_DICT``) so the next stage can load it."""
    plugin = getattr(trainer.accelerator.state, "fsdp_plugin", None) if trainer.is_fsdp_enabled else None
    if plugin is None or "FULL_STATE_DICT" in str(plugin.state_dict_type):
        yield
        return
    previous = plugin.state_dict_type
    plugin.set_state_dict_type("FULL_STATE_DICT")
    try:
        yield
    finally:
        plugin.state_dict_type = previous


def read_metrics(path: Path) -> list[dict]:
    if not Path(path).exists():
        return []
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
