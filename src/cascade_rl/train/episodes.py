"""Multi-turn rollouts in the on-policy stages, engine-neutral (Nemotron-Cascade 2's multi-domain
RL and MOPD, SPEC section 11; docs/environments.md).

A row whose reward domain names an environment (``workplace``) is an *episode*: the loop of
:mod:`cascade_rl.llm.episodes` plays it over the backend's sampler, and its reward is the
episode's own verdict, reached when it ends (NeMo Gym's ``verify`` after the agent's last step).
This module holds what a stage decides about episodes, for any backend:

* :class:`EpisodeSettings`: the stage's budgets (``max_turns``, ``max_turn_tokens``) and the
  domains' options, and whether the stage has multi-turn rows at all (a stage without them
  samples exactly as before);
* :func:`start_episodes`: this process's rows of a step as episodes (None for single-turn rows);
* :func:`episode_results`: each ended episode's verdict as the reward function takes it
  (column ``_episode``, taken by :meth:`~cascade_rl.train.verification.StepVerification.collect`), and its record for
  ``episodes.jsonl`` (what the model called, in order, so ``cascade score`` re-judges it).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cascade_rl.llm.episodes import Transcript
from cascade_rl.rewards.base import Score
from cascade_rl.rewards.environment import Episode, has_environment, start_episode


@dataclass(frozen=True)
class EpisodeSettings:
    """How a stage plays its episodes: model turns per episode, tokens per turn (None: what the
    episode's budget leaves) and each domain's options (the environment's own)."""

    max_turns: int
    max_turn_tokens: int | None = None
    options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @classmethod
    def of(cls, stage: Any, domains: Iterable[str], options: Mapping[str, Mapping[str, Any]] | None = None):
        """The stage's settings when one of ``domains`` (its rows') has an environment, else None."""
        if not any(has_environment(domain) for domain in set(domains)):
            return None
        return cls(stage.max_turns, stage.max_turn_tokens, {k: dict(v) for k, v in (options or {}).items()})


def start_episodes(rows: Sequence[Mapping[str, Any]], prompts: Sequence[Any], settings: EpisodeSettings):
    """An episode for each row of a multi-turn domain (its prompt as the trainer renders it and its
    reference fields, ``_ref``), None for the others."""
    episodes: list[Episode | None] = []
    for row, prompt in zip(rows, prompts):
        domain = str(row.get("_domain") or "")
        if not domain or not has_environment(domain):
            episodes.append(None)
            continue
        reference = json.loads(row["_ref"]) if row.get("_ref") else {}
        options = {**settings.options.get(domain, {}), "max_steps": settings.max_turns}
        episodes.append(start_episode({"prompt": list(prompt), "domain": domain, "reference": reference}, options))
    return episodes


def episode_results(
    rows: Sequence[Mapping[str, Any]], episodes: Sequence[Episode | None], transcripts: Sequence[Transcript]
) -> tuple[list[dict | None], list[dict]]:
    """Per row, the ``_episode`` column (None for single-turn rows): the verdict's reward, details
    and mask reason, and the model's tokens; and the records of this process's episodes."""
    column: list[dict | None] = []
    records: list[dict] = []
    for row, episode, transcript in zip(rows, episodes, transcripts):
        if episode is None:
            column.append(None)
            continue
        score = episode.verdict()
        details = {key: value for key, value in score.details.items() if _jsonable(value)}
        tokens = transcript.model_tokens
        column.append({"reward": score.reward, "details": details, "masked": score.masked, "model_tokens": tokens})
        records.append(
            {
                "prompt": int(row["_pidx"]),
                "mode": row.get("_mode"),
                "domain": row.get("_domain"),
                "reward": None if score.masked else score.reward,
                "end": transcript.end,
                "turns": transcript.turns,
                "model_tokens": transcript.model_tokens,
                "tokens": len(transcript.completion_ids),
                "calls": episode.call_records(),
                "failed_calls": episode.failed_calls,
                **({"no_verdict": score.masked} if score.masked else {}),
            }
        )
    return column, records


def episode_score(entry: Mapping[str, Any]) -> Score:
    """The :class:`Score` an ``_episode`` entry carries."""
    return Score(float(entry["reward"]), dict(entry.get("details") or {}), masked=entry.get("masked"))


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True
