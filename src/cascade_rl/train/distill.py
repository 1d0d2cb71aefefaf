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

**Built on the GRPO engine.** :class:`DistillTrainer` is :class:`CascadeGRPOTrainer`: prompts
are drawn through the same :class:`PromptSchedule` and sampler contract (identical for any
process count and micro-batching), draws.jsonl, checkpoints every ``runtime.save_steps`` with
the schedule state, ``--resume`` to the same weights. It overrides one method: after TRL has
generated the step's rollouts, it scores them with the teachers and replaces TRL's
per-sequence advantages with the per-token ones (TRL's loss takes a (B, T) advantage as it is).
The student's log-probabilities are the trainer's own (TRL's ``old_per_token_logps`` when it
computed them for the vLLM correction, else one forward pass without gradient). There is no
reward: a recorder in the reward slot reports the step's rollouts to the schedule.

TRL's own distillation trainers were checked (TRL 1.16) and none is this objective; see
docs/mopd.md.

**Teachers** (resolved by the cascade, :func:`cascade_rl.train.cascade.resolve_teachers`): a
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

import json
import logging
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import torch

from cascade_rl.chat import stop_token_ids, with_mode, with_tools
from cascade_rl.data.loading import LoadReport, as_messages, load_sources, read_rows, resolve_path
from cascade_rl.data.rows import rename_fields
from cascade_rl.recipe import CurriculumStep, DistillStage, DynamicFilter, RecipeError, Runtime
from cascade_rl.train import distributed
from cascade_rl.train.common import (
    CheckpointMarker,
    MetricsWriter,
    compact_progress,
    peft_config,
    prune_checkpoints,
    resume_point,
    save_checkpoint,
)
from cascade_rl.train.curriculum import merge_substage_metrics, run_substages
from cascade_rl.train.filtering import MODES
from cascade_rl.train.grpo import CascadeGRPOTrainer, grpo_config, rewind_logs, rollout_engine, write_data_report
from cascade_rl.train.lm_head import install_lm_head
from cascade_rl.train.reward_adapter import ScoredBatch
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


def normalise_distill_row(row: dict) -> dict:
    """A prompt (chat messages ending with a user or tool turn, tools written into the system
    message as for RL rows) and its ``domain``; no reference answer is needed."""
    prompt = as_messages(row.get("prompt") if "prompt" in row else row.get("messages"), "prompt")
    while prompt and prompt[-1]["role"] == "assistant":
        prompt = prompt[:-1]
    if not prompt or prompt[-1]["role"] not in ("user", "tool"):
        raise ValueError("prompt does not end with a user turn")
    domain = row.get("domain")
    if not isinstance(domain, str) or not domain:
        raise ValueError("missing field 'domain'")
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
        for where, row in read_rows(path, LoadReport()):
            if not isinstance(row, dict):
                continue
            rename_fields(row, source.fields)
            domain = row.get("domain")
            if isinstance(domain, str) and domain and domain not in stage.teachers:
                raise RecipeError(
                    f"stages ({stage.name}).data: {where}: domain {domain!r} has no teacher "
                    f"(teachers: {', '.join(sorted(stage.teachers))})"
                )


def build_distill_data(stage: DistillStage, *, seed: int, variables: Mapping[str, str] | None = None) -> DistillData:
    check_domains(stage, variables)
    prompts, report = load_sources(stage.data, normalise_distill_row, seed=seed, variables=dict(variables or {}))
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


class RolloutRecorder:
    """The reward slot of TRL's trainer in a distill stage: no reward (the teachers give the
    advantage); it reports every process's rollouts of the step to the schedule (draws.jsonl),
    as :class:`~cascade_rl.train.reward_adapter.CascadeReward` does for GRPO stages."""

    def __init__(self, tokenizer: Any):
        self.__name__ = "rollouts"
        self.stop_ids = stop_token_ids(tokenizer)
        self.on_scored: Any = None

    def __call__(self, prompts, completions, completion_ids, _pidx=None, _mode=None, _domain=None, **_):
        local = [
            (int(p), str(m), str(d), len(ids), not ids or int(ids[-1]) not in self.stop_ids)
            for p, m, d, ids in zip(_pidx, _mode, _domain, completion_ids)
        ]
        rollouts = [rollout for part in distributed.gather(local) for rollout in part]
        prompt_indices, modes, domains, lengths, truncated = (list(column) for column in zip(*rollouts))
        if self.on_scored is not None:
            self.on_scored(ScoredBatch([0.0] * len(rollouts), domains, modes, prompt_indices, truncated, lengths))
        return [0.0] * len(completion_ids)


# ----------------------------------------------------------------------------- the objective
def distillation_advantages(teacher: torch.Tensor, student: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """a_t = log pi_teacher(y_t) - log pi_student(y_t) on every sampled token, 0 on padding; no gradient."""
    return ((teacher - student) * mask).detach()


class DistillTrainer(CascadeGRPOTrainer):
    """:class:`CascadeGRPOTrainer` whose advantages are the teachers' per-token ones (module
    docstring). ``teachers`` maps each domain to its :class:`TeacherSpec`."""

    def __init__(
        self,
        *args: Any,
        teachers: Mapping[str, TeacherSpec],
        teacher_batch_size: int | None = None,
        teacher_concurrency: int = 16,
        teacher_timeout_s: float = 600.0,
        **kwargs: Any,
    ):
        super().__init__(*args, **kwargs)
        self.scoring_batch_size = teacher_batch_size or self.args.per_device_train_batch_size
        loaded: dict[str, LocalTeacher | ServedTeacher] = {}
        for teacher in teachers.values():
            if teacher.source not in loaded:
                loaded[teacher.source] = (
                    self._served(teacher, teacher_concurrency, teacher_timeout_s)
                    if teacher.served
                    else LocalTeacher(self._load_local(teacher.source))
                )
        self.teachers = {domain: loaded[teacher.source] for domain, teacher in teachers.items()}

    def _load_local(self, path: str) -> Any:
        from transformers import AutoModelForCausalLM
        from trl.models import prepare_deepspeed, prepare_fsdp
        from trl.trainer.utils import add_fused_lm_head

        model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=self.model.dtype)
        model.requires_grad_(False).eval()
        add_fused_lm_head(model, temperature=self.temperature)
        install_lm_head(model, self.lm_head, temperature=self.temperature)
        if self.is_deepspeed_enabled:
            return prepare_deepspeed(model, self.accelerator)
        if self.is_fsdp_enabled:
            return prepare_fsdp(model, self.accelerator)
        return self.accelerator.prepare_model(model, evaluation_mode=True)

    @staticmethod
    def _served(teacher: TeacherSpec, concurrency: int, timeout: float) -> ServedTeacher:
        from cascade_rl.serve.teacher import TeacherClient

        return ServedTeacher(TeacherClient(teacher.source, max_concurrency=concurrency, timeout=timeout))

    # ------------------------------------------------------------------ the one override
    def _generate_and_score_completions(self, inputs: list[dict]) -> dict:
        output = super()._generate_and_score_completions(inputs)
        domains = [row["_domain"] for row in inputs]
        mask = output["completion_mask"]
        started = time.perf_counter()
        teacher = self.teacher_logps(domains, output)
        scored = time.perf_counter()
        student = output.get("old_per_token_logps")  # pi_train at rollout time, when TRL computed it
        if student is None:
            student = self.policy_logps(self.model, output)
        output["advantages"] = distillation_advantages(teacher, student, mask)
        self._log_distillation(domains, teacher, student, mask, scored - started, time.perf_counter() - scored)
        return output

    # ------------------------------------------------------------------ log-probabilities
    def policy_logps(self, model: Any, output: Mapping[str, Any], rows: torch.Tensor | None = None) -> torch.Tensor:
        """Per completion token, ``model``'s log-probability at the sampling temperature (TRL's
        own forward), without gradient; for ``rows`` of the batch, or all of it."""
        from trl.models.utils import disable_gradient_checkpointing

        ids = torch.cat([output["prompt_ids"], output["completion_ids"]], dim=1)
        attention = torch.cat([output["prompt_mask"], output["completion_mask"]], dim=1)
        if rows is not None:
            ids, attention = ids[rows], attention[rows]
        with torch.no_grad(), disable_gradient_checkpointing(self.model, self.args.gradient_checkpointing_kwargs):
            logps, _, _ = self._get_per_token_logps_and_entropies(
                model, ids, attention, output["completion_ids"].size(1), batch_size=self.scoring_batch_size
            )
        return logps

    def teacher_logps(self, domains: Sequence[str], output: Mapping[str, Any]) -> torch.Tensor:
        """Per completion token, the log-probability its row's domain teacher gives it (0 on padding)."""
        mask = output["completion_mask"]
        result = torch.zeros(mask.shape, dtype=torch.float32, device=mask.device)
        by_teacher: dict[int, list[int]] = defaultdict(list)
        for i, domain in enumerate(domains):
            by_teacher[id(self.teachers[domain])].append(i)
        for members in by_teacher.values():
            teacher = self.teachers[domains[members[0]]]
            rows = torch.tensor(members, device=mask.device)
            if isinstance(teacher, LocalTeacher):
                result[rows] = self.policy_logps(teacher.model, output, rows).float()
            else:
                result[rows] = self._served_logps(teacher, output, members).to(mask.device)
        return result * mask

    def _served_logps(self, teacher: ServedTeacher, output: Mapping[str, Any], members: list[int]) -> torch.Tensor:
        sequences = []
        for i in members:
            prompt = output["prompt_ids"][i][output["prompt_mask"][i].bool()].tolist()
            completion = output["completion_ids"][i][: int(output["completion_mask"][i].sum())].tolist()
            sequences.append((prompt, completion))
        values = teacher.client.completion_logprobs(sequences, temperature=self.temperature)
        padded = torch.zeros((len(members), output["completion_ids"].size(1)), dtype=torch.float32)
        for row, logps in enumerate(values):
            padded[row, : len(logps)] = torch.tensor(logps, dtype=torch.float32)
        return padded

    # ------------------------------------------------------------------ metrics
    def _log_distillation(self, domains, teacher, student, mask, teacher_s: float, student_s: float) -> None:
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
        metrics = self._metrics["train"]
        for domain, (kl, tokens, sequences) in sorted(totals.items()):
            metrics[f"distill/{domain}/reverse_kl"].append(kl / max(tokens, 1.0))
            metrics[f"response_length/{domain}"].append(tokens / sequences)
        kl, tokens = sum(v[0] for v in totals.values()), sum(v[1] for v in totals.values())
        metrics["distill/reverse_kl"].append(kl / max(tokens, 1.0))
        metrics["time/teacher"].append(teacher_s)
        metrics["time/student"].append(student_s)
        for name in [key for key in metrics if key.startswith(("reward", "frac_reward"))]:
            del metrics[name]  # the recorder's zero "reward" says nothing in a distill stage


# ----------------------------------------------------------------------------- configuration
def distill_config(
    stage: DistillStage,
    runtime: Runtime,
    output_dir: Path,
    seed: int,
    model_dtype: str = "auto",
    run_name: str | None = None,
):
    """The TRL configuration: the GRPO stages' (strictly on-policy, dapo token-level loss, no KL,
    no entropy bonus) with this stage's sampling and batch, truncated responses kept in the loss,
    and the mismatch band as TRL's token_mask correction for vLLM rollouts."""
    return grpo_config(
        stage,
        substage_step(stage),
        mismatch_runtime(stage, runtime),
        output_dir,
        seed,
        model_dtype,
        run_name,
    )


def substage_step(stage: DistillStage) -> CurriculumStep:
    return CurriculumStep(
        max_response_length=stage.max_response_length, max_steps=stage.max_steps, overlong_filter=False
    )


def mismatch_runtime(stage: DistillStage, runtime: Runtime) -> Runtime:
    """The runtime with TRL's importance-sampling correction set to the stage's mismatch band."""
    if stage.mismatch_band is None:
        return runtime.model_copy(update={"vllm_importance_sampling": "off"})
    low, high = stage.mismatch_band
    return runtime.model_copy(
        update={
            "vllm_importance_sampling": "token_mask",
            "vllm_importance_sampling_min": low,
            "vllm_importance_sampling_max": high,
        }
    )


# ----------------------------------------------------------------------------- the stage
def run_distill_stage(
    stage: DistillStage,
    *,
    model_in: Path,
    stage_dir: Path,
    runtime: Runtime,
    seed: int,
    teachers: Mapping[str, TeacherSpec],
    variables: Mapping[str, str] | None = None,
    model_dtype: str = "auto",
    sample_dtype: str | None = None,
) -> Path:
    """Check the inputs, then distill into ``stage_dir/substage-1/model`` (resumable); write
    ``distill.json`` (the student and its teachers, for the recovery report). Returns the model.
    ``sample_dtype``: the weights of vLLM's student samples (None = ``model_dtype``)."""
    data = build_distill_data(stage, seed=seed, variables=variables)
    distributed.on_main(
        "check teachers", lambda: check_teachers(stage, teachers, Path(model_in), runtime.server_wait_s)
    )
    counts = ", ".join(f"{domain} {count}" for domain, count in data.domain_counts().items())
    log.info("%s: %s; prompts per domain: %s", stage.name, data.report.summary(), counts)
    distributed.on_main("stage records", lambda: _write_records(stage_dir, data, model_in, teachers))

    def train(index: int, step: CurriculumStep, model: Path, substage_dir: Path) -> dict:
        dtypes = (model_dtype, sample_dtype or model_dtype)
        return _train(stage, data, model, substage_dir, runtime, seed, teachers, dtypes)

    model = run_substages([substage_step(stage)], stage_dir, Path(model_in), train)
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
    runtime: Runtime,
    seed: int,
    teachers: Mapping[str, TeacherSpec],
    dtypes: tuple[str, str],
) -> dict:
    from datasets import Dataset
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model, local_files_only=True)
    trainer_dir = substage_dir / "trainer"
    resume = resume_point(trainer_dir)
    schedule = DomainModeSchedule(data.modes, prompts_per_batch=stage.prompts_per_batch, seed=seed)
    done = 0
    if resume is not None:
        schedule.load_state_dict(resume.state["schedule"])
        done = resume.global_step
    distributed.on_main("sub-stage logs", lambda: rewind_logs(substage_dir, done, 0))
    recorder = RolloutRecorder(tokenizer)
    model_dtype, sample_dtype = dtypes
    trainer = DistillTrainer(
        model=str(model),
        reward_funcs=[recorder],
        args=distill_config(stage, runtime, trainer_dir, seed, model_dtype, run_name=stage.name),
        train_dataset=Dataset.from_list(data.rows),
        processing_class=tokenizer,
        callbacks=[
            MetricsWriter(substage_dir / "metrics.jsonl", substage="1"),
            CheckpointMarker(lambda global_step: {"schedule": schedule.checkpoint(global_step)}),
        ],
        schedule=schedule,
        row_of=lambda prompt, mode: prompt,
        steps=stage.max_steps - done,
        draws_log=substage_dir / "draws.jsonl",
        lm_head=runtime.lm_head,
        teachers=teachers,
        teacher_batch_size=stage.teacher_batch_size,
        teacher_concurrency=stage.teacher_concurrency,
        teacher_timeout_s=stage.teacher_timeout_s,
        peft_config=peft_config(stage.lora),
        rollouts=rollout_engine(stage, substage_step(stage), runtime, model, sample_dtype, seed),
        drop_idle_rollouts=runtime.drop_idle_rollouts,
    )
    recorder.on_scored = trainer.record_scored
    compact_progress(trainer).train(resume_from_checkpoint=str(resume.path) if resume else None)
    save_checkpoint(trainer, tokenizer, substage_dir / "model")
    prune_checkpoints(trainer_dir)
    return {"steps": trainer.state.global_step, "resumed_from_step": done or None}
