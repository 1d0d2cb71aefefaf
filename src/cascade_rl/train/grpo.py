"""One domain-wise RL stage: GRPO with the paper's semantics on TRL (SPEC sections 5-6).

The paper's objective maps onto TRL's ``GRPOTrainer`` configuration:

* strictly on-policy — one optimizer step per rollout batch (``steps_per_generation`` equals
  the gradient-accumulation steps, ``num_iterations = 1``), so TRL never computes old
  log-probabilities and the importance ratio is exactly 1; TRL's vLLM/trainer
  importance-sampling correction is off unless ``runtime.vllm_importance_sampling`` asks;
* no KL term and no reference model (``beta = 0``), no entropy bonus (``entropy_coef = 0``);
* token-level loss: the sum over every token of the batch divided by the total token count
  (``loss_type = "dapo"``); group z-score advantages (``scale_rewards = "group"``);
* overlong filtering — the reward function returns ``None`` for truncated rollouts (left out of
  group statistics) and ``mask_truncated_completions`` leaves them out of the loss;
* a constant learning rate with AdamW.

**Rollouts** come from vLLM when the run's engine is vLLM (``runtime.use_vllm``, decided once per
run for the machine: :mod:`cascade_rl.llm.vllm_engine`): in colocate mode the cascade drives an
engine in each process itself (:mod:`cascade_rl.train.rollouts`: weights synced after every
optimizer step, steps seeded, the vLLM / trainer importance ratio logged); in server mode TRL's
own client talks to ``trl vllm-serve`` (GPU nodes, NCCL weight sync). Without vLLM the
trainer's model samples through the project's loop (:mod:`cascade_rl.llm.decode`).

**Which prompts a step trains** is decided by the engine-neutral
:class:`~cascade_rl.train.schedule.PromptSchedule` (dynamic filter, thinking split). This
module serves it to TRL through TRL's own sampler contract (the one ``RepeatSampler``
follows): the sampler yields one *global* generation batch per step — ``prompts_per_batch``
prompts, each repeated ``rollouts_per_prompt`` times — and repeats it
``steps_per_generation`` times, because TRL's data loader is read once per accumulation step
but generation uses only the first read; accelerate hands each process its slice of the
global batch. So every drawn prompt is generated ``rollouts_per_prompt`` times and trained
once, a step trains exactly ``prompts_per_batch`` prompts, and the sequence of prompts is the
same for any number of processes and micro-batches. The reward function gathers every
process's results; the schedule records them on every process, and the processes check
after each step that their schedules agree.

``--resume`` continues inside a sub-stage from the trainer's last checkpoint
(``runtime.save_steps``): model, optimizer, scheduler and RNG states (TRL), plus the
schedule, so the resumed run draws the same prompts and reaches the same weights.
"""

from __future__ import annotations

import json
import logging
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from torch.utils.data import Sampler
from transformers import TrainerCallback
from trl import GRPOConfig, GRPOTrainer

from cascade_rl.data.loading import LoadReport
from cascade_rl.llm.decode import install_decoder
from cascade_rl.recipe import CurriculumStep, DistillStage, GRPOStage, OnPolicyStage, RecipeError, Runtime
from cascade_rl.train import distributed
from cascade_rl.train.common import (
    CheckpointMarker,
    MetricsWriter,
    base_args,
    compact_progress,
    has_gpu,
    model_init_kwargs,
    peft_config,
    prune_checkpoints,
    read_metrics,
    resume_point,
    save_checkpoint,
    truncate_jsonl,
)
from cascade_rl.train.curriculum import TruncationStopRule, merge_substage_metrics, run_substages
from cascade_rl.train.learning_rows import can_drop_idle_rollouts, learning_mask, learning_rows
from cascade_rl.train.lm_head import install_lm_head
from cascade_rl.train.machine import local_engine
from cascade_rl.train.prompt_filter import kept_prompts
from cascade_rl.train.reward_adapter import CascadeReward, ScoredBatch
from cascade_rl.train.rl_data import RLData, drop_long_prompts, load_rl_prompts, rl_data_from
from cascade_rl.train.rollouts import ImportanceRatio, VLLMRollouts
from cascade_rl.train.schedule import PromptSchedule, StepDraw

log = logging.getLogger(__name__)

#: prompt tokens a rollout's KV cache is sized for when the sub-stage sets no max_prompt_length
TYPICAL_PROMPT_TOKENS = 1024


class _SkippedRolloutNotice(logging.Filter):
    """TRL warns for every rollout that no reward function scored. Overlong filtering skips
    truncated rollouts on purpose (counted in ``overlong/skipped``), so that warning is noise."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "All reward functions returned None" not in record.getMessage()


logging.getLogger("trl.trainer.grpo_trainer").addFilter(_SkippedRolloutNotice())


# ----------------------------------------------------------------------------- TRL configuration
def batch_shape(stage: OnPolicyStage, processes: int) -> tuple[int, int]:
    """(completions per micro-batch per process, micro-batches per step), or a one-line error
    naming the field when the step cannot be split evenly over ``processes``."""
    completions = stage.prompts_per_batch * stage.rollouts_per_prompt
    if stage.prompts_per_batch % processes:
        raise RecipeError(
            f"stages ({stage.name}).prompts_per_batch: {stage.prompts_per_batch} is not divisible by the "
            f"{processes} processes"
        )
    per_process = completions // processes
    per_device = stage.per_device_batch_size or per_process
    if per_process % per_device:
        raise RecipeError(
            f"stages ({stage.name}).per_device_batch_size: {per_device} does not divide the {per_process} "
            f"completions per process per step ({stage.prompts_per_batch} prompts x {stage.rollouts_per_prompt} "
            f"rollouts / {processes} processes)"
        )
    return per_device, per_process // per_device


def grpo_config(
    stage: GRPOStage | DistillStage,
    step: CurriculumStep,
    runtime: Runtime,
    output_dir: Path,
    seed: int,
    model_dtype: str = "auto",
    run_name: str | None = None,
) -> GRPOConfig:
    """The TRL configuration of one curriculum sub-stage (see the module docstring)."""
    per_device, accumulation = batch_shape(stage, distributed.world_size())
    args = base_args(runtime, output_dir, seed, run_name=run_name)
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
        ignore_data_skip=True,  # the prompt schedule resumes itself; the data loader must not skip
        model_init_kwargs=model_init_kwargs(model_dtype),
        use_vllm=trl_serves_rollouts(runtime),
        vllm_mode=runtime.vllm_mode,
        **importance_sampling_args(runtime),
    )
    if trl_serves_rollouts(runtime):
        args.update(vllm_gpu_memory_utilization=runtime.vllm_gpu_memory_utilization)
        if runtime.vllm_server_base_url:
            args.update(vllm_server_base_url=runtime.vllm_server_base_url)
    return GRPOConfig(**args)


def trl_serves_rollouts(runtime: Runtime) -> bool:
    """TRL's vLLM client generates (server mode); in colocate mode the cascade drives vLLM itself."""
    return runtime.use_vllm is True and runtime.vllm_mode == "server"


def cascade_serves_rollouts(runtime: Runtime) -> bool:
    """The cascade's own vLLM engine generates the rollouts (colocate mode, vLLM chosen for the run)."""
    return runtime.use_vllm is True and runtime.vllm_mode == "colocate"


def rollout_engine(
    stage: Any, step: CurriculumStep, runtime: Runtime, model: Path, dtype: str, seed: int
) -> VLLMRollouts | None:
    """This process's vLLM rollouts for a sub-stage, or None when TRL or the trainer's model samples."""
    if not cascade_serves_rollouts(runtime):
        return None
    per_process = stage.prompts_per_batch * stage.rollouts_per_prompt // distributed.world_size()
    return VLLMRollouts(
        model,
        dtype=("bfloat16" if has_gpu() else "float32") if dtype in (None, "auto") else dtype,  # as model.dtype
        sequences=per_process,
        sequence_tokens=(step.max_prompt_length or TYPICAL_PROMPT_TOKENS) + step.max_response_length,
        seed=seed,
        runtime=runtime,
    )


def importance_sampling_args(runtime: Runtime) -> dict[str, Any]:
    """TRL turns on a vLLM/trainer importance-sampling correction by default; the paper's
    objective is strictly on-policy, so it is off unless the recipe asks for a mode."""
    if runtime.vllm_importance_sampling == "off":
        return {"vllm_importance_sampling_correction": False}
    return {
        "vllm_importance_sampling_correction": True,
        "vllm_importance_sampling_mode": runtime.vllm_importance_sampling,
        "vllm_importance_sampling_clip_min": runtime.vllm_importance_sampling_min,
        "vllm_importance_sampling_clip_max": runtime.vllm_importance_sampling_max,
    }


# ----------------------------------------------------------------------------- the TRL backend
class ScheduleSampler(Sampler[int]):
    """TRL's ``RepeatSampler`` contract over a :class:`PromptSchedule`: per step, the global
    batch (each prompt row ``rollouts`` times) repeated ``repeats`` times, for ``steps`` steps."""

    def __init__(
        self,
        schedule: PromptSchedule,
        *,
        rollouts: int,
        repeats: int,
        steps: int,
        row_of: Callable[[int, str], int],
    ):
        self.schedule, self.rollouts, self.repeats, self.steps, self.row_of = schedule, rollouts, repeats, steps, row_of
        self.drawn: deque[StepDraw] = deque()  # drawn, not generated yet

    def __len__(self) -> int:
        return self.steps * self.repeats * self.schedule.batch * self.rollouts

    def __iter__(self) -> Iterator[int]:
        for _ in range(self.steps):
            draw = self.schedule.draw()
            self.drawn.append(draw)
            rows = [self.row_of(p, m) for p, m in zip(draw.prompts, draw.modes) for _ in range(self.rollouts)]
            for _ in range(self.repeats):
                yield from rows


class CascadeGRPOTrainer(GRPOTrainer):
    """TRL's GRPOTrainer drawing its prompts from a :class:`PromptSchedule`, timing generation,
    and recording each step's global results in the schedule (see the module docstring)."""

    def __init__(
        self,
        *args: Any,
        schedule: PromptSchedule,
        row_of: Callable[[int, str], int],
        steps: int,
        draws_log: Path | None = None,
        lm_head: str = "auto",
        rollouts: VLLMRollouts | None = None,
        drop_idle_rollouts: bool = True,
        **kwargs: Any,
    ):
        self.schedule, self.row_of, self.schedule_steps, self.draws_log = schedule, row_of, steps, draws_log
        self.sampler: ScheduleSampler | None = None
        self.current_draw: StepDraw | None = None
        self.rng_checkpoint: str | None = None
        self.lm_head = lm_head
        super().__init__(*args, **kwargs)
        self.drop_idle_rollouts = drop_idle_rollouts and can_drop_idle_rollouts(
            self.loss_type, self.beta, self.args.entropy_coef, self.top_entropy_quantile
        )
        install_lm_head(self.model, lm_head, temperature=self.temperature, outputs=("log_probs", "entropy"))
        self.rollouts, self.synced_step, self.ratio = rollouts, -1, ImportanceRatio()
        self.captured_logps: list | None = None
        if rollouts is not None:
            # TRL's vLLM branches (sampling log-probabilities, the optional importance-sampling
            # correction) apply to these rollouts; generation itself is _generate_single_turn below
            self.use_vllm, self.vllm_mode = True, "colocate"
        if not self.use_vllm:
            install_decoder(self.model)  # rollouts without finished sequences in the batch (llm/decode.py)
        if self.ref_model is not None:
            install_lm_head(self.ref_model, lm_head, temperature=self.temperature)

    def train(self, resume_from_checkpoint: str | None = None, **kwargs: Any):
        self.rng_checkpoint = resume_from_checkpoint
        return super().train(resume_from_checkpoint=resume_from_checkpoint, **kwargs)

    def _get_train_sampler(self, dataset: Any = None) -> ScheduleSampler:
        self.sampler = ScheduleSampler(
            self.schedule,
            rollouts=self.num_generations,
            repeats=self.args.steps_per_generation * self.num_iterations,
            steps=self.schedule_steps,
            row_of=self.row_of,
        )
        return self.sampler

    def _generate_and_score_completions(self, inputs: list[dict]) -> dict:
        assert self.sampler is not None
        self.current_draw = self.sampler.drawn.popleft()
        self._check_rows(inputs, self.current_draw)
        if self.rng_checkpoint is not None:
            # The trainer restores the RNG states before the data loader starts, which draws a
            # seed from them; restored here, the first resumed step samples exactly what the
            # uninterrupted run sampled.
            self._load_rng_state(self.rng_checkpoint)
            self.rng_checkpoint = None
        return super()._generate_and_score_completions(inputs)

    def _check_rows(self, inputs: Sequence[dict], draw: StepDraw) -> None:
        """The rows TRL handed this process are its slice of the drawn step, or the contract broke."""
        expected = [(p, m) for p, m in zip(draw.prompts, draw.modes) for _ in range(self.num_generations)]
        start = distributed.rank() * len(inputs)
        got = [(int(row["_pidx"]), row["_mode"]) for row in inputs]
        if got != expected[start : start + len(inputs)]:
            raise RuntimeError(
                f"step {draw.step}: the data loader handed this process rows {got[:4]}... instead of its slice "
                f"of the drawn step; the sampler contract with TRL is broken"
            )

    def _generate(self, prompts: list):
        start = time.perf_counter()
        result = super()._generate(prompts)
        self._log_metric("time/generation", time.perf_counter() - start)
        return result

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, *args, **kwargs):
        if self.rollouts is None:
            return super()._generate_single_turn(
                prompt_ids, images, multimodal_fields, num_generations, *args, **kwargs
            )
        if self.state.global_step != self.synced_step:  # new weights since the last rollouts
            self._log_metric("time/weight_sync", self.rollouts.sync(self.accelerator.unwrap_model(self.model)))
            self.synced_step = self.state.global_step
        return self.rollouts.generate(
            prompt_ids,
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=self.top_k or 0,
            max_tokens=self.max_completion_length,
            stop_ids=self.eos_token_ids,
            step=self.state.global_step,
        )

    # ------------------------------------------------------------------ the vLLM / trainer ratio
    def _get_per_token_logps_and_entropies(self, *args, **kwargs):
        result = super()._get_per_token_logps_and_entropies(*args, **kwargs)
        if self.captured_logps is not None:
            self.captured_logps.append(result[0])
        return result

    def _compute_loss(self, model, inputs):
        if self.drop_idle_rollouts and self.model.training:
            inputs = self._learning_rows(inputs)
        sampled = inputs.get("sampling_per_token_logps")
        if self.rollouts is None or sampled is None:
            return super()._compute_loss(model, inputs)
        self.captured_logps = []
        try:
            loss = super()._compute_loss(model, inputs)
            self.ratio.add(self.captured_logps[0], sampled, inputs["completion_mask"])
        finally:
            self.captured_logps = None
        return loss

    def _learning_rows(self, inputs: dict) -> dict:
        """The micro-batch without its idle rollouts (train/learning_rows.py), the same number of
        rows on every process."""
        everywhere = distributed.gather(int(learning_mask(inputs).sum()))
        kept, _ = learning_rows(inputs, max(everywhere))
        share = sum(everywhere) / (inputs["completion_ids"].size(0) * len(everywhere))
        self._metrics["train"]["train/learning_share"].append(share)  # averaged over the step's micro-batches
        return kept

    def log(self, logs: dict[str, float], *args: Any, **kwargs: Any) -> None:
        if self.rollouts is not None and "loss" in logs:  # a training step's log (all processes)
            logs.update(self.ratio.flush())
        super().log(logs, *args, **kwargs)

    def record_scored(self, batch: ScoredBatch) -> None:
        """The reward function's report of the step (every process's rollouts)."""
        draw = self.current_draw
        assert draw is not None
        self.schedule.record(draw.step, batch.prompt_indices, batch.rewards)
        digests = distributed.gather(self.schedule.digest())
        if len(set(digests)) > 1:
            raise RuntimeError(f"step {draw.step}: the processes' prompt schedules disagree ({digests})")
        for name, value in self.schedule.metrics().items():
            self._log_metric(name, value)
        if self.draws_log is not None and distributed.is_main():
            with open(self.draws_log, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(draw_record(draw, batch, digests)) + "\n")


def draw_record(draw: StepDraw, batch: ScoredBatch, digests: Sequence[str]) -> dict:
    """One line of ``draws.jsonl``: what a step trained, and how its rollouts scored."""
    return {
        "step": draw.step,
        "prompts": list(draw.prompts),
        "modes": list(draw.modes),
        "epochs": list(draw.epochs),
        "rollouts": len(batch.rewards),
        "scored": sum(r is not None for r in batch.rewards),
        "schedule_digests": list(digests),
    }


class TruncationStop(TrainerCallback):
    """The curriculum's stop rule, fed with each logged step's truncation ratio."""

    def __init__(self, rule: TruncationStopRule):
        self.rule = rule

    def on_log(self, args, state, control, logs=None, **kwargs):
        ratio = (logs or {}).get("completions/clipped_ratio")
        if ratio is not None and self.rule.observe(state.global_step, float(ratio)):
            control.should_training_stop = True


# ----------------------------------------------------------------------------- the stage
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
    sample_dtype: str | None = None,
) -> Path:
    """Run every curriculum sub-stage of ``stage``; write ``stage_dir/model``,
    ``stage_dir/metrics.jsonl`` and ``draws.jsonl`` per sub-stage. Returns the model directory.
    ``sample_dtype``: the weights of vLLM rollouts and the prompt filter (None = ``model_dtype``)."""
    sample_dtype = sample_dtype or model_dtype
    prompts, report = load_rl_prompts(stage, seed=seed, variables=variables)
    kept = kept_prompts(
        stage,
        prompts,
        model=model_in,
        stage_dir=stage_dir,
        seed=seed,
        reward_options=reward_options,
        workers=runtime.reward_workers,
        dtype=sample_dtype,
        engine=local_engine(runtime),
    )
    data = rl_data_from(stage, [prompts[i] for i in kept], report)
    log.info("%s: %s", stage.name, data.report.summary())
    distributed.on_main("stage data report", lambda: write_data_report(stage_dir, data.report))

    def run_substage(index: int, step: CurriculumStep, model: Path, substage_dir: Path) -> dict:
        dtypes = (model_dtype, sample_dtype)
        return _run_substage(stage, step, index, data, model, substage_dir, runtime, seed, reward_options, dtypes)

    model = run_substages(stage.curriculum, stage_dir, model_in, run_substage)
    merge_substage_metrics(stage_dir, len(stage.curriculum))
    return model


def write_data_report(stage_dir: Path, report: LoadReport) -> None:
    stage_dir.mkdir(parents=True, exist_ok=True)
    summary = {"kept": report.kept, "read": report.read, "skipped": dict(report.skipped)}
    (stage_dir / "data_report.json").write_text(json.dumps(summary))


def _run_substage(
    stage: GRPOStage,
    step: CurriculumStep,
    index: int,
    data: RLData,
    model: Path,
    substage_dir: Path,
    runtime: Runtime,
    seed: int,
    reward_options: Mapping[str, Mapping[str, Any]],
    dtypes: tuple[str, str],
) -> dict:
    from datasets import Dataset
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model, local_files_only=True)
    substage_data = drop_long_prompts(data, tokenizer, step.max_prompt_length)
    trainer_dir = substage_dir / "trainer"
    resume = resume_point(trainer_dir)
    schedule, offset, done_steps = _schedule_for(stage, substage_data, substage_dir, index, seed, resume)
    rule = TruncationStopRule.for_step(step)
    history = distributed.on_main("sub-stage logs", lambda: rewind_logs(substage_dir, done_steps, offset))
    for logged_step, ratio in history:  # the stop rule continues where the interrupted run was
        rule.observe(logged_step, ratio)
    rows = substage_data.row_index()
    reward = CascadeReward(
        tokenizer,
        domain=None,
        options=reward_options,
        overlong_filter=step.overlong_filter,
        workers=runtime.reward_workers,
        shaping=stage.stabilisers.reward_shaping,
        group_size=stage.rollouts_per_prompt,
    )
    model_dtype, sample_dtype = dtypes
    trainer = CascadeGRPOTrainer(
        model=str(model),
        reward_funcs=[reward],
        args=grpo_config(
            stage, step, runtime, trainer_dir, seed, model_dtype, run_name=f"{stage.name}/substage-{index + 1}"
        ),
        train_dataset=Dataset.from_list(substage_data.rows),
        processing_class=tokenizer,
        callbacks=[
            MetricsWriter(substage_dir / "metrics.jsonl", substage=f"{index + 1}"),
            TruncationStop(rule),
            CheckpointMarker(lambda global_step: {"schedule": schedule.checkpoint(offset + global_step)}),
        ],
        schedule=schedule,
        row_of=lambda prompt, mode: rows[(prompt, mode)],
        steps=step.max_steps - done_steps,
        draws_log=substage_dir / "draws.jsonl",
        lm_head=runtime.lm_head,
        peft_config=peft_config(stage.lora),
        rollouts=rollout_engine(stage, step, runtime, model, sample_dtype, seed),
        drop_idle_rollouts=runtime.drop_idle_rollouts,
    )
    reward.on_scored = trainer.record_scored
    compact_progress(trainer).train(resume_from_checkpoint=str(resume.path) if resume else None)
    save_checkpoint(trainer, tokenizer, substage_dir / "model")
    trained = trainer.state.global_step
    handover = schedule.checkpoint(offset + trained)
    distributed.on_main("sub-stage schedule", lambda: (substage_dir / "schedule.json").write_text(json.dumps(handover)))
    prune_checkpoints(trainer_dir)
    return {
        "steps": trained,
        "max_response_length": step.max_response_length,
        "stopped_on_truncation": rule.stopped_at is not None,
        "truncation_ratio": rule.ratio,
        "resumed_from_step": done_steps or None,
    }


def _schedule_for(
    stage: GRPOStage,
    data: RLData,
    substage_dir: Path,
    index: int,
    seed: int,
    resume: Any,
) -> tuple[PromptSchedule, int, int]:
    """The sub-stage's schedule, the schedule step before its first step, and the steps
    already trained: from its own checkpoint (resume), from the previous sub-stage's hand-over
    (the dynamic filter and the epoch carry over), or new."""
    schedule = PromptSchedule(
        data.prompts,
        prompts_per_batch=stage.prompts_per_batch,
        thinking=_batch_split(stage),
        dynamic_filter=stage.dynamic_filter,
        seed=seed,
        modes=data.modes,
    )
    if resume is not None:
        state = resume.state["schedule"]
        schedule.load_state_dict(state)
        return schedule, state["next_step"] - 1 - resume.global_step, resume.global_step
    previous = substage_dir.parent / f"substage-{index}" / "schedule.json"
    if index > 0:
        state = distributed.on_main("previous schedule", lambda: json.loads(previous.read_text()))
        schedule.load_state_dict(state)
    return schedule, schedule.next_step - 1, 0


def _batch_split(stage: GRPOStage) -> str:
    """How each batch's slots are split into modes; prompts of a domain with a fixed mode take
    that mode whatever their slot (per-domain ``thinking``)."""
    if isinstance(stage.thinking, str):
        return stage.thinking
    return "half" if "half" in stage.thinking.values() else "think"


def rewind_logs(substage_dir: Path, done_steps: int, offset: int) -> list[tuple[int, float]]:
    """Forget what a crashed run logged after its last checkpoint; return the truncation ratios
    logged before it (main process)."""
    truncate_jsonl(substage_dir / "metrics.jsonl", done_steps)
    truncate_jsonl(substage_dir / "draws.jsonl", offset + done_steps)
    return [
        (int(record["step"]), float(record["truncation_ratio"]))
        for record in read_metrics(substage_dir / "metrics.jsonl")
        if "truncation_ratio" in record
    ]
