"""Rollout rewards of an RL step, engine-neutral (SPEC sections 5-6; DESIGN convention 12).

Two halves, the second built on the first:

* **The reward function** (:class:`RolloutScorer`) returns scores and does nothing else: it routes
  each of this process's rollouts by its row's domain (DESIGN convention 3) to the registry,
  scoring each domain's rollouts as one batch (code runs in the sandbox pool); decodes the
  completion itself from its token ids, keeping ``<think>`` / ``<tool_call>`` tags a tokenizer may
  mark special; leaves a truncated rollout unscored when overlong filtering is on (TRL then leaves
  it out of its group's mean and standard deviation, and ``mask_truncated_completions`` out of the
  loss) instead of scoring it 0; and turns a scorer that raises or times out into reward 0,
  counted. Each result is a :class:`Rollout`, what travels between processes.
* **The step's scoring** (:func:`score_step`), which the trainer's scoring step calls with every
  process's rollouts: it gathers them, then finishes the rewards that depend on other rollouts over
  the step's **whole** batch -- RLHF's "lowest reward in the batch - 10" and the IF+RM group
  z-score (a domain's registry ``combine``) -- so that a group split over processes is one group
  (groups are consecutive ``group_size`` rollouts of the global batch), and optionally shapes them
  (group z-score then tanh, the unstable-RLHF toolbox). The result, a :class:`ScoredBatch`, is the
  same on every process; :func:`report_metrics` turns it into the step's metrics (per-domain
  rewards and the means of their numeric score details, e.g. ``reward/swe/applied``; response
  length per thinking mode; errors, timeouts, skipped rollouts; time).

The trainer (``train/trl_backend.py``) owns the step: it calls the reward function, then
:func:`score_step`, logs, and records the results in the prompt schedule.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from statistics import mean, pstdev
from typing import Any

from cascade_rl.chat import decode_response, last_user_text, stop_token_ids
from cascade_rl.rewards.base import Score
from cascade_rl.rewards.registry import get_domain, score_batch


@dataclass
class Rollout:
    """One rollout's result as it travels between processes."""

    reward: float | None
    domain: str
    mode: str
    prompt: int
    truncated: bool
    length: int
    error: bool = False
    timeout: bool = False
    details: dict[str, Any] | None = None  # kept only for domains with a global combine
    numbers: dict[str, float] = field(default_factory=dict)  # the score's numeric details


@dataclass
class ScoredBatch:
    """One step's rollouts over all processes and their finished rewards, for metrics and the
    prompt schedule."""

    rewards: list[float | None]
    domains: list[str]
    modes: list[str]
    prompt_indices: list[int]
    truncated: list[bool]
    lengths: list[int]
    errors: int = 0
    timeouts: int = 0
    seconds: float = 0.0
    per_domain: dict[str, list[float]] = field(default_factory=dict)
    #: per domain, the mean of each numeric (or boolean) score detail over its scored rollouts
    details: dict[str, dict[str, float]] = field(default_factory=dict)

    @classmethod
    def of(cls, rollouts: Sequence[Rollout], rewards: Sequence[float | None]) -> ScoredBatch:
        batch = cls(
            list(rewards),
            [r.domain for r in rollouts],
            [r.mode for r in rollouts],
            [r.prompt for r in rollouts],
            [r.truncated for r in rollouts],
            [r.length for r in rollouts],
            errors=sum(r.error for r in rollouts),
            timeouts=sum(r.timeout for r in rollouts),
        )
        for domain in dict.fromkeys(batch.domains):
            values = [rewards[i] for i, r in enumerate(rollouts) if r.domain == domain and rewards[i] is not None]
            if values:
                batch.per_domain[domain] = values  # type: ignore[assignment]
            batch.details[domain] = _mean_details(r.numbers for r in rollouts if r.domain == domain)
        return batch


# ----------------------------------------------------------------------------- the reward function
class RolloutScorer:
    """The reward function of a GRPO stage: this process's rollouts scored through the registry
    (module docstring). ``columns`` are the rows' own: ``_ref`` (reference fields, JSON),
    ``_pidx`` (prompt index), ``_mode`` (thinking mode), ``_domain`` (reward domain)."""

    def __init__(
        self,
        tokenizer: Any,
        *,
        domain: str | None = None,
        options: Mapping[str, Mapping[str, Any]] | None = None,
        overlong_filter: bool = False,
        workers: int = 4,
    ):
        self.__name__ = "cascade"  # the name TRL logs the reward under (rewards/cascade/mean)
        self.tokenizer = tokenizer
        self.domain = domain
        self.options = {name: dict(values) for name, values in (options or {}).items()}
        self.overlong_filter = overlong_filter
        self.workers = workers
        self.stop_ids = stop_token_ids(tokenizer)

    def __call__(
        self,
        prompts: Sequence[Any],
        completion_ids: Sequence[Sequence[int]],
        _ref: Sequence[str] | None = None,
        _pidx: Sequence[int] | None = None,
        _mode: Sequence[str] | None = None,
        _domain: Sequence[str] | None = None,
        **_: Any,
    ) -> list[Rollout]:
        """Score this process's rollouts, one registry batch per domain."""
        count = len(completion_ids)
        references = [json.loads(r) if r else {} for r in (_ref or [None] * count)]
        rollouts = unscored(completion_ids, self.stop_ids, _pidx, _mode, _domain, domain=self.domain)
        by_domain: dict[str, list[int]] = defaultdict(list)
        for i, rollout in enumerate(rollouts):
            rollout.reward = None
            if not (self.overlong_filter and rollout.truncated):
                by_domain[rollout.domain].append(i)
        for name, members in by_domain.items():
            domain = get_domain(name)
            requests = [
                {
                    **references[i],
                    "response": decode_response(self.tokenizer, completion_ids[i], self.stop_ids),
                    "prompt": last_user_text(prompts[i]),
                    "messages": _prompt_messages(prompts[i]),
                }
                for i in members
            ]
            scores = score_batch(domain, requests, self.options.get(name), workers=self.workers)
            for i, score in zip(members, scores):
                _take_score(rollouts[i], score, keep_details=domain.combine is not None)
        return rollouts


def unscored(
    completion_ids: Sequence[Sequence[int]],
    stop_ids: Iterable[int],
    prompts: Sequence[int] | None = None,
    modes: Sequence[str] | None = None,
    domains: Sequence[str] | None = None,
    *,
    domain: str | None = None,
) -> list[Rollout]:
    """This process's rollouts before scoring (reward 0, the placeholder of a stage without a
    reward, e.g. distillation): prompt, mode, domain, length and whether each was truncated (it
    stopped without an end token)."""
    count, stops = len(completion_ids), set(stop_ids)
    prompt_indices = [int(i) for i in (prompts if prompts is not None else range(count))]
    mode_names = list(modes or ["think"] * count)
    domain_names = [domain or (d if d else "") for d in (domains or [None] * count)]
    return [
        Rollout(0.0, domain_names[i], mode_names[i], prompt_indices[i], not ids or int(ids[-1]) not in stops, len(ids))
        for i, ids in enumerate(completion_ids)
    ]


def _take_score(rollout: Rollout, score: Score, *, keep_details: bool) -> None:
    rollout.reward = float(score.reward)
    rollout.error = "error" in score.details
    rollout.timeout = bool(score.details.get("timeout"))
    rollout.details = dict(score.details) if keep_details else None
    rollout.numbers = numeric_details(score.details)


def _prompt_messages(prompt: Any) -> list[dict]:
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    return [dict(m) for m in prompt]


# ----------------------------------------------------------------------------- the step's scoring
def score_step(
    local: list[Rollout],
    *,
    gather: Callable[[Any], list[Any]],
    group_size: int | None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    shaping: str = "none",
) -> ScoredBatch:
    """Every process's rollouts (``gather``: each process's object, in rank order) with their
    rewards finished over the whole batch: each domain's ``combine``, then ``shaping``."""
    rollouts = [rollout for part in gather(local) for rollout in part]
    return ScoredBatch.of(rollouts, finish(rollouts, group_size=group_size, options=options or {}, shaping=shaping))


def recorded_step(local: list[Rollout], *, gather: Callable[[Any], list[Any]]) -> ScoredBatch:
    """Every process's rollouts of a step without a reward (their placeholder rewards as they are)."""
    rollouts = [rollout for part in gather(local) for rollout in part]
    return ScoredBatch.of(rollouts, [rollout.reward for rollout in rollouts])


def finish(
    rollouts: Sequence[Rollout], *, group_size: int | None, options: Mapping[str, Mapping[str, Any]], shaping: str
) -> list[float | None]:
    """Rewards over the global batch: each domain's ``combine``, then optional shaping."""
    rewards = [r.reward for r in rollouts]
    groups = [i // group_size if group_size else i for i in range(len(rollouts))]
    by_domain: dict[str, list[int]] = defaultdict(list)
    for i, rollout in enumerate(rollouts):
        if rollout.reward is not None:
            by_domain[rollout.domain].append(i)
    for name, members in by_domain.items():
        combine = get_domain(name).load_combine()
        if combine is None:
            continue
        scores = [Score(rollouts[i].reward or 0.0, rollouts[i].details or {}) for i in members]
        combined = combine(scores, [groups[i] for i in members], **options.get(name, {}))
        for i, value in zip(members, combined):
            rewards[i] = float(value)
    if shaping == "tanh_z":
        rewards = tanh_z_by_group(rewards, groups)
    return rewards


def tanh_z_by_group(rewards: Sequence[float | None], groups: Sequence[Any]) -> list[float | None]:
    """Group z-score then tanh into [-1, 1] (skipped rollouts stay None)."""
    members: dict[Any, list[int]] = defaultdict(list)
    for i, (reward, group) in enumerate(zip(rewards, groups)):
        if reward is not None:
            members[group].append(i)
    out = list(rewards)
    for indices in members.values():
        values = [rewards[i] for i in indices]
        centre, spread = mean(values), pstdev(values)  # type: ignore[arg-type]
        for i in indices:
            out[i] = math.tanh((rewards[i] - centre) / spread) if spread > 0 else 0.0  # type: ignore[operator]
    return out


def numeric_details(details: Mapping[str, Any]) -> dict[str, float]:
    """The numeric and boolean details of a score (e.g. the SWE reward's ``applied``), which are
    logged per domain as ``reward/<domain>/<detail>`` (DESIGN convention 2); the reward's own
    bookkeeping (``error``, ``timeout``) is counted elsewhere."""
    return {
        key: float(value)
        for key, value in details.items()
        if isinstance(value, (bool, int, float)) and key not in ("error", "timeout") and math.isfinite(value)
    }


def _mean_details(numbers: Iterable[dict[str, float]]) -> dict[str, float]:
    columns: dict[str, list[float]] = defaultdict(list)
    for row in numbers:
        for key, value in row.items():
            columns[key].append(value)
    return {key: mean(values) for key, values in columns.items()}


def report_metrics(batch: ScoredBatch, log_metric: Callable[[str, float], None]) -> None:
    """The step's reward metrics (module docstring), the same on every process."""
    for name, values in batch.per_domain.items():
        if values:
            log_metric(f"reward/{name or 'row'}/mean", mean(values))
    for name, means in batch.details.items():
        for key, value in means.items():
            if key != "mean":
                log_metric(f"reward/{name or 'row'}/{key}", value)
    for mode in ("think", "no_think"):
        lengths = [n for n, m in zip(batch.lengths, batch.modes) if m == mode]
        if lengths:
            log_metric(f"response_length/{mode}", mean(lengths))
    log_metric("reward/errors", float(batch.errors))
    log_metric("reward/timeouts", float(batch.timeouts))
    log_metric("overlong/skipped", float(sum(r is None for r in batch.rewards)))
    log_metric("rollouts/scored", float(sum(r is not None for r in batch.rewards)))
    log_metric("rollouts/total", float(len(batch.rewards)))
    log_metric("time/reward", batch.seconds)
