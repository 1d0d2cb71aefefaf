"""Difficulty filters for RL prompts and the ground-truth check of SFT responses (SPEC sections 3
and 6): ``cascade data difficulty`` and ``cascade data verify``.

**Pass rates.** For every prompt, ``k`` responses of a model (local checkpoint or
OpenAI-compatible server, :func:`cascade_rl.llm.load_generator`) are scored with the row's own
reward (the registry, as in evaluation: :func:`cascade_rl.rewards.registry.score_samples`); a
response passes when its reward reaches ``pass_threshold`` (1). The pass rate is written into
the row (``pass_rate``; ``strong_pass_rate`` for the second model) and drops a prompt by
:class:`DifficultyRule`, the one rule a GRPO stage's ``prompt_filter`` uses too
(``train/prompt_filter.py``):

* *too easy* -- ``drop_at_or_above``: Math RL drops the problems a reference model solves in
  at least 75% of 16 samples; Code RL drops the problems an 8B-class model solves 8 of 8;
* *hopeless* -- ``strong_drop_at_or_below`` with a ``strong`` model: Code RL drops the problems
  a strong model solves 0 of 8.

The presets ``math`` and ``code`` carry these settings; every threshold is an option.

**Ground truth.** :func:`verify_responses` scores the last assistant turn of SFT rows that carry
a reward ``domain`` and its reference fields (``answer``, ``tests``, ...) and drops the responses
that disagree with the ground truth; rows without a domain have no ground truth and are kept
(counted).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from cascade_rl.chat import with_mode
from cascade_rl.data.job import Drop, Keep, Summary, prevalidate, run_job
from cascade_rl.data.loading import rl_normaliser
from cascade_rl.data.rows import Row, RowError
from cascade_rl.llm.base import Sampling

Verdict = Literal["keep", "too easy", "hopeless"]


@dataclass(frozen=True)
class Passing:
    """When one sample passes: its reward reaches ``threshold`` (``strict``: exceeds it)."""

    threshold: float
    strict: bool = False

    def passes(self, reward: float) -> bool:
        return reward > self.threshold if self.strict else reward >= self.threshold

    def rate(self, rewards: Sequence[float]) -> float:
        """The share of ``rewards`` that pass (0 for no samples)."""
        return sum(self.passes(reward) for reward in rewards) / max(len(rewards), 1)


@dataclass(frozen=True)
class DifficultyRule:
    """The one "k samples, pass rate, drop too easy / hopeless" rule (SPEC 6) of ``cascade data
    difficulty`` and of a GRPO stage's ``prompt_filter``: a prompt is **too easy** when the pass
    rate of its samples under ``easy`` reaches ``too_easy_at``, **hopeless** when their pass rate
    under ``hard`` is at most ``hopeless_at`` (None: that side never drops)."""

    easy: Passing
    too_easy_at: float | None = None
    hard: Passing | None = None
    hopeless_at: float | None = None

    def verdict(self, rewards: Sequence[float]) -> Verdict:
        if self.too_easy_at is not None and self.easy.rate(rewards) >= self.too_easy_at:
            return "too easy"
        if self.hopeless_at is not None and (self.hard or self.easy).rate(rewards) <= self.hopeless_at:
            return "hopeless"
        return "keep"


@dataclass(frozen=True)
class PassRateFilter:
    """One model's samples and the :class:`DifficultyRule` that drops a prompt by their pass rate."""

    generator: Any
    k: int
    drop_at_or_above: float | None = None
    drop_at_or_below: float | None = None
    column: str = "pass_rate"
    name: str = "model"
    spec: str = ""  # how the generator was named (identifies the job for resuming)

    def rule(self, pass_threshold: float) -> DifficultyRule:
        return DifficultyRule(Passing(pass_threshold), self.drop_at_or_above, None, self.drop_at_or_below)

    def reason(self, verdict: Verdict) -> str | None:
        """Why a prompt is dropped, as the job's summary counts it (None: kept)."""
        if verdict == "too easy":
            return f"too easy: {self.name} pass rate >= {self.drop_at_or_above:g} of {self.k}"
        if verdict == "hopeless":
            return f"hopeless: {self.name} pass rate <= {self.drop_at_or_below:g} of {self.k}"
        return None


PRESETS: dict[str, dict[str, Any]] = {
    "math": {"k": 16, "drop_at_or_above": 0.75, "strong_k": 8, "strong_drop_at_or_below": None},
    "code": {"k": 8, "drop_at_or_above": 1.0, "strong_k": 8, "strong_drop_at_or_below": 0.0},
}


def rl_rows(rows: Sequence[Row], domain: str | None) -> list[dict | RowError]:
    """Each row as a normalised RL row, or the RowError that says why it is not one."""
    normalise = rl_normaliser(domain)
    out: list[dict | RowError] = []
    for row in rows:
        try:
            out.append(normalise(dict(row.data)))
        except ValueError as error:
            out.append(RowError(str(error)))
    return out


def check_rl_inputs(inputs: Sequence[Path], domain: str | None, *, skip_malformed: bool = False) -> int:
    """Validate every row as an RL row before any model is loaded; returns the row count."""
    normalise = rl_normaliser(domain)

    def check(data: dict) -> None:
        try:
            normalise(dict(data))
        except ValueError as error:
            raise RowError(str(error)) from None

    return prevalidate(inputs, check, skip_malformed=skip_malformed)


def sample_rewards(
    generator: Any,
    rows: Sequence[dict],
    *,
    k: int,
    mode: str = "think",
    sampling: Sampling = Sampling(),
    workers: int = 4,
) -> list[list[float]]:
    """The rewards of ``k`` responses per normalised RL row sampled from ``sampling``'s distribution,
    scored by the row's own reward."""
    from cascade_rl.llm import generate_many
    from cascade_rl.rewards.registry import score_samples

    prompts = [with_mode(row["prompt"], mode) for row in rows]
    samples = generate_many(generator, prompts, sampling.times(k))
    options = {row["domain"]: {} for row in rows}
    scores = score_samples(rows, samples, options, workers=workers)
    return [[float(s.reward) for s in group] for group in scores]


def filter_difficulty(
    inputs: Sequence[Path],
    output: Path,
    filters: Sequence[PassRateFilter],
    *,
    domain: str | None = None,
    mode: str = "think",
    pass_threshold: float = 1.0,
    sampling: Sampling = Sampling(),
    workers: int = 4,
    batch_size: int = 32,
    skip_malformed: bool = False,
    **job: Any,
) -> Summary:
    """``cascade data difficulty``: annotate each RL row with its pass rates and drop the rows
    a filter rejects (module docstring). Every row is validated before any generation."""
    if not filters:
        raise ValueError("give at least one model")
    total = check_rl_inputs(inputs, domain, skip_malformed=skip_malformed)

    def process(rows: Sequence[Row]) -> list:
        normalised = rl_rows(rows, domain)
        good = [i for i, row in enumerate(normalised) if isinstance(row, dict)]
        rates: dict[int, dict[str, float]] = {i: {} for i in good}
        alive = list(good)
        verdicts: dict[int, str] = {}
        for rule in filters:  # a later model only samples the prompts the earlier ones kept
            if not alive:
                break
            measured = sample_rewards(
                rule.generator,
                [normalised[i] for i in alive],
                k=rule.k,
                mode=mode,
                sampling=sampling,
                workers=workers,
            )
            difficulty = rule.rule(pass_threshold)
            for i, rewards in zip(alive, measured):
                rates[i][rule.column] = difficulty.easy.rate(rewards)
                reason = rule.reason(difficulty.verdict(rewards))
                if reason:
                    verdicts[i] = reason
            alive = [i for i in alive if i not in verdicts]
        outcomes: list = []
        for i, row in enumerate(rows):
            if not isinstance(normalised[i], dict):
                outcomes.append(normalised[i])
            elif i in verdicts:
                outcomes.append(Drop(verdicts[i]))
            else:
                outcomes.append(Keep([{**row.data, **rates[i]}]))
        return outcomes

    options = {
        "filters": [(f.name, f.k, f.drop_at_or_above, f.drop_at_or_below, f.spec) for f in filters],
        "domain": domain,
        "mode": mode,
        "pass_threshold": pass_threshold,
        "sampling": sampling.settings(),
    }
    return run_job(
        "difficulty",
        inputs,
        output,
        process,
        options=options,
        batch_size=batch_size,
        skip_malformed=skip_malformed,
        total=total,
        **job,
    )


def verify_responses(
    inputs: Sequence[Path], output: Path, *, pass_threshold: float = 1.0, workers: int = 4, **job: Any
) -> Summary:
    """``cascade data verify``: drop SFT responses that disagree with their row's ground truth."""
    from cascade_rl.rewards.registry import score_samples

    unchecked = {"no ground truth (kept)": 0}

    def process(rows: Sequence[Row]) -> list:
        checked: list[tuple[int, dict, str]] = []
        outcomes: list = [None] * len(rows)
        for i, row in enumerate(rows):
            messages = row.data.get("messages")
            if not isinstance(messages, list) or not messages or messages[-1].get("role") != "assistant":
                outcomes[i] = RowError("messages do not end with an assistant response")
            elif not row.data.get("domain"):
                unchecked["no ground truth (kept)"] += 1
                outcomes[i] = Keep([row.data])
            else:
                reference = {k: v for k, v in row.data.items() if k != "messages"}
                reference["prompt"] = messages[:-1]
                try:
                    normalised = rl_normaliser(None)(reference)
                except ValueError as error:
                    outcomes[i] = RowError(str(error))
                    continue
                checked.append((i, normalised, str(messages[-1].get("content") or "")))
        if checked:
            scores = score_samples([c[1] for c in checked], [[c[2]] for c in checked], {}, workers=workers)
            for (i, _, _), (score,) in zip(checked, scores):
                agrees = score.reward >= pass_threshold
                outcomes[i] = Keep([rows[i].data]) if agrees else Drop("response disagrees with the ground truth")
        return outcomes

    def extra() -> dict:
        return {"unchecked": [{"rows": name, "count": count} for name, count in unchecked.items()]}

    return run_job("verify", inputs, output, process, options={"pass_threshold": pass_threshold}, extra=extra, **job)
