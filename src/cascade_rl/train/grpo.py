"""One domain-wise RL stage: GRPO with the paper's semantics (SPEC sections 5-6).

The paper's objective -- strictly on-policy (one optimizer step per rollout batch, importance
ratio exactly 1; TRL's vLLM/trainer correction off unless ``runtime.vllm_importance_sampling``
asks), no KL term and no reference model, no entropy bonus, the token-level loss (the sum over
every token of the batch divided by the total token count), group z-score advantages, overlong
filtering (a truncated rollout unscored, out of its group's statistics and out of the loss) and a
constant learning rate with AdamW -- is a :class:`~cascade_rl.train.on_policy.StepSettings` per
curriculum sub-stage, which the backend maps onto its trainer (``train/trl_backend.py``), and a
reward function over the registry (:class:`~cascade_rl.train.verification.RolloutScorer`), which
verifies each rollout as it finishes (``runtime.async_rewards``) and masks a rollout whose verifier
reached no verdict (``max_masked_share`` stops the stage when too many do).

**Rollouts** come from vLLM when the run's engine is vLLM (``runtime.use_vllm``, settled once per
run for the machine: :mod:`cascade_rl.train.machine`): in colocate mode the cascade drives an
engine in each process itself (:mod:`cascade_rl.train.rollouts`: weights synced after every
optimizer step, steps seeded, the vLLM / trainer importance ratio logged); in server mode TRL's
own client talks to ``trl vllm-serve`` (GPU nodes, NCCL weight sync). Without vLLM the trainer's
model samples through the project's loop (:mod:`cascade_rl.llm.decode`).

**Which prompts a step trains** is decided by the engine-neutral
:class:`~cascade_rl.train.schedule.PromptSchedule` (dynamic filter, thinking split), served to
the trainer through TRL's sampler contract: each step is one *global* generation batch of
``prompts_per_batch`` prompts, each repeated ``rollouts_per_prompt`` times, and accelerate hands
each process its slice. So every drawn prompt is generated ``rollouts_per_prompt`` times and
trained once, a step trains exactly ``prompts_per_batch`` prompts, and the sequence of prompts is
the same for any number of processes and micro-batches. The trainer's scoring step gathers every
process's results; the schedule records them on every process, and the processes check after each
step that their schedules agree.

The stage runs its curriculum's sub-stages through the one on-policy routine
(:func:`~cascade_rl.train.on_policy.train_substage`), after the optional prompt filter
(:mod:`cascade_rl.train.prompt_filter`). ``--resume`` continues inside a sub-stage from the
trainer's last checkpoint (``runtime.save_steps``): model, optimizer, scheduler and RNG states,
plus the schedule, so the resumed run draws the same prompts and reaches the same weights.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from cascade_rl.data.loading import LoadReport
from cascade_rl.recipe import CurriculumStep, GRPOStage, RecipeError, Runtime, expand
from cascade_rl.train import distributed
from cascade_rl.train.common import read_metrics, resume_point, truncate_jsonl
from cascade_rl.train.context import StageContext
from cascade_rl.train.curriculum import TruncationStopRule, merge_substage_metrics, run_substages
from cascade_rl.train.machine import local_engine
from cascade_rl.train.on_policy import StepSettings, Substage, on_policy_config, train_substage
from cascade_rl.train.prompt_filter import kept_prompts
from cascade_rl.train.rl_data import RLData, drop_long_prompts, load_rl_prompts, rl_data_from
from cascade_rl.train.schedule import PromptSchedule
from cascade_rl.train.verification import RolloutScorer

log = logging.getLogger(__name__)

#: prompt tokens a rollout's KV cache is sized for when the sub-stage sets no max_prompt_length
TYPICAL_PROMPT_TOKENS = 1024


# ----------------------------------------------------------------------------- the objective
def grpo_config(
    stage: GRPOStage,
    step: CurriculumStep,
    runtime: Runtime,
    output_dir: Path,
    seed: int,
    model_dtype: str = "auto",
    run_name: str | None = None,
):
    """The backend's configuration of one curriculum sub-stage (module docstring)."""
    return on_policy_config(step_settings(stage, step, runtime), runtime, output_dir, seed, model_dtype, run_name)


def step_settings(stage: GRPOStage, step: CurriculumStep, runtime: Runtime) -> StepSettings:
    """The paper's objective for one curriculum sub-stage: its response budget and steps, overlong
    filtering, and TRL's vLLM/trainer correction only where the recipe names a mode."""
    return StepSettings.of(
        stage,
        max_response_length=step.max_response_length,
        max_steps=step.max_steps,
        mask_truncated=step.overlong_filter,
        importance_sampling=(
            runtime.vllm_importance_sampling,
            runtime.vllm_importance_sampling_min,
            runtime.vllm_importance_sampling_max,
        ),
    )


class TruncationStop(TrainerCallback):
    """The curriculum's stop rule, fed with each logged step's truncation ratio."""

    def __init__(self, rule: TruncationStopRule):
        self.rule = rule

    def on_log(self, args, state, control, logs=None, **kwargs):
        ratio = (logs or {}).get("completions/clipped_ratio")
        if ratio is not None and self.rule.observe(state.global_step, float(ratio)):
            control.should_training_stop = True


# ----------------------------------------------------------------------------- the stage
def run_grpo_stage(stage: GRPOStage, context: StageContext) -> Path:
    """Run every curriculum sub-stage of ``stage`` from ``context.policy``; write
    ``stage_dir/metrics.jsonl``, each sub-stage's model and ``draws.jsonl``. Returns the last
    sub-stage's model directory. Reward options name the reward models of ``context``; the prompt
    filter and vLLM rollouts sample in ``context.dtypes.sample``."""
    runtime, stage_dir = context.runtime, context.stage_dir
    options = resolve_reward_options(stage, context.reward_models)
    distributed.on_main("reward servers", partial(check_reward_servers, stage, options, runtime))
    prompts, report = load_rl_prompts(stage, seed=context.seed, variables=context.variables)
    kept = kept_prompts(
        stage,
        prompts,
        model=context.policy,
        stage_dir=stage_dir,
        seed=context.seed,
        reward_options=options,
        workers=runtime.reward_workers,
        dtype=context.dtypes.sample,
        engine=local_engine(runtime),
    )
    data = rl_data_from(stage, [prompts[i] for i in kept], report)
    log.info("%s: %s", stage.name, data.report.summary())
    distributed.on_main("stage data report", lambda: write_data_report(stage_dir, data.report))

    def run_substage(index: int, step: CurriculumStep, model: Path, substage_dir: Path) -> dict:
        return _run_substage(stage, step, index, data, model, substage_dir, context, options)

    model = run_substages(stage.curriculum, stage_dir, context.policy, run_substage)
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
    context: StageContext,
    options: Mapping[str, Mapping[str, Any]],
) -> dict:
    """One curriculum sub-stage through the on-policy routine, with the truncation stop rule and
    the schedule handed to the next sub-stage (``schedule.json``)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model, local_files_only=True)
    substage_data = drop_long_prompts(data, tokenizer, step.max_prompt_length)
    resume = resume_point(substage_dir / "trainer")
    schedule, offset, done_steps = _schedule_for(stage, substage_data, substage_dir, index, context.seed, resume)
    rule = TruncationStopRule.for_step(step)
    history = distributed.on_main("sub-stage logs", lambda: rewind_logs(substage_dir, done_steps, offset))
    for logged_step, ratio in history:  # the stop rule continues where the interrupted run was
        rule.observe(logged_step, ratio)
    rows = substage_data.row_index()
    reward = RolloutScorer(
        tokenizer,
        options=options,
        overlong_filter=step.overlong_filter,
        workers=context.runtime.reward_workers,
        asynchronous=context.runtime.async_rewards,
        max_masked_share=stage.max_masked_share,
    )
    substage = Substage(
        stage,
        step_settings(stage, step, context.runtime),
        substage_data.rows,
        schedule,
        row_of=lambda prompt, mode: rows[(prompt, mode)],
        label=f"{index + 1}",
        run_name=f"{stage.name}/substage-{index + 1}",
        tokenizer=tokenizer,
        resume=resume,
        offset=offset,
        done_steps=done_steps,
        reward=reward,
        callbacks=[TruncationStop(rule)],
        prompt_tokens=step.max_prompt_length,
    )
    trained = train_substage(substage, model, substage_dir, context)
    handover = schedule.checkpoint(offset + trained)
    distributed.on_main("sub-stage schedule", lambda: (substage_dir / "schedule.json").write_text(json.dumps(handover)))
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


# ----------------------------------------------------------------------------- reward options
def resolve_reward_options(stage: GRPOStage, reward_models: Mapping[str, Path]) -> dict[str, dict]:
    """Scorer options as the scorers take them: ``'@name'`` becomes that reward-model stage's
    checkpoint and ``${VAR}`` expands. A ``judge`` given as a spec (``local:/path`` or
    ``http://host/v1#model``) stays one: each domain loads its own kind of judge from it, once
    per process (SWE's yes/no judge, GenRM's pairwise judge)."""
    resolved: dict[str, dict] = {}
    for domain, options in stage.reward_options.items():
        resolved[domain] = {}
        for key, value in options.items():
            if isinstance(value, str) and value.startswith("@"):
                if value[1:] not in reward_models:
                    raise RecipeError(f"{stage.name}.reward_options.{domain}.{key}: {value} has not been trained")
                value = str(reward_models[value[1:]])
            elif isinstance(value, str):
                value = expand(value)
            resolved[domain][key] = value
    return resolved


def check_reward_servers(stage: GRPOStage, options: Mapping[str, Mapping], runtime: Runtime) -> None:
    """Before a stage trains: every reward server and judge its domains point at answers (a
    server that never comes up is a clear error now, not a run of zero rewards)."""
    from cascade_rl.rewards.registry import PreflightError, preflight

    for domain in sorted({*options, *([stage.domain] if stage.domain else [])}):
        try:
            preflight(domain, options.get(domain), timeout=runtime.server_wait_s)
        except PreflightError as error:
            raise RecipeError(f"stages ({stage.name}).{error}") from None
