"""A YES/NO LLM judge that returns the probability of "YES" (SPEC appendix C.2, "Reward judge":
the SWE RL semantic-similarity reward is the probability the judge assigns to the YES token of
``<judgement>YES</judgement>`` / ``<judgement>NO</judgement>``; also the off-topic check of
appendix C.1 step 2).

How P(YES) is read, by backend:

* **Local** (:class:`~cascade_rl.llm.local.LocalGenerator`): the prompt is rendered with the
  generation prompt and the assistant turn is prefilled with ``<judgement>``; one forward pass
  gives the next-token distribution, and P(YES) = p(YES) / (p(YES) + p(NO)) -- the YES/NO
  probabilities renormalised over the two answers (computed as a sigmoid of the log-probability
  difference, so it stays exact when both are tiny). When "YES" or "NO" is several tokens in the
  judge's vocabulary, the first token of each stands for it (they must differ). Prefilling skips
  any thinking: use a judge that answers directly.
* **OpenAI-compatible server**: one chat-completions request with ``logprobs`` and
  ``top_logprobs`` at temperature 0; the judgement position is the token that follows the
  generated ``<judgement>`` (outside any ``<think>`` block), and p(YES), p(NO) are summed over
  the top candidates there whose text starts the word ("Y", "YE", "YES", ...). When the server
  returns no logprobs (``transformers serve`` ignores them), or the position or both answers are
  missing from them, the judge samples ``samples`` completions at temperature 1 and returns the
  fraction that answer ``<judgement>YES</judgement>`` (a completion without a judgement counts
  as not-YES). A server found to ignore logprobs is not asked for them again.

**Served judge** (the paper's 72B judge cannot sit in every training process). A judge named by
a server spec (``"http://host:8000/v1#Kimi-Dev-72B"``, or a dict ``{"base_url", "model", ...}``
whose other keys set the client: ``max_concurrency``, ``timeout``, ``max_retries``, ...) gets
judge defaults: at most :data:`JUDGE_SERVER_DEFAULTS` ``max_concurrency`` requests in flight,
``timeout`` seconds each, ``max_retries`` retries with exponential backoff on connection
errors, timeouts, HTTP 429 and 5xx. A request that still fails raises
:class:`~cascade_rl.llm.base.GenerationError`; the SWE reward gives that rollout no verdict
(``Score.no_verdict``: training leaves it out). After a server failure, calls
fail at once for ``cooldown`` seconds (:class:`~cascade_rl.llm.guard.ServiceGuard`), so a dead
judge costs one timeout per cooldown, not one per rollout. :func:`check_judge` checks a served
judge before a stage trains (the SWE reward's preflight calls it).
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import threading
import time
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from cascade_rl.chat import THINK_CLOSE, THINK_OPEN, split_thinking
from cascade_rl.llm.base import Generator, Messages, Sampling, check_messages
from cascade_rl.llm.factory import load_generator
from cascade_rl.llm.guard import ServiceGuard, wait_for_url
from cascade_rl.llm.local import LocalGenerator
from cascade_rl.llm.openai_compat import OpenAICompatGenerator

JUDGEMENT_OPEN = "<judgement>"
#: client settings of a judge named by a server spec (module docstring); a dict spec overrides them
JUDGE_SERVER_DEFAULTS = {"max_concurrency": 16, "timeout": 120.0, "max_retries": 3}
#: YesNoJudge's own keys in a dict spec; every other key configures the generation backend
JUDGE_KEYS = ("yes", "no", "prefix", "samples", "max_tokens", "top_logprobs", "cooldown")


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


def _starts_word(token: str, word: str) -> bool:
    piece = token.strip()
    return bool(piece) and word.startswith(piece)


def yes_probability_from_logprobs(
    content: Sequence[Mapping[str, Any]], *, yes: str = "YES", no: str = "NO", prefix: str = JUDGEMENT_OPEN
) -> float | None:
    """P(YES) from the ``choices[0].logprobs.content`` list of a chat completion (entries
    ``{"token", "logprob", "top_logprobs": [{"token", "logprob"}, ...]}``); ``None`` when no
    token follows ``prefix`` outside a thinking block, or neither answer is among the
    candidates there."""
    text = ""
    for entry in content:
        before = text.rstrip()
        text += entry.get("token", "")
        thinking = before.count(THINK_OPEN) > before.count(THINK_CLOSE)
        if not before.endswith(prefix) or thinking:
            continue
        candidates = {entry.get("token", ""): entry.get("logprob")}
        candidates.update({c.get("token", ""): c.get("logprob") for c in entry.get("top_logprobs") or []})
        p_yes = sum(math.exp(lp) for tok, lp in candidates.items() if lp is not None and _starts_word(tok, yes))
        p_no = sum(math.exp(lp) for tok, lp in candidates.items() if lp is not None and _starts_word(tok, no))
        return p_yes / (p_yes + p_no) if p_yes + p_no > 0 else None
    return None


class YesNoJudge:
    """P(YES) of a YES/NO judge at its judgement position (module docstring).

    ``backend_or_model``: a :class:`LocalGenerator`, an :class:`OpenAICompatGenerator`, or a
    spec for :func:`~cascade_rl.llm.factory.load_generator`. ``samples`` and ``max_tokens`` apply
    to server requests (the fallback's sample count; the room for the judge to reach its
    judgement)."""

    def __init__(
        self,
        backend_or_model: Generator | str | Mapping[str, Any],
        *,
        yes: str = "YES",
        no: str = "NO",
        prefix: str = JUDGEMENT_OPEN,
        samples: int = 16,
        max_tokens: int = 64,
        top_logprobs: int = 20,
        cooldown: float = 60.0,
    ) -> None:
        backend = backend_or_model
        if isinstance(backend, (str, Mapping)):
            backend = load_generator(backend, server=JUDGE_SERVER_DEFAULTS)
        if not isinstance(backend, (LocalGenerator, OpenAICompatGenerator)):
            raise TypeError(
                f"YesNoJudge needs a LocalGenerator, an OpenAICompatGenerator or a spec, "
                f"got {type(backend_or_model).__name__}"
            )
        if not yes or not no or yes == no:
            raise ValueError(f"yes and no must be two different non-empty words, got {yes!r}, {no!r}")
        if samples < 1 or max_tokens < 1 or top_logprobs < 1:
            raise ValueError("samples, max_tokens and top_logprobs must be positive")
        self.backend, self.yes, self.no, self.prefix = backend, yes, no, prefix
        self.samples, self.max_tokens, self.top_logprobs = samples, max_tokens, top_logprobs
        self.server_logprobs: bool | None = None  # learnt from the first server request
        self.guard = (
            ServiceGuard(backend.base_url, limit=backend.max_concurrency, cooldown=cooldown)
            if isinstance(backend, OpenAICompatGenerator)
            else None
        )
        self._answer_re = re.compile(re.escape(prefix) + r"\s*(" + re.escape(yes) + "|" + re.escape(no) + r")\b")
        if isinstance(backend, LocalGenerator):
            self._yes_id, self._no_id = (self._first_token(word) for word in (yes, no))
            if self._yes_id == self._no_id:
                raise ValueError(f"{yes!r} and {no!r} start with the same token; the judge cannot tell them apart")

    def _first_token(self, word: str) -> int:
        ids = self.backend.tokenizer.encode(word, add_special_tokens=False)
        if not ids:
            raise ValueError(f"the judge's tokenizer encodes {word!r} as no tokens")
        return ids[0]

    def probability_yes(self, messages: list[dict]) -> float:
        """P(YES) in [0, 1] for one judge conversation (system + user turns of appendix C.2)."""
        if isinstance(self.backend, LocalGenerator):
            logprobs = self.backend.next_token_logprobs(messages, self.prefix)
            return _sigmoid(float(logprobs[self._yes_id] - logprobs[self._no_id]))
        return self.backend.run_sync(self.aprobability_yes(messages))

    async def aprobability_yes(self, messages: list[dict]) -> float:
        if isinstance(self.backend, LocalGenerator):
            return await asyncio.to_thread(self.probability_yes, messages)
        check_messages(messages)
        assert self.guard is not None
        return await self.guard.run(lambda: self._from_server(messages))

    async def _from_server(self, messages: Messages) -> float:
        if self.server_logprobs is not False:
            probability = await self._from_logprobs(messages)
            if probability is not None:
                return probability
        return await self._from_samples(messages)

    async def _from_logprobs(self, messages: Messages) -> float | None:
        response = await self.backend.arequest(
            messages, temperature=0.0, max_tokens=self.max_tokens, logprobs=True, top_logprobs=self.top_logprobs
        )
        content = (response["choices"][0].get("logprobs") or {}).get("content")
        self.server_logprobs = bool(content)
        if not content:
            return None
        return yes_probability_from_logprobs(content, yes=self.yes, no=self.no, prefix=self.prefix)

    async def _from_samples(self, messages: Messages) -> float:
        texts = await self.backend.agenerate(
            list(messages), Sampling(n=self.samples, temperature=1.0, top_p=1.0, max_tokens=self.max_tokens)
        )
        return sum(self.judgement(text) == self.yes for text in texts) / len(texts)

    def judgement(self, response: str) -> str | None:
        """The word (YES / NO) a judge response gives after the prefix, outside its thinking."""
        match = self._answer_re.search(split_thinking(response).answer)
        return match.group(1) if match else None


def load_judge(spec: str | Mapping[str, Any]) -> YesNoJudge:
    """A :class:`YesNoJudge` for a spec (a local model, a server URL, or a dict of server and
    judge settings), built once per process and spec (models are heavy; clients share limits)."""
    key = spec if isinstance(spec, str) else json.dumps(dict(spec), sort_keys=True, default=str)
    with _JUDGES_LOCK:  # reward workers are threads: two first calls must not build two judges (two guards)
        return _cached_judge(key)


_JUDGES_LOCK = threading.Lock()


@lru_cache(maxsize=4)
def _cached_judge(key: str) -> YesNoJudge:
    spec: str | dict = json.loads(key) if key.startswith("{") else key
    if isinstance(spec, dict):
        judge_options = {k: spec.pop(k) for k in JUDGE_KEYS if k in spec}
        return YesNoJudge(spec, **judge_options)
    return YesNoJudge(spec)


PROBE = [
    {"role": "system", "content": "Respond only with <judgement>YES</judgement> or <judgement>NO</judgement>."},
    {"role": "user", "content": "Is 2 + 2 = 4?"},
]


def check_judge(judge: YesNoJudge, *, timeout: float = 300.0) -> None:
    """Raise ``RuntimeError`` (one line, naming the URL) unless a served judge answers
    ``GET /models`` and one tiny judgement within ``timeout`` seconds; a local judge passes at
    once. The SWE reward's preflight (:func:`cascade_rl.rewards.swe.preflight`) names the option."""
    if judge.guard is None:
        return
    backend = judge.backend
    deadline = time.monotonic() + timeout
    try:
        wait_for_url(f"{backend.base_url}/models", deadline, backend.headers)
        remaining = max(1.0, deadline - time.monotonic())
        backend.run_sync(asyncio.wait_for(judge.aprobability_yes(PROBE), remaining))
    except (TimeoutError, asyncio.TimeoutError) as error:
        raise RuntimeError(
            f"no judge server answers at {backend.base_url} within {timeout:g} s ({error or 'timed out'})"
        ) from None
    except Exception as error:  # noqa: BLE001 - any failure of the probe is the message
        raise RuntimeError(f"the judge at {backend.base_url} cannot judge: {error}") from None
