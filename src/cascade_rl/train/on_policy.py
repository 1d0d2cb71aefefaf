"""The one on-policy training routine of GRPO and distillation stages (SPEC sections 5-6; MOPD,
docs/mopd.md): a sub-stage's prompts drawn by a :class:`~cascade_rl.train.schedule.PromptSchedule`,
the policy's rollouts scored (GRPO: verifiers) or given token-level advantages (distillation:
teachers), one optimizer step per rollout batch, checkpoints every ``runtime.save_steps`` with the
schedule's state, ``--resume`` to the same weights.

What a stage kind brings is data: its :class:`StepSettings` (the objective's numbers, from which
the backend builds its configuration, ``train/trl_backend.py``), its rows and schedule, and either
a reward function or a :class:`TokenObjective`. :func:`train_substage` does the rest, the same for
both: the trainer (with the metrics writer and the checkpoint marker), the vLLM rollouts when the
run samples with vLLM, training from the last checkpoint, saving the model, pruning checkpoints.
A stage whose rows include multi-turn domains also brings its :class:`EpisodeSettings`
(``train/episodes.py``): those rows are played as episodes, recorded in ``episodes.jsonl``.

The protocols here are the engine's side of the boundary with the backend: :class:`TokenObjective`
is what an objective offers the trainer, :class:`PolicyModels` what the trainer offers it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from cascade_rl.recipe import OnPolicyStage, RecipeError, Runtime
from cascade_rl.train import distributed
from cascade_rl.train.common import (
    CheckpointMarker,
    MetricsWriter,
    ResumePoint,
    Trackers,
    base_args,
    fit,
    peft_config,
)
from cascade_rl.train.context import StageContext
from cascade_rl.train.episodes import EpisodeSettings
from cascade_rl.train.schedule import PromptSchedule

#: prompt tokens a rollout's KV cache is sized for when the sub-stage sets no max_prompt_length
TYPICAL_PROMPT_TOKENS = 1024


@dataclass(frozen=True)
class StepSettings:
    """The paper's on-policy objective for one (sub-)stage, whatever its kind: the sampling, the
    batch and its split, the optimiser, the loss and the vLLM / trainer correction."""

    rollouts_per_prompt: int
    per_device_batch_size: int
    accumulation: int
    max_response_length: int
    max_steps: int
    temperature: float
    top_p: float
    top_k: int | None
    learning_rate: float
    weight_decay: float
    max_grad_norm: float
    kl_coef: float = 0.0
    token_loss: bool = True
    #: truncated rollouts out of the loss (overlong filtering)
    mask_truncated: bool = False
    #: TRL's vLLM / trainer importance-sampling correction: (mode or "off", low, high)
    importance_sampling: tuple[str, float | None, float | None] = ("off", None, None)

    @classmethod
    def of(cls, stage: OnPolicyStage, *, max_response_length: int, max_steps: int, **objective: Any) -> StepSettings:
        """The settings of ``stage`` for this many processes; ``objective``: ``mask_truncated``
        and ``importance_sampling``."""
        per_device, accumulation = batch_shape(stage, distributed.world_size())
        return cls(
            rollouts_per_prompt=stage.rollouts_per_prompt,
            per_device_batch_size=per_device,
            accumulation=accumulation,
            max_response_length=max_response_length,
            max_steps=max_steps,
            temperature=stage.temperature,
            top_p=stage.top_p,
            top_k=stage.top_k,
            learning_rate=stage.learning_rate,
            weight_decay=stage.weight_decay,
            max_grad_norm=stage.max_grad_norm,
            kl_coef=stage.stabilisers.kl_coef,
            token_loss=stage.stabilisers.loss == "token",
            **objective,
        )


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


def on_policy_config(settings: StepSettings, runtime: Runtime, output_dir: Path, seed: int, dtype: str, run_name):
    """The backend's configuration of ``settings`` (``train/trl_backend.py``)."""
    from cascade_rl.train.trl_backend import on_policy_config as trl_config

    return trl_config(settings, runtime, base_args(runtime, output_dir, seed, run_name=run_name, dtype=dtype))


# ----------------------------------------------------------------------------- the engine's protocols
class PolicyModels(Protocol):
    """What the trainer offers a :class:`TokenObjective` (``train/trl_backend.py``)."""

    model: Any
    temperature: float

    def load_frozen_model(self, path: str) -> Any: ...

    def sequence_logps(
        self, model: Any, output: Mapping[str, Any], rows: Any = None, batch_size: int | None = None
    ) -> Any: ...

    def log_step_metrics(self, values: Mapping[str, float]) -> None: ...


class TokenObjective(Protocol):
    """A step objective whose advantage is per token (distillation): it loads what it needs once,
    then turns each step's rollouts (``output``: the trainer's tensors) into (B, T) advantages."""

    def prepare(self, models: PolicyModels) -> None: ...

    def advantages(
        self, inputs: Sequence[Mapping[str, Any]], output: Mapping[str, Any], models: PolicyModels
    ) -> Any: ...


# ----------------------------------------------------------------------------- the routine
@dataclass
class Substage:
    """One on-policy sub-stage as :func:`train_substage` trains it. ``offset`` is the schedule's
    step before the sub-stage's first; ``done_steps`` the steps a resumed run has trained."""

    stage: OnPolicyStage
    settings: StepSettings
    rows: list[dict]
    schedule: PromptSchedule
    row_of: Callable[[int, str], int]
    label: str
    run_name: str
    tokenizer: Any
    resume: ResumePoint | None = None
    offset: int = 0
    done_steps: int = 0
    reward: Any = None
    objective: TokenObjective | None = None
    callbacks: list = field(default_factory=list)
    prompt_tokens: int | None = None  # the longest prompt the rollouts' KV cache must hold
    episodes: EpisodeSettings | None = None  # how multi-turn rows play (None: the stage has none)


def train_substage(substage: Substage, model: Path, substage_dir: Path, context: StageContext) -> int:
    """Train ``substage`` from ``model`` into ``substage_dir/model`` (module docstring); returns
    the trainer's global step (the sub-stage's steps, those of a resumed run included)."""
    from datasets import Dataset

    from cascade_rl.train.trl_backend import OnPolicyTrainer

    stage, settings, schedule = substage.stage, substage.settings, substage.schedule
    runtime = context.runtime

    def schedule_state(global_step: int) -> dict:
        return {"schedule": schedule.checkpoint(substage.offset + global_step)}

    args = on_policy_config(settings, runtime, substage_dir / "trainer", context.seed, context.dtypes.train,
                            substage.run_name)  # fmt: skip
    trainer = OnPolicyTrainer(
        model=str(model),
        reward_funcs=[substage.reward] if substage.reward is not None else None,  # else the objective's
        args=args,
        train_dataset=Dataset.from_list(substage.rows),
        processing_class=substage.tokenizer,
        callbacks=[
            MetricsWriter(substage_dir / "metrics.jsonl", substage=substage.label),
            *substage.callbacks,
            CheckpointMarker(schedule_state),
        ],
        schedule=schedule,
        row_of=substage.row_of,
        steps=settings.max_steps - substage.done_steps,
        draws_log=substage_dir / "draws.jsonl",
        lm_head=runtime.lm_head,
        peft_config=peft_config(stage.lora),
        rollouts=rollout_engine(substage, model, context),
        drop_idle_rollouts=runtime.drop_idle_rollouts,
        reward_shaping=stage.stabilisers.reward_shaping,
        objective=substage.objective,
        episodes=substage.episodes,
        episodes_log=substage_dir / "episodes.jsonl",
    )
    trackers = Trackers.of(runtime, substage_dir / "trainer", substage.run_name)
    fit(trainer, substage.tokenizer, substage_dir, substage.resume, trackers)
    return trainer.state.global_step


def rollout_engine(substage: Substage, model: Path, context: StageContext) -> Any:
    """This process's vLLM rollouts for a sub-stage (the cascade drives vLLM in colocate mode), or
    None when TRL's client (server mode) or the trainer's model samples."""
    runtime, stage = context.runtime, substage.stage
    if not cascade_serves_rollouts(runtime):
        return None
    from cascade_rl.train.rollouts import VLLMRollouts

    per_process = stage.prompts_per_batch * stage.rollouts_per_prompt // distributed.world_size()
    return VLLMRollouts(
        model,
        dtype=context.dtypes.sample,
        sequences=per_process,
        sequence_tokens=(substage.prompt_tokens or TYPICAL_PROMPT_TOKENS) + substage.settings.max_response_length,
        seed=context.seed,
        runtime=runtime,
    )


def cascade_serves_rollouts(runtime: Runtime) -> bool:
    """The cascade's own vLLM engine generates the rollouts (colocate mode, vLLM chosen for the run)."""
    return runtime.use_vllm is True and runtime.vllm_mode == "colocate"
