"""The generation interface every pipeline codes against (DESIGN: ``llm/``; used by the SWE
pipeline of SPEC section 7, data building of SPEC section 6 and the LLM judge of appendix C.2).

A :class:`Generator` turns one chat conversation (Hugging Face / OpenAI message dicts, see
docs/data-formats.md) and one :class:`Sampling` value (the same value every engine, pipeline and
command passes on) into ``sampling.n`` completions, as plain text in the project's response
format: ``<think>reasoning</think>answer`` for thinking responses, so that every scorer sees the
same text whichever backend produced it. Defaults follow the paper's inference settings
(SPEC section 1: temperature 0.6, top-p 0.95); ``top_k`` (0 = off) is what the RL stages add
(IF-RL's top-k 20), so that a prompt filter or rejection sampler draws from the distribution its
rollouts will; ``max_tokens`` defaults to 1024 here (the paper allows 64K) because pipelines set
it per task.

Backends: :class:`~cascade_rl.llm.local.LocalGenerator` (``transformers`` on a local checkpoint)
and :class:`~cascade_rl.llm.openai_compat.OpenAICompatGenerator` (any OpenAI-compatible
chat-completions server: vLLM, SGLang, ``transformers serve``); this module knows neither (the
backends import it). :func:`cascade_rl.llm.factory.load_generator` builds one from a spec string
or dict; :func:`generate_many` / :func:`agenerate_many` run many conversations at once (batched
locally, concurrently against a server).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, Protocol, runtime_checkable

from cascade_rl.chat import MODES

DEFAULT_TEMPERATURE = 0.6
DEFAULT_TOP_P = 0.95
DEFAULT_MAX_TOKENS = 1024

Messages = Sequence[Mapping[str, Any]]


class GenerationError(RuntimeError):
    """A backend could not produce completions (server error, retries exhausted, timeout)."""


@dataclass(frozen=True)
class Sampling:
    """How completions are sampled, one value through every generator, engine and command: ``n``
    completions at ``temperature`` (0: greedy), nucleus ``top_p``, ``top_k`` (0 = off), at most
    ``max_tokens`` new tokens each. Checked when made: a bad value is a ``ValueError`` naming it."""

    n: int = 1
    temperature: float = DEFAULT_TEMPERATURE
    top_p: float = DEFAULT_TOP_P
    max_tokens: int = DEFAULT_MAX_TOKENS
    top_k: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.n, int) or isinstance(self.n, bool) or self.n < 1:
            raise ValueError(f"n must be a positive integer, got {self.n!r}")
        if not self.temperature >= 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature!r}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p!r}")
        if not isinstance(self.max_tokens, int) or self.max_tokens < 1:
            raise ValueError(f"max_tokens must be a positive integer, got {self.max_tokens!r}")
        if not isinstance(self.top_k, int) or isinstance(self.top_k, bool) or self.top_k < 0:
            raise ValueError(f"top_k must be a non-negative integer (0 = off), got {self.top_k!r}")

    def times(self, n: int) -> Sampling:
        """The same distribution, ``n`` completions."""
        return replace(self, n=n)

    def settings(self) -> dict[str, Any]:
        """The distribution without ``n``, as the keys of stored samples and jobs name it: ``top_k``
        only when set, so that samples stored before it existed keep their keys."""
        return {"temperature": self.temperature, "top_p": self.top_p, "max_tokens": self.max_tokens} | (
            {"top_k": self.top_k} if self.top_k else {}
        )


@runtime_checkable
class Generator(Protocol):
    """Samples completions of one conversation; ``agenerate`` is the same, awaitable."""

    def generate(self, messages: list[dict], sampling: Sampling = Sampling()) -> list[str]: ...

    async def agenerate(self, messages: list[dict], sampling: Sampling = Sampling()) -> list[str]: ...


def check_messages(messages: Messages) -> None:
    """Raise ``ValueError`` naming the first bad part of a conversation."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence) or not messages:
        raise ValueError(f"messages must be a non-empty list of chat message dicts, got {messages!r:.80}")
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping) or "role" not in message:
            raise ValueError(f"messages[{i}] must be a dict with a 'role', got {message!r:.80}")


def _has_flag(content: str) -> bool:
    # the same rule as templates/cascade_chatml.jinja
    return content.endswith(" /think") or content.endswith(" /no_think")


def apply_modes(messages: Messages, default_mode: str | None = None) -> list[dict]:
    """Turn the ``mode`` key of user messages into the ` /think` / ` /no_think` flag at the end
    of their content (SPEC section 2), so that the flag survives any chat template and any
    server: the Cascade template keeps a flag already present, Qwen3's template reads it as its
    soft switch. A user message without a flag or ``mode`` gets ``default_mode`` when one is
    given; the ``mode`` key is removed. Returns copies."""
    if default_mode is not None and default_mode not in MODES:
        raise ValueError(f"default_mode must be one of {MODES} or None, got {default_mode!r}")
    out = []
    for message in messages:
        message = dict(message)
        mode = message.pop("mode", None) or default_mode
        if mode not in (None, *MODES):
            raise ValueError(f"message mode must be one of {MODES}, got {mode!r}")
        content = message.get("content")
        if message.get("role") == "user" and mode and isinstance(content, str) and not _has_flag(content):
            message["content"] = f"{content} /{mode}"
        out.append(message)
    return out


def generate_many(
    generator: Generator,
    conversations: Sequence[Messages],
    sampling: Sampling = Sampling(),
    *,
    max_workers: int | None = None,
) -> list[list[str]]:
    """``sampling.n`` completions for each conversation, in order. Uses the backend's own
    batching (``generate_batch``: batched forward passes locally, concurrent requests to a
    server) when it has one, else runs ``generate`` in a thread pool of ``max_workers`` threads."""
    conversations = list(conversations)
    batch = getattr(generator, "generate_batch", None)
    if callable(batch):
        return batch(conversations, sampling)
    with ThreadPoolExecutor(max_workers=max_workers or min(32, max(1, len(conversations)))) as pool:
        return list(pool.map(lambda messages: generator.generate(list(messages), sampling), conversations))


async def agenerate_many(
    generator: Generator, conversations: Sequence[Messages], sampling: Sampling = Sampling()
) -> list[list[str]]:
    """Awaitable :func:`generate_many`: the backend's ``agenerate_batch`` when it has one, else
    all ``agenerate`` calls at once (the backend bounds its own concurrency)."""
    conversations = list(conversations)
    batch = getattr(generator, "agenerate_batch", None)
    if callable(batch):
        return await batch(conversations, sampling)
    return list(await asyncio.gather(*(generator.agenerate(list(m), sampling) for m in conversations)))
