"""Multi-domain on-policy distillation (MOPD) as a cascade stage (Nemotron-Cascade 2, arXiv
2603.19220; the follow-up to SPEC section 1's cascade; docs/mopd.md).

The student samples its own responses to prompts of several domains; each prompt goes to its
domain's teacher (``teachers: {domain: teacher}`` -- typically the cascade's own checkpoint right
after that domain's RL stage), and every sampled token gets the advantage

    a_t = log pi_teacher(y_t | y_<t) - log pi_student(y_t | y_<t)      (no gradient through a_t)

trained with the GRPO stages' objective: TRL's ``dapo`` loss, the sum over every token of the
step divided by the step's token count, importance ratio exactly 1 (one update per rollout
batch). Its gradient is -1/N sum_t a_t grad log pi(y_t): reverse KL to the teacher on the
student's own samples. When vLLM generates the rollouts, a token's weight is
w_t = r_t * 1[low <= r_t <= high], r_t = pi_train / pi_inference (TRL's ``token_mask``
importance sampling, which is exactly that band mask; ``mismatch_band``, default [0.5, 2]).

**The GRPO stages' routine.** A distill stage trains through the one on-policy routine
(:func:`~cascade_rl.train.on_policy.train_substage`) and trainer: prompts are drawn through the
same :class:`PromptSchedule` and sampler contract (identical for any process count and
micro-batching), draws.jsonl, checkpoints every ``runtime.save_steps`` with the schedule state,
``--resume`` to the same weights. What differs is its objective, :class:`TeacherAdvantages`: after
the trainer has generated the step's rollouts, it scores them with the teachers and replaces the
per-sequence advantages with the per-token ones (TRL's loss takes a (B, T) advantage as it is).
The student's log-probabilities are the trainer's own (TRL's ``old_per_token_logps`` when it
computed them for the vLLM correction, else one forward pass without gradient). There is no
reward function: the trainer records the step's rollouts in the schedule all the same.

TRL's own distillation trainers were checked (TRL 1.16) and none is this objective; see
docs/mopd.md.

**Teachers** (resolved by the cascade, :func:`cascade_rl.train.teachers.resolve_teachers`): a
local checkpoint is loaded once in every process (a checkpoint teaching several domains, once)
and scored with the same TRL forward as the student; a server URL is asked for the
``prompt_logprobs`` of prompt + response token ids (:mod:`cascade_rl.serve.teacher`). Before any
compute, every row's domain must have a teacher and every teacher must share the student's
tokenizer (one-line errors naming the row or the teacher).

**Metrics** per step (``metrics.jsonl``): per domain the mean reverse KL to its teacher over
the sampled tokens (``distill/<domain>/reverse_kl``, an estimate of KL(pi_student || pi_teacher)
per token) and the mean response length (``response_length/<domain>``); the overall reverse
KL; time spent scoring with teachers and the student (``time/teacher``, ``time/student``).
"""

from __future__ import annotations

import functools
import json
import logging
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import torch

from cascade_rl.chat import with_mode, with_tools
from cascade_rl.data.loading import LoadReport, as_messages, load_routed_sources, read_rows, resolve_path, rl_normaliser
from cascade_rl.data.rows import rename_fields
from cascade_rl.recipe import DistillStage, DynamicFilter, RecipeError, Runtime
from cascade_rl.rewards.environment import has_environment
from cascade_rl.train import distributed
from cascade_rl.train.common import resume_point
from cascade_rl.train.context import StageContext
from cascade_rl.train.curriculum import merge_substage_metrics, run_substages
from cascade_rl.train.episodes import EpisodeSettings
from cascade_rl.train.filtering import MODES
from cascade_rl.train.grpo import rewind_logs, write_data_report
from cascade_rl.train.on_policy import PolicyModels, StepSettings, Substage, on_policy_config, train_substage
from cascade_rl.train.schedule import PromptSchedule, StepDraw
from cascade_rl.train.teachers import LocalTeacher, ServedTeacher, TeacherSpec, check_teachers

log = logging.getLogger(__name__)


# ----------------------------------------------------------------------------- data
@dataclass
class DistillData:
    """The stage's TRL rows: one per (prompt, mode), so ``_pidx`` is the schedule's prompt and
    each keeps its mode and ``_domain``."""

    rows: list[dict]
    report: LoadReport

    @property
    def modes(self) -> list[str]:
        return [row["_mode"] for row in self.rows]

    def domain_counts(self) -> dict[str, int]:
        counts: dict[str, int] = defaultdict(int)
        for row in self.rows:
            counts[row["_domain"]] += 1
        return dict(sorted(counts.items()))


def normalise_distill_row(row: dict, domain: str | None = None) -> dict:
    """A prompt (chat messages ending with a user or tool turn, tools written into the system
    message as for RL rows) and its domain (``domain``: its source's, over the row's column); no
    reference answer is needed, except by a multi-turn domain, whose environment runs on the row's
    fields (the RL rows' normaliser checks and keeps them as ``reference``)."""
    domain = domain or row.get("domain")
    if not isinstance(domain, str) or not domain:
        raise ValueError("missing field 'domain'")
    if has_environment(domain):
        return rl_normaliser(domain)(row)
    prompt = as_messages(row.get("prompt") if "prompt" in row else row.get("messages"), "prompt")
    while prompt and prompt[-1]["role"] == "assistant":
        prompt = prompt[:-1]
    if not prompt or prompt[-1]["role"] not in ("user", "tool"):
        raise ValueError("prompt does not end with a user turn")
    if row.get("tools"):
        try:
            prompt = with_tools(prompt, row["tools"])
        except (ValueError, json.JSONDecodeError) as error:
            raise ValueError(f"tools: {error}") from None
    return {"prompt": prompt, "domain": domain}


def check_domains(stage: DistillStage, variables: Mapping[str, str] | None = None) -> None:
    """Every row's domain has a teacher: a one-line ``RecipeError`` naming the first row whose
    domain has none (file and line), before anything is loaded or trained."""
    for source in stage.data:
        path = resolve_path(source.path, dict(variables or {}))
        if not path.exists():
            raise RecipeError(f"stages ({stage.name}).data: data file not found: {path}")
        if source.domain:  # every row of the source is taught in that domain
            check_teacher(stage, source.domain, str(path))
            continue
        for where, row in read_rows(path, LoadReport()):
            if not isinstance(row, dict):
                continue
            rename_fields(row, source.fields)
            domain = row.get("domain")
            if isinstance(domain, str) and domain:
                check_teacher(stage, domain, where)


def check_teacher(stage: DistillStage, domain: str, where: str) -> None:
    if domain not in stage.teachers:
        raise RecipeError(
            f"stages ({stage.name}).data: {where}: domain {domain!r} has no teacher "
            f"(teachers: {', '.join(sorted(stage.teachers))})"
        )


def build_distill_data(stage: DistillStage, *, seed: int, variables: Mapping[str, str] | None = None) -> DistillData:
    check_domains(stage, variables)
    prompts, report = load_routed_sources(  # each row taught in its source's domain, else its own
        stage.data,
        lambda source: functools.partial(normalise_distill_row, domain=source.domain),
        seed=seed,
        variables=dict(variables or {}),
    )
    rows: list[dict] = []
    for prompt in prompts:
        mode = stage.mode_of(prompt["domain"])
        for each in MODES if mode == "half" else (mode,):
            rows.append(
                {
                    "prompt": with_mode(prompt["prompt"], each),
                    "_pidx": len(rows),
                    "_mode": each,
                    "_domain": prompt["domain"],
                    "_ref": json.dumps(prompt["reference"]) if "reference" in prompt else "",
                }
            )
    if not rows:
        raise RecipeError(f"stages ({stage.name}).data: no usable prompt rows ({report.summary()})")
    return DistillData(rows, report)


class DomainModeSchedule(PromptSchedule):
    """The GRPO stages' :class:`PromptSchedule` over prompts that each have a fixed mode (the
    one their domain trained in), instead of modes split per batch."""

    def __init__(self, modes: Sequence[str], *, prompts_per_batch: int, seed: int):
        super().__init__(
            range(len(modes)),
            prompts_per_batch=prompts_per_batch,
            thinking="think",
            dynamic_filter=DynamicFilter(),
            seed=seed,
        )
        self.modes = list(modes)

    def draw(self) -> StepDraw:
        draw = super().draw()
        return replace(draw, modes=tuple(self.modes[p] for p in draw.prompts))


# ----------------------------------------------------------------------------- the objective
def distillation_advantages(teacher: torch.Tensor, student: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """a_t = log pi_teacher(y_t) - log pi_student(y_t) on every sampled token, 0 on padding; no gradient."""
    return ((teacher - student) * mask).detach()


class TeacherAdvantages:
    """The distill stage's :class:`~cascade_rl.train.on_policy.TokenObjective` (module
    docstring): ``teachers`` maps each domain to its :class:`TeacherSpec`; a checkpoint teaching
    several domains is loaded once."""

    def __init__(
        self,
        teachers: Mapping[str, TeacherSpec],
        *,
        batch_size: int | None = None,
        concurrency: int = 16,
        timeout_s: float = 600.0,
    ):
        self.specs, self.batch_size, self.concurrency, self.timeout_s = (
            dict(teachers),
            batch_size,
            concurrency,
            timeout_s,
        )
        self.teachers: dict[str, LocalTeacher | ServedTeacher] = {}

    def prepare(self, models: PolicyModels) -> None:
        """Load every local teacher through the trainer (once per checkpoint); open the servers' clients."""
        loaded: dict[str, LocalTeacher | ServedTeacher] = {}
        for teacher in self.specs.values():
            if teacher.source not in loaded:
                loaded[teacher.source] = (
                    self._served(teacher) if teacher.served else LocalTeacher(models.load_frozen_model(teacher.source))
                )
        self.teachers = {domain: loaded[teacher.source] for domain, teacher in self.specs.items()}

    def _served(self, teacher: TeacherSpec) -> ServedTeacher:
        from cascade_rl.serve.teacher import TeacherClient

        return ServedTeacher(TeacherClient(teacher.source, max_concurrency=self.concurrency, timeout=self.timeout_s))

    def advantages(self, inputs: Sequence[Mapping[str, Any]], output: Mapping[str, Any], models: PolicyModels):
        domains = [row["_domain"] for row in inputs]
        mask = model_tokens(output)
        started = time.perf_counter()
        teacher = self.teacher_logps(domains, output, models)
        scored = time.perf_counter()
        student = output.get("old_per_token_logps")  # pi_train at rollout time, when TRL computed it
        if student is None:
            student = models.sequence_logps(models.model, output, batch_size=self.batch_size)
        advantages = distillation_advantages(teacher, student, mask)
        metrics = distillation_metrics(domains, teacher, student, mask)
        models.log_step_metrics(
            {**metrics, "time/teacher": scored - started, "time/student": time.perf_counter() - scored}
        )
        return advantages

    def teacher_logps(self, domains: Sequence[str], output: Mapping[str, Any], models: PolicyModels) -> torch.Tensor:
        """Per completion token, the log-probability its row's domain teacher gives it (0 on padding
        and on an episode's tool results)."""
        mask = model_tokens(output)
        result = torch.zeros(mask.shape, dtype=torch.float32, device=mask.device)
        by_teacher: dict[int, list[int]] = defaultdict(list)
        for i, domain in enumerate(domains):
            by_teacher[id(self.teachers[domain])].append(i)
        for members in by_teacher.values():
            teacher = self.teachers[domains[members[0]]]
            rows = torch.tensor(members, device=mask.device)
            if isinstance(teacher, LocalTeacher):
                result[rows] = models.sequence_logps(teacher.model, output, rows, self.batch_size).float()
            else:
                result[rows] = _served_logps(teacher, output, members, models.temperature).to(mask.device)
        return result * mask


def model_tokens(output: Mapping[str, Any]) -> torch.Tensor:
    """The mask of the model's own completion tokens: padding out, and an episode's tool results
    (TRL's ``tool_mask``), which the teacher is not asked to have written."""
    mask = output["completion_mask"]
    return mask * output["tool_mask"] if output.get("tool_mask") is not None else mask


def _served_logps(teacher: ServedTeacher, output: Mapping[str, Any], members: list[int], temperature: float):
    sequences = []
    for i in members:
        prompt = output["prompt_ids"][i][output["prompt_mask"][i].bool()].tolist()
        completion = output["completion_ids"][i][: int(output["completion_mask"][i].sum())].tolist()
        sequences.append((prompt, completion))
    values = teacher.client.completion_logprobs(sequences, temperature=temperature)
    padded = torch.zeros((len(members), output["completion_ids"].size(1)), dtype=torch.float32)
    for row, logps in enumerate(values):
        padded[row, : len(logps)] = torch.tensor(logps, dtype=torch.float32)
    return padded


def distillation_metrics(domains, teacher, student, mask) -> dict[str, float]:
    """Per domain over every process: mean reverse KL per sampled token and response length."""
    local: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    gap = ((student - teacher) * mask).sum(-1).tolist()
    lengths = mask.sum(-1).tolist()
    for domain, kl, length in zip(domains, gap, lengths):
        local[domain][0] += kl
        local[domain][1] += length
        local[domain][2] += 1
    totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for part in distributed.gather(dict(local)):
        for domain, values in part.items():
            totals[domain] = [a + b for a, b in zip(totals[domain], values)]
    metrics = {}
    for domain, (kl, tokens, sequences) in sorted(totals.items()):
        metrics[f"distill/{domain}/reverse_kl"] = kl / max(tokens, 1.0)
        metrics[f"response_length/{domain}"] = tokens / sequences
    kl, tokens = sum(v[0] for v in totals.values()), sum(v[1] for v in totals.values())
    metrics["distill/reverse_kl"] = kl / max(tokens, 1.0)
    return metrics


# ----------------------------------------------------------------------------- configuration
def step_settings(stage: DistillStage) -> StepSettings:
    """The GRPO stages' objective (strictly on-policy, the token-level loss, no KL, no entropy
    bonus) with this stage's sampling and batch, truncated responses kept in the loss, and the
    mismatch band as TRL's ``token_mask`` correction for vLLM rollouts."""
    band = ("off", None, None) if stage.mismatch_band is None else ("token_mask", *stage.mismatch_band)
    return StepSettings.of(
        stage,
        max_response_length=stage.max_response_length,
        max_steps=stage.max_steps,
        mask_truncated=False,
        importance_sampling=band,
    )


def distill_config(stage: DistillStage, runtime: Runtime, output_dir: Path, seed: int, model_dtype: str = "auto",
                   run_name: str | None = None):  # fmt: skip
    """The backend's configuration of a distill stage (:func:`step_settings`)."""
    return on_policy_config(step_settings(stage), runtime, output_dir, seed, model_dtype, run_name)


# ----------------------------------------------------------------------------- the stage
def run_distill_stage(stage: DistillStage, context: StageContext, teachers: Mapping[str, TeacherSpec]) -> Path:
    """Check the inputs, then distill into ``stage_dir/substage-1/model`` (resumable); write
    ``distill.json`` (the student and its teachers, for the recovery report). Returns the model."""
    stage_dir, model_in = context.stage_dir, context.policy
    data = build_distill_data(stage, seed=context.seed, variables=context.variables)
    distributed.on_main(
        "check teachers", lambda: check_teachers(stage, teachers, model_in, context.runtime.server_wait_s)
    )
    counts = ", ".join(f"{domain} {count}" for domain, count in data.domain_counts().items())
    log.info("%s: %s; prompts per domain: %s", stage.name, data.report.summary(), counts)
    distributed.on_main("stage records", lambda: _write_records(stage_dir, data, model_in, teachers))

    def train(index: int, settings: StepSettings, model: Path, substage_dir: Path) -> dict:
        return _train(stage, data, model, substage_dir, context, teachers)

    model = run_substages([step_settings(stage)], stage_dir, model_in, train)
    merge_substage_metrics(stage_dir, 1)
    return model


def _write_records(stage_dir: Path, data: DistillData, model_in: Path, teachers: Mapping[str, TeacherSpec]) -> None:
    write_data_report(stage_dir, data.report)
    student = Path(model_in)
    record = {
        "student": str(student),
        "student_stage_dir": str(student.parent) if (student.parent / "stage.json").exists() else None,
        "teachers": {domain: asdict(teacher) for domain, teacher in sorted(teachers.items())},
        "prompts_per_domain": data.domain_counts(),
    }
    (stage_dir / "distill.json").write_text(json.dumps(record, indent=1))


def _train(
    stage: DistillStage,
    data: DistillData,
    model: Path,
    substage_dir: Path,
    context: StageContext,
    teachers: Mapping[str, TeacherSpec],
) -> dict:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model, local_files_only=True)
    resume = resume_point(substage_dir / "trainer")
    schedule = DomainModeSchedule(data.modes, prompts_per_batch=stage.prompts_per_batch, seed=context.seed)
    done = 0
    if resume is not None:
        schedule.load_state_dict(resume.state["schedule"])
        done = resume.global_step
    distributed.on_main("sub-stage logs", lambda: rewind_logs(substage_dir, done, 0))
    settings = step_settings(stage)
    objective = TeacherAdvantages(
        teachers,
        batch_size=stage.teacher_batch_size or settings.per_device_batch_size,
        concurrency=stage.teacher_concurrency,
        timeout_s=stage.teacher_timeout_s,
    )
    substage = Substage(
        stage,
        settings,
        data.rows,
        schedule,
        row_of=lambda prompt, mode: prompt,
        label="1",
        run_name=stage.name,
        tokenizer=tokenizer,
        resume=resume,
        done_steps=done,
        objective=objective,
        episodes=EpisodeSettings.of(stage, (row["_domain"] for row in data.rows)),
    )
    steps = train_substage(substage, model, substage_dir, context)
    return {"steps": steps, "resumed_from_step": done or None}
