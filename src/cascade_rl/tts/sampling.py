"""Candidate generation for the test-time-scaling loop (SPEC section 8), on any backend of
:mod:`cascade_rl.llm`, one generation at a time so that each is saved as soon as it exists.

:func:`candidate_source` wraps a generator:

* an :class:`~cascade_rl.llm.OpenAICompatGenerator` (a served model, the realistic case): one
  chat-completions request per candidate, all of a round's requests in flight together within
  the generator's ``max_concurrency``, with its timeout and retries; with ``confidence`` the
  request asks for ``logprobs`` / ``top_logprobs`` and the tail confidence is computed from the
  answer (:mod:`cascade_rl.tts.selection`);
* a :class:`~cascade_rl.llm.LocalGenerator`: batched ``generate`` calls of up to its
  ``batch_size`` sequences; with ``confidence`` one forward pass over prompt + response gives
  the log-probabilities of the response's last tokens (what the sampler saw, before
  temperature);
* any other :class:`~cascade_rl.llm.Generator`: ``agenerate`` one candidate at a time, all
  concurrently; no confidence.

``sample(messages, n, on_generation)`` calls ``on_generation(Generation)`` as each candidate
arrives, so the loop can persist it before the next one is made.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cascade_rl import llm
from cascade_rl.llm import LocalGenerator, OpenAICompatGenerator
from cascade_rl.llm.openai_compat import choice_text
from cascade_rl.tts.selection import TAIL_TOKENS, TOP_LOGPROBS, tail_confidence, token_confidence


@dataclass(frozen=True)
class Generation:
    text: str
    confidence: float | None = None


@dataclass(frozen=True)
class Sampling:
    temperature: float = 0.6
    top_p: float = 0.95
    max_tokens: int = 131072
    confidence: bool = True  # compute tail confidences (the tail10 heuristic needs them)
    tail_tokens: int = TAIL_TOKENS
    top_logprobs: int = TOP_LOGPROBS

    def distribution(self, n: int = 1) -> llm.Sampling:
        """The generators' sampling value for ``n`` candidates."""
        return llm.Sampling(n=n, temperature=self.temperature, top_p=self.top_p, max_tokens=self.max_tokens)


OnGeneration = Callable[[Generation], None]


class ServerSource:
    """Candidates from an OpenAI-compatible server, one request each (module docstring)."""

    def __init__(self, generator: OpenAICompatGenerator, sampling: Sampling) -> None:
        self.generator, self.sampling = generator, sampling

    async def _one(self, messages: list[dict]) -> Generation:
        params = self.sampling.distribution().settings()
        if self.sampling.confidence:
            params.update(logprobs=True, top_logprobs=self.sampling.top_logprobs)
        response = await self.generator.arequest(messages, **params)
        choice = response["choices"][0]
        return Generation(choice_text(choice), self._confidence(choice))

    def _confidence(self, choice: dict) -> float | None:
        tokens = ((choice.get("logprobs") or {}).get("content")) or []
        per_token = [
            token_confidence([entry["logprob"] for entry in token.get("top_logprobs") or [token]])
            for token in tokens
            if isinstance(token, dict) and "logprob" in token
        ]
        return tail_confidence(per_token, self.sampling.tail_tokens)

    async def sample(self, messages: list[dict], n: int, on_generation: OnGeneration) -> None:
        for finished in asyncio.as_completed([self._one(messages) for _ in range(n)]):
            on_generation(await finished)


class LocalSource:
    """Candidates from a local ``transformers`` model in batches (module docstring)."""

    def __init__(self, generator: LocalGenerator, sampling: Sampling) -> None:
        self.generator, self.sampling = generator, sampling
        self._lock = threading.Lock()

    def _batch(self, messages: list[dict], n: int) -> list[Generation]:
        with self._lock:
            texts = self.generator.generate(messages, self.sampling.distribution(n))
            if not self.sampling.confidence:
                return [Generation(text) for text in texts]
            prompt = self.generator.render_prompt(messages)
            return [Generation(text, self._confidence(prompt, text)) for text in texts]

    def _confidence(self, prompt: str, text: str) -> float | None:
        import torch

        tokenizer, model = self.generator.tokenizer, self.generator.model
        prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        response_ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        if not response_ids:
            return None
        tail = min(len(response_ids), self.sampling.tail_tokens)
        ids = torch.tensor([prompt_ids + response_ids], device=self.generator.device)
        with torch.inference_mode():
            try:
                logits = model(ids, logits_to_keep=tail + 1).logits[0, :-1]
            except TypeError:  # a model without logits_to_keep: all positions
                logits = model(ids).logits[0, -tail - 1 : -1]
            top = torch.log_softmax(logits.float(), dim=-1).topk(self.sampling.top_logprobs, dim=-1).values
        per_token = (-top.mean(dim=-1)).tolist()
        return tail_confidence(per_token, self.sampling.tail_tokens)

    async def sample(self, messages: list[dict], n: int, on_generation: OnGeneration) -> None:
        per_call = max(1, self.generator.batch_size)
        made = 0
        while made < n:
            batch = await asyncio.to_thread(self._batch, messages, min(per_call, n - made))
            for generation in batch:
                on_generation(generation)
            made += len(batch)


class TextSource:
    """Candidates from any :class:`~cascade_rl.llm.Generator`, without confidences."""

    def __init__(self, generator: Any, sampling: Sampling) -> None:
        self.generator, self.sampling = generator, sampling

    async def _one(self, messages: list[dict]) -> Generation:
        texts = await self.generator.agenerate(messages, self.sampling.distribution())
        return Generation(texts[0])

    async def sample(self, messages: list[dict], n: int, on_generation: OnGeneration) -> None:
        for finished in asyncio.as_completed([self._one(messages) for _ in range(n)]):
            on_generation(await finished)


def candidate_source(generator: Any, sampling: Sampling) -> ServerSource | LocalSource | TextSource:
    """The source for ``generator`` (module docstring)."""
    if isinstance(generator, OpenAICompatGenerator):
        return ServerSource(generator, sampling)
    if isinstance(generator, LocalGenerator):
        return LocalSource(generator, sampling)
    return TextSource(generator, sampling)
