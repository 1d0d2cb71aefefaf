"""The stage runners by kind: one interface, one registry (SPEC sections 3-8; DESIGN convention 4,
an explicit registry).

Every stage kind a recipe may name (``recipe.Stage``) has one runner here with the same interface,
:class:`StageRunner`: ``describe(stage, variables)`` says what the stage will do (rows, steps,
settings: a line of ``cascade run --dry-run``'s plan), ``check(stage, context)`` checks its own
inputs before any stage computes, and ``run(stage, context) -> Handover`` trains the stage from the
context's policy (:class:`~cascade_rl.train.context.StageContext`: the run's settled runtime, seed,
dtypes and variables, the stage's directory and the reward models before it) and says what the
next stage starts from. The cascade (:mod:`cascade_rl.train.cascade`) knows no stage kind: it looks the runner
up by ``stage.kind`` in :data:`RUNNERS`.

torchtune keeps a recipe interface (a ``Protocol``, no implementation inheritance) and a plain list
of recipes; the registry here is the same shape, with one difference taken on purpose: a runner is
an object registered under the recipe's ``kind`` (the discriminator pydantic validates), so an
unknown kind is impossible once a recipe parses, and each runner imports its trainer only when it
runs (a ``--dry-run`` or a plan never loads TRL).
"""

from __future__ import annotations

import math
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from cascade_rl.data.loading import count_source_rows
from cascade_rl.recipe import DistillStage, EvalStage, GRPOStage, RewardModelStage, SFTStage
from cascade_rl.train import distributed
from cascade_rl.train.context import Handover, StageContext


class StageDescription(NamedTuple):
    """One stage in the plan: its data rows, its optimizer steps and the settings that matter."""

    rows: str
    steps: str
    settings: str


class StageRunner(Protocol):
    """What the cascade and the plan ask of every stage kind."""

    def describe(self, stage: Any, variables: dict[str, str]) -> StageDescription:
        """What ``stage`` will do, before any compute (``variables``: the run's path variables)."""
        ...

    def check(self, stage: Any, context: StageContext) -> None:
        """Before any stage computes (main process): the inputs only this kind reads, with a
        one-line :class:`~cascade_rl.recipe.RecipeError` naming the field."""
        ...

    def run(self, stage: Any, context: StageContext) -> Handover:
        """Train ``stage`` (or only evaluate it) from ``context``; what the next stage starts from."""
        ...


class NoInputs:
    """The check of a kind whose inputs the run's own checks cover (data files, benchmarks)."""

    def check(self, stage: Any, context: StageContext) -> None:
        return None


class SFTRunner(NoInputs):
    def describe(self, stage: SFTStage, variables: dict[str, str]) -> StageDescription:
        rows = [count_source_rows(sub.data, variables) for sub in stage.substages]
        steps = [_steps(sub.max_steps, count, sub.epochs, sub.batch_size) for sub, count in zip(stage.substages, rows)]
        settings = "; ".join(
            f"{s.name}: {s.max_length} tok, {s.epochs:g} ep, lr {s.learning_rate:g}" for s in stage.substages
        )
        return StageDescription(" + ".join(rows), " + ".join(steps), settings)

    def run(self, stage: SFTStage, context: StageContext) -> Handover:
        from cascade_rl.train.sft import run_sft_stage

        return policy_handover(run_sft_stage(stage, context), context)


class RewardModelRunner(NoInputs):
    def describe(self, stage: RewardModelStage, variables: dict[str, str]) -> StageDescription:
        rows = count_source_rows(stage.data, variables)
        settings = (
            f"Bradley-Terry, base {stage.base}, {stage.epochs:g} ep, lr {stage.learning_rate:g}, "
            f"batch {stage.batch_size}"
        )
        return StageDescription(rows, _steps(stage.max_steps, rows, stage.epochs, stage.batch_size), settings)

    def run(self, stage: RewardModelStage, context: StageContext) -> Handover:
        from cascade_rl.train.reward_model import run_reward_model_stage

        trained = run_reward_model_stage(stage, context)
        return Handover(context.policy, {**context.reward_models, stage.name: trained})


class GRPORunner(NoInputs):
    def describe(self, stage: GRPOStage, variables: dict[str, str]) -> StageDescription:
        curriculum = " -> ".join(_substage_text(c) for c in stage.curriculum)
        settings = (
            f"domain {stage.domain or 'per row'}, {stage.thinking}, {stage.prompts_per_batch}x"
            f"{stage.rollouts_per_prompt} rollouts, T {stage.temperature:g}, lr {stage.learning_rate:g}, "
            f"lengths {curriculum}"
            + (", dynamic filtering" if stage.dynamic_filter.enabled else "")
            + (", prompt filter" if stage.prompt_filter else "")
            + _lora_text(stage)
            + _topics_text(stage.all_data)
        )
        steps = f"<= {sum(c.max_steps for c in stage.curriculum)}"
        return StageDescription(_grpo_rows(stage, variables), steps, settings)

    def run(self, stage: GRPOStage, context: StageContext) -> Handover:
        from cascade_rl.train.grpo import run_grpo_stage

        return policy_handover(run_grpo_stage(stage, context), context)


class DistillRunner:
    def describe(self, stage: DistillStage, variables: dict[str, str]) -> StageDescription:
        teachers = ", ".join(f"{domain} <- {teacher}" for domain, teacher in stage.teachers.items())
        thinking = stage.thinking if isinstance(stage.thinking, str) else "per domain"
        settings = (
            f"MOPD (reverse KL to each domain's teacher: {teachers}), {thinking}, {stage.prompts_per_batch}x"
            f"{stage.rollouts_per_prompt} rollouts, T {stage.temperature:g}, lr {stage.learning_rate:g}, "
            f"length {stage.max_response_length}"
        )
        return StageDescription(count_source_rows(stage.data, variables), str(stage.max_steps), settings)

    def check(self, stage: DistillStage, context: StageContext) -> None:
        """Every row's domain has a teacher, and the teachers from outside this run exist and share
        the base model's tokenizer (stages of this run are checked when they have run, servers when
        the stage starts)."""
        from cascade_rl.llm.transport import is_server_spec
        from cascade_rl.recipe import expand
        from cascade_rl.train.distill import check_domains
        from cascade_rl.train.teachers import check_teachers, resolve_teachers

        check_domains(stage, context.variables)
        outside = {
            d: t for d, t in stage.teachers.items() if t not in context.stage_dirs and not is_server_spec(expand(t))
        }
        external = resolve_teachers(stage.model_copy(update={"teachers": outside}), context.stage_dirs)
        check_teachers(stage, external, context.policy, context.runtime.server_wait_s)

    def run(self, stage: DistillStage, context: StageContext) -> Handover:
        from cascade_rl.train.distill import run_distill_stage
        from cascade_rl.train.teachers import resolve_teachers

        teachers = distributed.on_main("teachers", partial(resolve_teachers, stage, context.stage_dirs))
        return policy_handover(run_distill_stage(stage, context, teachers), context)


class EvalRunner(NoInputs):
    """An evaluation stage trains nothing: the cascade evaluates the policy it was handed."""

    def describe(self, stage: EvalStage, variables: dict[str, str]) -> StageDescription:
        return StageDescription("-", "-", f"benchmarks: {', '.join(stage.benchmarks or ['all'])}")

    def run(self, stage: Any, context: StageContext) -> Handover:
        return context.handover


#: the runner of each stage kind (``stage.kind``)
RUNNERS: dict[str, StageRunner] = {
    "sft": SFTRunner(),
    "reward_model": RewardModelRunner(),
    "grpo": GRPORunner(),
    "distill": DistillRunner(),
    "eval": EvalRunner(),
}


def runner_for(stage: Any) -> StageRunner:
    """The runner of ``stage``'s kind; a stage kind without one is a programming error, named."""
    try:
        return RUNNERS[stage.kind]
    except KeyError:
        raise KeyError(f"no runner for stage kind {stage.kind!r}; runners: {', '.join(RUNNERS)}") from None


def _steps(max_steps: int | None, rows: str, epochs: float, batch_size: int) -> str:
    """A supervised stage's optimizer steps: its ``max_steps``, else epochs over its rows."""
    if max_steps:
        return str(max_steps)
    return str(math.ceil(int(rows) * epochs / batch_size)) if rows.isdigit() else "?"


def _lora_text(stage: Any) -> str:
    return f", LoRA r{stage.lora.r}" if stage.lora is not None else ""


def _substage_text(step: Any) -> str:
    """A curriculum step in the plan: its response budget, overlong filtering, input-context
    budget and stop rules, e.g. ``16384(OF, prompts <= 16384, until the reward plateaus)``."""
    notes = ["OF"] if step.overlong_filter else []
    if step.max_prompt_length:
        notes.append(f"prompts <= {step.max_prompt_length}")
    if step.stop_truncation_ratio is not None:
        notes.append(f"until truncation {step.stop_direction} to {step.stop_truncation_ratio:g}")
    if step.plateau_window is not None:
        notes.append("until the reward plateaus")
    return f"{step.max_response_length}" + (f"({', '.join(notes)})" if notes else "")


def _grpo_rows(stage: GRPOStage, variables: dict[str, str]) -> str:
    """The rows a GRPO stage reads: the stage's data, or per sub-stage the data it trains."""
    if all(step.data is None for step in stage.curriculum):
        return count_source_rows(stage.data, variables)
    return " -> ".join(count_source_rows(stage.substage_data(i), variables) for i in range(len(stage.curriculum)))


def _topics_text(sources: Any) -> str:
    """The topics the stage's data sources leave out (``drop_topics``), e.g. ``, without math,
    code prompts``."""
    topics = dict.fromkeys(topic for source in sources for topic in source.drop_topics)
    return f", without {', '.join(topics)} prompts" if topics else ""


def policy_handover(model: Path, context: StageContext) -> Handover:
    """A stage that trained the policy hands over ``stage_dir/model``, a link to ``model``."""
    return Handover(distributed.on_main("publish", partial(publish, model, context.stage_dir)), context.reward_models)


def publish(model: Path, stage_dir: Path) -> Path:
    """Make ``stage_dir/model`` the stage's checkpoint: a relative link to the last sub-stage's
    model (no copy of the weights)."""
    final = stage_dir / "model"
    if Path(model).resolve() == final.resolve():
        return final
    if final.is_symlink() or final.is_file():
        final.unlink()
    elif final.exists():
        import shutil

        shutil.rmtree(final)
    final.symlink_to(Path(model).resolve().relative_to(stage_dir.resolve()))
    return final
