"""Verifying one process's rollouts of an RL step, each as soon as it finishes (SPEC section 6:
Code RL's rewards are computed "in parallel and asynchronously", 1172 s -> 416 s per batch in
the paper; section 11: Cascade 2's verifiers are asynchronous servers).

**The reward function** (:class:`RolloutScorer`) routes each rollout by its row's domain
(DESIGN convention 3) to the registry; decodes the completion itself from its token ids,
keeping ``<think>`` / ``<tool_call>`` tags a tokenizer may mark special; leaves a truncated
rollout unscored when overlong filtering is on (TRL then leaves it out of its group's mean and
standard deviation, and ``mask_truncated_completions`` out of the loss) instead of scoring it 0;
and keeps a scorer's "no verdict" (:meth:`Score.no_verdict`) as such: the rollout is masked, not
zeroed (:mod:`cascade_rl.train.rewards`).

**One step's verification** (:class:`StepVerification`) is opened before the step generates.
The generation engine reports each rollout as it ends (vLLM's step loop,
:meth:`~cascade_rl.llm.vllm_engine.VLLMEngine.sample`; the fallback loop,
:func:`~cascade_rl.llm.decode.decode`, when a sequence emits its stop token), and
:meth:`~StepVerification.finished` hands it at once to a bounded pool of ``workers`` threads (the
code domain's jobs then run on its sandbox pool of as many sandboxes): verification does not wait
for the slowest rollout of the batch, and generation never waits for verification. A domain
scored per response is scored rollout by rollout; a domain scored per group (``group_scorer``,
the pairwise GenRM) when the last rollout of a group this process holds whole finishes (a group
split over processes is judged after the gather, :func:`~cascade_rl.train.rewards.score_step`).
:meth:`~StepVerification.collect`, the scoring step, scores what was not reported (an engine
without per-request completion, TRL's server mode) and waits for the rest. A multi-turn episode
(``train/episodes.py``) is not reported turn by turn: its environment judged it when it ended,
and ``collect`` takes that verdict (a verdict or none, as any scorer's) for its rollout.

The scorers see the same requests either way, so the rewards are the synchronous path's: with
``asynchronous=False`` (``runtime.async_rewards: false``) nothing is scored before the step's
generation has ended, and each domain's rollouts are scored as one batch. A scorer whose numbers
depend on its batch (a reward model's padded forward passes) may differ from the batched
synchronous path in the last bits of float precision; one rollout at a time is deterministic.

:meth:`~StepVerification.timing` says what verification cost this process and how much of it ran
while the step was still generating: ``time/verification`` (wall time during which some rollout
was being verified), ``time/verification_hidden`` (the part of it before the scoring step
started waiting) and ``verify/hidden_share``.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from cascade_rl.chat import decode_response, last_user_text, stop_token_ids
from cascade_rl.rewards.base import Score
from cascade_rl.rewards.registry import get_domain, score_batch, score_groups
from cascade_rl.train.episodes import episode_score
from cascade_rl.train.rewards import Rollout, call_totals, rollout_of


class RolloutScorer:
    """The reward function of a GRPO stage (module docstring). ``asynchronous``: score each
    rollout as it finishes; ``max_masked_share``: the share of a step without a verdict above
    which the stage stops (:func:`~cascade_rl.train.rewards.check_masked_share`);
    ``mask_groups_at_or_below``: a group whose rewards all lie at or below it leaves the loss
    (:func:`~cascade_rl.train.rewards.low_groups`; None: none does)."""

    def __init__(
        self,
        tokenizer: Any,
        *,
        domain: str | None = None,
        options: Mapping[str, Mapping[str, Any]] | None = None,
        overlong_filter: bool = False,
        workers: int = 4,
        asynchronous: bool = False,
        max_masked_share: float = 0.5,
        mask_groups_at_or_below: float | None = None,
    ):
        self.__name__ = "cascade"  # the name TRL logs the reward under (rewards/cascade/mean)
        self.tokenizer = tokenizer
        self.domain = domain
        self.options = {name: dict(values) for name, values in (options or {}).items()}
        self.overlong_filter = overlong_filter
        self.workers = workers
        self.asynchronous = asynchronous
        self.max_masked_share = max_masked_share
        self.mask_groups_at_or_below = mask_groups_at_or_below
        self.stop_ids = stop_token_ids(tokenizer)

    def verify(
        self,
        prompts: Sequence[Any],
        columns: Mapping[str, Sequence[Any]],
        *,
        groups: Sequence[int] | None = None,
        group_size: int | None = None,
    ) -> StepVerification:
        """This process's verification of one step's rollouts of ``prompts`` (``columns``: the
        rows' own ``_ref``, ``_pidx``, ``_mode``, ``_domain``). ``groups``: each rollout's GRPO
        group in the step's global batch (default: its prompt); ``group_size``: the rollouts of
        a whole group (default: whatever this process holds)."""
        return StepVerification(self, prompts, columns, groups=groups, group_size=group_size)

    def __call__(
        self, prompts: Sequence[Any], completion_ids: Sequence[Sequence[int]], **columns: Any
    ) -> list[Rollout]:
        """Score this process's rollouts after generation (``columns`` as :meth:`verify`, plus
        ``groups`` and ``group_size``)."""
        groups, group_size = columns.pop("groups", None), columns.pop("group_size", None)
        return self.verify(prompts, columns, groups=groups, group_size=group_size).collect(completion_ids)


@dataclass(frozen=True)
class _Unit:
    """What one scorer call scores: rollouts of one domain, one group of it when ``grouped``."""

    domain: str
    members: tuple[int, ...]
    grouped: bool


class StepVerification:
    """One step's rollouts of this process, verified as each finishes (module docstring)."""

    def __init__(
        self,
        scorer: RolloutScorer,
        prompts: Sequence[Any],
        columns: Mapping[str, Sequence[Any]],
        *,
        groups: Sequence[int] | None,
        group_size: int | None,
    ):
        count = len(prompts)
        self.scorer, self.prompts, self.eager = scorer, prompts, scorer.asynchronous
        self.references = [json.loads(r) if r else {} for r in (columns.get("_ref") or [None] * count)]
        self.prompt_indices = [int(i) for i in (columns.get("_pidx") or range(count))]
        self.modes = list(columns.get("_mode") or ["think"] * count)
        self.domains = [scorer.domain or (d or "") for d in (columns.get("_domain") or [None] * count)]
        self.groups = [int(g) for g in (groups if groups is not None else self.prompt_indices)]
        self.members: dict[int, list[int]] = defaultdict(list)
        for index, group in enumerate(self.groups):
            self.members[group].append(index)
        self.group_size = group_size
        self.tokens: list[list[int] | None] = [None] * count
        self.rollouts: list[Rollout | None] = [None] * count
        self.submitted: set[int] = set()
        self.pending: list[tuple[_Unit, Future]] = []
        self.intervals: list[tuple[float, float]] = []
        self.pool = ThreadPoolExecutor(scorer.workers, thread_name_prefix="cascade-verify") if self.eager else None
        self.waited_at: float | None = None

    # ------------------------------------------------------------------ as the rollouts finish
    def finished(self, index: int, token_ids: Sequence[int]) -> None:
        """Rollout ``index`` ended with ``token_ids`` (the generation engine's callback): score it
        now, or its group once the group's last rollout here has ended."""
        self._record(index, token_ids)
        if self.pool is None:
            return
        unit = self._ready_unit(index)
        if unit is not None:
            self._submit(unit, self.pool)

    def _record(self, index: int, token_ids: Sequence[int]) -> None:
        self.tokens[index] = list(token_ids)
        self.rollouts[index] = rollout_of(
            self.tokens[index],
            set(self.scorer.stop_ids),
            self.prompt_indices[index],
            self.modes[index],
            self.domains[index],
            self.groups[index],
        )
        self.rollouts[index].reward = None

    def _scored(self, index: int) -> bool:
        rollout = self.rollouts[index]
        return rollout is not None and not (self.scorer.overlong_filter and rollout.truncated)

    def _ready_unit(self, index: int) -> _Unit | None:
        """The unit ``index`` completes: itself, or its group when the group is whole here and
        every one of its rollouts has ended."""
        if not self._scored(index):
            return None
        domain = get_domain(self.domains[index])
        if domain.group_scorer is None:
            return _Unit(self.domains[index], (index,), grouped=False)
        members = self.members[self.groups[index]]
        if not self._whole(members) or any(self.tokens[i] is None for i in members):
            return None
        return _Unit(self.domains[index], tuple(i for i in members if self._scored(i)), grouped=True)

    def _whole(self, members: Sequence[int]) -> bool:
        return self.group_size is None or len(members) == self.group_size

    # ------------------------------------------------------------------ the scoring step
    def collect(
        self, completion_ids: Sequence[Sequence[int]], episodes: Sequence[Mapping[str, Any] | None] | None = None
    ) -> list[Rollout]:
        """Every rollout of this process with its verdict (the scoring step): the rollouts no
        engine reported are recorded now, what is left is scored, and all is waited for.
        ``episodes``: per rollout, the verdict of a multi-turn episode (``_episode``,
        :func:`~cascade_rl.train.episodes.episode_results`), reached when it ended; the rollout
        keeps it instead of being scored again."""
        self.waited_at = time.perf_counter()
        for index, entry in enumerate(episodes or []):
            if entry is not None:
                self._take_episode(index, completion_ids[index], entry)
        for index, ids in enumerate(completion_ids):
            if self.tokens[index] is None:
                self._record(index, ids)
            elif self.tokens[index] != list(ids):
                raise RuntimeError(
                    f"rollout {index}: the generation engine reported other tokens than it returned; the rollout "
                    "would be scored on text the trainer does not train on"
                )
        pool = self.pool or ThreadPoolExecutor(self.scorer.workers, thread_name_prefix="cascade-verify")
        try:
            for unit in self._remaining_units():
                self._submit(unit, pool)
            for unit, future in self.pending:
                self._take(unit, *future.result())
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        self._hold_split_groups()
        return [rollout for rollout in self.rollouts if rollout is not None]

    def _take_episode(self, index: int, token_ids: Sequence[int], entry: Mapping[str, Any]) -> None:
        """An episode's rollout: its length is the model's own tokens (not the tools'), its verdict
        the episode's (none for a truncated rollout under overlong filtering)."""
        self._record(index, token_ids)
        self.submitted.add(index)
        rollout = self.rollouts[index]
        assert rollout is not None
        rollout.length = int(entry["model_tokens"])
        if self._scored(index):
            rollout.take(episode_score(entry), keep_details=get_domain(self.domains[index]).combine is not None)

    def _remaining_units(self) -> list[_Unit]:
        """What nobody has scored yet: each domain's rollouts as one batch, each group whole here
        as one call (a group continued on another process waits for the gather)."""
        batches: dict[str, list[int]] = defaultdict(list)
        units = []
        for index in range(len(self.rollouts)):
            if index in self.submitted or not self._scored(index):
                continue
            if get_domain(self.domains[index]).group_scorer is None:
                batches[self.domains[index]].append(index)
                continue
            members = self.members[self.groups[index]]
            if self._whole(members):
                units.append(_Unit(self.domains[index], tuple(i for i in members if self._scored(i)), grouped=True))
                self.submitted.update(members)
        return [_Unit(domain, tuple(members), grouped=False) for domain, members in batches.items()] + units

    def _submit(self, unit: _Unit, pool: ThreadPoolExecutor) -> None:
        self.submitted.update(unit.members)
        self.pending.append((unit, pool.submit(self._score, unit)))

    def _score(self, unit: _Unit) -> tuple[list[Score], float]:
        """One scorer call (on a pool thread): the unit's scores and its wall time."""
        started = time.perf_counter()
        requests = [self._request(i) for i in unit.members]
        domain, options = get_domain(unit.domain), self.scorer.options.get(unit.domain)
        if unit.grouped:
            (scores,) = score_groups(domain, [requests], options)
        else:
            scores = score_batch(domain, requests, options, workers=self.scorer.workers)
        ended = time.perf_counter()
        self.intervals.append((started, ended))
        return scores, ended - started

    def _request(self, index: int) -> dict[str, Any]:
        tokens = self.tokens[index]
        assert tokens is not None
        return {
            **self.references[index],
            "response": decode_response(self.scorer.tokenizer, tokens, self.scorer.stop_ids),
            "prompt": last_user_text(self.prompts[index]),
            "messages": _prompt_messages(self.prompts[index]),
        }

    def _take(self, unit: _Unit, scores: Sequence[Score], seconds: float) -> None:
        keep_details = get_domain(unit.domain).combine is not None
        for index, score in zip(unit.members, scores):
            rollout = self.rollouts[index]
            assert rollout is not None
            rollout.take(score, keep_details=keep_details)
        first = self.rollouts[unit.members[0]]
        assert first is not None
        first.call = call_totals(scores, seconds, grouped=unit.grouped)

    def _hold_split_groups(self) -> None:
        """A group scorer's rollouts whose group goes on on another process carry their request
        to the gather, where the group is judged whole."""
        for index, rollout in enumerate(self.rollouts):
            if rollout is not None and index not in self.submitted and self._scored(index):
                rollout.request = self._request(index)

    # ------------------------------------------------------------------ what it cost
    def timing(self) -> dict[str, float]:
        """This process's verification time, and how much of it ran before the scoring step
        started waiting (module docstring); call after :meth:`collect`."""
        busy = _union(self.intervals)
        hidden = _union([(start, min(end, self.waited_at or end)) for start, end in self.intervals])
        return {
            "time/verification": busy,
            "time/verification_hidden": hidden,
            "verify/hidden_share": hidden / busy if busy > 0 else 0.0,
        }


def _union(intervals: Sequence[tuple[float, float]]) -> float:
    """The length of the union of ``(start, end)`` intervals (empty ones count nothing)."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(interval for interval in intervals if interval[1] > interval[0]):
        if end <= reach:
            continue
        total += end - max(start, reach)
        reach = end
    return total


def _prompt_messages(prompt: Any) -> list[dict]:
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    return [dict(m) for m in prompt]
