"""The bridge from the reward registry to TRL's ``GRPOTrainer`` (SPEC sections 5-6).

:class:`CascadeReward` is a TRL reward function ``(prompts, completions, completion_ids,
**columns) -> list[float | None]`` that

* routes each rollout by its row's domain (DESIGN convention 3) to the registry, scoring each
  domain's rollouts as one batch (code runs in the sandbox pool, RLHF sees its whole batch for
  the language penalty, IF+RM sees each prompt's group);
* decodes the completion itself from its token ids, keeping ``<think>`` / ``<tool_call>``
  tags that a tokenizer may mark special (TRL's own decoding drops special tokens);
* returns ``None`` for a truncated rollout when overlong filtering is on — TRL then leaves it
  out of its group's mean and standard deviation, and ``mask_truncated_completions`` leaves it
  out of the loss — instead of scoring it 0;
* turns a scorer that raises or times out into reward 0 and counts it;
* optionally shapes rewards (group z-score then tanh, the unstable-RLHF toolbox);
* reports what it saw (per-domain rewards, response length per thinking mode, pass/fail per
  prompt for dynamic filtering, timings) through ``on_scored``.
"""

from __future__ import annotations

import json
import math
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from statistics import mean, pstdev
from typing import Any

from cascade_rl.chat import decode_response, last_user_text, stop_token_ids
from cascade_rl.rewards.registry import get_domain, score_batch


@dataclass
class ScoredBatch:
    """What one call of the reward function saw, for metrics and dynamic filtering."""

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
        on_scored: Callable[[ScoredBatch], None] | None = None,
    ):
        self.__name__ = "cascade"
        self.tokenizer = tokenizer
        self.domain = domain
        self.options = {name: dict(values) for name, values in (options or {}).items()}
        self.overlong_filter = overlong_filter
        self.workers = workers
        self.shaping = shaping
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
        references = [json.loads(r) if r else {} for r in (_ref or [None] * count)]
        domains = [self.domain or (d if d else "") for d in (_domain or [None] * count)]
        modes = list(_mode or ["think"] * count)
        indices = [int(i) for i in (_pidx or range(count))]
        truncated = [self.is_truncated(ids) for ids in completion_ids]
        texts = [self.decode(ids) for ids in completion_ids]

        rewards: list[float | None] = [None] * count
        batch = ScoredBatch(rewards, domains, modes, indices, truncated, [len(ids) for ids in completion_ids])
        by_domain: dict[str, list[int]] = defaultdict(list)
        for i in range(count):
            if not (self.overlong_filter and truncated[i]):
                by_domain[domains[i]].append(i)
        for name, members in by_domain.items():
            requests = [
                {
                    **references[i],
                    "response": texts[i],
                    "prompt": last_user_text(prompts[i]),
                    "messages": _prompt_messages(prompts[i]),
                    "group": f"{indices[i]}:{modes[i]}",
                }
                for i in members
            ]
            scores = score_batch(get_domain(name), requests, self.options.get(name), workers=self.workers)
            for i, score in zip(members, scores):
                rewards[i] = float(score.reward)
                batch.errors += "error" in score.details
                batch.timeouts += bool(score.details.get("timeout"))
            batch.per_domain[name] = [rewards[i] for i in members]  # type: ignore[misc]

        if self.shaping == "tanh_z":
            shaped = tanh_z_by_group(rewards, [f"{i}:{m}" for i, m in zip(indices, modes)])
            rewards[:] = shaped
        batch.seconds = time.perf_counter() - start
        if log_metric is not None:
            report_metrics(batch, log_metric)
        if self.on_scored is not None:
            self.on_scored(batch)
        return rewards

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


def tanh_z_by_group(rewards: Sequence[float | None], groups: Sequence[str]) -> list[float | None]:
    """Group z-score then tanh into [-1, 1] (skipped rollouts stay None)."""
    members: dict[str, list[int]] = defaultdict(list)
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


def report_metrics(batch: ScoredBatch, log_metric: Callable[[str, float], None]) -> None:
    for name, values in batch.per_domain.items():
        if values:
            log_metric(f"reward/{name or 'row'}/mean", mean(values))
    for mode in ("think", "no_think"):
        lengths = [n for n, m in zip(batch.lengths, batch.modes) if m == mode]
        if lengths:
            log_metric(f"response_length/{mode}", mean(lengths))
    log_metric("reward/errors", float(batch.errors))
    log_metric("reward/timeouts", float(batch.timeouts))
    log_metric("overlong/skipped", float(sum(r is None for r in batch.rewards)))
    log_metric("time/reward", batch.seconds)
