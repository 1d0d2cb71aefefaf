"""The step's scoring of an RL step, engine-neutral (SPEC sections 5-6, 11; DESIGN convention 12).

Each process verifies its own rollouts (:mod:`cascade_rl.train.verification`: the reward function,
scoring each rollout as it finishes); each result is a :class:`Rollout`, what travels between
processes. The trainer's scoring step then calls :func:`score_step` with every process's
rollouts, which

* gathers them, in rank order: the step's global batch, whose groups are consecutive
  ``group_size`` rollouts;
* judges, once and whole, a group that a domain scores as a group (``group_scorer``: the pairwise
  GenRM) whose rollouts sit on several processes: the first process holding one of its rollouts
  asks the judge, and every process takes its verdicts (a second gather, only when such a group
  exists; with the trainer's contiguous slices each process holds whole groups and none does);
* finishes the rewards that depend on other rollouts over the step's **whole** batch -- RLHF's
  "lowest reward in the batch - 10" and the IF+RM group z-score (a domain's registry ``combine``)
  -- and optionally shapes them (group z-score then tanh, the unstable-RLHF toolbox).

**Masked, not zeroed** (Nemotron-Cascade 2's ``mask_sample``): a rollout whose scorer reached no
verdict (:meth:`Score.no_verdict`: a sandbox that died, a reward or judge server down or timing
out) has reward ``None``, like a rollout left out by overlong filtering: it takes no part in its
group's mean and standard deviation nor in a domain's ``combine``, and the trainer leaves its
tokens out of the loss. :func:`check_masked_share` stops the stage when more than the stage's
``max_masked_share`` of a step has no verdict (:class:`VerifierFailure`): the verifiers are
failing, and training on what is left would learn from a biased remainder.

The result, a :class:`ScoredBatch`, is the same on every process; :func:`report_metrics` turns
it into the step's metrics (per-domain rewards, pass rates and the means of their numeric score
details, e.g. ``reward/swe/applied``, a multi-turn domain's ``reward/workplace/turns`` and
``failed_calls`` (tool errors); rollouts without a verdict per domain and reason,
``masked/<domain>/<reason>``; each domain's scorer calls, their time and the judge calls they
made, ``verify/<domain>/...``; response length per thinking mode; errors, timeouts, skipped
rollouts; time).
"""

from __future__ import annotations

import math
import re
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from statistics import mean, pstdev
from typing import Any

from cascade_rl.rewards.base import Score
from cascade_rl.rewards.registry import get_domain, score_groups


class VerifierFailure(RuntimeError):
    """Too much of a step has no verdict: the verifiers fail, not the policy (one line)."""


#: a rollout passes when its reward reaches this (the binary verifiers' 1; ``reward/<domain>/pass_rate``)
PASS_REWARD = 1.0


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
    #: why the scorer reached no verdict (:attr:`Score.masked`); None for a verdict
    masked: str | None = None
    #: its GRPO group: the index of its group in the step's global batch
    group: int = 0
    #: the scoring request of a rollout whose group a group scorer judges after the gather
    request: dict[str, Any] | None = None
    #: the totals of the scorer call this rollout heads (one rollout per call): calls, seconds, judge_*
    call: dict[str, float] | None = None

    def take(self, score: Score, *, keep_details: bool) -> None:
        """This rollout's verdict: a reward, or none (``score.masked``: the rollout is left out)."""
        self.masked = score.masked
        self.reward = None if score.masked is not None else float(score.reward)
        self.error = "error" in score.details
        self.timeout = bool(score.details.get("timeout"))
        self.details = dict(score.details) if keep_details else None
        self.numbers = numeric_details(score.details)
        self.request = None


def rollout_of(
    token_ids: Sequence[int], stops: set[int], prompt: int, mode: str, domain: str, group: int = 0
) -> Rollout:
    """A rollout before scoring (reward 0, the placeholder of a stage without a reward): its
    length and whether it was truncated (it stopped without an end token)."""
    truncated = not token_ids or int(token_ids[-1]) not in stops
    return Rollout(0.0, domain, mode, int(prompt), truncated, len(token_ids), group=group)


def unscored(
    completion_ids: Sequence[Sequence[int]],
    stop_ids: Iterable[int],
    prompts: Sequence[int] | None = None,
    modes: Sequence[str] | None = None,
    domains: Sequence[str] | None = None,
    *,
    domain: str | None = None,
) -> list[Rollout]:
    """This process's rollouts before scoring (:func:`rollout_of`), e.g. of distillation."""
    count, stops = len(completion_ids), set(stop_ids)
    prompt_indices = [int(i) for i in (prompts if prompts is not None else range(count))]
    mode_names = list(modes or ["think"] * count)
    domain_names = [domain or (d if d else "") for d in (domains or [None] * count)]
    return [
        rollout_of(ids, stops, prompt_indices[i], mode_names[i], domain_names[i])
        for i, ids in enumerate(completion_ids)
    ]


def call_totals(scores: Sequence[Score], seconds: float, *, grouped: bool) -> dict[str, float]:
    """What one scorer call cost: one call, its wall time, and its ``judge_*`` details (a group
    scorer's are the group's, the same on each score: counted once; others' are summed)."""
    totals: dict[str, float] = {"calls": 1.0, "seconds": seconds}
    for score in scores[:1] if grouped else scores:
        for key, value in numeric_details(score.details).items():
            if key.startswith("judge_"):
                totals[key] = totals.get(key, 0.0) + value
    return totals


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
    #: per rollout, why it has no verdict (None: a verdict, or skipped by overlong filtering)
    masked: list[str | None] = field(default_factory=list)
    errors: int = 0
    timeouts: int = 0
    seconds: float = 0.0
    per_domain: dict[str, list[float]] = field(default_factory=dict)
    #: per domain, the mean of each numeric (or boolean) score detail over its scored rollouts
    details: dict[str, dict[str, float]] = field(default_factory=dict)
    #: per domain, the totals of its scorer calls (calls, seconds, judge_calls, ...)
    calls: dict[str, dict[str, float]] = field(default_factory=dict)

    @classmethod
    def of(cls, rollouts: Sequence[Rollout], rewards: Sequence[float | None]) -> ScoredBatch:
        batch = cls(
            list(rewards),
            [r.domain for r in rollouts],
            [r.mode for r in rollouts],
            [r.prompt for r in rollouts],
            [r.truncated for r in rollouts],
            [r.length for r in rollouts],
            masked=[r.masked for r in rollouts],
            errors=sum(r.error for r in rollouts),
            timeouts=sum(r.timeout for r in rollouts),
        )
        for domain in dict.fromkeys(batch.domains):
            values = [rewards[i] for i, r in enumerate(rollouts) if r.domain == domain and rewards[i] is not None]
            if values:
                batch.per_domain[domain] = values  # type: ignore[assignment]
            batch.details[domain] = _mean_details(r.numbers for r in rollouts if r.domain == domain)
            for call in (r.call for r in rollouts if r.domain == domain and r.call):
                totals = batch.calls.setdefault(domain, {})
                for key, value in call.items():
                    totals[key] = totals.get(key, 0.0) + value
        return batch

    def masked_counts(self) -> dict[str, dict[str, int]]:
        """Rollouts without a verdict per domain and reason (:func:`reason_kind`)."""
        counts: dict[str, dict[str, int]] = defaultdict(dict)
        for domain, reason in zip(self.domains, self.masked):
            if reason is not None:
                kind = reason_kind(reason)
                counts[domain or "row"][kind] = counts[domain or "row"].get(kind, 0) + 1
        return dict(counts)


def reason_kind(reason: str) -> str:
    """A no-verdict reason as a metric name: its text before the first colon, in snake case
    (``"sandbox failed: the server died"`` -> ``sandbox_failed``)."""
    head = reason.split(":", 1)[0]
    return re.sub(r"[^0-9a-z]+", "_", head.lower()).strip("_")[:48] or "unknown"


# ----------------------------------------------------------------------------- the step's scoring
def score_step(
    local: list[Rollout],
    *,
    gather: Callable[[Any], list[Any]],
    group_size: int | None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    shaping: str = "none",
    rank: int = 0,
) -> ScoredBatch:
    """Every process's rollouts (``gather``: each process's object, in rank order; ``rank``: this
    process's) with their rewards finished over the whole batch: split groups judged, each
    domain's ``combine``, then ``shaping`` (module docstring)."""
    options = options or {}
    parts = gather(local)
    rollouts = [rollout for part in parts for rollout in part]
    judge_split_groups(parts, gather=gather, rank=rank, options=options)
    return ScoredBatch.of(rollouts, finish(rollouts, group_size=group_size, options=options, shaping=shaping))


def judge_split_groups(
    parts: Sequence[Sequence[Rollout]],
    *,
    gather: Callable[[Any], list[Any]],
    rank: int,
    options: Mapping[str, Mapping[str, Any]],
) -> None:
    """Verdicts for the groups whose rollouts carry their ``request`` (a group scorer's group
    that no single process held whole): each judged once, whole, by the first process holding
    one of its rollouts; every process then takes the verdicts of all of them (collective only
    when such a group exists, which every process sees alike)."""
    members: dict[int, list[Rollout]] = defaultdict(list)
    owners: dict[int, int] = {}
    for owner, part in enumerate(parts):
        for rollout in part:
            if rollout.request is not None:
                members[rollout.group].append(rollout)
                owners.setdefault(rollout.group, owner)
    if not members:
        return
    mine = {group: _judge_group(rollouts, options) for group, rollouts in members.items() if owners[group] == rank}
    verdicts = {group: result for part in gather(mine) for group, result in part.items()}
    for group, rollouts in members.items():
        scores, seconds = verdicts[group]
        domain = get_domain(rollouts[0].domain)
        for rollout, score in zip(rollouts, scores):
            rollout.take(score, keep_details=domain.combine is not None)
        rollouts[0].call = call_totals(scores, seconds, grouped=True)


def _judge_group(rollouts: Sequence[Rollout], options: Mapping[str, Mapping[str, Any]]) -> tuple[list[Score], float]:
    started = time.perf_counter()
    name = rollouts[0].domain
    (scores,) = score_groups(get_domain(name), [[r.request for r in rollouts]], options.get(name))
    return scores, time.perf_counter() - started


def recorded_step(local: list[Rollout], *, gather: Callable[[Any], list[Any]]) -> ScoredBatch:
    """Every process's rollouts of a step without a reward (their placeholder rewards as they are)."""
    rollouts = [rollout for part in gather(local) for rollout in part]
    return ScoredBatch.of(rollouts, [rollout.reward for rollout in rollouts])


def finish(
    rollouts: Sequence[Rollout], *, group_size: int | None, options: Mapping[str, Mapping[str, Any]], shaping: str
) -> list[float | None]:
    """Rewards over the global batch: each domain's ``combine`` over its rollouts with a verdict,
    then optional shaping."""
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


def check_masked_share(batch: ScoredBatch, limit: float, *, step: int) -> None:
    """Raise :class:`VerifierFailure` when more than ``limit`` of the step's rollouts have no
    verdict, naming each domain and reason with one example (the same on every process)."""
    total, masked = len(batch.masked), sum(reason is not None for reason in batch.masked)
    if not total or masked / total <= limit:
        return
    examples: dict[tuple[str, str], str] = {}
    for domain, reason in zip(batch.domains, batch.masked):
        if reason is not None:
            examples.setdefault((domain or "row", reason_kind(reason)), reason)
    causes = "; ".join(
        f"{domain}: {count} x {examples[(domain, kind)][:160]!r}"
        for domain, kinds in batch.masked_counts().items()
        for kind, count in kinds.items()
    )
    raise VerifierFailure(
        f"step {step}: {masked} of {total} rollouts ({masked / total:.0%}) have no verdict, more than "
        f"max_masked_share {limit:g} -- the verifiers are failing, not the policy ({causes}); fix the sandbox or "
        "the reward / judge servers, then --resume"
    )


def low_groups(rewards: Sequence[float | None], group_size: int, at_or_below: float | None) -> list[bool]:
    """Per rollout, whether its group is one whose every verdict is at most ``at_or_below``
    (Nemotron-Cascade 2's SWE RL leaves such prompts out of the loss); a group without any
    verdict is the masked rollouts' business, not this rule's. All False when ``at_or_below`` is None."""
    low = [False] * len(rewards)
    if at_or_below is None:
        return low
    for start in range(0, len(rewards), group_size):
        verdicts = [r for r in rewards[start : start + group_size] if r is not None]
        if verdicts and max(verdicts) <= at_or_below:
            low[start : start + group_size] = [True] * len(rewards[start : start + group_size])
    return low


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
            log_metric(f"reward/{name or 'row'}/pass_rate", sum(v >= PASS_REWARD for v in values) / len(values))
    for name, means in batch.details.items():
        for key, value in means.items():
            if key != "mean":
                log_metric(f"reward/{name or 'row'}/{key}", value)
    for name, totals in batch.calls.items():
        for key, value in totals.items():
            log_metric(f"verify/{name or 'row'}/{key}", value)
    for name, kinds in batch.masked_counts().items():
        for kind, count in kinds.items():
            log_metric(f"masked/{name}/{kind}", float(count))
    for mode in ("think", "no_think"):
        lengths = [n for n, m in zip(batch.lengths, batch.modes) if m == mode]
        if lengths:
            log_metric(f"response_length/{mode}", mean(lengths))
    masked = sum(reason is not None for reason in batch.masked)
    log_metric("reward/errors", float(batch.errors))
    log_metric("reward/timeouts", float(batch.timeouts))
    log_metric("overlong/skipped", float(sum(r is None for r in batch.rewards) - masked))
    log_metric("rollouts/masked", float(masked))
    log_metric("rollouts/scored", float(sum(r is not None for r in batch.rewards)))
    log_metric("rollouts/total", float(len(batch.rewards)))
    log_metric("time/reward", batch.seconds)
