"""Epoch-level dynamic filtering and thinking modes (SPEC sections 5-6): the per-prompt record
the filter decides from, and the split of a batch into ``/think`` and ``/no_think`` prompts.

**Epoch-level dynamic filtering.** Every prompt keeps the pass rate of its rollouts in the
last epoch that sampled it. When a new epoch reaches a prompt, a prompt whose last pass rate
was 100% (easy) comes back with probability ``readd_easy`` (0.01), one at 0% (hard) with
probability ``readd_hard`` (0.10); all others are kept. Draws are seeded per (epoch, prompt),
so a run is reproducible, resumable and identical on every process. A rollout skipped by
overlong filtering does not count.

**Thinking modes.** ``half`` puts exactly half of every batch's prompts in ``/think`` and
half in ``/no_think`` (the unified model's RLHF); ``think`` / ``no_think`` put all of them
in one mode.

This module knows no trainer (DESIGN convention 12); :mod:`cascade_rl.train.schedule` uses it
to decide which prompts each step trains.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Literal

from cascade_rl.recipe import DynamicFilter

MODES = ("think", "no_think")
Verdict = Literal["keep", "easy", "hard", "unseen"]


@dataclass
class PassRecord:
    passed: int = 0
    total: int = 0

    @property
    def verdict(self) -> Verdict:
        if self.total == 0:
            return "unseen"
        if self.passed == self.total:
            return "easy"
        if self.passed == 0:
            return "hard"
        return "keep"


@dataclass
class FilterState:
    """Per-prompt results and the filter's decisions; serialisable for resume."""

    config: DynamicFilter
    seed: int = 0
    epoch: int = 0
    #: results of the epoch in progress, per prompt
    current: dict[int, PassRecord] = field(default_factory=dict)
    #: results of the last epoch that sampled each prompt
    last: dict[int, PassRecord] = field(default_factory=dict)
    counts: Counter = field(default_factory=Counter)

    def record(self, prompt: int, reward: float | None) -> None:
        """One rollout of ``prompt`` scored ``reward`` (None = skipped, does not count)."""
        if reward is None:
            return
        entry = self.current.setdefault(prompt, PassRecord())
        entry.total += 1
        entry.passed += reward >= self.config.pass_threshold

    def close_prompt_epoch(self, prompt: int) -> None:
        """Move ``prompt``'s results of the finished epoch into ``last``."""
        if prompt in self.current:
            self.last[prompt] = self.current.pop(prompt)

    def admit(self, prompt: int) -> bool:
        """Whether ``prompt`` is trained on in the current epoch (and count the decision)."""
        if not self.config.enabled:
            return True
        verdict = self.last.get(prompt, PassRecord()).verdict
        if verdict in ("keep", "unseen"):
            self.counts["kept"] += 1
            return True
        draw = random.Random(f"{self.seed}:{self.epoch}:{prompt}").random()
        chance = self.config.readd_easy if verdict == "easy" else self.config.readd_hard
        if draw < chance:
            self.counts[f"readded_{verdict}"] += 1
            return True
        self.counts[f"dropped_{verdict}"] += 1
        return False

    def to_dict(self) -> dict:
        return {
            "epoch": self.epoch,
            "seed": self.seed,
            "last": {str(k): [v.passed, v.total] for k, v in sorted(self.last.items())},
            "current": {str(k): [v.passed, v.total] for k, v in sorted(self.current.items())},
            "counts": dict(sorted(self.counts.items())),
        }

    @classmethod
    def from_dict(cls, config: DynamicFilter, data: dict) -> FilterState:
        state = cls(config, seed=data.get("seed", 0), epoch=data.get("epoch", 0))
        state.last = {int(k): PassRecord(*v) for k, v in data.get("last", {}).items()}
        state.current = {int(k): PassRecord(*v) for k, v in data.get("current", {}).items()}
        state.counts = Counter(data.get("counts", {}))
        return state


def split_modes(batch_size: int, thinking: str, rng: random.Random) -> list[str]:
    """The mode of each prompt slot of a batch: all one mode, or exactly half each (shuffled)."""
    if thinking in MODES:
        return [thinking] * batch_size
    if batch_size % 2:
        raise ValueError(f"thinking: half needs an even prompts_per_batch, got {batch_size}")
    modes = ["think"] * (batch_size // 2) + ["no_think"] * (batch_size // 2)
    rng.shuffle(modes)
    return modes


def dataset_index(prompt: int, mode: str, thinking: str) -> int:
    """Row of the RL dataset holding ``prompt`` in ``mode`` (``half`` stores both modes)."""
    return 2 * prompt + MODES.index(mode) if thinking == "half" else prompt
