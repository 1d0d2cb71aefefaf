"""The cascade: run a recipe's stages in order, each from the previous stage's checkpoint
(SPEC section 1; DESIGN convention 6).

Run layout::

    runs/<run>/recipe.json              the resolved recipe
    runs/<run>/world/                   the toy world, when the recipe builds one
    runs/<run>/00-base/model/           the base model (built, when the recipe asks for a tiny one)
    runs/<run>/<NN-stage>/model/        the stage's checkpoint (a reward_model stage: the RM)
    runs/<run>/<NN-stage>/metrics.jsonl one line per training step
    runs/<run>/<NN-stage>/eval.json     benchmarks after the stage
    runs/<run>/<NN-stage>/stage.json    status (trained -> done), wall time, policy path (relative to the run directory)
    runs/<run>/<NN-stage>/attempt.json  while the stage is unfinished: when this process began it
                                        (a resumed stage's wall time adds the killed process's)
    runs/<run>/report.md, report.json   the stage x benchmark table, forgetting matrix, plots

A side branch (a stage with ``branch_from``, e.g. Cascade 2's RLHF teacher trained from SFT)
trains from that earlier stage's checkpoint and is evaluated on its own; the stages after it go
on from the policy before it (its ``stage.json`` names that policy and ``branch_from``).

A stage is finished when its ``stage.json`` says ``done``; ``--resume`` skips finished stages,
re-runs only the evaluation of a trained-but-unevaluated one, and continues a half-written one
from its last finished sub-stage, and inside that sub-stage from its last checkpoint
(``runtime.save_steps``).

Under ``torchrun`` / ``accelerate launch`` every process runs this same loop: training runs on
all of them; everything else (the run's files, the toy world, evaluation, the report) runs on
the main process while the others wait (:func:`cascade_rl.train.distributed.on_main`), and
every decision (which stages are done) is the main process's.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property, partial
from pathlib import Path
from typing import Any

from cascade_rl.data.loading import Screen, screening
from cascade_rl.recipe import EvalStage, OnPolicyStage, Recipe, RecipeError, branch_source, run_variables
from cascade_rl.train import distributed, machine, preflight
from cascade_rl.train.context import Handover, StageContext
from cascade_rl.train.stages import runner_for

log = logging.getLogger(__name__)


@dataclass
class StagePlan:
    index: int
    stage: Any

    @property
    def dirname(self) -> str:
        return f"{self.index:02d}-{self.stage.name}"


def plan(recipe: Recipe) -> list[StagePlan]:
    return [StagePlan(i + 1, stage) for i, stage in enumerate(recipe.stages)]


def read_status(stage_dir: Path) -> dict:
    path = stage_dir / "stage.json"
    return json.loads(path.read_text()) if path.exists() else {}


def write_status(stage_dir: Path, status: dict) -> None:
    """Atomic write: a crash leaves the old status or the new one, never half of it."""
    temporary = stage_dir / "stage.json.tmp"
    temporary.write_text(json.dumps(status, indent=1))
    temporary.replace(stage_dir / "stage.json")


def policy_entry(policy: Path, run_dir: Path) -> str:
    """How ``stage.json`` records a policy: relative to the run directory when it lies inside it
    (the run may be resumed from any directory, or moved), else absolute."""
    policy, run_dir = Path(policy).absolute(), Path(run_dir).absolute()
    return str(policy.relative_to(run_dir)) if policy.is_relative_to(run_dir) else str(policy)


def recorded_policy(entry: str, run_dir: Path) -> Path:
    """The policy a ``stage.json`` entry names (:func:`policy_entry`); an entry of a run written
    before it, relative to the directory cascade ran in then, is read as it was written."""
    path = Path(entry)
    if path.is_absolute() or (path.exists() and not (run_dir / path).exists()):
        return path
    return run_dir / path


class Cascade:
    """Runs one recipe into one run directory."""

    def __init__(self, recipe: Recipe, run_dir: Path | None = None, *, echo: Callable[[str], None] = print):
        self.recipe = recipe
        self.run_dir = Path(run_dir or recipe.run_dir)
        self._echo = echo
        self.variables = run_variables(self.run_dir)

    def echo(self, text: str) -> None:
        if distributed.is_main():
            self._echo(text)

    # ----------------------------------------------------------------- entry point
    def run(self, *, resume: bool = False, only: str | None = None, start_from: str | None = None) -> Path:
        stages = plan(self.recipe)
        names = [p.stage.name for p in stages]
        for flag, name in (("--only", only), ("--from", start_from)):
            if name is not None and name not in names:
                raise RecipeError(f"{flag} {name!r}: no such stage; stages: {', '.join(names)}")
        from cascade_rl.train.reuse import check_flags

        check_flags(self.recipe, {"--only": only, "--from": start_from})
        preflight.check_recipe(self.recipe, self.variables)  # what --dry-run checks too, start_from included
        distributed.start()
        check_process_layout(self.recipe, distributed.world_size())
        distributed.on_main("prepare the run", partial(self._prepare, resume=resume, only=only, start_from=start_from))
        from cascade_rl.train.common import set_threads

        set_threads(self.recipe.runtime)
        distributed.on_main("build the toy world", self._build_world)
        policy = distributed.on_main("base model", self._base_model)
        decided = distributed.on_main("machine", partial(self._settle_machine, policy))
        self.recipe = machine.apply(self.recipe, decided)
        distributed.on_main("data files", partial(preflight.check_inputs, self.recipe, self.variables))
        handover = Handover(policy)
        distributed.on_main("stage inputs", partial(self._check_stages, stages, handover))
        started = time.perf_counter()
        if self._evaluates_base(only, start_from):
            self._run_stage(StagePlan(0, EvalStage(name="base")), len(stages), handover)
        checkpoints: dict[str, Path] = {}  # what each main-line policy stage handed on (branches start there)
        for p in stages:
            status = distributed.on_main("stage status", partial(read_status, self.run_dir / p.dirname))
            if only and p.stage.name != only:
                if names.index(p.stage.name) > names.index(only):
                    break
                if status.get("status") != "done":
                    raise RecipeError(f"--only {only}: earlier stage {p.stage.name} has not finished; run it first")
            if status.get("status") == "done":
                handover = finished_handover(p.stage, self.run_dir / p.dirname, status, handover)
                self.echo(f"[{p.index}/{len(stages)}] {p.stage.name}: finished earlier, skipped")
            else:
                handover = self._run_stage(p, len(stages), handover, checkpoints)
            if p.stage.trains_policy and branch_source(p.stage) is None:
                checkpoints[p.stage.name] = handover.policy
        self.echo(f"stages finished in {time.perf_counter() - started:.0f} s")
        return distributed.on_main("report", self._report)

    def _evaluates_base(self, only: str | None, start_from: str | None) -> bool:
        """``eval.before_first_stage``: the base model is evaluated once, as an evaluation stage
        ``00-base`` before the first (the report's base-model row); not again on --resume,
        --only or --from, and not when the recipe starts with an evaluation stage of its own or
        from a checkpoint (start_from.checkpoint: there is no base model of the run)."""
        from cascade_rl.train.reuse import start_checkpoint

        if not self.recipe.eval.before_first_stage or only or start_from or start_checkpoint(self.recipe):
            return False
        if self.recipe.stages[0].evaluation_only:
            return False
        status = distributed.on_main("base evaluation status", partial(read_status, self.run_dir / "00-base"))
        return status.get("status") != "done"

    # ----------------------------------------------------------------- set-up
    def _prepare(self, *, resume: bool, only: str | None, start_from: str | None) -> None:
        self._check_run_dir(resume=resume or bool(only or start_from))
        stages = plan(self.recipe)
        names = [p.stage.name for p in stages]
        if start_from:
            for p in stages[names.index(start_from) :]:
                shutil.rmtree(self.run_dir / p.dirname, ignore_errors=True)
        if only:
            shutil.rmtree(self.run_dir / stages[names.index(only)].dirname, ignore_errors=True)
        from cascade_rl.train.reuse import link_stages

        link_stages(self.recipe, self.run_dir)

    def _check_run_dir(self, *, resume: bool) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        recipe_file = self.run_dir / "recipe.json"
        resolved = self.recipe.model_dump(mode="json")
        existing = any(read_status(d) for d in self.run_dir.iterdir() if d.is_dir())
        if existing and not resume:
            raise RecipeError(
                f"{self.run_dir} already holds a run; pass --resume to finish it, "
                "--from STAGE to redo from a stage, or --out DIR to start elsewhere"
            )
        if recipe_file.exists() and json.loads(recipe_file.read_text()) != resolved:
            self.echo("note: the recipe changed since this run started; finished stages keep their results")
        recipe_file.write_text(json.dumps(resolved, indent=1))

    def _settle_machine(self, policy: Path) -> dict:
        """The engine and dtypes for this machine (``auto`` settings), recorded and said once."""
        decided = machine.decide(self.recipe, policy)
        machine.record(self.run_dir, decided)
        self.echo(machine.summary(decided))
        return decided

    def _build_world(self) -> None:
        if self.recipe.world is None:
            return
        marker = self.run_dir / "world" / ".done"
        if marker.exists():
            return
        from cascade_rl.world import WorldOptions, WorldSizes, build_world

        self.echo("building the toy world ...")
        world = self.recipe.world
        manifest = build_world(
            self.run_dir / "world",
            seed=world.seed,
            sizes=WorldSizes.from_overrides(world.sizes),
            options=WorldOptions.from_overrides(world.options),
        )
        rows = ", ".join(f"{name.removesuffix('.jsonl')} {count}" for name, count in manifest.rows.items())
        self.echo(f"toy world: {rows}")
        marker.write_text("done")

    def _base_model(self) -> Path:
        spec = self.recipe.model
        path = preflight.model_path(self.recipe)
        if path is not None:
            if spec.chat_template == "cascade":
                return self._with_cascade_template(path)
            preflight.check_chat_template(path)
            return path
        target = self.run_dir / "00-base" / "model"
        if not (target / "config.json").exists():
            from transformers import AutoTokenizer

            from cascade_rl.world import WorldManifest, build_tiny_model, parameter_count

            world = WorldManifest.load(self.run_dir / "world")
            tokenizer = AutoTokenizer.from_pretrained(world.out_dir / world.tokenizer_dir, local_files_only=True)
            model = build_tiny_model(tokenizer, seed=self.recipe.seed, out_dir=target, **spec.tiny.model_dump())
            self.echo(
                f"tiny base model: Qwen3, {parameter_count(model) / 1e6:.2f}M parameters, vocabulary {len(tokenizer)}"
            )
        return target

    def _with_cascade_template(self, path: Path) -> Path:
        """A base checkpoint whose tokenizer carries the Cascade chat template: the weights are
        linked, the tokenizer is re-saved with the template (the user's directory is untouched)."""
        from transformers import AutoTokenizer

        from cascade_rl.chat import chat_template, install_chat_template

        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        if tokenizer.chat_template == chat_template():
            return path
        target = self.run_dir / "00-base" / "model"
        if not (target / "tokenizer_config.json").exists():
            target.mkdir(parents=True, exist_ok=True)
            for item in path.iterdir():
                if not item.name.startswith(("tokenizer", "special_tokens", "vocab", "merges", "chat_template")):
                    link = target / item.name
                    if not link.exists():
                        link.symlink_to(item.resolve())
            install_chat_template(tokenizer).save_pretrained(target)
        return target

    # ----------------------------------------------------------------- stages
    @property
    def stage_dirs(self) -> dict[str, Path]:
        """Each stage's directory in this run, by stage name."""
        return {p.stage.name: self.run_dir / p.dirname for p in plan(self.recipe)}

    def context(self, p: StagePlan, handover: Handover) -> StageContext:
        """The context stage ``p`` runs with, from the hand-over of the stages before it."""
        return StageContext.of_recipe(
            self.recipe,
            stage_dir=self.run_dir / p.dirname,
            policy=handover.policy,
            variables=self.variables,
            reward_models=handover.reward_models,
            stage_dirs=self.stage_dirs,
        )

    def _check_stages(self, stages: list[StagePlan], handover: Handover) -> None:
        """Before the first stage computes: each stage's own inputs (its runner's check; the base
        model stands in for the policy a stage will start from)."""
        for p in stages:
            runner_for(p.stage).check(p.stage, self.context(p, handover))

    def _run_stage(
        self, p: StagePlan, total: int, handover: Handover, checkpoints: Mapping[str, Path] | None = None
    ) -> Handover:
        """Train (unless an earlier attempt did) and evaluate stage ``p``. A side branch
        (``branch_from``) trains from that stage's checkpoint (``checkpoints``), is evaluated on
        its own checkpoint, and hands on the policy it was given."""
        stage, stage_dir = p.stage, self.run_dir / p.dirname
        branch = branch_source(stage)
        status, earlier_s = distributed.on_main("open the stage", partial(_open_stage, stage_dir))
        self.echo(f"[{p.index}/{total}] {stage.kind} {stage.name}" + (f" (a branch from {branch})" if branch else ""))
        started = time.perf_counter()
        trained_here = status.get("status") != "trained"
        if trained_here:
            start = Handover(checkpoints[branch], handover.reward_models) if branch else handover
            with screening(self.training_screen):
                trained = runner_for(stage).run(stage, self.context(p, start))
            handover = handover if branch else trained
            status = {
                "index": p.index,
                "name": stage.name,
                "kind": stage.kind,
                "status": "trained",
                "policy": policy_entry(handover.policy, self.run_dir),
                "train_s": round(time.perf_counter() - started, 2),
                "processes": distributed.world_size(),
                **({"branch_from": branch} if branch else {}),
            }
            distributed.on_main("stage trained", partial(write_status, stage_dir, status))
            if stage.kind == "grpo":  # the steps a GRPO stage learned nothing in (eval/learning.py)
                distributed.on_main("what the stage learned", partial(self._say_if_idle, stage, stage_dir))
        else:
            handover = finished_handover(stage, stage_dir, status, handover)
        evaluated = Handover(stage_dir / "model", handover.reward_models) if branch else handover
        eval_started = time.perf_counter()
        distributed.on_main(f"evaluate {stage.name}", partial(self._evaluate, stage, stage_dir, evaluated))
        status.update(status="done", eval_s=round(time.perf_counter() - eval_started, 2))
        status.update(_wall_time(status, trained_here, earlier_s))
        distributed.on_main("stage done", partial(_close_stage, stage_dir, status))
        return handover

    def _say_if_idle(self, stage: Any, stage_dir: Path) -> None:
        """A stage, or a stretch of it, that learned nothing is said at once (eval/learning.py)."""
        from cascade_rl.eval.learning import learning_note
        from cascade_rl.eval.runs import read_metrics

        note = learning_note(stage.name, read_metrics(stage_dir / "metrics.jsonl")[0])
        if note:
            self.echo(f"warning: {note}")

    @cached_property
    def training_screen(self) -> Screen | None:
        """The recipe's benchmarks as a screen on training rows (train/decontaminate.py); none
        for the toy world, which is decontaminated when it is built (world/decontam.py, with its
        prompt families' scaffolding, which a screen over benchmark questions cannot know)."""
        if self.recipe.world is not None:
            return None
        from cascade_rl.train.decontaminate import benchmark_screen

        return benchmark_screen(self.recipe.eval, self.variables)

    def _evaluate(self, stage: Any, stage_dir: Path, handover: Handover) -> None:
        benchmarks = self._benchmarks_after(stage)
        if not benchmarks:
            return
        from cascade_rl.eval.benchmarks import EvalSettings, evaluate

        latest_rm = str(list(handover.reward_models.values())[-1]) if handover.reward_models else None
        runtime, spec = self.recipe.runtime, self.recipe.eval
        settings = EvalSettings(
            batch_size=spec.batch_size,
            workers=runtime.reward_workers,
            seed=self.recipe.seed,
            dtype=self.recipe.model.sampling_dtype,
            engine=machine.local_engine(runtime),
        )
        evaluate(handover.policy, benchmarks, stage_dir, variables=self.variables, reward_model=latest_rm,
                 arena_dir=self.run_dir / "arena", settings=settings)  # fmt: skip

    def _benchmarks_after(self, stage: Any) -> list:
        spec = self.recipe.eval
        names = stage.eval
        if names is None and not (spec.after_every_stage or stage.evaluation_only):
            return []
        return [b for b in spec.benchmarks if names is None or b.name in names]

    def _report(self) -> Path:
        from cascade_rl.eval.report import build_report

        return build_report(self.run_dir)


ATTEMPT_FILE = "attempt.json"


def _open_stage(stage_dir: Path) -> tuple[dict, float]:
    """The stage's status and the seconds earlier processes spent on it without finishing it."""
    stage_dir.mkdir(parents=True, exist_ok=True)
    return read_status(stage_dir), _begin_attempt(stage_dir)


def _begin_attempt(stage_dir: Path) -> float:
    """Record this process's start on the stage; return the time earlier, unfinished attempts spent
    on it, each from its start to its last write (a process killed mid-stage never says when it
    died; its checkpoints, metrics and progress files do), so that a resumed stage's wall time
    counts the work of the process that was killed as well as of the one that finished it."""
    path = stage_dir / ATTEMPT_FILE
    earlier_s = 0.0
    if path.exists():
        record = json.loads(path.read_text())
        last_write = max(_write_times(stage_dir, skip=path), default=record["started"])
        earlier_s = round(record.get("earlier_s", 0.0) + max(0.0, last_write - record["started"]), 2)
    path.write_text(json.dumps({"started": time.time(), "earlier_s": earlier_s}))
    return earlier_s


def _write_times(stage_dir: Path, *, skip: Path) -> list[float]:
    """Modification times of the stage's files (``is_file`` is false for a dangling link)."""
    return [item.stat().st_mtime for item in stage_dir.rglob("*") if item != skip and item.is_file()]


def _wall_time(status: dict, trained_here: bool, earlier_s: float) -> dict:
    """``wall_s``: this process's training (if it trained the stage) and evaluation, plus what
    earlier attempts spent (``earlier_attempts_s``). A stage trained by an earlier process of an
    older version, which left no attempt record, counts that process's recorded training time."""
    this_process = (status.get("train_s", 0.0) if trained_here else 0.0) + status["eval_s"]
    before = earlier_s or (0.0 if trained_here else status.get("train_s", 0.0))
    times = {"wall_s": round(this_process + before, 2)}
    if earlier_s:
        times["earlier_attempts_s"] = earlier_s
    return times


def _close_stage(stage_dir: Path, status: dict) -> None:
    write_status(stage_dir, status)
    (stage_dir / ATTEMPT_FILE).unlink(missing_ok=True)


def check_process_layout(recipe: Recipe, processes: int) -> None:
    """Every on-policy stage's step must split evenly over the processes and micro-batches; a recipe
    whose step cannot is refused before any compute, naming the stage and the field."""
    from cascade_rl.train.on_policy import batch_shape

    for stage in recipe.stages:
        if isinstance(stage, OnPolicyStage):
            batch_shape(stage, processes)


def finished_handover(stage: Any, stage_dir: Path, status: dict, before: Handover) -> Handover:
    """What a stage that finished earlier (or was taken over from another run) hands over: the
    policy its ``stage.json`` names, and itself when it trained a reward model."""
    reward_models = dict(before.reward_models)
    if stage.trains_reward_model:
        reward_models[stage.name] = stage_dir / "model"
    policy = recorded_policy(status["policy"], stage_dir.parent) if status.get("policy") else before.policy
    return Handover(policy, reward_models)
