"""Hard-but-not-hopeless prompt selection before an RL stage trains (SPEC section 6, SWE RL: the
paper keeps the repair prompts on which fewer than 4 of 8 samples score above 0.5 similarity and
at least one sample scores above zero).

A GRPO stage with ``prompt_filter`` samples ``samples`` responses per prompt from the policy the
stage starts from, with the stage's own rollout sampling (temperature, top-p, the response budget
of the first sub-stage that trains the prompt and each prompt's thinking mode; ``half`` samples in
``/think``), scores them with the stage's rewards, and drops a prompt. Each data set of the stage
(the stage's ``data``, a sub-stage's own) is filtered once, before the stage trains.

* **too easy**: at least ``drop_solved_at_or_above`` of its samples score above ``solved_above``;
* **hopeless** (``drop_hopeless``): none of its samples scores above ``hopeless_at_or_below`` (0);

the one pass-rate rule of ``cascade data difficulty`` (:class:`~cascade_rl.data.difficulty.DifficultyRule`).

With ``domains``, only the prompts of those reward domains are sampled and judged; the others
are kept as they are (a joint stage over several domains filters the ones its cascade stages did).

Both kinds give GRPO groups without variance, which train nothing. The paper checks hopelessness
with a strong model's samples; here the policy's own samples decide (there is no stronger model in
the cascade). Rewards are the scorers' own, before any batch-level combination.

Only the main process samples; the samples are appended to ``prompt_filter.progress.jsonl`` as
they arrive (a killed run resumes without re-sampling), the verdicts go to ``prompt_filter.json``,
and every process reads the same verdicts from it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cascade_rl.chat import with_mode
from cascade_rl.data.difficulty import DifficultyRule, Passing
from cascade_rl.llm.base import Sampling
from cascade_rl.recipe import GRPOStage, PromptFilter, RecipeError
from cascade_rl.train import distributed

RESULT_FILE = "prompt_filter.json"
PROGRESS_FILE = "prompt_filter.progress.jsonl"


def difficulty_rule(rule: PromptFilter) -> DifficultyRule:
    """The recipe's ``prompt_filter`` as the one pass-rate rule of ``cascade data difficulty``: a
    sample solves its prompt above ``solved_above``; hopeless means no sample above ``hopeless_at_or_below``."""
    return DifficultyRule(
        easy=Passing(rule.solved_above, strict=True),
        too_easy_at=rule.drop_solved_at_or_above,
        hard=Passing(rule.hopeless_at_or_below, strict=True),
        hopeless_at=0.0 if rule.drop_hopeless else None,
    )


def verdict(rewards: Sequence[float], rule: PromptFilter) -> str:
    """``keep``, ``too easy`` or ``hopeless`` for one prompt's sample rewards."""
    return difficulty_rule(rule).verdict(rewards)


def kept_prompts(
    stage: GRPOStage,
    prompts: Sequence[dict],
    *,
    model: Path,
    stage_dir: Path,
    seed: int,
    reward_options: Mapping[str, Mapping[str, Any]],
    workers: int = 4,
    dtype: str | None = None,
    engine: str = "transformers",
    max_tokens: int | None = None,
) -> list[int]:
    """Indices of the prompts the stage's ``prompt_filter`` keeps (all of them without one), the
    same on every process; the verdicts are written to ``stage_dir``. ``max_tokens``: the
    response budget of the sub-stage that trains these prompts (default: the first one's).
    Raises :class:`RecipeError` when it keeps none."""
    if stage.prompt_filter is None:
        return list(range(len(prompts)))
    result = stage_dir / RESULT_FILE
    budget = max_tokens or stage.curriculum[0].max_response_length
    distributed.on_main(
        f"{stage.name}: prompt filter",
        lambda: (
            result.exists()
            or _measure(stage, prompts, model, stage_dir, seed, reward_options, workers, (dtype, engine), budget)
        ),
    )
    verdicts = json.loads(result.read_text())["verdicts"]
    kept = [index for index, v in enumerate(verdicts) if v == "keep"]
    if not kept:
        raise RecipeError(
            f"stages ({stage.name}).prompt_filter dropped every one of the {len(prompts)} prompts "
            f"(see {result}); loosen drop_solved_at_or_above / drop_hopeless or start from a stronger policy"
        )
    return kept


def _measure(
    stage: GRPOStage,
    prompts: Sequence[dict],
    model: Path,
    stage_dir: Path,
    seed: int,
    reward_options: Mapping[str, Mapping[str, Any]],
    workers: int,
    sampling: tuple[str | None, str] = (None, "transformers"),
    max_tokens: int | None = None,
) -> None:
    from cascade_rl.eval.benchmarks import score_samples
    from cascade_rl.eval.sampling import open_generator, reserve, sample

    rule = stage.prompt_filter
    assert rule is not None
    total = len(prompts)
    measured = [i for i, p in enumerate(prompts) if rule.domains is None or p["domain"] in rule.domains]
    prompts = [prompts[i] for i in measured]
    conversations = [with_mode(p["prompt"], _sampling_mode(stage, p["domain"])) for p in prompts]
    dtype, engine = sampling
    generator = open_generator(model, batch_size=max(rule.samples, 64), dtype=dtype, engine=engine)
    rollouts = Sampling(  # the rollouts' distribution, which the verdicts are about
        n=rule.samples,
        temperature=stage.temperature,
        top_p=stage.top_p,
        max_tokens=max_tokens or stage.curriculum[0].max_response_length,
        top_k=stage.top_k or 0,
    )
    stage_dir.mkdir(parents=True, exist_ok=True)
    reserve(generator, conversations, rollouts.max_tokens)  # one engine for every prompt
    samples = sample(
        generator,
        conversations,
        rollouts,
        progress=stage_dir / PROGRESS_FILE,
        description=f"{stage.name} filter",
        seed=seed,
    )
    scores = score_samples(prompts, samples, reward_options, workers=workers)
    measured_rewards = [[float(score.reward) for score in group] for group in scores]
    rewards: list[list[float] | None] = [None] * total
    verdicts = ["keep"] * total  # prompts of the domains the rule leaves alone
    for index, group in zip(measured, measured_rewards):
        rewards[index], verdicts[index] = group, verdict(group, rule)
    counts = {name: verdicts.count(name) for name in ("keep", "too easy", "hopeless")}
    summary = {
        "prompts": total,
        "measured": len(measured),
        **counts,
        "rule": rule.model_dump(),
        "verdicts": verdicts,
        "rewards": rewards,
    }
    tmp = stage_dir / (RESULT_FILE + ".tmp")
    tmp.write_text(json.dumps(summary))
    tmp.replace(stage_dir / RESULT_FILE)
    print(
        f"{stage.name}: prompt filter kept {counts['keep']} of {total} prompts "
        f"(too easy {counts['too easy']}, hopeless {counts['hopeless']})",
        flush=True,
    )


def _sampling_mode(stage: GRPOStage, domain: str) -> str:
    mode = stage.mode_of(domain)
    return "think" if mode == "half" else mode
