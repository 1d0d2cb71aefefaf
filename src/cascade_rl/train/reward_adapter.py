"""The bridge from the reward registry to TRL's ``GRPOTrainer`` (SPEC sections 5-6).

:class:`CascadeReward` is a TRL reward function ``(prompts, completions, completion_ids,
**columns) -> list[float | None]`` that

* routes each rollout by its row's domain (DESIGN convention 3) to the registry, scoring each
  domain's rollouts of this process as one batch (code runs in the sandbox pool);
* decodes the completion itself from its token ids, keeping ``<think>`` / ``<tool_call>``
  tags that a tokenizer may mark special (TRL's own decoding drops special tokens);
* returns ``None`` for a truncated rollout when overlong filtering is on — TRL then leaves it
  out of its group's mean and standard deviation, and ``mask_truncated_completions`` leaves it
  out of the loss — instead of scoring it 0;
* turns a scorer that raises or times out into reward 0 and counts it;
* then gathers every process's results and finishes the rewards that depend on other
  rollouts over the step's **whole** batch: RLHF's "lowest reward in the batch - 10" and the
  IF+RM group z-score (a domain's registry ``combine``), so a group split over processes is
  one group; groups are TRL's (consecutive ``group_size`` rollouts of the global batch);
* optionally shapes rewards (group z-score then tanh, the unstable-RLHF toolbox);
* reports the global batch (per-domain rewards and the means of their numeric score details,
  e.g. ``reward/swe/applied``; response length per thinking mode, pass/fail per prompt for
  dynamic filtering, timings) through ``on_scored`` and ``log_metric``: every
  process sees and logs the same numbers.

It returns this process's slice of the global rewards.
"""

from __future__ import annotations

import json
import math
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from statistics import mean, pstdev
from typing import Any

from cascade_rl.chat import decode_response, last_user_text, stop_token_ids
from cascade_rl.rewards.base import Score
from cascade_rl.rewards.registry import get_domain, score_batch


@dataclass
class ScoredBatch:
    """What one call of the reward function saw (over all processes), for metrics and
    dynamic filtering."""

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


@dataclass
class _Rollout:
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


class CascadeReward:
    """TRL reward function over the registry; see the module docstring."""

    def __init__(
        self,
        tokenizer: Any,
        *,
        domain: str | None = None,
        options: Mapping[str, Mapping[str, Any]] | None = None,
        overlong_filter: bool = False,
        workers: int = 4,
        shaping: str = "none",
        group_size: int | None = None,
        gather: Callable[[Any], list[Any]] | None = None,
        rank: int | None = None,
        on_scored: Callable[[ScoredBatch], None] | None = None,
    ):
        from cascade_rl.train.distributed import gather as gather_processes

        self.__name__ = "cascade"
        self.tokenizer = tokenizer
        self.domain = domain
        self.options = {name: dict(values) for name, values in (options or {}).items()}
        self.overlong_filter = overlong_filter
        self.workers = workers
        self.shaping = shaping
        self.group_size = group_size
        self.gather = gather or gather_processes  # every process's object, in rank order
        self.rank = rank  # None: this process's rank in the process group
        self.on_scored = on_scored
        self.stop_ids = stop_token_ids(tokenizer)

    # --------------------------------------------------------------------- TRL entry point
    def __call__(
        self,
        prompts: Sequence[Any],
        completions: Sequence[Any],
        completion_ids: Sequence[Sequence[int]],
        _ref: Sequence[str] | None = None,
        _pidx: Sequence[int] | None = None,
        _mode: Sequence[str] | None = None,
        _domain: Sequence[str] | None = None,
        log_metric: Callable[[str, float], None] | None = None,
        **_: Any,
    ) -> list[float | None]:
        start = time.perf_counter()
        count = len(completion_ids)
        local = self._score_local(prompts, completion_ids, _ref, _pidx, _mode, _domain)
        everyone = self.gather(local)
        offset = sum(len(part) for part in everyone[: self._own_rank(len(everyone))])
        rollouts = [rollout for part in everyone for rollout in part]
        rewards = self._finish(rollouts)
        batch = ScoredBatch(
            rewards,
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
        batch.seconds = time.perf_counter() - start
        if log_metric is not None:
            report_metrics(batch, log_metric)
        if self.on_scored is not None:
            self.on_scored(batch)
        return rewards[offset : offset + count]

    # --------------------------------------------------------------------- phases
    def _score_local(self, prompts, completion_ids, refs, pidx, modes, domains) -> list[_Rollout]:
        """Score this process's rollouts, one registry batch per domain."""
        count = len(completion_ids)
        references = [json.loads(r) if r else {} for r in (refs or [None] * count)]
        domain_names = [self.domain or (d if d else "") for d in (domains or [None] * count)]
        mode_names = list(modes or ["think"] * count)
        indices = [int(i) for i in (pidx or range(count))]
        rollouts = [
            _Rollout(None, domain_names[i], mode_names[i], indices[i], self.is_truncated(ids), len(ids))
            for i, ids in enumerate(completion_ids)
        ]
        by_domain: dict[str, list[int]] = defaultdict(list)
        for i, rollout in enumerate(rollouts):
            if not (self.overlong_filter and rollout.truncated):
                by_domain[rollout.domain].append(i)
        for name, members in by_domain.items():
            domain = get_domain(name)
            requests = [
                {
                    **references[i],
                    "response": self.decode(completion_ids[i]),
                    "prompt": last_user_text(prompts[i]),
                    "messages": _prompt_messages(prompts[i]),
                }
                for i in members
            ]
            scores = score_batch(domain, requests, self.options.get(name), workers=self.workers)
            keep_details = domain.combine is not None
            for i, score in zip(members, scores):
                rollout = rollouts[i]
                rollout.reward = float(score.reward)
                rollout.error = "error" in score.details
                rollout.timeout = bool(score.details.get("timeout"))
                rollout.details = dict(score.details) if keep_details else None
                rollout.numbers = numeric_details(score.details)
        return rollouts

    def _finish(self, rollouts: list[_Rollout]) -> list[float | None]:
        """Rewards over the global batch: each domain's ``combine``, then optional shaping."""
        rewards = [r.reward for r in rollouts]
        groups = [self._group(i) for i in range(len(rollouts))]
        by_domain: dict[str, list[int]] = defaultdict(list)
        for i, rollout in enumerate(rollouts):
            if rollout.reward is not None:
                by_domain[rollout.domain].append(i)
        for name, members in by_domain.items():
            combine = get_domain(name).load_combine()
            if combine is None:
                continue
            scores = [Score(rollouts[i].reward or 0.0, rollouts[i].details or {}) for i in members]
            combined = combine(scores, [groups[i] for i in members], **self.options.get(name, {}))
            for i, value in zip(members, combined):
                rewards[i] = float(value)
        if self.shaping == "tanh_z":
            rewards = tanh_z_by_group(rewards, groups)
        return rewards

    def _group(self, index: int) -> Any:
        """TRL's group of a rollout in the global batch (consecutive ``group_size`` rollouts)."""
        return index // self.group_size if self.group_size else index

    def _own_rank(self, processes: int) -> int:
        if self.rank is not None:
            return self.rank
        if processes == 1:
            return 0
        from cascade_rl.train.distributed import rank

        return rank()

    # --------------------------------------------------------------------- helpers
    def is_truncated(self, ids: Sequence[int]) -> bool:
        """A rollout that stopped without an end token hit the length limit."""
        return len(ids) == 0 or int(ids[-1]) not in self.stop_ids

    def decode(self, ids: Sequence[int]) -> str:
        return decode_response(self.tokenizer, ids, self.stop_ids)


def _prompt_messages(prompt: Any) -> list[dict]:
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    return [dict(m) for m in prompt]


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
