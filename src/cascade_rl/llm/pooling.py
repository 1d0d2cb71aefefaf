"""The reward-model service: vLLM's Pooling API, the client the RLHF / IF+RM rewards use, and
the request and response shapes ``cascade serve reward-model`` answers (SPEC sections 4 and 6:
a 72B scalar reward model served apart from the training processes).

**Where.** A ``preference`` / ``if_rm`` reward option ``reward_model: "http://HOST:PORT[#MODEL]"``
names a server (``#MODEL``: the served model name; omitted, the server's only model). Any of:

* ``cascade serve reward-model PATH`` (:mod:`cascade_rl.serve.server`: transformers, CPU or GPU);
* ``vllm serve PATH --runner pooling`` (vLLM detects a ``*ForSequenceClassification``
  checkpoint, which is what the reward-model stage saves, as a ``classify`` pooling model).

**Request** (``POST /pooling``, one conversation per request, the chat form)::

    {"model": "rm", "messages": [{"role": "user", "content": "..."},
                                 {"role": "assistant", "content": "..."}],
     "task": "classify", "use_activation": false,
     "truncate_prompt_tokens": 16384, "truncation_side": "left"}

The server applies the reward model's own chat template (no generation prompt), as the local
scorer does. ``use_activation: false`` asks for the raw score (vLLM's default for a one-label
classifier is its sigmoid; a vLLM too old to know the parameter must have the activation turned
off in its pooler config instead). ``truncate_prompt_tokens`` is sent only when the reward
option ``max_length`` is set: the server then keeps the *last* ``max_length`` tokens (see
:mod:`cascade_rl.rewards.preference` for why); unset, the server's own limit applies (``cascade
serve`` truncates to its ``--max-length`` the same way; vLLM refuses a longer input with HTTP 400).
The completion form ``{"input": "rendered text" | [...]}`` is accepted by both servers too.

**Response**::

    {"id": "pool-...", "object": "list", "created": 1767225600, "model": "rm",
     "data": [{"index": 0, "object": "pooling", "data": [1.8125]}],
     "usage": {"prompt_tokens": 57, "total_tokens": 57, "completion_tokens": 0}}

``data[i].data`` is the score vector of input ``i`` (one label: one number); a token-wise
reward model (``token_classify``) returns one vector per token, and its last token's is read.

**Client** (:class:`RewardModelClient`). Every conversation of a batch is one request, sent
concurrently -- at most ``max_concurrency`` in flight; the server batches what arrives together
(vLLM's continuous batching; ``cascade serve``'s ``--batch-size``). Each request has a wall-clock
``timeout`` and is retried up to ``max_retries`` times on connection errors, timeouts, HTTP 429
and 5xx, with exponential backoff (it is an :class:`~cascade_rl.llm.transport.HttpClient`,
``Retry-After`` honoured). A
request that still fails gives that conversation no score and an error (the reward then has no
verdict on it, ``Score.no_verdict``, and training leaves it out); the other conversations are
scored. After a server failure the client fails fast for ``cooldown`` seconds
(:class:`~cascade_rl.llm.guard.ServiceGuard`), so a dead server costs one timeout, not one per
request. :func:`check_server` is the preflight: the server answers ``GET /health`` and one tiny
scoring request within a deadline, or a one-line error names the URL.
"""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any, NamedTuple

from cascade_rl.llm.base import GenerationError
from cascade_rl.llm.guard import ServiceGuard, wait_for_url
from cascade_rl.llm.transport import Connection, HttpClient, parse_server_spec

Conversation = Sequence[Mapping[str, Any]]


class RewardResult(NamedTuple):
    """The reward model's score of one conversation, or why there is none."""

    value: float | None
    error: str | None = None


class ProtocolError(ValueError):
    """A request or response that does not follow the protocol."""


# ---------------------------------------------------------------------------- shapes


def pooling_request(messages: Conversation, *, model: str | None, max_length: int | None) -> dict[str, Any]:
    """The body of one chat-form ``POST /pooling`` request (module docstring)."""
    body: dict[str, Any] = {"messages": [dict(m) for m in messages], "task": "classify", "use_activation": False}
    if model:
        body["model"] = model
    if max_length is not None:
        body.update(truncate_prompt_tokens=int(max_length), truncation_side="left")
    return body


def pooling_response(model: str, vectors: Sequence[Sequence[float]], prompt_tokens: int) -> dict[str, Any]:
    """A ``/pooling`` response for the score vectors of the inputs, in order."""
    return {
        "id": f"pool-{uuid.uuid4().hex}",
        "object": "list",
        "created": int(time.time()),
        "model": model,
        "data": [{"index": i, "object": "pooling", "data": list(vector)} for i, vector in enumerate(vectors)],
        "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens, "completion_tokens": 0},
    }


def score_from_response(response: Mapping[str, Any]) -> float:
    """The scalar reward in a one-input ``/pooling`` response (module docstring)."""
    try:
        value: Any = response["data"][0]["data"]
    except (KeyError, IndexError, TypeError):
        raise ProtocolError(f"not a /pooling response: {str(response)[:300]}") from None
    while isinstance(value, list) and value:
        value = value[-1] if isinstance(value[-1], list) else value[0]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ProtocolError(f"/pooling response holds no finite score: {str(response)[:300]}")
    return float(value)


# ---------------------------------------------------------------------------- client


class RewardModelClient(HttpClient):
    """Scores conversations with a reward-model server (module docstring). ``url``:
    ``http://host:port[/v1][/pooling][#MODEL]``."""

    def __init__(
        self,
        url: str,
        *,
        max_concurrency: int = 16,
        timeout: float = 120.0,
        max_retries: int = 3,
        cooldown: float = 60.0,
        **http: Any,
    ) -> None:
        spec = parse_server_spec(url, what="reward-model server")
        super().__init__(spec.root, max_concurrency=max_concurrency, timeout=timeout, max_retries=max_retries, **http)
        self.root, self.model = spec.root, spec.model
        self.url = f"{self.root}/pooling"
        self.guard = ServiceGuard(self.url, limit=max_concurrency, cooldown=cooldown)

    def __repr__(self) -> str:
        return f"RewardModelClient({self.url!r}, model={self.model!r})"

    def score(self, conversations: Sequence[Conversation], *, max_length: int | None = None) -> list[RewardResult]:
        """One result per conversation (blocking; thread-safe)."""
        return self.run_sync(self.ascore(conversations, max_length=max_length))

    async def ascore(
        self, conversations: Sequence[Conversation], *, max_length: int | None = None
    ) -> list[RewardResult]:
        async with self.connect() as connection:
            return list(await asyncio.gather(*(self._one(connection, c, max_length) for c in conversations)))

    async def _one(self, connection: Connection, conversation: Conversation, max_length: int | None) -> RewardResult:
        body = pooling_request(conversation, model=self.model, max_length=max_length)
        try:
            response = await self.guard.run(lambda: connection.post("/pooling", body))
            return RewardResult(score_from_response(response))
        except (GenerationError, ProtocolError) as error:
            return RewardResult(None, f"reward-model server: {error}")


@lru_cache(maxsize=8)
def reward_model_client(url: str, **options: Any) -> RewardModelClient:
    """One client per server and options for the process (they share the concurrency limit)."""
    return RewardModelClient(url, **options)


# ---------------------------------------------------------------------------- preflight


def check_server(
    url: str, *, max_length: int | None = None, timeout: float = 300.0, api_key: str | None = None
) -> float:
    """Raise ``RuntimeError`` (one line, naming the URL) unless the server at ``url`` answers
    ``/health`` and scores one tiny conversation (with ``truncate_prompt_tokens`` =
    ``max_length`` when given) within ``timeout`` seconds; returns that score."""
    root = parse_server_spec(url, what="reward-model server").root
    deadline = time.monotonic() + timeout
    try:
        wait_for_url(f"{root}/health", deadline)
    except TimeoutError as error:
        raise RuntimeError(f"no reward-model server answers at {root} within {timeout:g} s ({error})") from None
    remaining = max(1.0, deadline - time.monotonic())
    client = RewardModelClient(url, max_concurrency=1, timeout=remaining, max_retries=0, api_key=api_key)
    try:
        probe = [{"role": "user", "content": "Say hello."}, {"role": "assistant", "content": "Hello!"}]
        (result,) = client.score([probe], max_length=max_length)
    finally:
        client.close()
    if result.error:
        raise RuntimeError(f"reward-model server at {root} answers /health but cannot score: {result.error}")
    return float(result.value)  # type: ignore[arg-type]
