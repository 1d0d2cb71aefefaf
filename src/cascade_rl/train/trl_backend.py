"""The one boundary with TRL (DESIGN convention 12: TRL is one backend behind a small interface;
SPEC sections 3-8 on TRL's trainers).

Every place the cascade reaches into TRL is in this module, and nowhere else imports ``trl``:

* **Configurations** (TRL's config + trainer pairs): :func:`on_policy_config` maps the paper's
  on-policy objective (:class:`~cascade_rl.train.on_policy.StepSettings`) onto ``GRPOConfig``;
  :func:`supervised_trainer` builds ``SFTTrainer`` / ``RewardTrainer`` from their configs.
* **The on-policy trainer** :class:`OnPolicyTrainer` (GRPO and distillation alike): TRL's
  ``GRPOTrainer`` drawing its prompts from the engine's
  :class:`~cascade_rl.train.schedule.PromptSchedule` through TRL's sampler contract, generating
  with the cascade's own vLLM engine when there is one, and owning **the step's scoring**
  (:meth:`OnPolicyTrainer._calculate_rewards`): the step's verification
  (:class:`~cascade_rl.train.verification.StepVerification`) is opened before the rollouts are
  generated, and the engine hands it each rollout as it finishes (vLLM's step loop, the fallback
  loop's hooks), so programs run in the sandbox while the rest of the step is sampled; the scoring
  step collects the verdicts, gathers every process's rollouts, finishes and shapes their rewards
  over the whole batch (:func:`~cascade_rl.train.rewards.score_step`), logs them and records them
  in the schedule -- one gather, no callback between reward and trainer. A rollout without a verdict
  leaves the loss too (its completion mask zeroed, the step's token count recounted), and a step
  mostly without verdicts stops the stage (:func:`~cascade_rl.train.rewards.check_masked_share`).
  A token-level objective (distillation's teacher advantages,
  :class:`~cascade_rl.train.on_policy.TokenObjective`) replaces TRL's group advantages after it.
* **Model heads TRL calls into**: the dense LM head (:func:`install_lm_head`) honouring TRL's
  ``fused_lm_head=True`` contract, and frozen models prepared the way TRL prepares its reference
  model (:meth:`OnPolicyTrainer.load_frozen_model`).

TRL has no public hook for most of this, so :class:`OnPolicyTrainer` overrides private methods
of ``GRPOTrainer`` and reads private attributes; :data:`TRL_PRIVATE` lists each with the parameters
relied on, :func:`trl_surface_problems` checks them against the installed TRL (at the first
trainer, one message naming every change), and ``tests/train/test_trl_backend.py`` pins them and
their behaviour for the TRL range of ``pyproject.toml``. TRL's public hooks serve where they can:
reward functions (``reward_funcs``, with TRL's names for their metrics), callbacks, configs.
TRL's ``rollout_func`` is not used: it is experimental in TRL 1.x (a warning at every trainer)
and it skips TRL's tokenisation and weight-sync bookkeeping this module relies on.

**Why one file of about 850 lines**: the point of it is that an upgrade of TRL is read and fixed
in one place; splitting it would scatter the private surface again.
"""

from __future__ import annotations

import inspect
import json
import logging
import time
import types
import warnings
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from torch.utils.data import Sampler

from cascade_rl.chat import stop_token_ids
from cascade_rl.llm.base import Sampling
from cascade_rl.llm.decode import install_decoder
from cascade_rl.llm.episodes import Budget, ChatCodec, run_episodes
from cascade_rl.llm.pretrained import load_pretrained
from cascade_rl.llm.vllm_engine import quiet_triton_on_cpu
from cascade_rl.train import distributed, machine
from cascade_rl.train.episodes import EpisodeSettings, episode_results, start_episodes
from cascade_rl.train.learning_rows import attended_span, can_drop_idle_rollouts, learning_mask, learning_rows
from cascade_rl.train.rewards import (
    ScoredBatch,
    check_masked_share,
    low_groups,
    recorded_step,
    report_metrics,
    score_step,
    unscored,
)
from cascade_rl.train.rollouts import ImportanceRatio, VLLMRollouts
from cascade_rl.train.schedule import PromptSchedule, StepDraw
from cascade_rl.train.verification import StepVerification

# TRL imports vLLM where it is installed, before the project starts an engine: vLLM's Triton probe
# then says three times that a CPU has no Triton; the filter drops those lines, on a CPU only
quiet_triton_on_cpu()
with warnings.catch_warnings():
    # TRL warns when its modules load beside a vLLM newer than its own client was tested with; the
    # cascade drives vLLM itself in colocate mode (train/rollouts.py): the warning concerns only
    # TRL's server mode
    warnings.filterwarnings("ignore", message="TRL currently supports vLLM versions", category=UserWarning)
    from trl import GRPOConfig, GRPOTrainer

log = logging.getLogger(__name__)

# ----------------------------------------------------------------------------- TRL's private surface
#: TRL's private methods this module overrides or calls, with the parameters it relies on (in order)
TRL_PRIVATE: dict[str, tuple[str, ...]] = {
    "GRPOTrainer._get_train_sampler": ("self", "dataset"),
    "GRPOTrainer._generate_and_score_completions": ("self", "inputs"),
    "GRPOTrainer._generate": ("self", "prompts"),
    "GRPOTrainer._generate_single_turn": ("self", "prompt_ids", "images", "multimodal_fields", "num_generations"),
    "GRPOTrainer._calculate_rewards": ("self", "inputs", "prompts", "completions", "completion_ids_list"),
    "GRPOTrainer._get_per_token_logps_and_entropies": (
        "self",
        "model",
        "input_ids",
        "attention_mask",
        "logits_to_keep",
        "batch_size",
        "compute_entropy",
        "compute_aux_loss",
    ),
    "GRPOTrainer._compute_loss": ("self", "model", "inputs"),
    "GRPOTrainer._log_metric": ("self", "name", "value"),
    "GRPOTrainer._load_rng_state": ("self", "checkpoint"),
    "GRPOTrainer._tokenize_prompts": ("self", "prompts"),
}
#: TRL's private attributes of a GRPOTrainer this module reads or sets (``rollout_func``: the hook
#: through which ``_generate`` takes multi-turn episodes, set per call; ``_last_loaded_step``: TRL's
#: own weight-sync mark, which the cascade's engine keeps from syncing a vLLM it does not have;
#: ``generation_config`` / ``generation_kwargs``: each turn's token budget without vLLM)
TRL_PRIVATE_ATTRIBUTES = (
    "_metrics",
    "use_vllm",
    "vllm_mode",
    "eos_token_ids",
    "num_generations",
    "temperature",
    "rollout_func",
    "_last_loaded_step",
    "generation_config",
    "generation_kwargs",
)
#: TRL's internal functions and types this module imports: (module, name)
TRL_INTERNALS = (
    ("trl.trainer.utils", "add_fused_lm_head"),
    ("trl.trainer.utils", "FusedCausalLMOutput"),
    ("trl.models", "prepare_deepspeed"),
    ("trl.models", "prepare_fsdp"),
    ("trl.models.utils", "disable_gradient_checkpointing"),
)


@cache
def trl_surface_problems() -> tuple[str, ...]:
    """What of :data:`TRL_PRIVATE` and :data:`TRL_INTERNALS` the installed TRL no longer has."""
    import importlib

    import trl

    problems = []
    for qualified, expected in TRL_PRIVATE.items():
        owner, name = qualified.split(".")
        method = getattr({"GRPOTrainer": GRPOTrainer}[owner], name, None)
        if method is None:
            problems.append(f"{qualified} is gone")
            continue
        found = tuple(inspect.signature(method).parameters)[: len(expected)]
        if found != expected:
            problems.append(f"{qualified}{expected} is now {qualified}{found}")
    for module, name in TRL_INTERNALS:
        if not hasattr(importlib.import_module(module), name):
            problems.append(f"{module}.{name} is gone")
    return tuple(f"trl {trl.__version__}: {problem}" for problem in problems)


def check_trl() -> None:
    """One error naming every change of TRL's private surface this backend relies on."""
    problems = trl_surface_problems()
    if problems:
        raise RuntimeError(
            "the installed TRL changed what train/trl_backend.py overrides (pyproject.toml pins the tested range): "
            + "; ".join(problems)
        )


#: the dataset columns a step's rows carry for its rewards: reference fields (JSON), prompt index,
#: thinking mode, reward domain
ROW_COLUMNS = ("_ref", "_pidx", "_mode", "_domain")


# ----------------------------------------------------------------------------- configurations
def on_policy_config(settings: Any, runtime: Any, base: dict[str, Any]) -> GRPOConfig:
    """``GRPOConfig`` for one on-policy (sub-)stage (:class:`~cascade_rl.train.on_policy.StepSettings`):

    * strictly on-policy -- one optimizer step per rollout batch (``steps_per_generation`` equals
      the gradient-accumulation steps, ``num_iterations = 1``), so TRL never computes old
      log-probabilities and the importance ratio is exactly 1;
    * no KL term unless the stabilisers ask (``beta``), no entropy bonus (``entropy_coef = 0``);
    * token-level loss (``loss_type = "dapo"``: the sum over every token of the batch divided by
      the total token count) or the per-sequence mean; group z-score advantages;
    * ``mask_truncated_completions`` with overlong filtering; a constant learning rate with AdamW;
    * TRL's vLLM/trainer importance-sampling correction only where the settings name a mode."""
    args = dict(base)
    args.update(
        per_device_train_batch_size=settings.per_device_batch_size,
        gradient_accumulation_steps=settings.accumulation,
        steps_per_generation=settings.accumulation,
        num_iterations=1,
        num_generations=settings.rollouts_per_prompt,
        max_completion_length=settings.max_response_length,
        max_steps=settings.max_steps,
        temperature=settings.temperature,
        top_p=settings.top_p,
        top_k=settings.top_k or 0,
        learning_rate=settings.learning_rate,
        lr_scheduler_type="constant",
        warmup_steps=0,
        weight_decay=settings.weight_decay,
        max_grad_norm=settings.max_grad_norm,
        beta=settings.kl_coef,
        loss_type="dapo" if settings.token_loss else "grpo",
        scale_rewards="group",
        mask_truncated_completions=settings.mask_truncated,
        entropy_coef=0.0,
        shuffle_dataset=False,
        remove_unused_columns=False,
        log_completions=False,
        ignore_data_skip=True,  # the prompt schedule resumes itself; the data loader must not skip
        use_vllm=trl_serves_rollouts(runtime),
        vllm_mode=runtime.vllm_mode,
        **_importance_sampling(settings.importance_sampling),
    )
    if trl_serves_rollouts(runtime):
        args.update(vllm_gpu_memory_utilization=runtime.vllm_gpu_memory_utilization)
        if runtime.vllm_server_base_url:
            args.update(vllm_server_base_url=runtime.vllm_server_base_url)
    return GRPOConfig(**args)


def trl_serves_rollouts(runtime: Any) -> bool:
    """TRL's vLLM client generates (server mode); in colocate mode the cascade drives vLLM itself."""
    return runtime.use_vllm is True and runtime.vllm_mode == "server"


def _importance_sampling(band: tuple[str, float | None, float | None]) -> dict[str, Any]:
    mode, low, high = band
    if mode == "off":
        return {"vllm_importance_sampling_correction": False}
    return {
        "vllm_importance_sampling_correction": True,
        "vllm_importance_sampling_mode": mode,
        "vllm_importance_sampling_clip_min": low,
        "vllm_importance_sampling_clip_max": high,
    }


def supervised_trainer(kind: str, model: str, args: dict[str, Any], lm_head: str, **parts: Any) -> Any:
    """TRL's ``SFTTrainer`` (``kind="sft"``, with the recipe's LM head) or ``RewardTrainer``
    (``"reward"``) over ``args``; ``parts``: dataset, tokenizer, callbacks, PEFT config."""
    from trl import RewardConfig, RewardTrainer, SFTConfig, SFTTrainer

    if kind == "reward":
        trainer = RewardTrainer(model=model, args=RewardConfig(**args), **parts)
        if getattr(trainer.model.config, "pad_token_id", None) is None:
            trainer.model.config.pad_token_id = parts["processing_class"].pad_token_id
        return trainer
    trainer = SFTTrainer(model=model, args=SFTConfig(**args), **parts)
    install_lm_head(trainer.model, lm_head, outputs=("log_probs", "entropy", "is_top1"))
    return trainer


# ----------------------------------------------------------------------------- the sampler
class ScheduleSampler(Sampler[int]):
    """TRL's ``RepeatSampler`` contract over a :class:`PromptSchedule`: per step, the global
    batch (each prompt row ``rollouts`` times) repeated ``repeats`` times, for ``steps`` steps.
    TRL's data loader is read once per accumulation step but generation uses only the first read;
    accelerate hands each process its slice of the global batch."""

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


# ----------------------------------------------------------------------------- the on-policy trainer
class OnPolicyTrainer(GRPOTrainer):
    """TRL's GRPOTrainer for every on-policy stage (module docstring).

    ``schedule`` / ``row_of`` / ``steps``: the prompts of each step and the dataset row of a
    (prompt, mode); ``draws_log``: where each step's draw is written (main process);
    ``reward_funcs`` (TRL's argument): the stage's :class:`~cascade_rl.train.verification.RolloutScorer`;
    ``objective``: token-level advantages instead of a reward (:class:`RewardSlot` fills TRL's reward
    slot); ``reward_shaping``: ``none`` or ``tanh_z``;
    ``rollouts``: this process's vLLM engine (None: TRL's path, the project's decoder without vLLM);
    ``episodes``: how the stage plays its multi-turn rows (None: it has none), whose records go to
    ``episodes_log`` (main process)."""

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
        reward_shaping: str = "none",
        objective: Any = None,
        episodes: EpisodeSettings | None = None,
        episodes_log: Path | None = None,
        **kwargs: Any,
    ):
        check_trl()
        if objective is not None:  # TRL requires a reward source
            kwargs["reward_funcs"] = [RewardSlot(getattr(objective, "name", "objective"))]
        self.schedule, self.row_of, self.schedule_steps, self.draws_log = schedule, row_of, steps, draws_log
        self.reward_shaping, self.objective = reward_shaping, objective
        self.sampler: ScheduleSampler | None = None
        self.current_draw: StepDraw | None = None
        self.scored: ScoredBatch | None = None  # the last step's rollouts and rewards, every process's
        self.rng_checkpoint: str | None = None
        self.lm_head = lm_head
        self.episodes, self.episodes_log = episodes, episodes_log
        self.step_rows: list[dict] = []  # this process's rows of the step being generated
        self.episode_records: list[dict] = []  # this process's finished episodes of that step
        self.turn, self.turn_tokens = 0, None  # the sampling round of an episode step, and its token budget
        super().__init__(*args, **kwargs)
        self.drop_idle_rollouts = drop_idle_rollouts and can_drop_idle_rollouts(
            self.loss_type, self.beta, self.args.entropy_coef, self.top_entropy_quantile
        )
        install_lm_head(self.model, lm_head, temperature=self.temperature, outputs=("log_probs", "entropy"))
        self.rollouts, self.synced_step, self.ratio = rollouts, -1, ImportanceRatio()
        self.trainer_logps: list | None = None  # the loss's own log-probabilities, for the vLLM ratio
        self.verification: StepVerification | None = None  # the step's, while it generates and scores
        self.decoder = None  # the project's decoder's hooks, when it samples
        if rollouts is not None:
            # TRL's vLLM branches (sampling log-probabilities, the optional importance-sampling
            # correction) apply to these rollouts; generation itself is _generate_single_turn below
            self.use_vllm, self.vllm_mode = True, "colocate"
        if not self.use_vllm:
            self.decoder = install_decoder(self.model)  # finished sequences leave the batch (llm/decode.py)
        if self.ref_model is not None:
            install_lm_head(self.ref_model, lm_head, temperature=self.temperature)
        if objective is not None:
            objective.prepare(self)

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

    # ------------------------------------------------------------------ one step's rollouts
    def _generate_and_score_completions(self, inputs: list[dict]) -> dict:
        self.current_draw = None  # a batch handed to the trainer directly (no schedule sampler: not training)
        if self.sampler is not None:
            self.current_draw = self.sampler.drawn.popleft()
            self._check_rows(inputs, self.current_draw)
        if self.rng_checkpoint is not None:
            # The trainer restores the RNG states before the data loader starts, which draws a
            # seed from them; restored here, the first resumed step samples exactly what the
            # uninterrupted run sampled.
            self._load_rng_state(self.rng_checkpoint)
            self.rng_checkpoint = None
        self.step_rows = inputs
        self.verification = self._verification(inputs) if self.objective is None else None
        try:
            output = super()._generate_and_score_completions(inputs)
        finally:
            self.verification = None
        if self.objective is not None:
            self._drop_reward_metrics()
            output["advantages"] = self.objective.advantages(inputs, output, self)
        else:
            self._leave_out_of_the_loss(output)
        return output

    def _verification(self, inputs: Sequence[dict]) -> StepVerification:
        """This process's verification of the step's rollouts (train/verification.py), opened before
        they are generated: each rollout's GRPO group is its place in the global batch, of which
        this process holds the contiguous slice its rank names."""
        (scorer,) = self.reward_funcs  # the stage's one reward function: every domain routes inside it
        columns = {key: [row[key] for row in inputs] for key in ROW_COLUMNS if key in inputs[0]}
        offset = distributed.rank() * len(inputs)
        groups = [(offset + i) // self.num_generations for i in range(len(inputs))]
        prompts = [row["prompt"] for row in inputs]
        return scorer.verify(prompts, columns, groups=groups, group_size=self.num_generations)

    def _leave_out_of_the_loss(self, output: dict) -> None:
        """Rollouts without a verdict (their reward None: out of their group's statistics) leave
        the loss too, and so do the groups the stage masks for scoring too low
        (``mask_groups_at_or_below``, :func:`~cascade_rl.train.rewards.low_groups`): their
        completion mask is zeroed and the step's token total (the token-level loss's denominator)
        recounted without them, as TRL does for overlong filtering."""
        batch = self.scored
        if batch is None:
            return
        (scorer,) = self.reward_funcs
        low = low_groups(batch.rewards, self.num_generations, scorer.mask_groups_at_or_below)
        if scorer.mask_groups_at_or_below is not None:
            self.log_step_metrics({"rollouts/low_groups_masked": sum(low) / self.num_generations})
        leave_out = [reason is not None or is_low for reason, is_low in zip(batch.masked, low)]
        if not any(leave_out):
            return  # the same on every process: the recount below is collective
        count = output["completion_ids"].size(0)
        start = distributed.rank() * count
        for row, out in enumerate(leave_out[start : start + count]):
            if out:
                output["completion_mask"][row] = 0
        mask = output["completion_mask"]
        if output.get("tool_mask") is not None:
            mask = mask * output["tool_mask"]
        output["num_items_in_batch"] = self.accelerator.gather(mask.sum()).sum()

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
        if self.episodes is None:
            result = super()._generate(prompts)
        else:  # TRL's hook for rollouts it does not generate itself, set for this call only
            self.rollout_func = self._play_episodes
            if self.rollouts is not None:  # TRL's weight sync is for a vLLM of its own; ours syncs in the first turn
                self._last_loaded_step = self.state.global_step
            try:
                result = super()._generate(prompts)
            finally:
                self.rollout_func = None
        self._log_metric("time/generation", time.perf_counter() - start)
        return result

    def _play_episodes(self, prompts: list, trainer: Any = None) -> dict:
        """The step's rollouts as episodes (``llm/episodes.py``): a multi-turn row plays its
        environment turn by turn, a single-turn row takes one turn; TRL receives every turn and tool
        result as the completion, the tool results masked (``env_mask``), and the episodes' verdicts
        in the ``_episode`` column for the scoring step."""
        assert self.episodes is not None
        prompt_ids, _, _ = self._tokenize_prompts(prompts)
        episodes = start_episodes(self.step_rows, prompts, self.episodes)
        self.turn = 0
        transcripts = run_episodes(
            prompt_ids,
            episodes,
            self._sample_turn,
            budget=Budget(self.max_completion_length, self.episodes.max_turn_tokens),
            codec=ChatCodec(self.processing_class, self.eos_token_ids),
            lockstep=(lambda open_here: any(distributed.gather(open_here))) if self._collective_generation() else None,
        )
        column, self.episode_records = episode_results(self.step_rows, episodes, transcripts)
        with_logprobs = all(t.logprobs is not None for t in transcripts)
        return {
            "prompt_ids": prompt_ids,
            "completion_ids": [t.completion_ids for t in transcripts],
            "logprobs": [t.logprobs for t in transcripts] if with_logprobs else None,
            "env_mask": [t.tool_mask for t in transcripts],
            "_episode": column,
        }

    def _sample_turn(self, prompt_ids: list[list[int]], max_tokens: int):
        """One round of the episodes' turns through the step's engine, at most ``max_tokens`` each."""
        self.turn_tokens = max_tokens
        try:
            if self.rollouts is not None or self.use_vllm:
                return self._generate_single_turn(prompt_ids, None, {}, 1)
            budget = {"max_new_tokens": max_tokens}
            saved = self.generation_config.max_new_tokens, dict(self.generation_kwargs)
            self.generation_config.update(**budget)
            self.generation_kwargs.update(budget)
            try:
                return self._generate_single_turn(prompt_ids, None, {}, 1)
            finally:
                self.generation_config.max_new_tokens = saved[0]
                self.generation_kwargs.clear()
                self.generation_kwargs.update(saved[1])
        finally:
            self.turn, self.turn_tokens = self.turn + 1, None

    def _collective_generation(self) -> bool:
        """Whether every process must take part in each generation call: TRL's server mode gathers
        the prompts, FSDP and DeepSpeed gather the weights of the trainer's model."""
        if self.rollouts is not None:
            return False
        return bool(self.use_vllm or self.is_fsdp_enabled or self.is_deepspeed_enabled)

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, *args, **kwargs):
        """The step's rollouts, each handed to the step's verification as it finishes (not a turn
        of an episode: the episode is its rollout, judged when it ends)."""
        playing = self.turn_tokens is not None
        on_finished = self.verification.finished if self.verification is not None and not playing else None
        if self.rollouts is None:
            if self.decoder is not None:  # else TRL's own engines: scored when the step collects
                self.decoder.on_finished = on_finished
            try:
                return super()._generate_single_turn(
                    prompt_ids, images, multimodal_fields, num_generations, *args, **kwargs
                )
            finally:
                if self.decoder is not None:
                    self.decoder.on_finished = None
        if self.state.global_step != self.synced_step:  # new weights since the last rollouts
            self._log_metric("time/weight_sync", self.rollouts.sync(self.accelerator.unwrap_model(self.model)))
            self.synced_step = self.state.global_step
        budget = self.turn_tokens or self.max_completion_length
        sampling = Sampling(1, self.temperature, self.top_p, budget, self.top_k or 0)
        return self.rollouts.generate(
            prompt_ids,
            sampling,
            stop_ids=self.eos_token_ids,
            step=self.state.global_step,
            turn=self.turn,
            on_finished=on_finished,
        )

    # ------------------------------------------------------------------ the step's scoring
    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        """The step's scoring (module docstring): TRL's contract is the global (rollouts x reward
        functions) tensor, NaN where a rollout is not scored."""
        import torch

        started = time.perf_counter()
        if self.objective is None:
            (scorer,) = self.reward_funcs
            verification = self.verification or self._verification(inputs)  # (a step not drawn here)
            local = verification.collect(completion_ids_list, episodes=[row.get("_episode") for row in inputs])
            batch = score_step(
                local,
                gather=distributed.gather,
                group_size=self.num_generations,
                options=scorer.options,
                shaping=self.reward_shaping,
                rank=distributed.rank(),
            )
            step = self.current_draw.step if self.current_draw is not None else self.state.global_step + 1
            check_masked_share(batch, scorer.max_masked_share, step=step)
        else:  # no reward (a token-level objective): the rollouts are recorded for the schedule, at 0
            columns = [[row.get(key) for row in inputs] for key in ROW_COLUMNS[1:]]
            local = unscored(completion_ids_list, stop_token_ids(self.processing_class), *columns)
            batch = recorded_step(local, gather=distributed.gather)
        batch.seconds = time.perf_counter() - started
        if self.objective is None:
            report_metrics(batch, self._log_metric)
            for name, value in verification.timing().items():  # this process's; TRL averages them
                self._log_metric(name, value)
        self._record(batch)
        rewards = [float("nan") if r is None else r for r in batch.rewards]
        return torch.tensor(rewards, dtype=torch.float32, device=self.accelerator.device).unsqueeze(1)

    def _record(self, batch: ScoredBatch) -> None:
        """The schedule's bookkeeping of a drawn step: its results, the processes' agreement, draws.jsonl."""
        self.scored = batch
        draw = self.current_draw
        if draw is None:  # a step handed to TRL directly, not drawn by the schedule
            return
        self.schedule.record(draw.step, batch.prompt_indices, batch.rewards)
        digests = distributed.gather(self.schedule.digest())
        if len(set(digests)) > 1:
            raise RuntimeError(f"step {draw.step}: the processes' prompt schedules disagree ({digests})")
        for name, value in self.schedule.metrics().items():
            self._log_metric(name, value)
        if self.draws_log is not None and distributed.is_main():
            with open(self.draws_log, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(draw_record(draw, batch, digests)) + "\n")
        if self.episodes is not None:
            self._log_episodes(draw.step)

    def _log_episodes(self, step: int) -> None:
        """Every process's finished episodes of the step, one line each in ``episodes.jsonl`` (collective)."""
        records = [record for part in distributed.gather(self.episode_records) for record in part]
        self.episode_records = []
        if self.episodes_log is not None and distributed.is_main() and records:
            with open(self.episodes_log, "a", encoding="utf-8") as handle:
                for record in records:
                    handle.write(json.dumps({"step": step, **record}, ensure_ascii=False) + "\n")

    def _drop_reward_metrics(self) -> None:
        """TRL's group reward statistics say nothing in a stage without a reward."""
        metrics = self._metrics["train"]
        for name in [key for key in metrics if key.startswith(("reward", "frac_reward"))]:
            del metrics[name]

    # ------------------------------------------------------------------ what an objective may ask
    def log_step_metrics(self, values: Mapping[str, float]) -> None:
        """Metrics of this step, already the same on every process."""
        for name, value in values.items():
            self._metrics["train"][name].append(value)

    def load_frozen_model(self, path: str) -> Any:
        """A checkpoint loaded in the policy's dtype, frozen, with the policy's LM head, prepared
        for this process as TRL prepares its reference model (DeepSpeed, FSDP or plain)."""
        from transformers import AutoModelForCausalLM
        from trl.models import prepare_deepspeed, prepare_fsdp
        from trl.trainer.utils import add_fused_lm_head

        model = load_pretrained(AutoModelForCausalLM, path, local_files_only=True, dtype=self.model.dtype)
        model.requires_grad_(False).eval()
        add_fused_lm_head(model, temperature=self.temperature)
        install_lm_head(model, self.lm_head, temperature=self.temperature)
        if self.is_deepspeed_enabled:
            return prepare_deepspeed(model, self.accelerator)
        if self.is_fsdp_enabled:
            return prepare_fsdp(model, self.accelerator)
        return self.accelerator.prepare_model(model, evaluation_mode=True)

    def sequence_logps(self, model: Any, output: Mapping[str, Any], rows: Any = None, batch_size: int | None = None):
        """Per completion token, ``model``'s log-probability at the sampling temperature (TRL's
        own forward), without gradient; for ``rows`` of the batch, or all of it."""
        import torch
        from trl.models.utils import disable_gradient_checkpointing

        ids = torch.cat([output["prompt_ids"], output["completion_ids"]], dim=1)
        attention = torch.cat([output["prompt_mask"], output["completion_mask"]], dim=1)
        if rows is not None:
            ids, attention = ids[rows], attention[rows]
        with torch.no_grad(), disable_gradient_checkpointing(self.model, self.args.gradient_checkpointing_kwargs):
            logps, _, _ = self._get_per_token_logps_and_entropies(
                model, ids, attention, output["completion_ids"].size(1), batch_size=batch_size
            )
        return logps

    # ------------------------------------------------------------------ the loss and the vLLM / trainer ratio
    def _get_per_token_logps_and_entropies(
        self, model, input_ids, attention_mask, logits_to_keep, batch_size=None, **kwargs
    ):
        """TRL's forward, one chunk at a time at that chunk's own width (learning_rows.attended_span):
        the loss's micro-batches, the old, reference and teacher log-probabilities alike."""
        if any(value is not None for key, value in kwargs.items() if not key.startswith("compute_")):
            result = super()._get_per_token_logps_and_entropies(  # images: TRL's own chunking
                model, input_ids, attention_mask, logits_to_keep, batch_size, **kwargs
            )
        else:
            result = self._narrow_chunks(model, input_ids, attention_mask, logits_to_keep, batch_size, **kwargs)
        if self.trainer_logps is not None:
            self.trainer_logps.append(result[0])
        return result

    def _narrow_chunks(self, model, input_ids, attention_mask, logits_to_keep, batch_size, **kwargs):
        import torch
        import torch.nn.functional as F

        batch_size = batch_size or input_ids.size(0)
        logps, entropies, aux = [], [], []
        for start in range(0, input_ids.size(0), batch_size):
            ids, attention = input_ids[start : start + batch_size], attention_mask[start : start + batch_size]
            lead, tail = attended_span(attention, logits_to_keep)
            end = ids.size(1) - tail
            chunk = super()._get_per_token_logps_and_entropies(
                model, ids[:, lead:end], attention[:, lead:end], logits_to_keep - tail, **kwargs
            )
            logps.append(F.pad(chunk[0], (0, tail)))  # a cut column scores 0, as TRL's padding does
            if chunk[1] is not None:
                entropies.append(F.pad(chunk[1], (0, tail)))
            if chunk[2] is not None:
                aux.append(chunk[2])
        return (
            torch.cat(logps),
            torch.cat(entropies) if entropies else None,
            torch.stack(aux).mean() if aux else None,
        )

    def _compute_loss(self, model, inputs):
        if self.drop_idle_rollouts and self.model.training:
            inputs = self._learning_rows(inputs)
        sampled = inputs.get("sampling_per_token_logps")
        if self.rollouts is None or sampled is None:
            return super()._compute_loss(model, inputs)
        self.trainer_logps = []
        try:
            loss = super()._compute_loss(model, inputs)
            mask = inputs["completion_mask"]
            if "tool_mask" in inputs:  # the model's own tokens only
                mask = mask * inputs["tool_mask"]
            self.ratio.add(self.trainer_logps[0], sampled, mask)
        finally:
            self.trainer_logps = None
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


class RewardSlot:
    """TRL's reward slot in a stage whose objective gives token-level advantages: TRL wants a reward
    source, and the trainer's scoring step never calls one through TRL (the rollouts are recorded
    at reward 0; TRL's group statistics over them are dropped from the metrics)."""

    def __init__(self, name: str):
        self.__name__ = name

    def __call__(self, *args: Any, **kwargs: Any) -> list[float]:
        raise RuntimeError(f"{self.__name__}: a token-level objective has no reward function to call")


def draw_record(draw: StepDraw, batch: ScoredBatch, digests: Sequence[str]) -> dict:
    """One line of ``draws.jsonl``: what a step trained, and how its rollouts scored."""
    return {
        "step": draw.step,
        "prompts": list(draw.prompts),
        "modes": list(draw.modes),
        "epochs": list(draw.epochs),
        "rollouts": len(batch.rewards),
        "scored": sum(r is not None for r in batch.rewards),
        "masked": sum(reason is not None for reason in batch.masked),
        "schedule_digests": list(digests),
    }


# ----------------------------------------------------------------------------- the dense LM head
#: model-config attributes that change the logits in ways only TRL's kernel reproduces
_LOGIT_TRANSFORMS = (
    "final_logit_softcapping",
    "logit_scale",
    "output_multiplier",
    "lm_head_multiplier",
    "logits_scaling",
)


def dense_supported(model: Any) -> bool:
    """Whether the dense head computes exactly what TRL's would for ``model``."""
    config = model.config.get_text_config()
    if any(getattr(config, name, None) not in (None, 1, 1.0) for name in _LOGIT_TRANSFORMS):
        return False
    return not getattr(config, "output_router_logits", False)


def install_lm_head(
    model: Any, choice: str, *, temperature: float = 1.0, outputs: tuple[str, ...] = ("log_probs",)
) -> str:
    """How the trainers turn hidden states into per-token log-probabilities (the SFT loss of SPEC
    section 3, the GRPO / distillation log-probabilities of sections 4-8).

    TRL patches every model it trains with a *fused* LM head (``add_fused_lm_head``): called with
    ``fused_lm_head=True``, the model returns per-token log-probabilities (and entropies, top-1
    hits) computed tile by tile, without the ``(tokens, vocabulary)`` logits -- what makes a 150K
    vocabulary and 16K-token sequences fit on a GPU. Without Triton (on a CPU) its kernel runs as
    torch code over every position, prompt tokens included, and its backward recomputes each tile:
    on the embedded default's 2,048-token vocabulary an SFT step costs 45% more than plain logits
    (``benchmarks/bench_lm_head.py``). This gives ``model`` (already patched by TRL) the head
    ``choice`` resolves to (``runtime.lm_head``; :func:`cascade_rl.train.machine.lm_head`) and
    returns the one it now has: ``dense`` replaces TRL's with the same contract (the same
    ``FusedCausalLMOutput`` fields, zero where the label is -100, the same temperature and loss
    normalisation) computing the logits of the scored positions only, in one matrix product, with
    autograd's backward. Models the dense head does not cover (logit soft-capping or scaling, MoE
    router losses) keep TRL's head. ``temperature`` and ``outputs`` are what TRL patched it with."""
    if hasattr(model, "get_base_model"):  # PEFT: TRL patched the base model
        model = model.get_base_model()
    if machine.lm_head(choice) == "fused" or not dense_supported(model):
        return "fused"
    _patch_dense(model, temperature, outputs)
    return "dense"


def _patch_dense(model: Any, temperature: float, outputs: tuple[str, ...]) -> None:
    previous_forward = model.forward  # TRL's: the model's own forward unless fused_lm_head=True

    def dense_forward(
        self, *args, fused_lm_head=False, labels=None, shift_labels=None, num_items_in_batch=None, **kwargs
    ):
        if not fused_lm_head:
            return previous_forward(
                *args, labels=labels, shift_labels=shift_labels, num_items_in_batch=num_items_in_batch, **kwargs
            )
        kwargs["use_cache"] = False
        hidden = self.base_model(*args, **kwargs).last_hidden_state
        if shift_labels is None:
            hidden, labels = hidden[:, :-1], labels[:, 1:]
        else:
            labels = shift_labels
        return dense_log_probs(self.get_output_embeddings(), hidden, labels, temperature, outputs, num_items_in_batch)

    model.forward = types.MethodType(dense_forward, model)


def dense_log_probs(
    lm_head: Any,
    hidden: Any,
    labels: Any,
    temperature: float,
    outputs: tuple[str, ...],
    num_items_in_batch: Any = None,
) -> Any:
    """TRL's ``FusedCausalLMOutput`` from hidden states ``(batch, positions, hidden)`` and their
    next-token ``labels`` (-100 = not scored), with the logits of the scored positions only."""
    import torch
    import torch.nn.functional as F
    from trl.trainer.utils import FusedCausalLMOutput

    weight, bias = lm_head.weight, lm_head.bias
    if hasattr(weight, "full_tensor"):  # FSDP2 shards the head as a DTensor
        weight = weight.full_tensor()
        bias = bias.full_tensor() if bias is not None else None
    labels = labels.to(weight.device)
    mask = labels != -100
    targets = labels[mask]
    logits = F.linear(hidden.to(weight.device)[mask], weight, bias).float() / temperature
    log_softmax = torch.log_softmax(logits, dim=-1)
    fields: dict[str, Any] = {"log_probs": log_softmax.gather(-1, targets.unsqueeze(-1)).squeeze(-1)}
    if "entropy" in outputs:
        fields["entropy"] = -(log_softmax.exp() * log_softmax).sum(-1)
    with torch.no_grad():
        if "log_sum_sq_probs" in outputs:
            fields["log_sum_sq_probs"] = torch.logsumexp(2 * log_softmax, dim=-1)
        if "mean_logits" in outputs:
            fields["mean_logits"] = logits.mean(-1)
        if "is_top1" in outputs:  # argmax takes the first maximum, as TRL's kernel counts ties
            fields["is_top1"] = logits.argmax(-1) == targets
    # masked_scatter keeps an all-masked micro-batch connected to the graph (a zero gradient, no error)
    per_token = {name: value.new_zeros(mask.shape).masked_scatter(mask, value) for name, value in fields.items()}
    count = mask.sum().clamp(min=1) if num_items_in_batch is None else num_items_in_batch
    return FusedCausalLMOutput(loss=-per_token["log_probs"].sum() / count, label_mask=mask, **per_token)
