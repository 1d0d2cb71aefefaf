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

import dataclasses
import json
import logging
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from cascade_rl.data.loading import LoadReport
from cascade_rl.recipe import CurriculumStep, DataSource, GRPOStage, RecipeError, Runtime, expand
from cascade_rl.train import distributed
from cascade_rl.train.common import MetricsWriter, finite_number, read_metrics, resume_point, truncate_jsonl
from cascade_rl.train.context import StageContext
from cascade_rl.train.curriculum import SubstageStop, merge_substage_metrics, run_substages
from cascade_rl.train.episodes import EpisodeSettings
from cascade_rl.train.machine import local_engine
from cascade_rl.train.on_policy import StepSettings, Substage, on_policy_config, train_substage
from cascade_rl.train.prompt_filter import kept_prompts
from cascade_rl.train.rl_data import RLData, data_key, drop_long_prompts, load_rl_prompts, rl_data_from
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


class StopRules(TrainerCallback):
    """The curriculum step's stop rules (:class:`~cascade_rl.train.curriculum.SubstageStop`), fed
    with each logged step's metrics under ``metrics.jsonl``'s names, as the replay of a resumed
    sub-stage feeds them."""

    def __init__(self, rules: SubstageStop):
        self.rules = rules

    def on_log(self, args, state, control, logs=None, **kwargs):
        metrics = logged_metrics(logs or {})
        if metrics and self.rules.observe(state.global_step, metrics):
            control.should_training_stop = True


def logged_metrics(logs: Mapping[str, Any]) -> dict[str, float]:
    """One log's metrics, named and kept as ``metrics.jsonl`` keeps them (:class:`MetricsWriter`)."""
    found = {MetricsWriter.RENAMES.get(key, key): finite_number(value) for key, value in logs.items()}
    return {name: value for name, value in found.items() if value is not None}


# ----------------------------------------------------------------------------- the stage
def run_grpo_stage(stage: GRPOStage, context: StageContext) -> Path:
    """Run every curriculum sub-stage of ``stage`` from ``context.policy``, each on its data set
    (:func:`stage_data`); write ``stage_dir/metrics.jsonl``, each sub-stage's model and
    ``draws.jsonl``. Returns the last sub-stage's model directory. Reward options name the reward
    models of ``context``; the prompt filter and vLLM rollouts sample in ``context.dtypes.sample``."""
    options = resolve_reward_options(stage, context.reward_models, context.variables)
    distributed.on_main("reward servers", partial(check_reward_servers, stage, options, context.runtime))
    data = stage_data(stage, context, options)

    def run_substage(index: int, step: CurriculumStep, model: Path, substage_dir: Path) -> dict:
        return _run_substage(stage, step, index, data[index], model, substage_dir, context, options)

    model = run_substages(stage.curriculum, context.stage_dir, context.policy, run_substage)
    merge_substage_metrics(context.stage_dir, len(stage.curriculum))
    return model


def stage_data(stage: GRPOStage, context: StageContext, options: Mapping[str, Mapping[str, Any]]) -> list[RLData]:
    """Each sub-stage's prompts: its own ``data`` or the stage's, each distinct data set loaded
    once before the first sub-stage trains and put through the prompt filter (sampled by the
    stage's starting policy; the stage's data in the stage directory, a sub-stage's own in the
    directory of the first sub-stage that trains it). ``data_report.json`` counts every set; a
    sub-stage with data of its own also gets its own."""
    sets: dict[str, RLData] = {}
    reports: list[LoadReport] = []
    for index in range(len(stage.curriculum)):
        sources = stage.substage_data(index)
        key = data_key(sources)
        if key in sets:
            continue
        own = stage.curriculum[index].data is not None
        where = context.stage_dir / f"substage-{index + 1}" if own else context.stage_dir
        sets[key] = _data_set(stage, sources, index, where, context, options)
        reports.append(sets[key].report)
        if own:
            distributed.on_main("sub-stage data report", partial(write_data_report, where, sets[key].report))
    total = LoadReport()
    for report in reports:
        total.merge(report)
    distributed.on_main("stage data report", partial(write_data_report, context.stage_dir, total))
    return [sets[data_key(stage.substage_data(index))] for index in range(len(stage.curriculum))]


def _data_set(
    stage: GRPOStage,
    sources: Sequence[DataSource],
    index: int,
    where: Path,
    context: StageContext,
    options: Mapping[str, Mapping[str, Any]],
) -> RLData:
    """One data set of the stage, loaded and prompt-filtered (results in ``where``) for the
    first sub-stage that trains it (``index``)."""
    prompts, report = load_rl_prompts(stage, seed=context.seed, variables=context.variables, sources=sources)
    kept = kept_prompts(
        stage,
        prompts,
        model=context.policy,
        stage_dir=where,
        seed=context.seed,
        reward_options=options,
        workers=context.runtime.reward_workers,
        dtype=context.dtypes.sample,
        engine=local_engine(context.runtime),
        max_tokens=stage.curriculum[index].max_response_length,
    )
    data = rl_data_from(stage, [prompts[i] for i in kept], report, key=data_key(sources))
    label = stage.name if where == context.stage_dir else f"{stage.name}/{where.name}"
    log.info("%s: %s", label, data.report.summary())
    return data


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
    """One curriculum sub-stage through the on-policy routine, with its stop rules and the
    schedule handed to the next sub-stage (``schedule.json``)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model, local_files_only=True)
    substage_data = drop_long_prompts(data, tokenizer, step.max_prompt_length)
    resume = resume_point(substage_dir / "trainer")
    schedule, offset, done_steps = _schedule_for(stage, substage_data, substage_dir, index, context.seed, resume)
    rules = SubstageStop(step)
    history = distributed.on_main("sub-stage logs", lambda: rewind_logs(substage_dir, done_steps, offset))
    for record in history:  # the stop rules continue where the interrupted run was
        rules.observe(int(record["step"]), record)
    settings = step_settings(stage, step, context.runtime)
    if rules.stopped_by is not None:  # a rule ended it at the checkpoint resumed from: no step more
        settings = dataclasses.replace(settings, max_steps=done_steps)
    rows = substage_data.row_index()
    reward = RolloutScorer(
        tokenizer,
        options=options,
        overlong_filter=step.overlong_filter,
        workers=context.runtime.reward_workers,
        asynchronous=context.runtime.async_rewards,
        max_masked_share=stage.max_masked_share,
        mask_groups_at_or_below=stage.mask_groups_at_or_below,
    )
    episodes = EpisodeSettings.of(stage, (row["_domain"] for row in substage_data.rows), options)
    substage = Substage(
        stage,
        settings,
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
        callbacks=[StopRules(rules)],
        prompt_tokens=step.max_prompt_length,
        episodes=episodes,
    )
    trained = train_substage(substage, model, substage_dir, context)
    handover = {**schedule.checkpoint(offset + trained), "data": data.key}
    distributed.on_main("sub-stage schedule", lambda: (substage_dir / "schedule.json").write_text(json.dumps(handover)))
    if distributed.is_main():
        print(f"{stage.name}/substage-{index + 1}: {trained} steps; {rules.explain()}", flush=True)
    return {
        "steps": trained,
        "max_response_length": step.max_response_length,
        **rules.summary(),
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
    already trained: from its own checkpoint (resume), or continued from the last sub-stage that
    trained the same data set (its ``schedule.json``: the epoch and the dynamic filter carry over),
    or new; step numbers go on from the previous sub-stage's."""
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
    if index > 0:
        next_step, same_data = distributed.on_main("previous schedules", partial(_handovers, substage_dir, index, data))
        if same_data is not None:
            schedule.load_state_dict(same_data)
        if schedule.next_step != next_step:  # another data set trained in between, or none before
            schedule.continue_at(next_step)
    return schedule, schedule.next_step - 1, 0


def _handovers(substage_dir: Path, index: int, data: RLData) -> tuple[int, dict | None]:
    """The step after the previous sub-stage's last, and the schedule hand-over of the last
    sub-stage before ``index`` that trained ``data``'s set (None: none did)."""
    states = [
        json.loads((substage_dir.parent / f"substage-{i}" / "schedule.json").read_text()) for i in range(1, index + 1)
    ]
    same = [state for state in states if state.get("data", data.key) == data.key]  # no key: written before sets
    return int(states[-1]["next_step"]), same[-1] if same else None


def _batch_split(stage: GRPOStage) -> str:
    """How each batch's slots are split into modes; prompts of a domain with a fixed mode take
    that mode whatever their slot (per-domain ``thinking``)."""
    if isinstance(stage.thinking, str):
        return stage.thinking
    return "half" if "half" in stage.thinking.values() else "think"


def rewind_logs(substage_dir: Path, done_steps: int, offset: int) -> list[dict]:
    """Forget what a crashed run logged after its last checkpoint; return the metrics logged
    before it (main process)."""
    truncate_jsonl(substage_dir / "metrics.jsonl", done_steps)
    truncate_jsonl(substage_dir / "draws.jsonl", offset + done_steps)
    truncate_jsonl(substage_dir / "episodes.jsonl", offset + done_steps)
    return read_metrics(substage_dir / "metrics.jsonl")


# ----------------------------------------------------------------------------- reward options
def resolve_reward_options(
    stage: GRPOStage, reward_models: Mapping[str, Path], variables: Mapping[str, str] | None = None
) -> dict[str, dict]:
    """Scorer options as the scorers take them: ``'@name'`` becomes that reward-model stage's
    checkpoint and ``${VAR}`` expands -- the run's ``${run}`` / ``${world}`` from ``variables``
    (:func:`~cascade_rl.recipe.run_variables`), then the environment. A ``judge`` given as a spec
    (``local:${run}/01-sft/model`` or ``http://host/v1#model``) stays one: each domain loads its
    own kind of judge from it, once per process (SWE's yes/no judge, GenRM's pairwise judge)."""
    resolved: dict[str, dict] = {}
    for domain, options in stage.reward_options.items():
        resolved[domain] = {}
        for key, value in options.items():
            if isinstance(value, str) and value.startswith("@"):
                if value[1:] not in reward_models:
                    raise RecipeError(f"{stage.name}.reward_options.{domain}.{key}: {value} has not been trained")
                value = str(reward_models[value[1:]])
            elif isinstance(value, str):
                value = expand(value, dict(variables or {}))
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
