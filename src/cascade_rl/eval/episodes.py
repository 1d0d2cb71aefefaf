"""Benchmarks of multi-turn domains (Nemotron-Cascade 2's workplace assistant; SPEC sections 9 and
11; docs/environments.md): each of a prompt's k samples is an episode played to its end, scored by
its own verdict.

* A **local checkpoint** plays on token ids through the loop the trainer's rollouts use
  (:func:`cascade_rl.llm.episodes.run_episodes` over :meth:`LocalGenerator.sample_ids`, either
  engine): the model reads, after each call, exactly the tokens it reads in training, and the
  benchmark's ``max_new_tokens`` bounds the whole episode (turns and tool results), like a
  stage's ``max_response_length``.
* **Any other generator** (a served model) plays on messages (:func:`cascade_rl.llm.episodes.converse`):
  each turn is one request with the conversation so far, at most ``max_turn_tokens`` (else
  ``max_new_tokens``) tokens.

Samples are written to the progress file as each chunk of prompts finishes and reused by a rerun
with the same model and settings (:class:`~cascade_rl.eval.sampling.SampleStore`): a sample is the
episode's transcript, its verdict and the calls it made, so ``cascade score`` can re-judge it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from cascade_rl.eval.sampling import SampleStore, sample_keys, token_budget
from cascade_rl.llm.base import Generator, Sampling
from cascade_rl.llm.episodes import Budget, ChatCodec, converse, run_episodes
from cascade_rl.llm.local import LocalGenerator
from cascade_rl.recipe import Benchmark
from cascade_rl.rewards.base import Score
from cascade_rl.rewards.environment import Episode, has_environment, start_episode


@dataclass(frozen=True)
class Played:
    """One sample of a multi-turn benchmark: the transcript text after the prompt, the verdict, and
    the calls in order (``{name, arguments}``; a call that could not be read: ``{error}``)."""

    response: str
    score: Score
    calls: list[dict]

    def to_json(self) -> str:
        score = {"reward": self.score.reward, "details": self.score.details, "masked": self.score.masked}
        return json.dumps({"response": self.response, "score": score, "calls": self.calls}, default=str)

    @classmethod
    def from_json(cls, text: str) -> Played:
        record = json.loads(text)
        score = record["score"]
        return cls(record["response"], Score(score["reward"], score["details"], score["masked"]), record["calls"])


def plays_episodes(bench: Benchmark, rows: Sequence[Mapping[str, Any]]) -> bool:
    """Whether a benchmark's rows are episodes (their domain has an environment); a benchmark
    mixing multi-turn and single-turn domains is a ValueError naming it."""
    multi = {has_environment(bench.domain or row["domain"]) for row in rows}
    if len(multi) > 1:
        raise ValueError(
            f"benchmark {bench.name}: mixes multi-turn and single-turn domains; make one benchmark of each"
        )
    return multi == {True}


def play(
    generator: Generator,
    rows: Sequence[Mapping[str, Any]],
    prompts: Sequence[list[dict]],
    bench: Benchmark,
    *,
    batch_size: int,
    progress: Path | None = None,
) -> list[list[Played]]:
    """``bench.k`` episodes of every row, in row order (module docstring)."""

    budget = token_budget(generator, prompts, bench.max_new_tokens)  # a local model's context
    sampling = Sampling(n=1, temperature=bench.temperature, top_p=bench.top_p, max_tokens=budget)
    settings = {"k": bench.k, "max_turns": bench.max_turns, "max_turn_tokens": bench.max_turn_tokens}
    store = SampleStore(progress, sample_keys(generator, prompts, settings | sampling.settings())) if progress else None
    done: dict[int, list[Played]] = {
        i: [Played.from_json(s) for s in v] for i, v in (store.done if store else {}).items()
    }
    todo = [i for i in range(len(rows)) if i not in done]
    chunk = max(1, batch_size // bench.k)
    with tqdm(total=len(rows), initial=len(rows) - len(todo), desc=bench.name, unit="prompt") as bar:
        for start in range(0, len(todo), chunk):
            indices = todo[start : start + chunk]
            played = _play_chunk(generator, [rows[i] for i in indices], [prompts[i] for i in indices], bench, sampling)
            for index, group in zip(indices, played):
                done[index] = group
                if store is not None:
                    store.add(index, [sample.to_json() for sample in group])
            bar.update(len(indices))
    return [done[i] for i in range(len(rows))]


def _play_chunk(
    generator: Generator, rows: Sequence[Mapping[str, Any]], prompts: Sequence[list[dict]], bench: Benchmark,
    sampling: Sampling,
) -> list[list[Played]]:  # fmt: skip
    """Every episode of some rows (k each), played together."""
    copies = [(row, prompt) for row, prompt in zip(rows, prompts) for _ in range(bench.k)]
    episodes = [_episode(row, prompt, bench) for row, prompt in copies]
    if isinstance(generator, LocalGenerator):
        texts = _on_tokens(generator, [prompt for _, prompt in copies], episodes, bench, sampling)
    else:
        texts = _on_messages(generator, episodes, bench, sampling)
    played = [_played(episode, text) for episode, text in zip(episodes, texts)]
    return [played[i * bench.k : (i + 1) * bench.k] for i in range(len(rows))]


def _episode(row: Mapping[str, Any], prompt: list[dict], bench: Benchmark) -> Episode:
    options = {**bench.options, "max_steps": bench.max_turns}
    return start_episode({"prompt": prompt, "domain": bench.domain or row["domain"], "reference": row["reference"]},
                         options)  # fmt: skip


def _on_tokens(generator: LocalGenerator, prompts, episodes, bench: Benchmark, sampling: Sampling) -> list[str]:
    prompt_ids = [generator.prompt_ids(prompt) for prompt in prompts]
    codec = ChatCodec(generator.tokenizer, generator.stop_ids)
    transcripts = run_episodes(
        prompt_ids,
        episodes,
        lambda sequences, max_tokens: (generator.sample_ids(sequences, max_tokens, sampling), None),
        budget=Budget(sampling.max_tokens, bench.max_turn_tokens),
        codec=codec,
    )
    return [generator.tokenizer.decode(t.completion_ids, skip_special_tokens=False) for t in transcripts]


def _on_messages(generator: Generator, episodes, bench: Benchmark, sampling: Sampling) -> list[str]:
    turn = Sampling(n=1, temperature=sampling.temperature, top_p=sampling.top_p,
                    max_tokens=bench.max_turn_tokens or bench.max_new_tokens)  # fmt: skip
    converse(generator, episodes, turn)
    return [_conversation_text(episode) for episode in episodes]


def _conversation_text(episode: Episode) -> str:
    """The turns after the prompt as text: each assistant reply, each tool result as the model read it."""
    parts = []
    for message in episode.messages[episode.prompt_messages :]:
        content = message["content"]
        parts.append(content if message["role"] == "assistant" else f"<tool_response>\n{content}\n</tool_response>")
    return "\n".join(parts)


def _played(episode: Episode, text: str) -> Played:
    return Played(text, episode.verdict(), episode.call_records())
