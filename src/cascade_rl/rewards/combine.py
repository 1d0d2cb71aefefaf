"""The dedicated thinking model's IF-RL reward (SPEC section 6):

    r_i = R_IF(o_i) + sigmoid(z(R_RM(o_i)))   if R_IF(o_i) == 1,   else 0,

where ``z`` is the z-score of the reward-model scores over the rollouts of the same prompt
(the group). A group whose RM scores are all equal has z = 0 (sigmoid 0.5).

Rollouts are grouped by ``request["group"]`` when given (the GRPO adapter passes the step's
group: the rollouts of one prompt slot, wherever they were generated), else by the prompt text.

When the reward-model server fails on a rollout (:mod:`cascade_rl.rewards.preference`), a
rollout that breaks an instruction still has its verdict, 0 (the RM score does not enter it);
one that follows every instruction has no verdict (:meth:`Score.no_verdict`) and takes no part
in its group's z-score.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from statistics import mean, pstdev
from typing import Any

from cascade_rl.rewards.base import Score
from cascade_rl.rewards.preference import rm_results


def group_z_scores(values: Sequence[float], groups: Sequence[Any]) -> list[float]:
    """Z-score of each value within its group (population std; 0 where the std is 0)."""
    members: dict[Any, list[int]] = defaultdict(list)
    for index, group in enumerate(groups):
        members[group].append(index)
    z = [0.0] * len(values)
    for indices in members.values():
        group_values = [values[i] for i in indices]
        centre, spread = mean(group_values), pstdev(group_values)
        for i in indices:
            z[i] = (values[i] - centre) / spread if spread > 0 else 0.0
    return z


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def combine(if_rewards: Sequence[float], rm_values: Sequence[float], groups: Sequence[Any]) -> list[float]:
    """The combined reward of the module docstring."""
    z = group_z_scores(rm_values, groups)
    return [r_if + sigmoid(zi) if r_if == 1 else 0.0 for r_if, zi in zip(if_rewards, z)]


def score_batch(
    requests: Sequence[Mapping[str, Any]],
    *,
    reward_model: str,
    mode: str = "strict",
    batch_size: int = 8,
    max_length: int | None = None,
    **options: Any,
) -> list[Score]:
    from cascade_rl.rewards.ifeval import score as if_score

    if not requests:
        return []
    if_results = [
        if_score(
            r.get("response") or "",
            instruction_id_list=r["instruction_id_list"],
            kwargs=r["kwargs"],
            prompt=r.get("prompt") if isinstance(r.get("prompt"), str) else None,
            mode=mode,
        )
        for r in requests
    ]
    results = rm_results(requests, reward_model, batch_size=batch_size, max_length=max_length, **options)
    groups = [r.get("group", str(r.get("prompt"))) for r in requests]
    local = [
        Score(
            s.reward,
            {"if_reward": s.reward, "rm_score": rm.value, **{k: v for k, v in s.details.items() if k == "follow_list"}},
        )
        if rm.error is None
        else _without_rm_score(s.reward, rm.error)
        for s, rm in zip(if_results, results)
    ]
    return [Score(value, score.details, score.masked) for value, score in zip(combine_scores(local, groups), local)]


def _without_rm_score(if_reward: float, error: str) -> Score:
    """The reward of a rollout the reward model did not score (module docstring)."""
    if if_reward != 1:
        return Score(0.0, {"if_reward": if_reward, "rm_error": error})
    return Score.no_verdict(error, if_reward=if_reward)


def combine_scores(scores: Sequence[Score], groups: Sequence[Any], **_: Any) -> list[float]:
    """The combined reward from each score's ``if_reward`` and ``rm_score`` details, z over
    ``groups``. :func:`score_batch` applies it to its own requests; the GRPO adapter applies it
    again to the step's whole batch, so a group whose rollouts sit on several processes is
    normalised as one. A score without an RM score (failed request) keeps its reward."""
    members = [i for i, s in enumerate(scores) if "rm_score" in s.details and "if_reward" in s.details]
    combined = combine(
        [scores[i].details["if_reward"] for i in members],
        [scores[i].details["rm_score"] for i in members],
        [groups[i] for i in members],
    )
    out = [s.reward for s in scores]
    for i, value in zip(members, combined):
        out[i] = value
    return out
